"""ClusterPolicyHandler: plays the NVIDIA GPU Operator (v26.7.0) on kwok nodes, reconciling ClusterPolicy
(nvidia.com/v1, cluster-scoped) the way the upstream operator documents it, with the operand pods made real
by the DaemonSet controller, the scheduler and kwok.

What it writes (upstream behaviour unless marked *sim*):

- Active ClusterPolicy: the oldest by creationTimestamp, then name (`getSingletonClusterPolicy`). Every
  other one gets `status.state: ignored` (+ *sim*: condition Ready=False reason `Ignored`; upstream sets
  the state in memory only).
- Node labels (`nodelabeling_controller.go`): a node with an NFD label `feature.node.kubernetes.io/
  pci-10de.present`, `pci-0302_10de.present` or `pci-0300_10de.present` = "true" gets
  `nvidia.com/gpu.present=true` (set to "false" when those labels go away) and the container-workload
  deploy labels `nvidia.com/gpu.deploy.{driver,gpu-feature-discovery,container-toolkit,device-plugin,dcgm,
  dcgm-exporter,node-status-exporter,operator-validator,client}=true`, plus `nvidia.com/gpu.deploy.
  mig-manager=true` on MIG-capable GPUs (from the node's hardware profile, label
  `gpuops.io/hardware-profile`, here instead of GFD's `nvidia.com/mig.capable`). As upstream, a deploy
  label that already has a non-empty value is left alone (so `...deploy.driver=false` keeps the driver off
  that node), `nvidia.com/gpu.deploy.operands=false` removes them all, and MIG-capable nodes without
  `nvidia.com/mig.config` get `all-disabled` when `spec.migManager.config.default` is `all-disabled`. The
  labels are set for every operand whatever the spec enables (upstream does too); only the DaemonSets
  follow the spec. *sim*: when the ClusterPolicy is deleted (upstream leaves labels behind), these
  labels, the MIG state label, resources and the node annotation `sim.gpuops.io/nvidia-gpu-operator`
  (which records the simulator instance managing the node) are removed again.
- Operand DaemonSets in the operator namespace, owned by the ClusterPolicy (the garbage collector deletes
  them with it), upstream names, `app=<name>` labels, nodeSelector `nvidia.com/gpu.deploy.<operand>:
  "true"`, tolerations `nvidia.com/gpu` NoSchedule + `spec.daemonsets.tolerations` (+ *sim* the kwok
  taint), `spec.daemonsets.priorityClassName` (default system-node-critical), images from the spec
  (`repository/image:version`, defaults of chart v26.7.0), upstream init/main container names:
  nvidia-driver-daemonset (driver.enabled, not useNvidiaDriverCRD), nvidia-container-toolkit-daemonset,
  nvidia-operator-validator (init driver-, toolkit-, cuda-, plugin-validation), nvidia-device-plugin-
  daemonset, nvidia-dcgm-exporter, gpu-feature-discovery, nvidia-mig-manager. A DaemonSet of a disabled
  operand is deleted.
- Operator namespace: annotation `sim.gpuops.io/operator-namespace` on the ClusterPolicy, else the
  handler's `operator_namespace`, else (when that is None, the built-in default) the namespace of a
  Deployment labelled `app.kubernetes.io/component=gpu-operator` (what the chart installs), else
  `gpu-operator`. It is written to `status.namespace`.
- Per GPU node, once the operand pods it needs are Running and Ready (driver, toolkit, then the operand):
  device plugin -> node capacity/allocatable by `spec.mig.strategy` (default single): whole GPUs as
  `nvidia.com/gpu`; with MIG applied (node label `nvidia.com/mig.config` = `all-<profile>` and the
  mig-manager pod ready, which then sets `nvidia.com/mig.config.state=success`, or `failed` for an
  unknown config): single -> `nvidia.com/gpu` = MIG devices, mixed -> `nvidia.com/mig-<profile>` (and
  `nvidia.com/gpu: 0`). Not ready -> those resources are removed.
- Device-plugin config (`spec.devicePlugin.config {name, default}`, see sharing.py): per node the entry of its
  label `nvidia.com/device-plugin.config` (else the default) replicates the resources (time-slicing/MPS), GFD gets
  replicas/sharing-strategy labels; an entry that does not exist fails the pod's config-manager
  (`specified config <label> does not exist`) and leaves the node's resources; the loaded config is kept on the pod
  (annotation `sim.gpuops.io/device-plugin-config`) until the label changes or the pod is recreated.
- MIG: mig-manager v0.15.0's generated configs (sharing.mig_devices) and its `nvidia.com/mig.config.state`
  sequence (`_mig_manager`): failed at once for a name the GPU lacks; pending with the GPU clients' deploy labels
  `paused-for-mig-change`, then success (labels restored), or failed while workload pods hold NVIDIA GPUs. With
  `spec.migManager.config.name` mig-manager reads that ConfigMap's `config.yaml` only (`_mig_custom`,
  sharing.parse_mig_parted / custom_mig_devices): its names, valid for the GPU -> success, else failed.
- GFD (gpu-feature-discovery v0.20.0, which uses the NFD NodeFeature API by default: flag
  `--use-node-feature-api`, default true since v0.19.0; the operator sets `USE_NODE_FEATURE_API=false`
  only on OpenShift) does not label the node itself. Per GPU node where its pod serves, it writes a
  `NodeFeature` (nfd.k8s-sigs.io/v1alpha1) `nvidia-features-for-<node>` in the operator namespace (its
  pod's namespace), label `nfd.node.kubernetes.io/node-name: <node>`, empty raw features, owned by the
  `gpu-feature-discovery` DaemonSet (controller) and the node's GFD pod, with `spec.labels`
  `nvidia.com/gpu.{product,count,memory,family,replicas,sharing-strategy,compute.major,compute.minor}`,
  `nvidia.com/mig.{capable,strategy}`, `nvidia.com/mig-<profile>.count` (mixed),
  `nvidia.com/cuda.driver.{major,minor,rev}` from `spec.driver.version` (or the profile's host driver
  when the operator does not deploy one) and `nvidia.com/gfd.timestamp`. The lab's real nfd-master
  merges it with nfd-worker's NodeFeature and puts the labels on the node (about a second later), and
  removes them when the NodeFeature goes. GFD disabled or the ClusterPolicy deleted: the DaemonSet goes,
  and the garbage collector deletes the NodeFeature with its owners, as upstream. *sim*:
  - where GFD no longer serves while its DaemonSet stays (its pod not ready under a fault, the node no
    longer a GPU node or out of this instance's scope), the NodeFeature is deleted, so the node loses
    the GFD labels (upstream leaves the last NodeFeature behind until its DaemonSet goes);
  - GFD NodeFeatures of deleted nodes are deleted here (upstream: nfd-gc, which the lab does not run);
  - `nvidia.com/gfd.timestamp` is set when the NodeFeature is first written and kept (upstream
    refreshes it every `GFD_SLEEP_INTERVAL`, 60 s), and the NodeFeature carries an annotation
    `sim.gpuops.io/applied-hash`;
  - while the NodeFeature API is not served (no NFD CRDs), nothing is published and the handler retries
    every 5 s (upstream GFD fails and restarts).
- status: `ready` with Ready=True reason Reconciled when every operand pod on every GPU node is ready;
  `notReady` with Ready=False, Error=True reason OperandNotReady and message `ClusterPolicy is not ready;
  states not ready: [state-driver ...]` otherwise. As upstream, no GPU node -> `ready` with reason
  NoGPUNodes, and no node with any NFD label -> `ready` with reason NFDLabelsMissing. Operator namespace
  missing -> `notReady`, Error reason ReconcileFailed.
- *sim* inference: when the operator deploys no driver on a node (driver disabled or its deploy label not
  "true") and the node's hardware profile has no host driver (`host.nvidia_driver: null`), the validations
  wait for a driver as upstream's do: pods stay in Init (below), the node gets no GPUs.

Faults (per node, see faults.py):

- `driver-crashloop`: the driver pod goes CrashLoopBackOff (nvidia-driver-ctr); the pods waiting on it
  stay in Init (toolkit and validator at driver-validation, the others at toolkit-validation); no GPU
  resources, no GFD NodeFeature (so no GFD labels).
- `host-driver-conflict`: as driver-crashloop, with the message "nvidia driver already loaded on the
  host", and node condition `GpuOpsHostDriverConflict=True` (not Ready=False: kwok resets Ready at once,
  and a NotReady node would be tainted and evicted).
- `toolkit-not-ready`: the toolkit pod Running but not Ready; the pods waiting on it stay in Init at
  toolkit-validation; no GPUs.
- `validator-init-stuck`: the validator pod stuck in Init at driver-validation (at toolkit-validation when
  the toolkit is what fails); GPUs stay advertised (the device plugin does not wait for the validator);
  the ClusterPolicy goes notReady.
- `nfd-labels-missing`: the node's NFD labels are treated as absent: no gpu.present/deploy labels
  (gpu.present=false if it was set), so no operand pods and no GPUs.
- `peermem-not-loaded` (with `spec.driver.rdma.enabled`, whose driver pod has upstream's `nvidia-peermem-ctr`
  container, transformPeerMemoryContainer): that container Running but not Ready, so the driver pod is not Ready
  (kubelet's Ready condition names the container; upstream's startup probe `nvidia-driver probe_nvidia_peermem`,
  assets/state-driver/0500_daemonset.yaml, fails for up to 120 x 10 s before the container is restarted, its
  output only in the pod's events) and state-driver is notReady; the driver
  container itself is fine, so the stack above it and the GPUs are not affected (the validator checks the driver
  container, not peermem).

- `driver-upgrade-fail`: a new driver version that keeps failing on the node: the driver upgrade controller
  (below) replaces its pod, then puts the node in `upgrade-failed` and leaves it cordoned while the fault is on.

Driver upgrades (driver_upgrade.py): the driver DaemonSet is always OnDelete, as upstream's; with
`driver.upgradePolicy.autoUpgrade` the upgrade controller labels every driver node
`nvidia.com/gpu-driver-upgrade-state` and replaces out-of-date driver pods node by node within
maxParallelUpgrades/maxUnavailable (cordon, GPU pod deletion, optional drain, pod restart, validation, uncordon).

Instances: `ClusterPolicyHandler(instance="x")` handles only ClusterPolicies and Nodes labelled
`sim.gpuops.io/instance=x` (its DaemonSets select those nodes too); the default instance (None) handles
only objects without that label, and its DaemonSets avoid labelled nodes; GFD's NodeFeatures follow the
nodes and the instance's operator namespace. A test runs its own instance in-process without the lab's
simulator touching its objects.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import dcgm
from ..framework import (
    CONFIGMAP,
    DAEMONSET,
    DEPLOYMENT,
    MANAGED_STATUS_ANNOTATION,
    NAMESPACE,
    NODE,
    POD,
    ApiError,
    Cache,
    Context,
    Handler,
    Key,
    Kind,
    Obj,
    rfc3339,
    running_container_status,
)
from . import driver_upgrade, sharing

CLUSTER_POLICY = Kind("nvidia.com/v1", "ClusterPolicy")
SERVICE = Kind("v1", "Service")
SERVICE_MONITOR = Kind("monitoring.coreos.com/v1", "ServiceMonitor")
CRD_KIND = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
SERVICE_MONITOR_CRD = "servicemonitors.monitoring.coreos.com"
DCGM_EXPORTER = "nvidia-dcgm-exporter"
DCGM_EXPORTER_PORT = 9400

INSTANCE_LABEL = "sim.gpuops.io/instance"
DEFAULT_INSTANCE = "default"
NODE_OWNER_ANNOTATION = "sim.gpuops.io/nvidia-gpu-operator"
OPERATOR_NAMESPACE_ANNOTATION = "sim.gpuops.io/operator-namespace"
DEFAULT_OPERATOR_NAMESPACE = "gpu-operator"
OPERATOR_DEPLOYMENT_LABEL = ("app.kubernetes.io/component", "gpu-operator")
PROFILE_LABEL = "gpuops.io/hardware-profile"
NFD_PREFIX = "feature.node.kubernetes.io/"
APPLIED_HASH_ANNOTATION = "nvidia.com/last-applied-hash"
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# A name no ClusterPolicy can have: reconciling it cleans nodes up when no ClusterPolicy is left.
CLEANUP_KEY = Key(None, "~node-cleanup")

FAULT_DRIVER_CRASHLOOP = "driver-crashloop"
FAULT_VALIDATOR_INIT_STUCK = "validator-init-stuck"
FAULT_NFD_LABELS_MISSING = "nfd-labels-missing"
FAULT_HOST_DRIVER_CONFLICT = "host-driver-conflict"
FAULT_TOOLKIT_NOT_READY = "toolkit-not-ready"
FAULT_PEERMEM_NOT_LOADED = "peermem-not-loaded"
FAULT_DRIVER_UPGRADE_FAIL = driver_upgrade.FAULT_UPGRADE_FAIL
PEERMEM_CONTAINER = "nvidia-peermem-ctr"
NVIDIA_FAULTS = frozenset(
    {
        FAULT_PEERMEM_NOT_LOADED,
        FAULT_DRIVER_CRASHLOOP,
        FAULT_VALIDATOR_INIT_STUCK,
        FAULT_NFD_LABELS_MISSING,
        FAULT_HOST_DRIVER_CONFLICT,
        FAULT_TOOLKIT_NOT_READY,
        FAULT_DRIVER_UPGRADE_FAIL,
    }
)
HOST_DRIVER_CONFLICT_CONDITION = "GpuOpsHostDriverConflict"
HOST_DRIVER_CONFLICT_MESSAGE = "nvidia driver already loaded on the host"
DRIVER_CRASH_MESSAGE = "Failed to load NVIDIA kernel modules"

GPU_PRESENT = "nvidia.com/gpu.present"
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
OPERANDS_DISABLED = "nvidia.com/gpu.deploy.operands"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
MIG_DISABLED = "all-disabled"
GPU_RESOURCE = "nvidia.com/gpu"
NFD_GPU_LABELS = (
    f"{NFD_PREFIX}pci-10de.present",
    f"{NFD_PREFIX}pci-0302_10de.present",
    f"{NFD_PREFIX}pci-0300_10de.present",
)
# deploy labels of the container workload config (state_manager.go gpuStateLabels) and mig-manager
CONTAINER_DEPLOY_KEYS = (
    "driver",
    "gpu-feature-discovery",
    "container-toolkit",
    "device-plugin",
    "dcgm",
    "dcgm-exporter",
    "node-status-exporter",
    "operator-validator",
    "client",
)
MIG_MANAGER_KEY = "mig-manager"
ALL_DEPLOY_KEYS = (*CONTAINER_DEPLOY_KEYS, MIG_MANAGER_KEY)
GFD_LABELS = (
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.family",
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/gpu.compute.major",
    "nvidia.com/gpu.compute.minor",
    "nvidia.com/mig.capable",
    "nvidia.com/mig.strategy",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
    "nvidia.com/gfd.timestamp",
)

# GFD publishes its labels through the NFD NodeFeature API (k8s-device-plugin v0.20.0
# internal/lm/output.go); nfd-master puts them on the node.
NODE_FEATURE = Kind("nfd.k8s-sigs.io/v1alpha1", "NodeFeature")
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
GFD_NODE_FEATURE_PREFIX = "nvidia-features-for-"
GFD_TIMESTAMP_LABEL = "nvidia.com/gfd.timestamp"
GFD_DAEMONSET = "gpu-feature-discovery"
SIM_APPLIED_HASH_ANNOTATION = "sim.gpuops.io/applied-hash"
# on a node: what mig-manager applied (JSON: instance, applied, paused deploy labels, failed config)
MIG_MANAGER_ANNOTATION = "sim.gpuops.io/mig-manager"
MIG_PAUSED = "paused-for-mig-change"
MIG_PAUSED_KEYS = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm")
MIG_CLIENTS = frozenset(
    {"nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-dcgm"}
)
# on a device-plugin pod: the config entry it loaded (JSON: instance, entry, sharing)
DP_CONFIG_ANNOTATION = "sim.gpuops.io/device-plugin-config"
NODE_FEATURE_NOT_SERVED_RETRY = 5.0

VALIDATOR_IMAGE = ("nvcr.io/nvidia", "gpu-operator", "v26.7.0")
DRIVER_MANAGER_IMAGE = ("nvcr.io/nvidia/cloud-native", "k8s-driver-manager", "v0.12.0")


@dataclass(frozen=True)
class Operand:
    """One operand DaemonSet: deploy label key, upstream DaemonSet and state names, the ClusterPolicy spec
    section, default image (repository, image, version), container names, init container names."""

    key: str
    daemonset: str
    state: str
    spec_field: str
    image: tuple[str, str, str]
    containers: tuple[str, ...]
    init_containers: tuple[str, ...]
    default_enabled: bool = True


# In upstream state order (state_manager.go addState), which is the order of status messages.
OPERANDS: tuple[Operand, ...] = (
    Operand(
        "driver",
        "nvidia-driver-daemonset",
        "state-driver",
        "driver",
        ("nvcr.io/nvidia", "driver", "595.91.07"),
        ("nvidia-driver-ctr",),
        ("k8s-driver-manager",),
    ),
    Operand(
        "container-toolkit",
        "nvidia-container-toolkit-daemonset",
        "state-container-toolkit",
        "toolkit",
        ("nvcr.io/nvidia/k8s", "container-toolkit", "v1.20.0"),
        ("nvidia-container-toolkit-ctr",),
        ("driver-validation",),
    ),
    Operand(
        "operator-validator",
        "nvidia-operator-validator",
        "state-operator-validation",
        "validator",
        VALIDATOR_IMAGE,
        ("nvidia-operator-validator",),
        ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"),
    ),
    Operand(
        "device-plugin",
        "nvidia-device-plugin-daemonset",
        "state-device-plugin",
        "devicePlugin",
        ("nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0"),
        ("nvidia-device-plugin",),
        ("toolkit-validation",),
    ),
    Operand(
        "dcgm-exporter",
        "nvidia-dcgm-exporter",
        "state-dcgm-exporter",
        "dcgmExporter",
        ("nvcr.io/nvidia/k8s", "dcgm-exporter", "4.6.0-4.8.3-distroless"),
        ("nvidia-dcgm-exporter",),
        ("toolkit-validation",),
    ),
    Operand(
        "gpu-feature-discovery",
        "gpu-feature-discovery",
        "gpu-feature-discovery",
        "gfd",
        ("nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0"),
        ("gpu-feature-discovery",),
        ("toolkit-validation",),
    ),
    Operand(
        "mig-manager",
        "nvidia-mig-manager",
        "state-mig-manager",
        "migManager",
        ("nvcr.io/nvidia/cloud-native", "k8s-mig-manager", "v0.15.0"),
        ("nvidia-mig-manager",),
        ("toolkit-validation",),
    ),
)
OPERAND_BY_KEY = {o.key: o for o in OPERANDS}
OPERAND_DAEMONSETS = frozenset(o.daemonset for o in OPERANDS)
# operands with a config-manager sidecar when spec.<section>.config.name is set
CONFIG_MANAGER_OPERANDS = frozenset({"device-plugin", "gpu-feature-discovery"})


# --------------------------------------------------------------------------------------------------
# GPU facts from hardware profiles
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuModel:
    family: str
    compute: tuple[int, int]
    mig_profiles: tuple[tuple[str, int], ...] = ()  # (profile, instances per GPU) for all-<profile>


# MIG profiles (most instances per GPU) as NVML lists them: NVIDIA MIG User Guide "Supported MIG Profiles"
# (H100 80GB / A100 80GB: 1g.10gb x7, 1g.10gb+me x1, ...; H200 141GB: 1g.18gb x7, ..., 7g.141gb).
_MIG_80GB = (
    ("1g.10gb", 7),
    ("1g.10gb+me", 1),
    ("1g.20gb", 4),
    ("2g.20gb", 3),
    ("3g.40gb", 2),
    ("4g.40gb", 1),
    ("7g.80gb", 1),
)
_MIG_H200 = (
    ("1g.18gb", 7),
    ("1g.18gb+me", 1),
    ("1g.35gb", 4),
    ("2g.35gb", 3),
    ("3g.71gb", 2),
    ("4g.71gb", 1),
    ("7g.141gb", 1),
)

# PCI device id -> facts GFD reports (NVML), for the GPUs of the hardware profiles and their close kin.
GPU_MODELS: dict[str, GpuModel] = {
    "2335": GpuModel("hopper", (9, 0), _MIG_H200),  # H200 SXM 141GB
    "233b": GpuModel("hopper", (9, 0), _MIG_H200),  # H200 NVL
    "2330": GpuModel(  # H100 SXM5 80GB
        "hopper",
        (9, 0),
        _MIG_80GB,
    ),
    "2331": GpuModel(  # H100 PCIe 80GB
        "hopper",
        (9, 0),
        _MIG_80GB,
    ),
    "20b2": GpuModel(  # A100 SXM4 80GB
        "ampere",
        (8, 0),
        _MIG_80GB,
    ),
    "20b0": GpuModel(  # A100 SXM4 40GB
        "ampere",
        (8, 0),
        (
            ("1g.5gb", 7),
            ("1g.5gb+me", 1),
            ("1g.10gb", 4),
            ("2g.10gb", 3),
            ("3g.20gb", 2),
            ("4g.20gb", 1),
            ("7g.40gb", 1),
        ),
    ),
    "26b9": GpuModel("ada-lovelace", (8, 9)),  # L40S
    "26b5": GpuModel("ada-lovelace", (8, 9)),  # L40
}


@dataclass(frozen=True)
class GpuInfo:
    """The NVIDIA GPUs of a node, as GFD and the device plugin would see them."""

    count: int
    product: str
    memory_mib: int
    device_id: str
    host_driver: str | None
    model: GpuModel | None

    @property
    def mig_capable(self) -> bool:
        return bool(self.model and self.model.mig_profiles)

    def mig_instances(self, profile: str) -> int | None:
        for name, n in self.model.mig_profiles if self.model else ():
            if name == profile:
                return n
        return None


def gpu_info(profile: Mapping[str, Any] | None) -> GpuInfo | None:
    """The first NVIDIA GPU group of a hardware profile (tests/fixtures/hardware), or None."""
    if not profile:
        return None
    host = profile.get("host") or {}
    for dev in host.get("pci") or ():
        if dev.get("role") == "gpu" and str(dev.get("vendor")).lower() == "10de":
            device = str(dev.get("device", "")).lower()
            return GpuInfo(
                count=int(dev.get("count") or 0),
                product=product_label(str(dev.get("model") or "NVIDIA GPU")),
                memory_mib=int(dev.get("memory_mib") or 0),
                device_id=device,
                host_driver=host.get("nvidia_driver") or None,
                model=GPU_MODELS.get(device),
            )
    return None


def product_label(model: str) -> str:
    """`NVIDIA H100 80GB HBM3` -> `NVIDIA-H100-80GB-HBM3` (GFD replaces spaces with dashes)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", model.strip())[:63].strip("-_.")


def driver_version_labels(version: str | None) -> dict[str, str]:
    """`595.91.07` -> cuda.driver.{major,minor,rev}; {} when unparsable or missing."""
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    if not m:
        return {}
    return {
        "nvidia.com/cuda.driver.major": m.group(1),
        "nvidia.com/cuda.driver.minor": m.group(2),
        "nvidia.com/cuda.driver.rev": m.group(3) or "",
    }


# --------------------------------------------------------------------------------------------------
# Small helpers shared with the AMD handler
# --------------------------------------------------------------------------------------------------


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def labels_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def instance_mark(obj: Mapping[str, Any] | None, annotation: str, instance: str) -> dict[str, Any] | None:
    """The JSON object in ``annotation`` when it names ``instance`` (a handler marks what it wrote on a node so that
    another instance of the simulator leaves it alone); None when absent, unparsable or another instance's."""
    raw = annotations_of(obj).get(annotation)
    if not raw:
        return None
    try:
        mark = json.loads(raw)
    except ValueError:
        return None
    return mark if isinstance(mark, dict) and mark.get("instance") == instance else None


def instance_of(obj: Mapping[str, Any] | None) -> str:
    return labels_of(obj).get(INSTANCE_LABEL) or DEFAULT_INSTANCE


def scope_to_instance(instance: str, pod_spec: Obj, node_selector: Obj, labels: Obj | None = None) -> None:
    """An operand DaemonSet of a test's own instance runs only on nodes labelled with it (and carries the label);
    the default instance's stays off every labelled node."""
    if instance != DEFAULT_INSTANCE:
        node_selector[INSTANCE_LABEL] = instance
        if labels is not None:
            labels[INSTANCE_LABEL] = instance
    else:
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": INSTANCE_LABEL, "operator": "DoesNotExist"}]}]
                }
            }
        }


def in_scope(obj: Mapping[str, Any] | None, instance: str) -> bool:
    return instance_of(obj) == instance


def oldest(objs: Iterable[Obj]) -> Obj | None:
    """The oldest object by creationTimestamp, then name (upstream getSingletonClusterPolicy)."""
    items = list(objs)
    if not items:
        return None
    return min(items, key=lambda o: (o["metadata"].get("creationTimestamp") or "", o["metadata"]["name"]))


def spec_enabled(section: Mapping[str, Any] | None, default: bool = True, field: str = "enabled") -> bool:
    value = (section or {}).get(field)
    return default if value is None else bool(value)


def image_path(section: Mapping[str, Any] | None, default: tuple[str, str, str]) -> str:
    """repository/image:version (upstream imagePath): a lone image is a full reference; a version
    starting with sha256: is a digest."""
    section = section or {}
    repo, image, version = section.get("repository"), section.get("image"), section.get("version")
    if not repo and not version and image:
        return str(image)
    repo, image, version = repo or default[0], image or default[1], version or default[2]
    sep = "@" if str(version).startswith("sha256:") else ":"
    return f"{repo}/{image}{sep}{version}"


def merge_tolerations(*groups: Iterable[Mapping[str, Any]]) -> list[Obj]:
    out: list[Obj] = []
    seen: set[tuple[Any, ...]] = set()
    for group in groups:
        for tol in group or ():
            ident = tuple(tol.get(k) for k in ("key", "operator", "value", "effect"))
            if ident not in seen:
                seen.add(ident)
                out.append(dict(tol))
    return out


def build_conditions(
    existing: Sequence[Mapping[str, Any]] | None, wanted: Sequence[Mapping[str, Any]], now: str
) -> list[Obj]:
    """metav1.Conditions with lastTransitionTime kept when the status did not change; message always
    present (the CRDs require it)."""
    current = {c.get("type"): c for c in existing or ()}
    out = []
    for cond in wanted:
        c = {"message": "", **cond}
        cur = current.get(c["type"])
        if cur is not None and cur.get("status") == c["status"] and cur.get("lastTransitionTime"):
            c["lastTransitionTime"] = cur["lastTransitionTime"]
        else:
            c["lastTransitionTime"] = now
        out.append(c)
    return out


def with_applied_hash(manifest: Obj, annotation: str) -> Obj:
    """The manifest with a hash of itself in `annotation`: a change anywhere (a key removed from a map
    included, which a subset comparison cannot see) changes the hash, so the object is applied again and
    server-side apply drops what the manifest no longer has (upstream uses nvidia.com/last-applied-hash)."""
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
    manifest.setdefault("metadata", {}).setdefault("annotations", {})[annotation] = digest
    return manifest


def pod_owner_name(pod: Mapping[str, Any], kind: str = "DaemonSet") -> tuple[str, str] | None:
    """(name, uid) of the pod's controller of `kind`."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == kind:
            return ref.get("name", ""), ref.get("uid", "")
    return None


def pods_by_node_and_owner(pods: Iterable[Obj], owners: Mapping[str, str]) -> dict[tuple[str, str], Obj]:
    """{(node, owner name): pod} for pods (not being deleted) owned by DaemonSets `owners` (name -> uid)."""
    out: dict[tuple[str, str], Obj] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        ref = pod_owner_name(pod)
        if not node or ref is None or meta.get("deletionTimestamp"):
            continue
        name, uid = ref
        if name in owners and owners[name] in (uid, ""):
            prev = out.get((node, name))
            # prefer the newest pod when the DaemonSet controller is replacing one
            if prev is None or (meta.get("creationTimestamp") or "") >= (
                (prev.get("metadata") or {}).get("creationTimestamp") or ""
            ):
                out[(node, name)] = pod
    return out


# --------------------------------------------------------------------------------------------------
# Pure decisions
# --------------------------------------------------------------------------------------------------


def is_nvidia_resource(name: str) -> bool:
    """An extended resource the device plugin advertises: nvidia.com/gpu, its renamed nvidia.com/gpu.shared,
    nvidia.com/mig-<profile> (and their .shared)."""
    return name == GPU_RESOURCE or name.startswith((GPU_RESOURCE + ".", "nvidia.com/mig-"))


def uses_nvidia_gpu(pod: Mapping[str, Any]) -> bool:
    """A pod whose containers request an NVIDIA GPU extended resource (or a DRA claim is not considered)."""
    spec = pod.get("spec") or {}
    for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ())):
        res = c.get("resources") or {}
        if any(is_nvidia_resource(r) for f in ("limits", "requests") for r in (res.get(f) or {})):
            return True
    return False


def has_gpu_pci_labels(labels: Mapping[str, str]) -> bool:
    return any(labels.get(k) == "true" for k in NFD_GPU_LABELS)


def has_nfd_labels(labels: Mapping[str, str]) -> bool:
    return any(k.startswith(NFD_PREFIX) for k in labels)


def effective_labels(labels: Mapping[str, str], faults: Iterable[str]) -> dict[str, str]:
    """The node labels as the operator sees them: fault nfd-labels-missing hides the NFD labels."""
    if FAULT_NFD_LABELS_MISSING in faults:
        return {k: v for k, v in labels.items() if not k.startswith(NFD_PREFIX)}
    return dict(labels)


def mig_config_default(spec: Mapping[str, Any]) -> str:
    return str(((spec.get("migManager") or {}).get("config") or {}).get("default") or "")


def operator_labels(
    labels: Mapping[str, str], spec: Mapping[str, Any], gpu: GpuInfo | None, faults: Iterable[str] = ()
) -> dict[str, str | None]:
    """Label changes the operator's node labelling makes (value None removes): gpu.present, the deploy
    labels, the default MIG config."""
    eff = effective_labels(labels, faults)
    want = dict(labels)
    if has_gpu_pci_labels(eff):
        want[GPU_PRESENT] = "true"
    elif want.get(GPU_PRESENT) == "true":
        want[GPU_PRESENT] = "false"
    if want.get(GPU_PRESENT) != "true" or want.get(OPERANDS_DISABLED) == "false":
        for key in ALL_DEPLOY_KEYS:
            want.pop(DEPLOY_PREFIX + key, None)
    else:
        for key in CONTAINER_DEPLOY_KEYS:
            if not want.get(DEPLOY_PREFIX + key):
                want[DEPLOY_PREFIX + key] = "true"
        mig_capable = bool(gpu and gpu.mig_capable)
        if mig_capable and not want.get(DEPLOY_PREFIX + MIG_MANAGER_KEY):
            want[DEPLOY_PREFIX + MIG_MANAGER_KEY] = "true"
        if (
            mig_capable
            and spec_enabled(spec.get("migManager"))
            and MIG_CONFIG not in want
            and mig_config_default(spec) == MIG_DISABLED
        ):
            want[MIG_CONFIG] = MIG_DISABLED
    return diff_labels(labels, want)


def diff_labels(have: Mapping[str, str], want: Mapping[str, str]) -> dict[str, str | None]:
    changes: dict[str, str | None] = {k: v for k, v in want.items() if have.get(k) != v}
    changes.update({k: None for k in have if k not in want})
    return changes


def enabled_operands(spec: Mapping[str, Any]) -> list[Operand]:
    """The operands whose DaemonSet the ClusterPolicy asks for (IsEnabled defaults: enabled when unset)."""
    out = []
    for op in OPERANDS:
        section = spec.get(op.spec_field) or {}
        if op.key == "operator-validator":
            out.append(op)
        elif op.key == "driver":
            if spec_enabled(section) and not section.get("useNvidiaDriverCRD"):
                out.append(op)
        elif spec_enabled(section, op.default_enabled):
            out.append(op)
    return out


def daemonset_manifest(op: Operand, cp: Mapping[str, Any], namespace: str, instance: str) -> Obj:
    """The operand DaemonSet as the operator renders it (assets/state-*/…_daemonset.yaml, trimmed to
    what scheduling and tests see)."""
    spec = cp.get("spec") or {}
    section = spec.get(op.spec_field) or {}
    ds_cfg = spec.get("daemonsets") or {}
    image = image_path(section, op.image)
    validator_image = image_path(spec.get("validator"), VALIDATOR_IMAGE)
    pull = section.get("imagePullPolicy") or "IfNotPresent"
    inits = []
    for name in op.init_containers:
        if name == "k8s-driver-manager":
            img = image_path(section.get("manager"), DRIVER_MANAGER_IMAGE)
        elif name.endswith("-validation"):
            img = validator_image
        else:
            img = image
        inits.append({"name": name, "image": img, "imagePullPolicy": pull})
    containers = [{"name": c, "image": image, "imagePullPolicy": pull} for c in op.containers]
    if op.key == "dcgm-exporter":  # assets/state-dcgm-exporter/0800_daemonset.yaml
        containers[0]["ports"] = [{"name": "metrics", "containerPort": DCGM_EXPORTER_PORT}]
    if op.key == "driver" and spec_enabled(section.get("rdma"), False):
        containers.append({"name": PEERMEM_CONTAINER, "image": image, "imagePullPolicy": pull})
    if op.key in CONFIG_MANAGER_OPERANDS and ((section.get("config") or {}).get("name")):
        inits.append({"name": "config-manager-init", "image": image, "imagePullPolicy": pull})
        containers.append({"name": "config-manager", "image": image, "imagePullPolicy": pull})
    node_selector = {DEPLOY_PREFIX + op.key: "true"}
    pod_spec: Obj = {
        "nodeSelector": node_selector,
        "tolerations": merge_tolerations([GPU_TOLERATION], ds_cfg.get("tolerations") or (), [KWOK_TOLERATION]),
        "priorityClassName": ds_cfg.get("priorityClassName") or "system-node-critical",
        "initContainers": inits,
        "containers": containers,
    }
    scope_to_instance(instance, pod_spec, node_selector)
    strategy: Obj = {"type": ds_cfg.get("updateStrategy") or "RollingUpdate"}
    if op.key == "driver":
        # assets/state-driver/0500_daemonset.yaml: OnDelete, never RollingUpdate (applyUpdateStrategyConfig skips
        # the driver): the upgrade controller replaces its pods node by node (driver_upgrade.py)
        strategy = {"type": "OnDelete"}
    if strategy["type"] == "RollingUpdate":
        max_unavailable = str((ds_cfg.get("rollingUpdate") or {}).get("maxUnavailable") or "1")
        strategy["rollingUpdate"] = {
            "maxUnavailable": int(max_unavailable) if max_unavailable.isdigit() else max_unavailable
        }
    template_meta: Obj = {"labels": {**(ds_cfg.get("labels") or {}), "app": op.daemonset}}
    if ds_cfg.get("annotations"):
        template_meta["annotations"] = dict(ds_cfg["annotations"])
    if op.key == "driver":
        # which template a driver pod was made from (upstream compares controller revisions): the upgrade controller
        # replaces the pods whose template is not the DaemonSet's now (driver_upgrade.py)
        digest = hashlib.sha256(json.dumps([template_meta, pod_spec], sort_keys=True).encode()).hexdigest()[:16]
        template_meta.setdefault("annotations", {})[driver_upgrade.TEMPLATE_ANNOTATION] = digest
    labels = {"app": op.daemonset}
    if instance != DEFAULT_INSTANCE:
        labels[INSTANCE_LABEL] = instance
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": op.daemonset, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": op.daemonset}},
            "updateStrategy": strategy,
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }
    return with_applied_hash(manifest, APPLIED_HASH_ANNOTATION)


def dcgm_exporter_service(cp: Mapping[str, Any], namespace: str) -> Obj:
    """The exporter's Service (assets/state-dcgm-exporter/0400_service.yaml; TransformDCGMExporterService sets the
    type and internalTrafficPolicy from dcgmExporter.serviceSpec)."""
    svc_cfg = ((cp.get("spec") or {}).get("dcgmExporter") or {}).get("serviceSpec") or {}
    spec: Obj = {
        "selector": {"app": DCGM_EXPORTER},
        "ports": [
            {"name": "gpu-metrics", "port": DCGM_EXPORTER_PORT, "targetPort": DCGM_EXPORTER_PORT, "protocol": "TCP"}
        ],
    }
    if svc_cfg.get("type"):
        spec["type"] = svc_cfg["type"]
    if svc_cfg.get("internalTrafficPolicy"):
        spec["internalTrafficPolicy"] = svc_cfg["internalTrafficPolicy"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": DCGM_EXPORTER,
            "namespace": namespace,
            "labels": {"app": DCGM_EXPORTER},
            "annotations": {"prometheus.io/scrape": "true"},
        },
        "spec": spec,
    }


def dcgm_exporter_service_monitor(cp: Mapping[str, Any], namespace: str) -> Obj | None:
    """The exporter's ServiceMonitor (assets/state-dcgm-exporter/0500_service_monitor.yaml with
    applyServiceMonitorCustomEdits: additionalLabels, and on the endpoint interval, scrapeTimeout, honorLabels,
    relabelings), or None when dcgmExporter.serviceMonitor.enabled is not true."""
    sm_cfg = ((cp.get("spec") or {}).get("dcgmExporter") or {}).get("serviceMonitor") or {}
    if sm_cfg.get("enabled") is not True:
        return None
    endpoint: Obj = {"port": "gpu-metrics", "path": "/metrics"}
    for key in ("interval", "scrapeTimeout"):
        if sm_cfg.get(key):
            endpoint[key] = sm_cfg[key]
    if sm_cfg.get("honorLabels") is not None:
        endpoint["honorLabels"] = bool(sm_cfg["honorLabels"])
    if sm_cfg.get("relabelings"):
        endpoint["relabelings"] = list(sm_cfg["relabelings"])
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {
            "name": DCGM_EXPORTER,
            "namespace": namespace,
            "labels": {"app": DCGM_EXPORTER, **(sm_cfg.get("additionalLabels") or {})},
        },
        "spec": {
            "endpoints": [endpoint],
            "jobLabel": "app",
            "namespaceSelector": {"matchNames": [namespace]},
            "selector": {"matchLabels": {"app": DCGM_EXPORTER}},
        },
    }


@dataclass(frozen=True)
class PodPlan:
    """What a fault makes of an operand pod: ok, crashloop (container, message), init (stuck at init
    container) or notready (container Running, not Ready)."""

    kind: str = "ok"
    container: str = ""
    message: str = ""


OK = PodPlan()


@dataclass(frozen=True)
class NodeHealth:
    driver_down: bool
    toolkit_down: bool
    plans: dict[str, PodPlan]
    reasons: tuple[str, ...]


def node_health(
    operands: Iterable[str],
    faults: Iterable[str],
    host_driver: bool,
    host_driver_known: bool = True,
    peermem: bool = False,
) -> NodeHealth:
    """Per-operand pod plans on a node that runs `operands` (deploy keys) under `faults`."""
    ops = set(operands)
    faults = frozenset(faults)
    reasons: list[str] = []
    driver_fault = "driver" in ops and bool(faults & {FAULT_DRIVER_CRASHLOOP, FAULT_HOST_DRIVER_CONFLICT})
    no_driver = "driver" not in ops and host_driver_known and not host_driver
    if driver_fault:
        reasons.append("driver pod failing")
    if no_driver:
        reasons.append("no driver: the operator deploys none here and the host has none loaded")
    driver_down = driver_fault or no_driver
    toolkit_down = "container-toolkit" in ops and FAULT_TOOLKIT_NOT_READY in faults
    if toolkit_down:
        reasons.append("container toolkit not ready")
    plans: dict[str, PodPlan] = {}
    for key in ops:
        plan = OK
        if key == "driver" and driver_fault:
            message = HOST_DRIVER_CONFLICT_MESSAGE if FAULT_HOST_DRIVER_CONFLICT in faults else DRIVER_CRASH_MESSAGE
            plan = PodPlan("crashloop", "nvidia-driver-ctr", message)
        elif key == "driver" and peermem and FAULT_PEERMEM_NOT_LOADED in faults:
            plan = PodPlan("notready", PEERMEM_CONTAINER, "nvidia-peermem module is not loaded")
        elif key == "container-toolkit":
            if driver_down:
                plan = PodPlan("init", "driver-validation")
            elif toolkit_down:
                plan = PodPlan("notready", "nvidia-container-toolkit-ctr", "toolkit is not ready")
        elif key == "operator-validator":
            if driver_down:
                plan = PodPlan("init", "driver-validation")
            elif toolkit_down:
                plan = PodPlan("init", "toolkit-validation")
            elif FAULT_VALIDATOR_INIT_STUCK in faults:
                plan = PodPlan("init", "driver-validation")
        elif key != "driver" and (driver_down or toolkit_down):
            plan = PodPlan("init", "toolkit-validation")
        plans[key] = plan
    if FAULT_VALIDATOR_INIT_STUCK in faults and "operator-validator" in ops:
        reasons.append("validator stuck in Init")
    return NodeHealth(driver_down, toolkit_down, plans, tuple(reasons))


MigCustom = Mapping[str, Any] | sharing.ConfigError | None


def mig_apply(
    gpu: GpuInfo | None, config: str | None, custom: MigCustom = None
) -> tuple[str | None, dict[str, int] | None]:
    """(mig.config.state, MIG devices per GPU: profile -> count, None when MIG is off) for a node's MIG config
    label, as mig-manager v0.15.0 applies the configs it generates (sharing.mig_devices): a name it has for
    this GPU -> success; any other -> failed (`mig-parted assert --valid-config` fails before anything
    changes), MIG left as it was (*sim*: off). With a custom config file (``custom``: its mig-configs, or the
    ConfigError it fails with) only its names exist (sharing.custom_mig_devices)."""
    if not config or gpu is None or not gpu.mig_capable or gpu.model is None:
        return None, None
    if custom is not None:
        if isinstance(custom, sharing.ConfigError) or config not in custom:
            return "failed", None
        try:
            custom_devices = sharing.custom_mig_devices(
                custom[config], dict(gpu.model.mig_profiles), gpu.device_id, gpu.count
            )
        except sharing.ConfigError:
            return "failed", None
        return "success", custom_devices
    devices = sharing.mig_devices(dict(gpu.model.mig_profiles), config)
    if devices is None:
        return "failed", None
    return "success", devices if sharing.mig_enabled(config) else None


def mig_state(gpu: GpuInfo | None, config: str | None) -> tuple[str | None, str | None, int]:
    """(mig.config.state, applied MIG profile or None, instances per GPU) for configs of one profile."""
    state, devices = mig_apply(gpu, config)
    if devices and len(devices) == 1:
        profile, count = next(iter(devices.items()))
        return state, profile, count
    return state, None, 0


def mig_resources(gpu: GpuInfo, strategy: str, devices: Mapping[str, int] | None) -> dict[str, int]:
    """Extended resources the device plugin advertises for MIG devices per GPU (migStrategy none|single|mixed;
    internal/rm/rm.go names mixed resources mig-<profile> with '+' replaced by '.'; single maps every MIG device,
    whatever its profile, to nvidia.com/gpu: AddMIGResource("*", "gpu")). MIG on without devices (all-enabled):
    no GPU. Under single, more than one MIG device type fails the plugin (internal/rm/device_map.go
    assertAllMigDevicesAreValid(uniform=true): "more than one MIG device type present on node"): nothing is
    advertised."""
    if devices is None or strategy == "none":
        return {GPU_RESOURCE: gpu.count}
    if strategy == "mixed":
        out = {GPU_RESOURCE: 0}
        out.update({f"nvidia.com/mig-{p.replace('+', '.')}": gpu.count * n for p, n in devices.items()})
        return out
    if len(devices) > 1:
        return {GPU_RESOURCE: 0}
    return {GPU_RESOURCE: gpu.count * sum(devices.values())}


def node_resources(gpu: GpuInfo, strategy: str, mig_profile: str | None, per_gpu: int) -> dict[str, int]:
    """Extended resources the device plugin advertises (migStrategy none|single|mixed), one MIG profile."""
    return mig_resources(gpu, strategy, {mig_profile: per_gpu} if mig_profile else None)


def gfd_labels(
    gpu: GpuInfo, strategy: str, mig_profile: str | None, per_gpu: int, driver_version: str | None
) -> dict[str, str]:
    """Labels GPU Feature Discovery publishes for the node (in its NodeFeature), but the timestamp."""
    labels = {
        "nvidia.com/gpu.product": gpu.product,
        "nvidia.com/gpu.count": str(gpu.count),
        "nvidia.com/gpu.memory": str(gpu.memory_mib),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true" if gpu.mig_capable else "false",
        "nvidia.com/mig.strategy": strategy,
    }
    if gpu.model:
        labels["nvidia.com/gpu.family"] = gpu.model.family
        labels["nvidia.com/gpu.compute.major"] = str(gpu.model.compute[0])
        labels["nvidia.com/gpu.compute.minor"] = str(gpu.model.compute[1])
    if mig_profile and strategy == "single":
        labels["nvidia.com/gpu.product"] = f"{gpu.product}-MIG-{mig_profile}"[:63]
        labels["nvidia.com/gpu.count"] = str(gpu.count * per_gpu)
        del labels["nvidia.com/gpu.memory"]
    elif mig_profile and strategy == "mixed":
        labels[f"nvidia.com/mig-{mig_profile}.count"] = str(gpu.count * per_gpu)
    labels.update(driver_version_labels(driver_version))
    return labels


def is_gfd_label(key: str) -> bool:
    """A label GFD publishes (through its NodeFeature; never written to the Node by the simulator)."""
    return key in GFD_LABELS or (key.startswith("nvidia.com/mig-") and key.endswith(".count"))


def gfd_node_feature_name(node: str) -> str:
    """`nvidia-features-for-<node>` (upstream nodeFeatureVendorPrefix joined with the node name)."""
    return GFD_NODE_FEATURE_PREFIX + node


def gfd_node_feature(node: str, namespace: str, labels: Mapping[str, str], daemonset: Obj, pod: Obj) -> Obj:
    """The NodeFeature GFD writes for its node (k8s-device-plugin v0.20.0 internal/lm/output.go):
    named `nvidia-features-for-<node>` in the GFD pod's namespace, labelled with the node name, empty
    raw features, its labels in spec.labels, owned by the GFD DaemonSet (controller) and pod, so the
    garbage collector deletes it once both are gone. *sim*: a hash annotation (the framework applies an
    object only when it differs, and a subset comparison cannot see a label removed)."""
    refs = []
    for owner, controller in ((daemonset, True), (pod, False)):
        meta = owner.get("metadata") or {}
        ref = {
            "apiVersion": owner.get("apiVersion") or ("apps/v1" if controller else "v1"),
            "kind": owner.get("kind") or ("DaemonSet" if controller else "Pod"),
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
        }
        if controller:
            ref["controller"] = True
        refs.append(ref)
    manifest = {
        "apiVersion": NODE_FEATURE.api_version,
        "kind": NODE_FEATURE.kind,
        "metadata": {
            "name": gfd_node_feature_name(node),
            "namespace": namespace,
            "labels": {NODE_NAME_LABEL: node},
            "ownerReferences": refs,
        },
        "spec": {"features": {"flags": {}, "attributes": {}, "instances": {}}, "labels": dict(labels)},
    }
    return with_applied_hash(manifest, SIM_APPLIED_HASH_ANNOTATION)


def policy_status(
    not_ready_states: Sequence[str],
    gpu_nodes: int,
    cluster_has_nfd: bool,
) -> tuple[str, list[dict[str, str]]]:
    """(state, conditions without times) of the active ClusterPolicy (clusterpolicy_controller.go)."""
    if not_ready_states:
        message = f"ClusterPolicy is not ready; states not ready: [{' '.join(not_ready_states)}]"
        return "notReady", [
            {"type": "Ready", "status": "False", "reason": "Error", "message": ""},
            {"type": "Error", "status": "True", "reason": "OperandNotReady", "message": message},
        ]
    if not cluster_has_nfd:
        reason, message = "NFDLabelsMissing", "No NFD labels found"
    elif gpu_nodes == 0:
        reason, message = "NoGPUNodes", "No GPU node found, watching for new nodes to join the cluster."
    else:
        reason, message = "Reconciled", "ClusterPolicy is ready as all resources have been successfully reconciled"
    return "ready", [
        {"type": "Ready", "status": "True", "reason": reason, "message": message},
        {"type": "Error", "status": "False", "reason": "Ready", "message": ""},
    ]


# --------------------------------------------------------------------------------------------------
# Pod status writes for plans
# --------------------------------------------------------------------------------------------------


def apply_pod_plan(ctx: Context, pod: Obj, plan: PodPlan) -> Obj:
    """Make the pod show `plan` (or release a simulated failure when the plan is ok)."""
    if plan.kind == "crashloop":
        return ctx.set_pod_crashloop(pod, [plan.container], message=plan.message)
    if plan.kind == "initcrash":
        return ctx.set_pod_stuck_init(pod, plan.container, reason="CrashLoopBackOff", message=plan.message)
    if plan.kind == "init":
        inits = {c["name"] for c in (pod.get("spec") or {}).get("initContainers") or ()}
        if plan.container not in inits:
            return pod
        return ctx.set_pod_stuck_init(pod, plan.container)
    if plan.kind == "notready":
        now = ctx.now()
        current = {c.get("name"): c for c in (pod.get("status") or {}).get("containerStatuses") or ()}
        statuses = []
        for c in (pod.get("spec") or {}).get("containers") or ():
            cur = current.get(c["name"]) or {}
            st = running_container_status(c, int(cur.get("restartCount") or 0), now)
            started = ((cur.get("state") or {}).get("running") or {}).get("startedAt")
            if started:
                st["state"] = {"running": {"startedAt": started}}
            if c["name"] == plan.container:
                st["ready"] = False
            statuses.append(st)
        msg = f"containers with unready status: [{plan.container}]"
        return ctx.set_pod_status(
            pod,
            phase="Running",
            container_statuses=statuses,
            conditions=[
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": msg},
                {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady", "message": msg},
                {"type": "PodScheduled", "status": "True"},
            ],
        )
    if MANAGED_STATUS_ANNOTATION in annotations_of(pod):
        return ctx.release_pod_status(pod)
    return pod


# --------------------------------------------------------------------------------------------------
# The handler
# --------------------------------------------------------------------------------------------------


def load_profile(name: str) -> dict[str, Any] | None:
    """A hardware profile by name, None when unknown (the node then has no known GPUs)."""
    from ...errors import LabError
    from ...profiles import load

    try:
        return load(name)
    except (LabError, OSError, ValueError):
        return None


class ClusterPolicyHandler(Handler):
    """The NVIDIA GPU Operator's ClusterPolicy controller (see the module docstring)."""

    name = "ClusterPolicy"
    primary = CLUSTER_POLICY
    known_faults = NVIDIA_FAULTS
    watches: Sequence[Kind] = (NODE, POD, DAEMONSET, DEPLOYMENT, NODE_FEATURE)

    def __init__(self, instance: str | None = None, operator_namespace: str | None = None) -> None:
        self.instance = instance or DEFAULT_INSTANCE
        self.operator_namespace = operator_namespace
        if self.instance != DEFAULT_INSTANCE:
            self.name = f"ClusterPolicy[{self.instance}]"
        self._profiles: dict[str, dict[str, Any] | None] = {}
        self._warned: set[str] = set()
        self._node_feature_not_served = False

    # -- scope -------------------------------------------------------------------------------------
    def _policies(self, cache: Cache) -> list[Obj]:
        return [cp for cp in cache.list(CLUSTER_POLICY) if in_scope(cp, self.instance)]

    def _active_key(self, cache: Cache) -> Key | None:
        active = oldest(self._policies(cache))
        return Key.of(active) if active is not None else None

    def _owns_node(self, node: Mapping[str, Any]) -> bool:
        return annotations_of(node).get(NODE_OWNER_ANNOTATION) == self.instance

    def map_to_primary(self, obj: Obj, cache: Cache) -> Iterable[Key]:
        kind = obj.get("kind")
        if kind == "Pod":
            ref = pod_owner_name(obj)
            if ref is None or ref[0] not in OPERAND_DAEMONSETS:
                return []
        elif kind == "DaemonSet":
            if (obj.get("metadata") or {}).get("name") not in OPERAND_DAEMONSETS:
                return []
        elif kind == "Deployment":
            key, value = OPERATOR_DEPLOYMENT_LABEL
            if self.operator_namespace is not None or labels_of(obj).get(key) != value:
                return []
        elif kind == "Node":
            if not in_scope(obj, self.instance) and not self._owns_node(obj):
                return []
        elif kind == "NodeFeature":
            # GFD's NodeFeature of a node this instance handles (republished when someone deletes it)
            if not str((obj.get("metadata") or {}).get("name", "")).startswith(GFD_NODE_FEATURE_PREFIX):
                return []
            node = cache.get(NODE, labels_of(obj).get(NODE_NAME_LABEL) or "")
            if node is None or (not in_scope(node, self.instance) and not self._owns_node(node)):
                return []
            obj = node
        else:
            return []
        active = self._active_key(cache)
        if active is not None:
            return [active]
        if obj.get("kind") == "Node" and self._owns_node(obj):
            return [CLEANUP_KEY]
        return []

    def keys_for_fault_change(self, nodes: frozenset[str] | None, cache: Cache) -> Iterable[Key] | None:
        active = self._active_key(cache)
        return [active] if active is not None else []

    # -- helpers -----------------------------------------------------------------------------------
    def _profile(self, node: Mapping[str, Any]) -> dict[str, Any] | None:
        name = labels_of(node).get(PROFILE_LABEL)
        if not name:
            return None
        if name not in self._profiles:
            self._profiles[name] = load_profile(name)
        return self._profiles[name]

    def _warn_once(self, ctx: Context, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            ctx.log(message, level=logging.WARNING)

    def _namespace(self, ctx: Context, cp: Mapping[str, Any]) -> str:
        override = annotations_of(cp).get(OPERATOR_NAMESPACE_ANNOTATION)
        if override:
            return override
        if self.operator_namespace:
            return self.operator_namespace
        key, value = OPERATOR_DEPLOYMENT_LABEL
        deployments = ctx.list(DEPLOYMENT, labels={key: value})
        if deployments:
            return str(deployments[0]["metadata"]["namespace"])
        return DEFAULT_OPERATOR_NAMESPACE

    def _write_status(self, ctx: Context, cp: Obj, state: str, namespace: str, conditions: list[dict]) -> None:
        existing = (cp.get("status") or {}).get("conditions")
        ctx.patch_status(
            cp,
            {
                "state": state,
                "namespace": namespace,
                "conditions": build_conditions(existing, conditions, rfc3339(ctx.now())),
            },
        )

    def _delete_gfd_node_features(self, ctx: Context, node: str, namespace: str | None = None) -> None:
        """Delete GFD's NodeFeature of the node (in `namespace`, or in any); nfd-master then removes its
        labels from the node."""
        for nf in ctx.list(NODE_FEATURE, namespace, labels={NODE_NAME_LABEL: node}):
            if nf["metadata"]["name"] == gfd_node_feature_name(node):
                ctx.delete_object(nf)

    def _cleanup_node(self, ctx: Context, node: Obj) -> None:
        """Remove everything this instance put on the node (labels, resources, condition, marker) and
        GFD's NodeFeature (nfd-master removes the GFD labels)."""
        self._delete_gfd_node_features(ctx, node["metadata"]["name"])
        labels = labels_of(node)
        remove: dict[str, str | None] = {}
        for key, value in labels.items():
            if key in (GPU_PRESENT, MIG_CONFIG_STATE):
                remove[key] = None
            elif key.startswith(DEPLOY_PREFIX) and key != OPERANDS_DISABLED and value == "true":
                remove[key] = None
            elif key == MIG_CONFIG and value == MIG_DISABLED:
                remove[key] = None
        status = node.get("status") or {}
        resources = {
            r: None for f in ("capacity", "allocatable") for r in (status.get(f) or {}) if is_nvidia_resource(r)
        }
        if resources:
            node = ctx.patch_node_status(node, capacity=resources, allocatable=resources)
        if any(c.get("type") == HOST_DRIVER_CONFLICT_CONDITION for c in status.get("conditions") or ()):
            node = ctx.patch_node_status(
                node, conditions=[{"type": HOST_DRIVER_CONFLICT_CONDITION, "status": "False", "reason": "Cleared"}]
            )
        ctx.patch_metadata(node, labels=remove, annotations={NODE_OWNER_ANNOTATION: None, MIG_MANAGER_ANNOTATION: None})

    def _cleanup_all(self, ctx: Context) -> None:
        for node in ctx.list(NODE):
            if self._owns_node(node):
                self._cleanup_node(ctx, node)

    # -- reconcile ---------------------------------------------------------------------------------
    def reconcile(self, ctx: Context, key: Key) -> float | None:
        cp = ctx.primary
        if cp is not None and not in_scope(cp, self.instance):
            cp = None
        active = oldest(self._policies(ctx.cache))
        if cp is None:
            if active is not None:
                ctx.sim.enqueue(self, Key.of(active))
            else:
                self._cleanup_all(ctx)
            return None
        if active is not None and Key.of(active) != key:
            ns = self._namespace(ctx, active)
            self._write_status(
                ctx,
                cp,
                "ignored",
                ns,
                [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "Ignored",
                        "message": f"ClusterPolicy {active['metadata']['name']} is the active one (the oldest); "
                        "this one is ignored",
                    }
                ],
            )
            return None
        return self._reconcile_active(ctx, cp)

    def _reconcile_active(self, ctx: Context, cp: Obj) -> float | None:
        spec = cp.get("spec") or {}
        namespace = self._namespace(ctx, cp)
        if ctx.get(NAMESPACE, namespace) is None:
            self._write_status(
                ctx,
                cp,
                "notReady",
                namespace,
                [
                    {"type": "Ready", "status": "False", "reason": "Error", "message": ""},
                    {
                        "type": "Error",
                        "status": "True",
                        "reason": "ReconcileFailed",
                        "message": f"operator namespace {namespace} not found",
                    },
                ],
            )
            return 10.0
        cp_uid = cp["metadata"].get("uid", "")

        # 1. node labelling
        nodes: list[Obj] = []
        cluster_has_nfd = False
        for node in ctx.list(NODE):
            if not in_scope(node, self.instance):
                if self._owns_node(node):
                    self._cleanup_node(ctx, node)
                continue
            owner = annotations_of(node).get(NODE_OWNER_ANNOTATION)
            if owner and owner != self.instance:
                self._warn_once(
                    ctx, f"node {node['metadata']['name']} is still managed by simulator instance {owner}; waiting"
                )
                continue
            faults = ctx.faults_for(node)
            labels = labels_of(node)
            cluster_has_nfd = cluster_has_nfd or has_nfd_labels(effective_labels(labels, faults))
            gpu = gpu_info(self._profile(node))
            changes = operator_labels(labels, spec, gpu, faults)
            marker = (
                {NODE_OWNER_ANNOTATION: self.instance} if not owner and (changes or GPU_PRESENT in labels) else None
            )
            if changes or marker:
                node = ctx.patch_metadata(node, labels=changes, annotations=marker)
            nodes.append(node)

        # 2. operand DaemonSets
        wanted = enabled_operands(spec)
        wanted_names = {op.daemonset for op in wanted}
        requeue: float | None = None
        for ds in ctx.list(DAEMONSET):
            refs = (ds.get("metadata") or {}).get("ownerReferences") or ()
            if any(r.get("uid") == cp_uid for r in refs) and (
                ds["metadata"]["name"] not in wanted_names or ds["metadata"]["namespace"] != namespace
            ):
                ctx.delete_object(ds)
        owners: dict[str, str] = {}
        failed: list[str] = []
        for op in wanted:
            existing = ctx.get(DAEMONSET, op.daemonset, namespace)
            if existing is not None:
                controller = next(
                    (r for r in existing["metadata"].get("ownerReferences") or () if r.get("controller")), None
                )
                if controller is not None and controller.get("uid") != cp_uid:
                    # left by a deleted ClusterPolicy (garbage collection pending) or someone else's: replace
                    ctx.delete_object(existing)
                    requeue = 1.0
                    continue
            try:
                ds = ctx.apply_object(daemonset_manifest(op, cp, namespace, self.instance), owner=cp)
            except ApiError as exc:
                if exc.status not in (400, 422):
                    raise
                # the spec renders an invalid DaemonSet: upstream reports ReconcileFailed
                failed.append(f"Failed to reconcile {op.state}: {exc.message or exc}")
                continue
            owners[op.daemonset] = ds["metadata"].get("uid", "")

        self._dcgm_exporter_objects(ctx, cp, namespace, DCGM_EXPORTER in owners)

        # 3. per node: pods, faults, resources, GFD labels
        pods = pods_by_node_and_owner(ctx.list(POD, namespace=namespace), owners)
        gfd_ds = ctx.get(DAEMONSET, GFD_DAEMONSET, namespace) if GFD_DAEMONSET in owners else None
        strategy = str((spec.get("mig") or {}).get("strategy") or "single")
        mig_custom = self._mig_custom(ctx, spec, namespace)
        driver_spec = spec.get("driver") or {}
        not_ready: set[str] = set()
        gpu_nodes = 0
        for node in nodes:
            name = node["metadata"]["name"]
            labels = labels_of(node)
            faults = ctx.faults_for(node)
            if labels.get(GPU_PRESENT) != "true":
                self._clear_node_gpu_state(ctx, node, namespace)
                continue
            gpu_nodes += 1
            gpu = gpu_info(self._profile(node))
            if gpu is None:
                self._warn_once(ctx, f"node {name}: no NVIDIA GPU in its hardware profile; advertising none")
            on_node = [op for op in wanted if op.daemonset in owners and labels.get(DEPLOY_PREFIX + op.key) == "true"]
            keys = {op.key for op in on_node}
            health = node_health(
                keys,
                faults,
                host_driver=bool(gpu and gpu.host_driver),
                host_driver_known=gpu is not None,
                peermem=spec_enabled(driver_spec.get("rdma"), False),
            )
            ready: dict[str, bool] = {}
            ready_for_stack: dict[str, bool] = {}
            dp_cfg, dp_plan, dp_keep = sharing.NO_SHARING, None, False
            dp_pod = pods.get((name, OPERAND_BY_KEY["device-plugin"].daemonset))
            if dp_pod is not None and not health.driver_down and not health.toolkit_down:
                mig_on = mig_apply(gpu, labels.get(MIG_CONFIG), mig_custom)[1] is not None
                dp_cfg, dp_plan, dp_keep = self._device_plugin_config(ctx, spec, namespace, labels, dp_pod, mig_on)
            for op in on_node:
                pod = pods.get((name, op.daemonset))
                plan = health.plans.get(op.key, OK)
                if op.key == "device-plugin" and plan == OK and dp_plan is not None:
                    plan = dp_plan
                if pod is not None:
                    pod = apply_pod_plan(ctx, pod, plan)
                    if plan.kind in ("crashloop", "initcrash"):
                        requeue = min(requeue or 10.0, 10.0)
                ready[op.key] = pod is not None and plan.kind == "ok" and is_pod_ready(pod)
                if not ready[op.key]:
                    not_ready.add(op.key)
                if plan.container == PEERMEM_CONTAINER and pod is not None:
                    ready_for_stack[op.key] = (pod.get("status") or {}).get("phase") == "Running"
            # an operand serves once its pod and the stack below it (driver, toolkit) are ready (only
            # nvidia-peermem not ready leaves the driver container serving)
            stack_ok = not health.driver_down and not health.toolkit_down
            stack_ok = stack_ok and all(
                ready_for_stack.get(k, ready.get(k, True)) for k in ("driver", "container-toolkit")
            )
            serving = {
                k: stack_ok and ready.get(k, False) for k in ("mig-manager", "device-plugin", "gpu-feature-discovery")
            }

            # MIG (mig-manager applies nvidia.com/mig.config)
            mig_devices: dict[str, int] | None = None
            if serving["mig-manager"]:
                node, mig_devices, mig_requeue = self._mig_manager(ctx, node, gpu, namespace, mig_custom)
                if mig_requeue is not None:
                    requeue = min(requeue or mig_requeue, mig_requeue)
            mig_profile, per_gpu = (
                next(iter(mig_devices.items())) if mig_devices and len(mig_devices) == 1 else (None, 0)
            )
            label_changes: dict[str, str | None] = {}
            # device plugin
            resources: dict[str, str | int | None] = {}
            if gpu is not None and serving["device-plugin"]:
                resources.update(sharing.replicate(mig_resources(gpu, strategy, mig_devices), dp_cfg))
            # GFD: its labels go into its NodeFeature; nfd-master puts them on the node
            gfd_pod = pods.get((name, GFD_DAEMONSET))
            if gpu is not None and serving["gpu-feature-discovery"] and gfd_ds is not None and gfd_pod is not None:
                version = driver_spec.get("version") or OPERAND_BY_KEY["driver"].image[2]
                if "driver" not in keys:
                    version = gpu.host_driver
                want_gfd = gfd_labels(gpu, strategy, mig_profile, per_gpu, version)
                if mig_devices and len(mig_devices) > 1 and strategy == "single":
                    # internal/lm/mig-strategy.go newInvalidMigStrategyLabeler: "more than one MIG device type"
                    want_gfd.update(
                        {
                            "nvidia.com/gpu.product": f"{gpu.product}-MIG-INVALID"[:63],
                            "nvidia.com/gpu.count": "0",
                            "nvidia.com/gpu.replicas": "0",
                            "nvidia.com/gpu.sharing-strategy": "",
                            "nvidia.com/gpu.memory": "0",
                        }
                    )
                if dp_cfg.resources:
                    want_gfd.update(sharing.gfd_sharing_labels(dp_cfg, want_gfd["nvidia.com/gpu.product"]))
                if not self._publish_gfd(ctx, name, namespace, want_gfd, gfd_ds, gfd_pod):
                    requeue = min(requeue or NODE_FEATURE_NOT_SERVED_RETRY, NODE_FEATURE_NOT_SERVED_RETRY)
            else:
                self._delete_gfd_node_features(ctx, name, namespace)
            if label_changes:
                node = ctx.patch_metadata(node, labels=label_changes)
            if not dp_keep:
                self._set_resources(ctx, node, resources)
            self._set_conflict_condition(ctx, node, FAULT_HOST_DRIVER_CONFLICT in faults and "driver" in keys)

        # 3b. the driver upgrade controller (k8s-operator-libs pkg/upgrade)
        upgrade_requeue = self._driver_upgrade(ctx, driver_spec, namespace, owners)
        if upgrade_requeue is not None:
            requeue = min(requeue or upgrade_requeue, upgrade_requeue)

        # nfd-gc's part: GFD NodeFeatures of nodes that are gone
        existing_nodes = {n["metadata"]["name"] for n in ctx.list(NODE)}
        for nf in ctx.list(NODE_FEATURE, namespace):
            nf_node = labels_of(nf).get(NODE_NAME_LABEL) or ""
            if nf["metadata"]["name"] == gfd_node_feature_name(nf_node) and nf_node not in existing_nodes:
                ctx.delete_object(nf)

        # 4. status
        states = [op.state for op in OPERANDS if op.key in not_ready]
        state, conditions = policy_status(states, gpu_nodes, cluster_has_nfd)
        if failed:
            state, conditions = (
                "notReady",
                [
                    {"type": "Ready", "status": "False", "reason": "Error", "message": ""},
                    {"type": "Error", "status": "True", "reason": "ReconcileFailed", "message": "; ".join(failed)},
                ],
            )
            requeue = min(requeue or 30.0, 30.0)
        self._write_status(ctx, cp, state, namespace, conditions)
        return requeue

    def _driver_upgrade(
        self, ctx: Context, driver_spec: Mapping[str, Any], namespace: str, owners: Mapping[str, str]
    ) -> float | None:
        """One round of the driver upgrade controller over the driver nodes (driver_upgrade.plan); 1 s while a
        node is on its way, so the next state follows."""
        ds_name = OPERAND_BY_KEY["driver"].daemonset
        ds = ctx.get(DAEMONSET, ds_name, namespace) if ds_name in owners else None
        policy = driver_spec.get("upgradePolicy") or {}
        template = ((ds or {}).get("spec") or {}).get("template") or {}
        want = annotations_of(template).get(driver_upgrade.TEMPLATE_ANNOTATION)
        pods = pods_by_node_and_owner(ctx.list(POD, namespace=namespace), {ds_name: owners.get(ds_name, "")})
        views: list[driver_upgrade.NodeView] = []
        by_name: dict[str, Obj] = {}
        unlabel: list[Obj] = []
        for node in ctx.list(NODE):
            labels = labels_of(node)
            if not in_scope(node, self.instance) or (
                labels.get(DEPLOY_PREFIX + "driver") != "true" and driver_upgrade.STATE_LABEL not in labels
            ):
                continue
            if ds is None or labels.get(DEPLOY_PREFIX + "driver") != "true":
                unlabel.append(node)  # no driver here (any more): the label goes, as upstream's cleanup does
                continue
            name = node["metadata"]["name"]
            by_name[name] = node
            pod = pods.get((name, ds_name))
            views.append(
                driver_upgrade.NodeView(
                    name,
                    labels.get(driver_upgrade.STATE_LABEL, ""),
                    in_sync=pod is None or annotations_of(pod).get(driver_upgrade.TEMPLATE_ANNOTATION) == want,
                    pod_exists=pod is not None,
                    pod_ready=pod is not None and is_pod_ready(pod),
                    unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
                    initially_unschedulable=annotations_of(node).get(driver_upgrade.INITIAL_STATE_ANNOTATION) == "true",
                    failing=driver_upgrade.FAULT_UPGRADE_FAIL in ctx.faults_for(node),
                    skip=labels.get(driver_upgrade.SKIP_LABEL) == "true",
                )
            )
        for node in unlabel:
            ctx.patch_metadata(node, labels={driver_upgrade.STATE_LABEL: None})
        steps = driver_upgrade.plan(views, policy)
        for step in steps:
            node = by_name[step.node]
            if step.record_initial and (node.get("spec") or {}).get("unschedulable"):
                node = ctx.patch_metadata(node, annotations={driver_upgrade.INITIAL_STATE_ANNOTATION: "true"})
            if step.cordon or step.uncordon:
                node = ctx.set_unschedulable(node, step.cordon)
            if step.delete_gpu_pods or step.drain:
                self._evict_for_upgrade(ctx, step.node, namespace, gpu_only=not step.drain)
            if step.delete_driver_pod and (pod := pods.get((step.node, ds_name))) is not None:
                ctx.delete_object(pod)
            if step.state is not None:
                annotations = (
                    {driver_upgrade.INITIAL_STATE_ANNOTATION: None} if step.state == driver_upgrade.DONE else None
                )
                label = step.state or None
                ctx.patch_metadata(node, labels={driver_upgrade.STATE_LABEL: label}, annotations=annotations)
            for note in step.notes:
                self._warn_once(ctx, f"node {step.node}: driver upgrade: {note}")
        # one state per reconcile: come back in a second while anything moved or a node is on its way
        moving = bool(steps) or any(v.state not in driver_upgrade.NOT_IN_PROGRESS for v in views)
        return 1.0 if moving and policy.get("autoUpgrade") else None

    def _evict_for_upgrade(self, ctx: Context, node: str, namespace: str, gpu_only: bool) -> None:
        """gpuPodDeletion: the node's pods that request nvidia.com/gpu, outside the operator's namespace; drain:
        every pod of the node that no DaemonSet owns."""
        for pod in ctx.list(POD):
            spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
            if spec.get("nodeName") != node or meta.get("deletionTimestamp"):
                continue
            if any(r.get("kind") == "DaemonSet" for r in meta.get("ownerReferences") or ()):
                continue
            if gpu_only and (
                meta.get("namespace") == namespace or not any(dcgm.gpu_request(c) for c in spec.get("containers") or ())
            ):
                continue
            ctx.delete_object(pod)

    def _dcgm_exporter_objects(self, ctx: Context, cp: Obj, namespace: str, enabled: bool) -> None:
        """The exporter's Service, and its ServiceMonitor when dcgmExporter.serviceMonitor.enabled and the
        ServiceMonitor CRD exists (the operator skips it quietly otherwise, object_controls.go ServiceMonitor());
        both deleted when the exporter is disabled."""
        svc = ctx.get(SERVICE, DCGM_EXPORTER, namespace)
        has_crd = ctx.get(CRD_KIND, SERVICE_MONITOR_CRD) is not None
        sm = dcgm_exporter_service_monitor(cp, namespace) if enabled else None
        if enabled:
            ctx.apply_object(dcgm_exporter_service(cp, namespace), owner=cp)
        elif svc is not None and any(
            r.get("uid") == cp["metadata"].get("uid") for r in svc["metadata"].get("ownerReferences") or ()
        ):
            ctx.delete_object(svc)
        if not has_crd:
            return
        if sm is not None:
            ctx.apply_object(sm, owner=cp)
        elif ctx.get(SERVICE_MONITOR, DCGM_EXPORTER, namespace) is not None:
            ctx.delete_object(SERVICE_MONITOR, DCGM_EXPORTER, namespace)

    def _mig_custom(self, ctx: Context, spec: Mapping[str, Any], namespace: str) -> MigCustom:
        """The custom mig-parted configs the ClusterPolicy names (migManager.config.name: a ConfigMap of the
        operator's namespace, key config.yaml), or the ConfigError mig-manager fails with; None without one."""
        name = ((spec.get("migManager") or {}).get("config") or {}).get("name")
        if not name:
            return None
        cm = ctx.get(CONFIGMAP, str(name), namespace)
        text = ((cm or {}).get("data") or {}).get("config.yaml")
        if text is None:
            return sharing.ConfigError(f"failed to read custom config /mig-parted-config/config.yaml ({name})")
        try:
            return sharing.parse_mig_parted(text)
        except sharing.ConfigError as exc:
            return exc

    def _mig_manager(
        self, ctx: Context, node: Obj, gpu: GpuInfo | None, namespace: str, custom: MigCustom = None
    ) -> tuple[Obj, dict[str, int] | None, float | None]:
        """mig-manager v0.15.0 (pkg/mig/reconfigure/reconfigure.go Run) on a node where its pod serves: returns
        (node, MIG devices per GPU in effect, requeue). A name it does not generate for the GPU -> state `failed`
        at once (validateMigConfig), MIG left as applied; the config already applied -> `success`; a change ->
        `pending`, the GPU clients' deploy labels (device-plugin, gpu-feature-discovery, dcgm-exporter, dcgm, nvsm)
        set to `paused-for-mig-change` (a `false` one stays), then, once their operand pods are gone, the apply:
        it fails (state `failed`, the devices in use) while a workload pod holding NVIDIA GPU resources runs on
        the node -- nvidia-smi cannot reconfigure a GPU in use, mig-manager itself checks no workload -- else the
        config is applied (`success`); either way the deploy labels are restored (setState: `true` unless they were
        `false`). A failed change is retried only when the label changes (mig-manager waits for the next label
        change). What is applied is recorded in the node annotation MIG_MANAGER_ANNOTATION (*sim*)."""
        labels = labels_of(node)
        want = labels.get(MIG_CONFIG)
        state, devices = mig_apply(gpu, want, custom)
        mark = instance_mark(node, MIG_MANAGER_ANNOTATION, self.instance) or {}
        applied = mark.get("applied") or MIG_DISABLED
        # what the GPUs hold: the applied name in the file mig-manager reads now, else as it was generated
        now, in_effect = mig_apply(gpu, applied, custom)
        if now == "failed":
            in_effect = mig_apply(gpu, applied)[1]
        if state is None:
            return node, None, None
        if state == "failed":
            return ctx.patch_metadata(node, labels={MIG_CONFIG_STATE: "failed"}), in_effect, None
        if want == applied:
            return ctx.patch_metadata(node, labels={MIG_CONFIG_STATE: "success"}), devices, None
        if mark.get("failed") == want:  # the last attempt at this config failed: wait for a label change
            return node, in_effect, None
        name = node["metadata"]["name"]
        if labels.get(MIG_CONFIG_STATE) != "pending" or "paused" not in mark:
            paused = {DEPLOY_PREFIX + k: labels.get(DEPLOY_PREFIX + k, "") for k in MIG_PAUSED_KEYS}
            changes: dict[str, str | None] = {MIG_CONFIG_STATE: "pending"}
            changes.update({k: "false" if v == "false" else MIG_PAUSED for k, v in paused.items()})
            new_mark = {**mark, "instance": self.instance, "applied": applied, "paused": paused}
            new_mark.pop("failed", None)
            node = ctx.patch_metadata(
                node, labels=changes, annotations={MIG_MANAGER_ANNOTATION: json.dumps(new_mark, sort_keys=True)}
            )
            return node, in_effect, 1.0
        pods = [p for p in ctx.list(POD) if (p.get("spec") or {}).get("nodeName") == name]
        operands = [
            p for p in pods if (p["metadata"].get("namespace") == namespace and labels_of(p).get("app") in MIG_CLIENTS)
        ]
        if operands:
            return node, in_effect, 1.0
        busy = [
            f"{p['metadata'].get('namespace')}/{p['metadata']['name']}"
            for p in pods
            if (p.get("status") or {}).get("phase") == "Running" and uses_nvidia_gpu(p)
        ]
        restore = {k: "false" if v == "false" else "true" for k, v in (mark.get("paused") or {}).items()}
        new_mark = {"instance": self.instance, "applied": applied}
        if busy:
            new_mark["failed"] = want or ""
            ctx.log("node %s: MIG config %s not applied: GPUs in use by %s", name, want, ", ".join(busy))
            state, devices = "failed", in_effect
        else:
            new_mark["applied"] = want or MIG_DISABLED
        node = ctx.patch_metadata(
            node,
            labels={**restore, MIG_CONFIG_STATE: state},
            annotations={MIG_MANAGER_ANNOTATION: json.dumps(new_mark, sort_keys=True)},
        )
        return node, devices, None

    def _device_plugin_config(
        self, ctx: Context, spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str], pod: Obj, mig_on: bool
    ) -> tuple[sharing.SharingConfig, PodPlan | None, bool]:
        """(sharing config the node's device plugin runs with, a failure plan for its pod or None, keep the node's
        resources as they are) -- see sharing.py for upstream's rules. What the pod loaded is recorded on it
        (annotation DP_CONFIG_ANNOTATION: the entry and its parsed sharing): config-manager reloads only when the
        selected entry name changes, so a new ConfigMap content reaches a node when its pod is recreated."""
        dp_config = (spec.get("devicePlugin") or {}).get("config") or {}
        cm_name = dp_config.get("name")
        if not cm_name:
            return sharing.NO_SHARING, None, False
        strategy = str((spec.get("mig") or {}).get("strategy") or "single")
        entry = sharing.select_entry(labels, dp_config.get("default"))
        mark = instance_mark(pod, DP_CONFIG_ANNOTATION, self.instance)
        loaded = sharing.SharingConfig.from_json(mark.get("sharing")) if mark else None
        if mark is not None and loaded is not None and mark.get("entry") == entry:
            cfg = loaded
        else:
            cm = ctx.get(CONFIGMAP, str(cm_name), namespace)
            data = (cm or {}).get("data") or {}
            if entry and entry not in data:
                # upstream formats the label's value, empty when the default was selected
                message = f"specified config {labels.get(sharing.DP_CONFIG_LABEL) or ''} does not exist"
                if loaded is None:
                    return sharing.NO_SHARING, PodPlan("initcrash", "config-manager-init", message), True
                return loaded, PodPlan("crashloop", "config-manager", message), True
            try:
                cfg = sharing.parse_config(data.get(entry) if entry else None)
            except sharing.ConfigError as exc:
                message = f"unable to load config: {exc}"
                return loaded or sharing.NO_SHARING, PodPlan("crashloop", "nvidia-device-plugin", message), True
            mark_value = {"instance": self.instance, "entry": entry, "sharing": cfg.to_json()}
            ctx.patch_metadata(pod, annotations={DP_CONFIG_ANNOTATION: json.dumps(mark_value, sort_keys=True)})
        try:
            sharing.check_strategy(cfg, strategy, mig_on)
        except sharing.ConfigError as exc:
            return cfg, PodPlan("crashloop", "nvidia-device-plugin", str(exc)), True
        return cfg, None, False

    def _set_resources(self, ctx: Context, node: Obj, resources: Mapping[str, str | int | None]) -> Obj:
        status = node.get("status") or {}
        changes: dict[str, str | int | None] = dict(resources)
        for field in ("capacity", "allocatable"):
            for r in status.get(field) or {}:
                if is_nvidia_resource(r) and r not in resources:
                    changes[r] = None
        if not changes:
            return node
        return ctx.patch_node_status(node, capacity=changes, allocatable=changes)

    def _set_conflict_condition(self, ctx: Context, node: Obj, conflict: bool) -> Obj:
        conds = (node.get("status") or {}).get("conditions") or ()
        present = any(c.get("type") == HOST_DRIVER_CONFLICT_CONDITION for c in conds)
        if conflict:
            cond = {
                "type": HOST_DRIVER_CONFLICT_CONDITION,
                "status": "True",
                "reason": "HostDriverLoaded",
                "message": HOST_DRIVER_CONFLICT_MESSAGE,
            }
        elif present:
            cond = {"type": HOST_DRIVER_CONFLICT_CONDITION, "status": "False", "reason": "NoConflict", "message": ""}
        else:
            return node
        return ctx.patch_node_status(node, conditions=[cond])

    def _publish_gfd(
        self, ctx: Context, node: str, namespace: str, labels: Mapping[str, str], daemonset: Obj, pod: Obj
    ) -> bool:
        """Create or update GFD's NodeFeature for the node; False while the NodeFeature API is not
        served (no NFD CRDs)."""
        existing = ctx.get(NODE_FEATURE, gfd_node_feature_name(node), namespace)
        stamp = ((existing or {}).get("spec") or {}).get("labels", {}).get(GFD_TIMESTAMP_LABEL)
        labels = {**labels, GFD_TIMESTAMP_LABEL: stamp or str(int(ctx.now().timestamp()))}
        try:
            ctx.apply_object(gfd_node_feature(node, namespace, labels, daemonset, pod), owner=None)
        except ApiError as exc:
            if exc.status != 404:
                raise
            if not self._node_feature_not_served:
                ctx.log("NodeFeature API not served (NFD CRDs not installed): %s; GFD retries", exc)
                self._node_feature_not_served = True
            return False
        self._node_feature_not_served = False
        return True

    def _clear_node_gpu_state(self, ctx: Context, node: Obj, namespace: str) -> None:
        """A node in scope that is (no longer) a GPU node: no resources, GFD NodeFeature, MIG state
        label or conflict condition."""
        self._delete_gfd_node_features(ctx, node["metadata"]["name"], namespace)
        labels = labels_of(node)
        remove = {k: None for k in labels if k == MIG_CONFIG_STATE}
        if remove:
            node = ctx.patch_metadata(node, labels=remove)
        node = self._set_resources(ctx, node, {})
        self._set_conflict_condition(ctx, node, False)


__all__ = [
    "CLUSTER_POLICY",
    "INSTANCE_LABEL",
    "NVIDIA_FAULTS",
    "ClusterPolicyHandler",
]
