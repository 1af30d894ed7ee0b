"""The pod model the lab's kubelet (kubelet.py) and the workloads it runs (kueue.py) share: what a workload is, where a
pod's mount paths lie on this machine, a pod's container."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import LabConfig


@dataclass(frozen=True)
class Workload:
    """A controller the lab runs for a chart's pods: `selector` (pod labels), the container it plays, the loopback
    port of each container port, and `prepare(cfg, pod, root) -> (argv, env)` (root: where the pod's volumes are)."""

    name: str
    selector: dict[str, str]
    container: str
    ports: Callable[[LabConfig], dict[int, int]]
    prepare: Callable[[LabConfig, dict[str, Any], Path], tuple[list[str], dict[str, str]]]

    def label_selector(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.selector.items()))


def host_path(root: Path, mount_path: str) -> Path:
    """Where a pod's mountPath lies on this machine (under the pod's root)."""
    return root / mount_path.lstrip("/")


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    for c in pod["spec"].get("containers") or []:
        if c["name"] == name:
            return c
    raise KeyError(f"pod {pod['metadata']['name']} has no container {name!r}")
