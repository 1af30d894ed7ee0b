"""Node Feature Discovery in the lab: the real nfd-master (v0.19, built by hack/cluster/build.sh) runs out
of cluster; the simulator plays nfd-worker (NodeFeature objects, simulator/handlers/nfd.py).

nfd-master needs the NFD API (its CRDs, else its informers never sync) and `NODE_NAME` naming an existing
Node (it annotates "its" node at start and exits when the node is missing). The lab therefore installs the
CRDs when they are missing (from the upstream NFD chart in the build cache, config.UPSTREAM_CHARTS: the same file an
NFD release installs) and keeps one control-plane Node, `gpuops-lab-control-plane`, tainted NoSchedule as a real
control-plane node is and without a hardware profile (no NodeFeature, no GPU), as the node nfd-master runs on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from .config import LabConfig
from .errors import LabError
from .k8s import ensure_crd_manifest
from .profiles import KWOK_TAINT

NAMESPACE = "gpuops-lab-nfd"
CONTROL_PLANE_NODE = "gpuops-lab-control-plane"
# The nfd role's master configuration (roles/nfd/defaults/main.yml, nfd_default_values.master.config).
MASTER_CONFIG = {"extraLabelNs": ["nvidia.com", "amd.com"]}


def crd_files(cfg: LabConfig | None = None) -> list[Path]:
    """The CRD files of the upstream NFD chart (crds/nfd-api-crds.yaml: NodeFeature, NodeFeatureGroup,
    NodeFeatureRule in one file)."""
    cfg = cfg or LabConfig.load()
    crds = cfg.upstream_chart_dir("node-feature-discovery") / "crds"
    files = sorted(crds.glob("*.yaml"))
    if not files:
        raise LabError(f"no NFD CRDs in {crds}: fetch the upstream NFD chart with hack/cluster/build.sh nfd-chart")
    return files


def crd_manifests(cfg: LabConfig | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """Every CustomResourceDefinition in crd_files(), with the file it is in."""
    return [
        (path, doc)
        for path in crd_files(cfg)
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == "CustomResourceDefinition"
    ]


def control_plane_node() -> dict[str, Any]:
    name = CONTROL_PLANE_NODE
    res = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/control-plane": "",
                "type": "kwok",
            },
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {
            "providerID": f"kwok://{name}",
            "taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}, dict(KWOK_TAINT)],
        },
        "status": {"capacity": dict(res), "allocatable": dict(res)},
    }


def _create(fn: Any, body: Any) -> None:
    try:
        fn(body)
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def ensure_api(api_client: Any, timeout: float = 30.0, cfg: LabConfig | None = None) -> list[str]:
    """Install the NFD CRDs that are missing and wait until they are served; returns their names."""
    return [ensure_crd_manifest(api_client, doc, timeout, str(path)) for path, doc in crd_manifests(cfg)]


def ensure_master_prereqs(api_client: Any, cfg: LabConfig | None = None) -> None:
    """What nfd-master needs before it starts: the NFD API, its namespace and the node it runs on."""
    ensure_api(api_client, cfg=cfg)
    core = client.CoreV1Api(api_client)
    _create(core.create_namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    _create(core.create_node, control_plane_node())
