"""Add and remove simulated (kwok) nodes of a hardware profile, and show their readiness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from . import nfd, profiles
from .config import LOCAL_INVENTORY, LabConfig
from .errors import LabError

NFD = profiles.NFD
# set by nfd-master on every node it labelled: the labels it owns there
NFD_FEATURE_LABELS_ANNOTATION = "nfd.node.kubernetes.io/feature-labels"


def api(cfg: LabConfig) -> client.CoreV1Api:
    if not cfg.kubeconfig.is_file():
        raise LabError(f"no kubeconfig at {cfg.kubeconfig}: start the lab first (make up)")
    return client.CoreV1Api(config.new_client_from_config(str(cfg.kubeconfig)))


def add(
    core: client.CoreV1Api, profile: str, count: int = 1, names: list[str] | None = None, prefix: str | None = None
) -> list[str]:
    """Create `count` nodes of `profile` (names prefix-0, prefix-1, ... skipping existing ones) or the
    given names. Existing nodes of the same name are left as they are. The NFD CRDs are installed when
    missing (an uninstalled NFD release takes them away), so the simulator can publish the nodes'
    NodeFeatures; nfd-master labels the nodes about a second later (labelled() tells when)."""
    prof = profiles.load(profile)
    if count < 0:
        raise LabError(f"count must be >= 0, got {count}")
    nfd.ensure_api(core.api_client)
    existing = {n.metadata.name for n in core.list_node().items}
    if names is None:
        names, i, prefix = [], 0, prefix or profile
        while len(names) < count:
            cand = f"{prefix}-{i}"
            if cand not in existing:
                names.append(cand)
            i += 1
    created = []
    for name in names:
        if name in existing:
            continue
        core.create_node(profiles.node_manifest(name, prof))
        created.append(name)
    return created


def remove(core: client.CoreV1Api, names: list[str] | None = None, profile: str | None = None) -> list[str]:
    if profile is not None:
        sel = f"{profiles.PROFILE_LABEL}={profile}"
        names = [n.metadata.name for n in core.list_node(label_selector=sel).items]
    removed = []
    for name in names or []:
        try:
            core.delete_node(name)
            removed.append(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    return removed


def inventory_nodes(path: Path = LOCAL_INVENTORY) -> dict[str, str]:
    """host -> hardware profile, for every host in the inventory that names one."""
    inv = yaml.safe_load(path.read_text())
    out: dict[str, str] = {}

    def walk(group: dict[str, Any]) -> None:
        for host, hv in (group.get("hosts") or {}).items():
            if hv and "gpuops_hardware_profile" in hv:
                out[host] = hv["gpuops_hardware_profile"]
        for child in (group.get("children") or {}).values():
            walk(child or {})

    walk(inv["all"])
    return out


def sync_inventory(core: client.CoreV1Api, path: Path = LOCAL_INVENTORY, hosts_root: Path | None = None) -> list[str]:
    """One simulated Kubernetes node per inventory host, and (with hosts_root) one simulated host root
    filesystem each, for the host-plane roles. Existing nodes and hosts are kept as they are."""
    from .hostsim.hosts import create_host

    created = []
    for host, prof in inventory_nodes(path).items():
        created += add(core, prof, names=[host])
        if hosts_root is not None and not (hosts_root / host).exists():
            create_host(prof, host, hosts_root)
    return created


def labelled(node: Any) -> bool:
    """Has nfd-master labelled this node (nodes without a hardware profile need no labels)?"""
    meta = node.metadata
    if profiles.PROFILE_LABEL not in (meta.labels or {}):
        return True
    return bool((meta.annotations or {}).get(NFD_FEATURE_LABELS_ANNOTATION))


def settled(core: client.CoreV1Api) -> bool:
    """Every node Ready and, where it has a hardware profile, labelled by nfd-master."""
    items = core.list_node().items
    return bool(items) and all(
        labelled(n) and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or ()) for n in items
    )


def rows(core: client.CoreV1Api) -> list[dict[str, str]]:
    out = []
    for n in core.list_node().items:
        labels = n.metadata.labels or {}
        ready = next((c.status for c in (n.status.conditions or []) if c.type == "Ready"), "Unknown")
        alloc = n.status.allocatable or {}
        gpus = ",".join(f"{k}={v}" for k, v in sorted(alloc.items()) if k.endswith("/gpu") or "/mig-" in k) or "-"
        rdma = ",".join(f"{k}={v}" for k, v in sorted(alloc.items()) if k.startswith("rdma/")) or "-"
        nfd = (
            ",".join(
                sorted(k[len(NFD) + 1 :] for k, v in labels.items() if k.startswith(f"{NFD}/pci-") and v == "true")
            )
            or "-"
        )
        out.append(
            {
                "NODE": n.metadata.name,
                "PROFILE": labels.get(profiles.PROFILE_LABEL, "-"),
                "READY": ready,
                "GPU RESOURCES": gpus,
                "RDMA RESOURCES": rdma,
                "NFD PCI LABELS": nfd,
            }
        )
    return out


def table(rs: list[dict[str, str]]) -> str:
    if not rs:
        return "(no nodes)"
    cols = list(rs[0])
    w = {c: max(len(c), *(len(r[c]) for r in rs)) for c in cols}
    lines = ["  ".join(c.ljust(w[c]) for c in cols)]
    lines += ["  ".join(r[c].ljust(w[c]) for c in cols) for r in rs]
    return "\n".join(lines)
