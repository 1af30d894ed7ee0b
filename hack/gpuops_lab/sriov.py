"""The SR-IOV Network Operator in the lab: the real operator (k8snetworkplumbingwg/sriov-network-operator v1.6.0,
built by hack/cluster/build.sh) runs out of cluster; the simulator plays its config daemon and device plugin on the
kwok nodes (simulator/handlers/sriov.py: SriovNetworkNodeState status, VFs, allocatable resources).

Before it starts the operator needs (main.go, checked against v1.6.0): the CRDs of the kinds it watches (the
eight of upstream's chart, crds/ of deployment/sriov-network-operator-chart in the build cache, config.UPSTREAM_CHARTS;
NetworkAttachmentDefinition included, else its informers never sync), its namespace, and the chart's
`supported-nic-ids` ConfigMap there (templates/configmap.yaml; initNicIDMap: it exits without). The lab creates that
ConfigMap with Helm's ownership metadata for the release `sriov-network-operator` in namespace
`sriov-network-operator`, so the role's chart install adopts it instead of failing on an object it does not own.
The operator then reconciles the SriovOperatorConfig `default`, policies and networks in that namespace only, so
the role must install there (the role's default namespace).

Environment (docs/sriov_network_operator.md, "Running the real operator in the lab"): NAMESPACE, RESOURCE_PREFIX
(openshift.io: the standalone chart's default; it exits when empty), CLUSTER_TYPE=kubernetes, RELEASEVERSION,
the CNI bin path, no stale node state delay, and the images it renders its DaemonSets with. Webhooks are off (no
SriovOperatorConfig enables them, so it registers none); its metrics and health probe bind loopback ports
(GPUOPS_LAB_SRIOV_METRICS_PORT / GPUOPS_LAB_SRIOV_PROBE_PORT). It runs from its build directory (it reads
./bindata)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from .config import LabConfig
from .errors import LabError
from .k8s import ensure_crd

VERSION_KEY = "SRIOV_VERSION"
NAMESPACE = "sriov-network-operator"
RELEASE = "sriov-network-operator"
RESOURCE_PREFIX = "openshift.io"
CHART = "sriov-network-operator-chart"  # upstream's chart name (config.UPSTREAM_CHARTS)
IMAGE_REPO = "ghcr.io/k8snetworkplumbingwg"


def chart_dir(cfg: LabConfig | None = None) -> Path:
    """Upstream's chart (deployment/sriov-network-operator-chart) in the build cache."""
    return (cfg or LabConfig.load()).upstream_chart_dir(CHART)


def crd_files(cfg: LabConfig | None = None) -> list[Path]:
    crds = chart_dir(cfg) / "crds"
    files = sorted(crds.glob("*.yaml"))
    if not files:
        fix = "fetch the upstream chart with hack/cluster/build.sh sriov-chart"
        raise LabError(f"no SR-IOV Network Operator CRDs in {crds}: {fix}")
    return files


def env(version: str, prefix: str = RESOURCE_PREFIX) -> dict[str, str]:
    """The operator's environment (what the chart's Deployment sets, with the fixes the recipe lists)."""
    tag = f"v{version}"
    images = {
        "SRIOV_CNI_IMAGE": f"{IMAGE_REPO}/sriov-cni:v2.9.0",
        "SRIOV_INFINIBAND_CNI_IMAGE": f"{IMAGE_REPO}/ib-sriov-cni:v1.2.2",
        "OVS_CNI_IMAGE": f"{IMAGE_REPO}/ovs-cni-plugin:v0.38.2",
        "RDMA_CNI_IMAGE": f"{IMAGE_REPO}/rdma-cni:v1.3.0",
        "SRIOV_DEVICE_PLUGIN_IMAGE": f"{IMAGE_REPO}/sriov-network-device-plugin:v3.9.0",
        "NETWORK_RESOURCES_INJECTOR_IMAGE": f"{IMAGE_REPO}/network-resources-injector:v1.7.0",
        "SRIOV_NETWORK_CONFIG_DAEMON_IMAGE": f"{IMAGE_REPO}/sriov-network-operator-config-daemon:{tag}",
        "SRIOV_NETWORK_WEBHOOK_IMAGE": f"{IMAGE_REPO}/sriov-network-operator-webhook:{tag}",
        "METRICS_EXPORTER_IMAGE": f"{IMAGE_REPO}/sriov-network-metrics-exporter:v1.2.0",
        "METRICS_EXPORTER_KUBE_RBAC_PROXY_IMAGE": "gcr.io/kubebuilder/kube-rbac-proxy:v0.15.0",
    }
    return {
        "NAMESPACE": NAMESPACE,
        "OPERATOR_NAME": "sriov-network-operator",
        "RESOURCE_PREFIX": prefix,
        "CLUSTER_TYPE": "kubernetes",
        "RELEASEVERSION": tag,
        "SRIOV_CNI_BIN_PATH": "/opt/cni/bin",
        "STALE_NODE_STATE_CLEANUP_DELAY_MINUTES": "0",
        "ADMISSION_CONTROLLERS_ENABLED": "false",
        **images,
    }


def nic_ids_configmap(path: Path | None = None) -> dict[str, Any]:
    """The chart's `supported-nic-ids` ConfigMap (upstream's templates/configmap.yaml without the Helm directives),
    with Helm's ownership metadata so that the chart's install adopts it."""
    path = path or chart_dir() / "templates" / "configmap.yaml"
    if not path.is_file():
        raise LabError(f"no {path}: fetch the upstream chart with hack/cluster/build.sh sriov-chart")
    text = re.sub(r"\{\{/\*.*?\*/\}\}", "", path.read_text(), flags=re.S)
    text = "\n".join(line for line in text.splitlines() if "{{" not in line)
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict) or not doc.get("data"):
        raise LabError(f"{path} has no supported-nic-ids entries: the upstream chart in the cache is incomplete")
    doc["metadata"] = {
        "name": doc["metadata"]["name"],
        "namespace": NAMESPACE,
        "labels": {"app.kubernetes.io/managed-by": "Helm"},
        "annotations": {"meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": NAMESPACE},
    }
    return doc


def _create(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def ensure_prereqs(api_client: Any, timeout: float = 30.0, cfg: LabConfig | None = None) -> None:
    """What the operator needs before it starts: the CRDs, its namespace and the supported-nic-ids ConfigMap."""
    for path in crd_files(cfg):
        ensure_crd(api_client, path, timeout)
    core = client.CoreV1Api(api_client)
    _create(core.create_namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    nic_ids = nic_ids_configmap(chart_dir(cfg) / "templates" / "configmap.yaml")
    _create(core.create_namespaced_config_map, NAMESPACE, nic_ids)
