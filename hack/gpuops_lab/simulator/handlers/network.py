"""NicClusterPolicyHandler: plays the NVIDIA Network Operator (Mellanox/network-operator v26.4.1) on kwok nodes,
reconciling NicClusterPolicy (mellanox.com/v1alpha1, cluster-scoped) as upstream's controller and state manifests
do (docs/network.md, "Upstream facts used").

What it writes (upstream behaviour unless marked *sim*):

- Only the NicClusterPolicy named `nic-cluster-policy` is reconciled; any other gets `status.state: ignore` with
  the reason "Only instance with name nic-cluster-policy is supported" (pkg/consts, the controller), forever.
- Operator namespace: the handler's `operator_namespace`, else the namespace of a Deployment labelled
  `app.kubernetes.io/name=network-operator` (what the chart installs, as the NVIDIA handler finds the GPU
  Operator's). Without either the operator is not running: the policy is left unreconciled (empty status).
- Operand DaemonSets in that namespace, owned by the policy, with upstream's names and node selectors
  (manifests/state-*/): `mofed-<os><version>-ds` per OS of the matching nodes (ofedDriver; selects
  `feature.node.kubernetes.io/pci-15b3.present=true` and the NFD OS labels), `rdma-shared-dp-ds`
  (rdmaSharedDevicePlugin) and `network-operator-sriov-device-plugin` (sriovDevicePlugin), both selecting
  `pci-15b3.present=true` and `network.nvidia.com/operator.mofed.wait=false`, `kube-multus-ds` and
  `cni-plugins-ds` (every node), `kube-ipoib-cni-ds` and `nv-ipam-node` (*sim*: ipoib on pci-15b3 nodes; nv-ipam
  on every node; the nv-ipam controller Deployment is not played), `doca-telemetry-service` (docaTelemetryService; pods
  labelled `app.kubernetes.io/name=doca-telemetry`, on pci-15b3 nodes with mofed.wait=false; *sim*: the operator's
  default ConfigMap `doca-telemetry-service` is not written, and the lab's monitoring answers the pods' Prometheus
  endpoint, monitoring.py). Tolerations `nvidia.com/gpu` + spec.tolerations
  (+ *sim* the kwok taint); images `<repository>/<image>:<version>` with spec.global filling the gaps
  (ApplyGlobalConfig). A DaemonSet of a section removed from the spec is deleted.
- Node label `network.nvidia.com/operator.mofed.wait` on nodes with `pci-15b3.present=true`: `true` until the
  node's driver container pod is ready, `false` after it (and at once without ofedDriver).
- With nvIpam: the IPPool CRD (`ippools.nv-ipam.nvidia.com`, from the fixture chart's
  manifests/state-nv-ipam-cni/), as the operator installs it with the nv-ipam state.
- Node resources, once the device plugin pod on the node is Running and Ready, from the NICs of the node's
  hardware profile (addresses and netdev names as the simulated host gets them, hack/gpuops_lab/hostsim): RDMA
  shared device plugin - `rdma/<resourceName>` (or `<resourcePrefix>/<resourceName>`) = `rdmaHcaMax` for each
  config entry whose selectors (vendors, deviceIDs, drivers, ifNames against the first netdev, linkTypes; ANDed
  across keys, ORed within one) match at least one RDMA device of the node; SR-IOV device plugin -
  `nvidia.com/<resourceName>` = the number of matching devices (with `isRdma`, RDMA devices only). Removed when
  the pod is not ready, the entry goes away or the policy is deleted. RDMA devices exist where mlx5_ib is loaded:
  the host's `modules_loaded`, or the driver container once it is ready there.
- status: `appliedStates` - one `{name, state}` per section in the spec with upstream's state names (`ready` when
  the section's DaemonSets have a Running and Ready pod on every node they select, else `notReady`); `state`
  `ready` when every applied state is ready, else `notReady` (no observedGeneration, as upstream).

Faults (per node): `nfd-labels-missing` hides the node's NFD labels (no operand lands there);
`network-driver-not-ready`: the driver container pod stays Running but not Ready (mofed-container), so
mofed.wait stays `true`, the device plugins do not land and the OFED state is notReady.
`ofed-crashloop-headers` / `ofed-crashloop-secureboot`: the driver container (mofed-container) goes
CrashLoopBackOff with the last termination message naming the cause (*sim* wording, what the DOCA driver
container's entrypoint and modprobe print): `OFED_HEADERS_MESSAGE` (no linux-headers package for the node's kernel,
from its status.nodeInfo.kernelVersion) or `OFED_SECURE_BOOT_MESSAGE` (the kernel rejects the unsigned module);
as with `network-driver-not-ready`, mofed.wait stays `true` and nothing above the driver lands.

NetworkHandler (one per kind: MacvlanNetwork, HostDeviceNetwork, IPoIBNetwork; cluster-scoped): while the operator
runs, writes the NetworkAttachmentDefinition (k8s.cni.cncf.io/v1) of the network's name in `spec.networkNamespace`,
owned by the network, with its CNI config (`macvlan` {master, mode, mtu}, `host-device` with the annotation
`k8s.v1.cni.cncf.io/resourceName` (*sim*: `nvidia.com/<resourceName>` when the name has no prefix), `ipoib`
{master}; `ipam` from the spec), then `status.state: ready`; a missing networkNamespace is `state: error` (*sim*:
the reason's wording). The `*NetworkAttachmentDef` status field is not written.

Instances: as the NVIDIA handler, `NicClusterPolicyHandler(instance="x")` handles only policies and nodes labelled
`sim.gpuops.io/instance=x`; the default instance only unlabelled ones.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from ...config import CHARTS_DIR
from ...hostsim import model, sysfs
from ..framework import (
    DAEMONSET,
    DEPLOYMENT,
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
)
from .nvidia import (
    DEFAULT_INSTANCE,
    FAULT_NFD_LABELS_MISSING,
    GPU_TOLERATION,
    KWOK_TOLERATION,
    NFD_PREFIX,
    PROFILE_LABEL,
    PodPlan,
    annotations_of,
    apply_pod_plan,
    effective_labels,
    in_scope,
    instance_mark,
    is_pod_ready,
    labels_of,
    load_profile,
    merge_tolerations,
    pod_owner_name,
    pods_by_node_and_owner,
    scope_to_instance,
    with_applied_hash,
)

NIC_CLUSTER_POLICY = Kind("mellanox.com/v1alpha1", "NicClusterPolicy")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
POLICY_NAME = "nic-cluster-policy"
IGNORE_REASON = "Only instance with name nic-cluster-policy is supported"
OPERATOR_DEPLOYMENT_LABEL = ("app.kubernetes.io/name", "network-operator")
NIC_LABEL = f"{NFD_PREFIX}pci-15b3.present"
OS_ID_LABEL = f"{NFD_PREFIX}system-os_release.ID"
OS_VERSION_LABEL = f"{NFD_PREFIX}system-os_release.VERSION_ID"
MOFED_WAIT_LABEL = "network.nvidia.com/operator.mofed.wait"
NODE_OWNER_ANNOTATION = "sim.gpuops.io/network-operator"  # the resources this instance set, as JSON
APPLIED_HASH_ANNOTATION = "sim.gpuops.io/applied-hash"
IPPOOL_CRD = CHARTS_DIR / "network-operator/26.4.1/manifests/state-nv-ipam-cni/nv-ipam.nvidia.com_ippools.yaml"
MELLANOX = "15b3"
RELEASE = ("nvcr.io/nvidia/mellanox", "network-operator-v26.4.1")

FAULT_DRIVER_NOT_READY = "network-driver-not-ready"
FAULT_OFED_HEADERS = "ofed-crashloop-headers"
FAULT_OFED_SECURE_BOOT = "ofed-crashloop-secureboot"
NETWORK_FAULTS = frozenset(
    {FAULT_NFD_LABELS_MISSING, FAULT_DRIVER_NOT_READY, FAULT_OFED_HEADERS, FAULT_OFED_SECURE_BOOT}
)
OFED_HEADERS_MESSAGE = (
    "E: Unable to locate package linux-headers-{kernel}; kernel headers for {kernel} are not installed and cannot "
    "be installed: failed to build the DOCA-OFED driver"
)
OFED_SECURE_BOOT_MESSAGE = (
    "modprobe: ERROR: could not insert 'mlx_compat': Key was rejected by service (Secure Boot is enabled and the "
    "module is not signed by an enrolled key)"
)


def ofed_plan(faults: frozenset[str], node: Mapping[str, Any]) -> PodPlan:
    """What a fault makes of the node's OFED driver pod."""
    container = SECTIONS["ofedDriver"][2]
    kernel = ((node.get("status") or {}).get("nodeInfo") or {}).get("kernelVersion") or "unknown"
    if FAULT_OFED_HEADERS in faults:
        return PodPlan("crashloop", container, OFED_HEADERS_MESSAGE.format(kernel=kernel))
    if FAULT_OFED_SECURE_BOOT in faults:
        return PodPlan("crashloop", container, OFED_SECURE_BOOT_MESSAGE)
    if FAULT_DRIVER_NOT_READY in faults:
        return PodPlan("notready", container)
    return PodPlan()


# section -> (appliedStates name, DaemonSet name, container, selects NVIDIA NIC nodes, waits for the driver)
SECTIONS: dict[str, tuple[str, str, str, bool, bool]] = {
    "ofedDriver": ("state-OFED", "mofed-{os}-ds", "mofed-container", True, False),
    "rdmaSharedDevicePlugin": ("state-RDMA-device-plugin", "rdma-shared-dp-ds", "rdma-shared-dp", True, True),
    "sriovDevicePlugin": (
        "state-SRIOV-device-plugin",
        "network-operator-sriov-device-plugin",
        "kube-sriovdp",
        True,
        True,
    ),
    "multus": ("state-multus-cni", "kube-multus-ds", "kube-multus", False, False),
    "cniPlugins": ("state-container-networking-plugins", "cni-plugins-ds", "cni-plugins", False, False),
    "ipoib": ("state-ipoib-cni", "kube-ipoib-cni-ds", "ipoib-cni", True, False),
    "nvIpam": ("state-nv-ipam-cni", "nv-ipam-node", "nv-ipam-node", False, False),
    # manifests/state-doca-telemetry-service: NIC nodes once the driver is ready (mofed.wait=false)
    "docaTelemetryService": (
        "state-doca-telemetry-service",
        "doca-telemetry-service",
        "doca-telemetry-service",
        True,
        True,
    ),
}
# the pod labels of a section's DaemonSet where upstream's are not app=<name>
POD_LABELS: dict[str, dict[str, str]] = {"docaTelemetryService": {"app.kubernetes.io/name": "doca-telemetry"}}
LINK_TYPES = {"Ethernet": "ether", "InfiniBand": "infiniband"}


# -- pure pieces ---------------------------------------------------------------------------------------------
def sections(spec: Mapping[str, Any]) -> list[str]:
    """The sections of the spec the operator deploys, in SECTIONS order."""
    secondary = spec.get("secondaryNetwork") or {}
    return [s for s in SECTIONS if spec.get(s) or secondary.get(s)]


def section_spec(spec: Mapping[str, Any], section: str) -> dict[str, Any]:
    return dict(spec.get(section) or (spec.get("secondaryNetwork") or {}).get(section) or {})


def image_of(spec: Mapping[str, Any], section: str) -> str:
    """`<repository>/<image>:<version>`, spec.global filling an empty repository/version (ApplyGlobalConfig)."""
    sec, glob = section_spec(spec, section), spec.get("global") or {}
    repo = sec.get("repository") or glob.get("repository") or RELEASE[0]
    version = sec.get("version") or glob.get("version") or RELEASE[1]
    return f"{repo}/{sec.get('image') or section}:{version}"


def profile_nics(profile: Mapping[str, Any] | None, rdma_stack: bool) -> list[dict[str, Any]]:
    """The NIC physical functions of a hardware profile as gpu_host_facts reports them (address, IDs, driver,
    netdevs, link type, RDMA device), named as the simulated host names them (hostsim: systemd's predictable
    names; an InfiniBand port has a netdev only with ib_ipoib). `rdma_stack`: mlx5_ib (and ib_ipoib) loaded."""
    if not profile:
        return []
    host = model.host_state(dict(profile))
    loaded = {
        m if isinstance(m, str) else m.get("name") for m in (profile.get("host") or {}).get("modules_loaded") or ()
    }
    ib_ipoib = rdma_stack or "ib_ipoib" in loaded
    out, n = [], 0
    for f in model.topology(host):
        if f.get("role") != "nic" or f.get("kind") != "endpoint":
            continue
        vendor, link = str(f["vendor"]).lower(), f.get("link_layer") or "Ethernet"
        driver = "mlx5_core" if vendor == MELLANOX else None
        if vendor == MELLANOX and link == "InfiniBand":
            netdev = sysfs.ifname(f["addr"], "ib", False) if ib_ipoib else None
        elif vendor == MELLANOX:
            netdev = sysfs.ifname(f["addr"], "en", True)
        else:
            netdev = sysfs.ifname(f["addr"], "en", False)
        rdma = None
        if vendor == MELLANOX and rdma_stack:
            rdma, n = f"mlx5_{n}", n + 1
        out.append(
            {
                "address": f["addr"],
                "vendor_id": vendor,
                "device_id": str(f["device"]).lower(),
                "class": str(f["class"]),
                "driver": driver,
                "netdevs": [netdev] if netdev else [],
                "link_layer": link,
                "rdma_device": rdma,
            }
        )
    return out


def selector_matches(selectors: Mapping[str, Any], nic: Mapping[str, Any]) -> bool:
    """The device plugins' selectors: every key given must match (AND), one value of a key suffices (OR);
    ifNames against the first netdev, linkTypes against the netlink encapsulation (ether, infiniband); the SR-IOV
    plugin's `devices` is the device ID, `pfNames` any netdev, `rootDevices` the PCI address."""
    netdevs = list(nic.get("netdevs") or ())
    tests = {
        "vendors": nic.get("vendor_id"),
        "deviceIDs": nic.get("device_id"),
        "devices": nic.get("device_id"),
        "drivers": nic.get("driver"),
        "linkTypes": LINK_TYPES.get(str(nic.get("link_layer"))),
        "rootDevices": nic.get("address"),
    }
    for key, want in selectors.items():
        if key in tests:
            if want and tests[key] not in want:
                return False
        elif key == "ifNames":
            if want and (not netdevs or netdevs[0] not in want):
                return False
        elif key == "pfNames":
            if want and not any(d in [str(w).split("#", maxsplit=1)[0] for w in want] for d in netdevs):
                return False
        elif key == "isRdma":
            if want and not nic.get("rdma_device"):
                return False
    return True


def _config(text: Any) -> dict[str, Any]:
    try:
        doc = json.loads(text) if isinstance(text, str) else dict(text or {})
    except (TypeError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def rdma_resources(config: Any, nics: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """k8s-rdma-shared-dev-plugin: `<prefix>/<resourceName>` = rdmaHcaMax for each entry that selects at least one
    RDMA device of the node (devices without an RDMA device are skipped by the plugin)."""
    out: dict[str, int] = {}
    for entry in _config(config).get("configList") or ():
        rdma_nics = [n for n in nics if n.get("rdma_device")]
        if any(selector_matches(entry.get("selectors") or {}, n) for n in rdma_nics):
            prefix = entry.get("resourcePrefix") or "rdma"
            out[f"{prefix}/{entry.get('resourceName')}"] = int(entry.get("rdmaHcaMax") or 0)
    return out


def sriov_resources(config: Any, nics: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """sriov-network-device-plugin: `<prefix>/<resourceName>` = number of matching devices."""
    out: dict[str, int] = {}
    for entry in _config(config).get("resourceList") or ():
        count = sum(selector_matches(entry.get("selectors") or {}, n) for n in nics)
        if count:
            out[f"{entry.get('resourcePrefix') or 'nvidia.com'}/{entry.get('resourceName')}"] = count
    return out


def os_key(labels: Mapping[str, str]) -> str | None:
    os_id, version = labels.get(OS_ID_LABEL), labels.get(OS_VERSION_LABEL)
    return f"{os_id}{version}" if os_id and version else None


def daemonset_manifest(
    section: str, spec: Mapping[str, Any], namespace: str, instance: str, os_name: str | None = None
) -> Obj:
    """An operand DaemonSet as upstream's state manifest renders it (trimmed to what scheduling sees)."""
    _state, name, container, nic_nodes, waits = SECTIONS[section]
    if section == "ofedDriver":
        name = name.format(os=os_name)
    selector: dict[str, str] = {}
    if nic_nodes:
        selector[NIC_LABEL] = "true"
    if waits:
        selector[MOFED_WAIT_LABEL] = "false"
    if section == "ofedDriver" and os_name:
        os_id = os_name.rstrip("0123456789.")
        selector[OS_ID_LABEL], selector[OS_VERSION_LABEL] = os_id, os_name[len(os_id) :]
    app = name.removesuffix("-ds")
    own_labels = POD_LABELS.get(section) or {"app": app}
    pod_spec: Obj = {
        "tolerations": merge_tolerations(spec.get("tolerations") or (), [GPU_TOLERATION], [KWOK_TOLERATION]),
        "priorityClassName": "system-node-critical",
        "hostNetwork": True,
        "containers": [{"name": container, "image": image_of(spec, section)}],
    }
    labels = dict(own_labels)
    scope_to_instance(instance, pod_spec, selector, labels)
    if selector:
        pod_spec["nodeSelector"] = selector
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(own_labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }
    return with_applied_hash(manifest, APPLIED_HASH_ANNOTATION)


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """The scheduler's rule: a toleration matches a taint by key (Exists: any value; Equal: the same value; an
    empty key with Exists matches every taint) and effect (empty: every effect)."""
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol.get("key") == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def selects(ds: Mapping[str, Any], node: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> bool:
    """Whether the DaemonSet runs a pod on the node: its nodeSelector matches the labels (default the node's) and
    its tolerations cover the node's NoSchedule/NoExecute taints."""
    pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    labels = labels_of(node) if labels is None else labels
    if not all(labels.get(k) == v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    taints = [t for t in (node.get("spec") or {}).get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute")]
    return all(tolerates(pod_spec.get("tolerations") or (), t) for t in taints)


class NicClusterPolicyHandler(Handler):
    """The Network Operator's NicClusterPolicy controller (see the module docstring)."""

    name = "NicClusterPolicy"
    primary = NIC_CLUSTER_POLICY
    watches: Sequence[Kind] = (NODE, POD, DAEMONSET, DEPLOYMENT)
    known_faults = NETWORK_FAULTS

    def __init__(self, instance: str | None = None, operator_namespace: str | None = None) -> None:
        self.instance = instance or DEFAULT_INSTANCE
        self.operator_namespace = operator_namespace
        if self.instance != DEFAULT_INSTANCE:
            self.name = f"NicClusterPolicy[{self.instance}]"
        self._profiles: dict[str, dict[str, Any] | None] = {}
        self._warned: set[str] = set()

    # -- scope -------------------------------------------------------------------------------------------------
    def _policies(self, cache: Cache) -> list[Obj]:
        return [p for p in cache.list(NIC_CLUSTER_POLICY) if in_scope(p, self.instance)]

    def _marked(self, node: Mapping[str, Any]) -> dict[str, Any] | None:
        return instance_mark(node, NODE_OWNER_ANNOTATION, self.instance)

    def map_to_primary(self, obj: Obj, cache: Cache) -> Iterable[Key]:
        kind = obj.get("kind")
        if kind == "Pod":
            ref = pod_owner_name(obj)
            if ref is None or not any(ref[0] == s[1] or ref[0].startswith("mofed-") for s in SECTIONS.values()):
                return []
        elif kind == "DaemonSet":
            name = (obj.get("metadata") or {}).get("name") or ""
            if not any(name == s[1] or name.startswith("mofed-") for s in SECTIONS.values()):
                return []
        elif kind == "Deployment":
            key, value = OPERATOR_DEPLOYMENT_LABEL
            if self.operator_namespace is not None or labels_of(obj).get(key) != value:
                return []
        elif kind == "Node":
            if not in_scope(obj, self.instance) and self._marked(obj) is None:
                return []
        else:
            return []
        keys = [Key.of(p) for p in self._policies(cache) if p["metadata"]["name"] == POLICY_NAME]
        return keys or [Key(None, POLICY_NAME)]

    def keys_for_fault_change(self, nodes: frozenset[str] | None, cache: Cache) -> Iterable[Key] | None:
        return [Key(None, POLICY_NAME)]

    # -- helpers -----------------------------------------------------------------------------------------------
    def _profile(self, node: Mapping[str, Any]) -> dict[str, Any] | None:
        name = labels_of(node).get(PROFILE_LABEL)
        if not name:
            return None
        if name not in self._profiles:
            self._profiles[name] = load_profile(name)
        return self._profiles[name]

    def _namespace(self, ctx: Context) -> str | None:
        if self.operator_namespace:
            return self.operator_namespace
        key, value = OPERATOR_DEPLOYMENT_LABEL
        deployments = [d for d in ctx.list(DEPLOYMENT, labels={key: value}) if in_scope(d, self.instance)]
        return str(deployments[0]["metadata"]["namespace"]) if deployments else None

    def _set_node(self, ctx: Context, node: Obj, wait: str | None, resources: Mapping[str, int]) -> None:
        """The mofed.wait label (None removes it) and the resources this instance advertises (others it set before
        are removed), recorded in the node annotation."""
        mark = self._marked(node) or {}
        before = set(mark.get("resources") or ())
        changes: dict[str, int | None] = {r: None for r in before if r not in resources}
        changes.update(resources)
        if changes:
            node = ctx.patch_node_status(node, capacity=changes, allocatable=changes)
        owned = wait is not None or bool(resources)
        want = json.dumps({"instance": self.instance, "resources": sorted(resources)}) if owned else None
        labels = {MOFED_WAIT_LABEL: wait} if labels_of(node).get(MOFED_WAIT_LABEL) != wait else None
        if annotations_of(node).get(NODE_OWNER_ANNOTATION) != want or labels:
            ctx.patch_metadata(node, labels=labels, annotations={NODE_OWNER_ANNOTATION: want})

    def _cleanup_nodes(self, ctx: Context) -> None:
        for node in ctx.list(NODE):
            if self._marked(node) is not None:
                self._set_node(ctx, node, None, {})

    def _ippool_crd(self, ctx: Context) -> None:
        if ctx.get(CRD, "ippools.nv-ipam.nvidia.com") is not None:
            return
        try:
            ctx.apply_object(yaml.safe_load(IPPOOL_CRD.read_text()), owner=None)
        except (OSError, ApiError) as exc:
            self._warn_once(ctx, f"cannot install the IPPool CRD: {exc}")

    def _warn_once(self, ctx: Context, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            ctx.log(message, level=logging.WARNING)

    # -- reconcile ---------------------------------------------------------------------------------------------
    def reconcile(self, ctx: Context, key: Key) -> float | None:
        policy = ctx.primary
        if policy is not None and not in_scope(policy, self.instance):
            policy = None
        if policy is not None and key.name != POLICY_NAME:
            status = policy.get("status") or {}
            if status.get("state") != "ignore" or status.get("reason") != IGNORE_REASON:
                ctx.patch_status(policy, {"state": "ignore", "reason": IGNORE_REASON, "appliedStates": None})
            return None
        if policy is None:
            if not any(p["metadata"]["name"] == POLICY_NAME for p in self._policies(ctx.cache)):
                self._cleanup_nodes(ctx)  # its DaemonSets go with it (owner references)
            return None
        namespace = self._namespace(ctx)
        if namespace is None:
            return None  # no operator running: nothing reconciles the policy
        return self._reconcile(ctx, policy, namespace)

    def _reconcile(self, ctx: Context, policy: Obj, namespace: str) -> float | None:
        spec = policy.get("spec") or {}
        wanted = sections(spec)
        uid = policy["metadata"].get("uid", "")

        # 1. nodes in scope, as the operator sees their labels
        nodes: list[tuple[Obj, dict[str, str], frozenset[str]]] = []
        for node in ctx.list(NODE):
            if not in_scope(node, self.instance):
                continue
            faults = ctx.faults_for(node)
            nodes.append((node, effective_labels(labels_of(node), faults), faults))

        # 2. DaemonSets
        manifests: list[tuple[str, Obj]] = []
        for section in wanted:
            if section == "ofedDriver":
                oses = sorted({k for _n, lab, _f in nodes if lab.get(NIC_LABEL) == "true" for k in [os_key(lab)] if k})
                manifests += [(section, daemonset_manifest(section, spec, namespace, self.instance, o)) for o in oses]
            else:
                manifests.append((section, daemonset_manifest(section, spec, namespace, self.instance)))
        names = {m["metadata"]["name"] for _s, m in manifests}
        for ds in ctx.list(DAEMONSET):
            refs = (ds.get("metadata") or {}).get("ownerReferences") or ()
            if any(r.get("uid") == uid for r in refs) and (
                ds["metadata"]["name"] not in names or ds["metadata"]["namespace"] != namespace
            ):
                ctx.delete_object(ds)
        applied: list[tuple[str, Obj]] = []
        owners: dict[str, str] = {}
        for section, manifest in manifests:
            ds = ctx.apply_object(manifest, owner=policy)
            applied.append((section, ds))
            owners[ds["metadata"]["name"]] = ds["metadata"].get("uid", "")
        if "nvIpam" in wanted:
            self._ippool_crd(ctx)
        pods = pods_by_node_and_owner(ctx.list(POD, namespace=namespace), owners)

        # 3. per node: driver readiness, mofed.wait, the device plugins' resources
        ready_sections = {s: True for s in wanted}
        for node, labels, faults in nodes:
            name = node["metadata"]["name"]
            nic_node = labels.get(NIC_LABEL) == "true"
            driver_ready = "ofedDriver" not in wanted
            for section, ds in applied:
                if not selects(ds, node, labels):
                    continue
                pod = pods.get((name, ds["metadata"]["name"]))
                plan = ofed_plan(faults, node) if section == "ofedDriver" else PodPlan()
                if pod is not None:
                    pod = apply_pod_plan(ctx, pod, plan)
                ok = pod is not None and plan.kind == "ok" and is_pod_ready(pod)
                ready_sections[section] = ready_sections[section] and ok
                if section == "ofedDriver":
                    driver_ready = ok
            wait = ("false" if driver_ready else "true") if nic_node else None
            resources: dict[str, int] = {}
            if nic_node and driver_ready:
                profile = self._profile(node)
                loaded = {
                    m if isinstance(m, str) else m.get("name")
                    for m in ((profile or {}).get("host") or {}).get("modules_loaded") or ()
                }
                nics = profile_nics(profile, "ofedDriver" in wanted or "mlx5_ib" in loaded)
                plugin_labels = {**labels, MOFED_WAIT_LABEL: "false"}
                for section, ds in applied:
                    pod = pods.get((name, ds["metadata"]["name"]))
                    if not selects(ds, node, plugin_labels) or pod is None or not is_pod_ready(pod):
                        continue
                    config = section_spec(spec, section).get("config")
                    if section == "rdmaSharedDevicePlugin":
                        resources.update(rdma_resources(config, nics))
                    elif section == "sriovDevicePlugin":
                        resources.update(sriov_resources(config, nics))
            self._set_node(ctx, node, wait, resources)

        # 4. status
        states = [{"name": SECTIONS[s][0], "state": "ready" if ready_sections[s] else "notReady"} for s in wanted]
        state = "ready" if all(s["state"] == "ready" for s in states) else "notReady"
        status = policy.get("status") or {}
        if status.get("state") != state or status.get("appliedStates") != states or status.get("reason"):
            ctx.patch_status(policy, {"state": state, "appliedStates": states, "reason": None})
        return None if state == "ready" else 5.0


# -- networks -----------------------------------------------------------------------------------------------
NAD = Kind("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition")
RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"


def nad_manifest(network: Mapping[str, Any]) -> Obj:
    """The NetworkAttachmentDefinition a MacvlanNetwork / HostDeviceNetwork / IPoIBNetwork renders."""
    kind, name = network["kind"], network["metadata"]["name"]
    spec = network.get("spec") or {}
    config: dict[str, Any] = {"cniVersion": "0.3.1", "name": name}
    annotations: dict[str, str] = {}
    if kind == "MacvlanNetwork":
        config.update(type="macvlan", master=spec.get("master"), mode=spec.get("mode") or "bridge")
        if spec.get("mtu"):
            config["mtu"] = spec["mtu"]
    elif kind == "HostDeviceNetwork":
        config["type"] = "host-device"
        resource = str(spec.get("resourceName") or "")
        annotations[RESOURCE_ANNOTATION] = resource if "/" in resource else f"nvidia.com/{resource}"
    else:
        config.update(type="ipoib", master=spec.get("master"))
    if spec.get("ipam"):
        try:
            config["ipam"] = json.loads(spec["ipam"])
        except (TypeError, ValueError):
            config["ipam"] = spec["ipam"]
    meta: dict[str, Any] = {"name": name, "namespace": str(spec.get("networkNamespace") or "default")}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": NAD.api_version, "kind": NAD.kind, "metadata": meta, "spec": {"config": json.dumps(config)}}


class NetworkHandler(Handler):
    """The Network Operator's network controllers (see the module docstring); subclasses set `primary`."""

    watches: Sequence[Kind] = (DEPLOYMENT, NAMESPACE)

    def __init__(self, instance: str | None = None, operator_namespace: str | None = None) -> None:
        self.instance = instance or DEFAULT_INSTANCE
        self.operator_namespace = operator_namespace
        if self.instance != DEFAULT_INSTANCE:
            self.name = f"{self.primary.kind}[{self.instance}]"

    def map_to_primary(self, obj: Obj, cache: Cache) -> Iterable[Key]:
        kind = obj.get("kind")
        if kind == "Deployment":
            key, value = OPERATOR_DEPLOYMENT_LABEL
            if labels_of(obj).get(key) != value:
                return []
        networks = [n for n in cache.list(self.primary) if in_scope(n, self.instance)]
        if kind == "Namespace":
            name = (obj.get("metadata") or {}).get("name")
            networks = [n for n in networks if (n.get("spec") or {}).get("networkNamespace") == name]
        return [Key.of(n) for n in networks]

    def reconcile(self, ctx: Context, key: Key) -> float | None:
        network = ctx.primary
        if network is None or not in_scope(network, self.instance):
            return None  # its NetworkAttachmentDefinition goes with it (owner reference)
        key_, value = OPERATOR_DEPLOYMENT_LABEL
        if not self.operator_namespace and not ctx.list(DEPLOYMENT, labels={key_: value}):
            return None  # no operator running
        nad = nad_manifest(network)
        namespace = nad["metadata"]["namespace"]
        if ctx.get(NAMESPACE, namespace) is None:
            want = {"state": "error", "reason": f"networkNamespace {namespace} not found"}
        else:
            ctx.apply_object(nad, owner=network)
            want = {"state": "ready", "reason": None}
        status = network.get("status") or {}
        if status.get("state") != want["state"] or status.get("reason") != want["reason"]:
            ctx.patch_status(network, want)
        return None if want["state"] == "ready" else 10.0


class MacvlanNetworkHandler(NetworkHandler):
    name = "MacvlanNetwork"
    primary = Kind("mellanox.com/v1alpha1", "MacvlanNetwork")


class HostDeviceNetworkHandler(NetworkHandler):
    name = "HostDeviceNetwork"
    primary = Kind("mellanox.com/v1alpha1", "HostDeviceNetwork")


class IPoIBNetworkHandler(NetworkHandler):
    name = "IPoIBNetwork"
    primary = Kind("mellanox.com/v1alpha1", "IPoIBNetwork")


NETWORK_HANDLERS = (MacvlanNetworkHandler, HostDeviceNetworkHandler, IPoIBNetworkHandler)

__all__ = ["NETWORK_FAULTS", "NETWORK_HANDLERS", "NIC_CLUSTER_POLICY", "NicClusterPolicyHandler"]
