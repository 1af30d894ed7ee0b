"""The pod model the lab's kubelet (kubelet.py) and the workloads it runs (kueue.py, volcano.py) share: what a workload
is, where a pod's mount paths lie on this machine, a pod's container, a container's paths and env out of cluster."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import LabConfig


@dataclass(frozen=True)
class Workload:
    """A program the lab runs for a chart's pods: `selector` (pod labels; its first key is the one kwok's stages are
    told to leave alone), the container it plays (None: the pod's first), the loopback port of each container port,
    and `prepare(cfg, pod, root) -> (argv, env)` (root: where the pod's volumes are). `kind` "server" runs while its
    pod lives (Ready while it answers); "job" runs once to completion for a Job's pod, whose phase its exit code
    gives (Succeeded or Failed)."""

    name: str
    selector: dict[str, str]
    container: str | None
    ports: Callable[[LabConfig], dict[int, int]]
    prepare: Callable[[LabConfig, dict[str, Any], Path], tuple[list[str], dict[str, str]]]
    kind: str = "server"

    def label_selector(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.selector.items()))


def host_path(root: Path, mount_path: str) -> Path:
    """Where a pod's mountPath lies on this machine (under the pod's root)."""
    return root / mount_path.lstrip("/")


def container(pod: dict[str, Any], name: str | None) -> dict[str, Any]:
    """The pod's container `name` (None: its first)."""
    for c in pod["spec"].get("containers") or []:
        if name is None or c["name"] == name:
            return c
    raise KeyError(f"pod {pod['metadata']['name']} has no container {name!r}")


def mount_paths(spec: dict[str, Any]) -> list[str]:
    """The container's mount paths, longest first (the deepest mount holds a path)."""
    return sorted((m["mountPath"] for m in spec.get("volumeMounts") or []), key=len, reverse=True)


def host_arg(arg: str, mounts: list[str], root: Path) -> str:
    """A `--flag=<path>` argument with a path inside one of the container's mounts given as its path on this machine;
    any other argument unchanged."""
    flag, sep, value = arg.partition("=")
    if not (sep and flag.startswith("-") and value.startswith("/")):
        return arg
    for mount in mounts:
        if value == mount or value.startswith(mount.rstrip("/") + "/"):
            return f"{flag}={host_path(root, value)}"
    return arg


def set_flag(args: list[str], flag: str, value: str) -> list[str]:
    """The arguments with `--flag=value` in place of any given value of that flag (appended when absent)."""
    kept = [a for a in args if a != flag and not a.startswith(flag + "=")]
    return [*kept, f"{flag}={value}"]


def plain_env(spec: dict[str, Any], mounts: list[str], root: Path) -> dict[str, str]:
    """The container's env entries with a plain value (valueFrom is not served), a value inside one of its mounts given
    as its path on this machine."""
    out = {}
    for e in spec.get("env") or []:
        if "value" in e:
            out[e["name"]] = host_arg(f"-x={e['value']}", mounts, root).split("=", 1)[1]
    return out
