"""DeviceConfigHandler: plays the AMD GPU Operator (ROCm/gpu-operator v1.5.1) on kwok nodes, reconciling
DeviceConfig (amd.com/v1alpha1, namespaced) as upstream's `device_config_reconciler.go` documents it.

What it writes (upstream behaviour unless marked *sim*):

- Matching nodes: those with every label of `spec.selector` (the chart's default CR uses
  `feature.node.kubernetes.io/amd-gpu: "true"`, which the chart's NodeFeatureRule `amd-gpu-label-nfd-rule`
  makes the lab's real nfd-master set from the node's NodeFeature). A node matched by an older
  DeviceConfig is not taken: the younger one gets Error=True reason ValidationError, as upstream.
- Driver: with `spec.driver.enable` (CRD default true) and driverType not pf-passthrough upstream has KMM
  load the driver and gates the device plugin and metrics exporter on the node label
  `kmm.node.kubernetes.io/<namespace>.<name>.ready`; *sim*: the simulator sets that label on matching
  nodes itself (no KMM Module). Without it the host's amdgpu module must be loaded (the node's hardware
  profile, `host.modules_loaded`); otherwise the pods wait in their `driver-init` init container.
- DaemonSets in the DeviceConfig's namespace, owned by it, labels `daemonset-name: <name>` (as
  upstream), priorityClassName system-node-critical, tolerations from the spec (+ *sim* the kwok taint):
  `<name>-device-plugin` (spec.devicePlugin.enableDevicePlugin, default true; image devicePluginImage or
  rocm/k8s-device-plugin:latest), `<name>-node-labeller` (enableNodeLabeller, default true;
  nodeLabellerImage or rocm/k8s-device-plugin:labeller-latest), `<name>-metrics-exporter`
  (metricsExporter.enable; image or docker.io/rocm/device-metrics-exporter:v1.5.1), each with init
  container driver-init (commonConfig.initContainerImage or busybox:1.36). A disabled one is deleted.
- Node, once its device-plugin pod is Running and Ready: capacity/allocatable `amd.com/gpu` = GPU count of
  the hardware profile; once its node-labeller pod is: labels `amd.com/gpu.device-id`,
  `amd.com/gpu.product-name` (spaces as underscores) and `amd.com/gpu.vram` (e.g. `192G`). Not ready ->
  removed.
- status (only fields of the fixture CRD): `devicePlugin`, `metricsExporter` (when enabled) and `driver`
  (with KMM) as {nodesMatchingSelectorNumber: matching nodes, desiredNumber: nodes the DaemonSet should
  run on, availableNumber: nodes where its pod is ready} (upstream copies NumberAvailable into
  nodesMatchingSelectorNumber; here it is the number of matching nodes), `observedGeneration`, and
  conditions: Ready=True reason OperatorReady once reconciled; no matching node -> Error=True and
  Ready=False, reason NoMatchingNodes, upstream's message.

Faults (per node): `nfd-labels-missing` hides the node's NFD labels (so, with an NFD selector, it matches
no DeviceConfig and gets nothing); `amd-driver-not-loaded`: the driver is not loaded there (no KMM ready
label; pods stuck in Init at driver-init; no `amd.com/gpu`).

Instances: as the NVIDIA handler, `DeviceConfigHandler(instance="x")` handles only DeviceConfigs and
nodes labelled `sim.gpuops.io/instance=x`; the default instance only unlabelled ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..framework import DAEMONSET, NODE, POD, Cache, Context, Handler, Key, Kind, Obj, rfc3339
from .nvidia import (
    DEFAULT_INSTANCE,
    FAULT_NFD_LABELS_MISSING,
    KWOK_TOLERATION,
    NFD_PREFIX,
    PROFILE_LABEL,
    PodPlan,
    annotations_of,
    apply_pod_plan,
    build_conditions,
    effective_labels,
    in_scope,
    is_pod_ready,
    labels_of,
    load_profile,
    merge_tolerations,
    oldest,
    pod_owner_name,
    pods_by_node_and_owner,
    scope_to_instance,
    spec_enabled,
    with_applied_hash,
)

DEVICE_CONFIG = Kind("amd.com/v1alpha1", "DeviceConfig")

AMD_GPU_LABEL = f"{NFD_PREFIX}amd-gpu"
DEFAULT_SELECTOR = {AMD_GPU_LABEL: "true"}
NODE_OWNER_ANNOTATION = "sim.gpuops.io/amd-gpu-operator"
GPU_RESOURCE = "amd.com/gpu"
APPLIED_HASH_ANNOTATION = "sim.gpuops.io/applied-hash"
LABELLER_LABELS = ("amd.com/gpu.device-id", "amd.com/gpu.product-name", "amd.com/gpu.vram")

FAULT_DRIVER_NOT_LOADED = "amd-driver-not-loaded"
AMD_FAULTS = frozenset({FAULT_NFD_LABELS_MISSING, FAULT_DRIVER_NOT_LOADED})

INIT_IMAGE = "busybox:1.36"
DEVICE_PLUGIN_IMAGE = "rocm/k8s-device-plugin:latest"
NODE_LABELLER_IMAGE = "rocm/k8s-device-plugin:labeller-latest"
METRICS_EXPORTER_IMAGE = "docker.io/rocm/device-metrics-exporter:v1.5.1"
SUFFIXES = ("-device-plugin", "-node-labeller", "-metrics-exporter")


@dataclass(frozen=True)
class AmdGpu:
    count: int
    device_id: str
    product: str
    memory_mib: int
    driver_loaded: bool


def amd_gpu(profile: Mapping[str, Any] | None) -> AmdGpu | None:
    """The first AMD GPU group of a hardware profile, or None."""
    if not profile:
        return None
    host = profile.get("host") or {}
    modules = {m if isinstance(m, str) else m.get("name") for m in host.get("modules_loaded") or ()}
    for dev in host.get("pci") or ():
        if dev.get("role") == "gpu" and str(dev.get("vendor")).lower() == "1002":
            return AmdGpu(
                count=int(dev.get("count") or 0),
                device_id=str(dev.get("device", "")).lower(),
                product=str(dev.get("model") or "AMD GPU").strip().replace(" ", "_"),
                memory_mib=int(dev.get("memory_mib") or 0),
                driver_loaded="amdgpu" in modules,
            )
    return None


def selector_of(spec: Mapping[str, Any]) -> dict[str, str]:
    return dict(spec.get("selector") or DEFAULT_SELECTOR)


def node_matches(labels: Mapping[str, str], selector: Mapping[str, str], faults: Iterable[str] = ()) -> bool:
    """Does the node match the DeviceConfig's selector?"""
    eff = effective_labels(labels, faults)
    return all(eff.get(k) == v for k, v in selector.items())


def uses_kmm(spec: Mapping[str, Any]) -> bool:
    driver = spec.get("driver") or {}
    return spec_enabled(driver, True, "enable") and driver.get("driverType") != "pf-passthrough"


def kmm_ready_label(namespace: str, name: str) -> str:
    return f"kmm.node.kubernetes.io/{namespace}.{name}.ready"


@dataclass(frozen=True)
class AmdOperand:
    suffix: str
    container: str
    status_field: str | None  # DeviceConfig status field mirroring it
    gated_by_driver: bool  # nodeSelector includes the KMM ready label


DEVICE_PLUGIN = AmdOperand("-device-plugin", "device-plugin", "devicePlugin", True)
NODE_LABELLER = AmdOperand("-node-labeller", "node-labeller-container", None, False)
METRICS_EXPORTER = AmdOperand("-metrics-exporter", "metrics-exporter-container", "metricsExporter", True)


def enabled_operands(spec: Mapping[str, Any]) -> list[AmdOperand]:
    dp = spec.get("devicePlugin") or {}
    out = []
    if spec_enabled(dp, True, "enableDevicePlugin"):
        out.append(DEVICE_PLUGIN)
    if spec_enabled(dp, True, "enableNodeLabeller"):
        out.append(NODE_LABELLER)
    if spec_enabled(spec.get("metricsExporter"), False, "enable"):
        out.append(METRICS_EXPORTER)
    return out


def daemonset_manifest(op: AmdOperand, dc: Mapping[str, Any], instance: str) -> Obj:
    meta = dc["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec = dc.get("spec") or {}
    dp = spec.get("devicePlugin") or {}
    mx = spec.get("metricsExporter") or {}
    if op is DEVICE_PLUGIN:
        image, tolerations = dp.get("devicePluginImage") or DEVICE_PLUGIN_IMAGE, dp.get("devicePluginTolerations")
        selector = selector_of(spec)
    elif op is NODE_LABELLER:
        image, tolerations = dp.get("nodeLabellerImage") or NODE_LABELLER_IMAGE, dp.get("nodeLabellerTolerations")
        selector = selector_of(spec)
    else:
        image, tolerations = mx.get("image") or METRICS_EXPORTER_IMAGE, mx.get("tolerations")
        selector = dict(mx.get("selector") or selector_of(spec))
    if op.gated_by_driver and uses_kmm(spec):
        selector[kmm_ready_label(namespace, name)] = ""
    match = {"daemonset-name": name}
    if op is METRICS_EXPORTER:
        match["app.kubernetes.io/name"] = "metrics-exporter"
    init_image = (spec.get("commonConfig") or {}).get("initContainerImage") or INIT_IMAGE
    pod_spec: Obj = {
        "nodeSelector": selector,
        "tolerations": merge_tolerations(tolerations or (), [KWOK_TOLERATION]),
        "priorityClassName": "system-node-critical",
        "initContainers": [{"name": "driver-init", "image": init_image}],
        "containers": [{"name": op.container, "image": image}],
    }
    labels = dict(match)
    scope_to_instance(instance, pod_spec, selector, labels)
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name + op.suffix, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": match},
            "template": {"metadata": {"labels": match}, "spec": pod_spec},
        },
    }
    return with_applied_hash(manifest, APPLIED_HASH_ANNOTATION)


def labeller_labels(gpu: AmdGpu) -> dict[str, str]:
    labels = {"amd.com/gpu.device-id": gpu.device_id, "amd.com/gpu.product-name": gpu.product[:63]}
    if gpu.memory_mib:
        labels["amd.com/gpu.vram"] = f"{round(gpu.memory_mib / 1024)}G"
    return labels


def no_matching_nodes_message(selector: Mapping[str, str]) -> str:
    sel = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    return f"no nodes found matching selector {sel}; verify node labels or check that NFD has labeled the GPU nodes"


def deployment_status(matching: int, desired: int, available: int) -> dict[str, int]:
    return {"nodesMatchingSelectorNumber": matching, "desiredNumber": desired, "availableNumber": available}


class DeviceConfigHandler(Handler):
    """The AMD GPU Operator's DeviceConfig controller (see the module docstring)."""

    name = "DeviceConfig"
    primary = DEVICE_CONFIG
    watches: Sequence[Kind] = (NODE, POD, DAEMONSET)
    known_faults = AMD_FAULTS

    def __init__(self, instance: str | None = None) -> None:
        self.instance = instance or DEFAULT_INSTANCE
        if self.instance != DEFAULT_INSTANCE:
            self.name = f"DeviceConfig[{self.instance}]"
        self._profiles: dict[str, dict[str, Any] | None] = {}

    # -- scope -------------------------------------------------------------------------------------
    def _marker(self, key: Key) -> str:
        return f"{self.instance}:{key.namespace}/{key.name}"

    def _marker_key(self, node: Mapping[str, Any]) -> Key | None:
        value = annotations_of(node).get(NODE_OWNER_ANNOTATION) or ""
        instance, sep, rest = value.partition(":")
        ns, sep2, name = rest.partition("/")
        if not sep or not sep2 or instance != self.instance:
            return None
        return Key(ns, name)

    def _configs(self, cache: Cache) -> list[Obj]:
        return [dc for dc in cache.list(DEVICE_CONFIG) if in_scope(dc, self.instance)]

    def map_to_primary(self, obj: Obj, cache: Cache) -> Iterable[Key]:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        if kind in ("Pod", "DaemonSet"):
            owner = pod_owner_name(obj) if kind == "Pod" else (meta.get("name", ""), "")
            if owner is None:
                return []
            for suffix in SUFFIXES:
                if owner[0].endswith(suffix):
                    return [Key(meta.get("namespace"), owner[0][: -len(suffix)])]
            return []
        if kind == "Node":
            keys = []
            marked = self._marker_key(obj)
            if marked is not None:
                keys.append(marked)
            if in_scope(obj, self.instance):
                keys.extend(Key.of(dc) for dc in self._configs(cache))
            return keys
        return []

    def keys_for_fault_change(self, nodes: frozenset[str] | None, cache: Cache) -> Iterable[Key] | None:
        return [Key.of(dc) for dc in self._configs(cache)]

    def _profile(self, node: Mapping[str, Any]) -> dict[str, Any] | None:
        name = labels_of(node).get(PROFILE_LABEL)
        if not name:
            return None
        if name not in self._profiles:
            self._profiles[name] = load_profile(name)
        return self._profiles[name]

    # -- node writes -------------------------------------------------------------------------------
    def _set_node(
        self,
        ctx: Context,
        node: Obj,
        labels: Mapping[str, str | None],
        annotations: Mapping[str, str | None],
        resource: int | None,
    ) -> Obj:
        node = ctx.patch_metadata(node, labels=labels, annotations=annotations)
        status = node.get("status") or {}
        have = any(GPU_RESOURCE in (status.get(f) or {}) for f in ("capacity", "allocatable"))
        if resource is not None or have:
            value = {GPU_RESOURCE: resource}
            node = ctx.patch_node_status(node, capacity=value, allocatable=value)
        return node

    def _cleanup_node(self, ctx: Context, node: Obj, key: Key) -> None:
        labels = labels_of(node)
        remove: dict[str, str | None] = {k: None for k in LABELLER_LABELS if k in labels}
        kmm = kmm_ready_label(key.namespace or "", key.name)
        if kmm in labels:
            remove[kmm] = None
        annotations: dict[str, str | None] = {NODE_OWNER_ANNOTATION: None}
        self._set_node(ctx, node, remove, annotations, None)

    # -- reconcile ---------------------------------------------------------------------------------
    def reconcile(self, ctx: Context, key: Key) -> float | None:
        dc = ctx.primary
        if dc is not None and not in_scope(dc, self.instance):
            dc = None
        marker = self._marker(key)
        if dc is None:
            for node in ctx.list(NODE):
                if annotations_of(node).get(NODE_OWNER_ANNOTATION) == marker:
                    self._cleanup_node(ctx, node, key)
            return None
        spec = dc.get("spec") or {}
        selector = selector_of(spec)
        kmm = uses_kmm(spec)
        kmm_label = kmm_ready_label(key.namespace or "", key.name)
        others = [o for o in self._configs(ctx.cache) if Key.of(o) != key]
        older = [o for o in others if oldest([o, dc]) is o]

        # 1. which nodes are ours
        matched: list[tuple[Obj, frozenset[str]]] = []
        conflicts: list[str] = []
        for node in ctx.list(NODE):
            labels = labels_of(node)
            faults = ctx.faults_for(node)
            owner = annotations_of(node).get(NODE_OWNER_ANNOTATION)
            mine = in_scope(node, self.instance) and node_matches(labels, selector, faults)
            if mine:
                for other in older:
                    if node_matches(labels, selector_of(other.get("spec") or {}), faults):
                        conflicts.append(f"node {node['metadata']['name']} is selected by DeviceConfig {Key.of(other)}")
                        mine = False
                        break
            if mine and owner and owner != marker:
                mine = False  # still managed by another DeviceConfig or simulator instance
            if not mine:
                if owner == marker:
                    self._cleanup_node(ctx, node, key)
                continue
            matched.append((node, faults))

        # 2. DaemonSets
        wanted = enabled_operands(spec)
        wanted_names = {key.name + op.suffix for op in wanted}
        dc_uid = dc["metadata"].get("uid", "")
        for ds in ctx.list(DAEMONSET, namespace=key.namespace):
            refs = ds["metadata"].get("ownerReferences") or ()
            if any(r.get("uid") == dc_uid for r in refs) and ds["metadata"]["name"] not in wanted_names:
                ctx.delete_object(ds)
        owners: dict[str, str] = {}
        for op in wanted:
            ds = ctx.apply_object(daemonset_manifest(op, dc, self.instance), owner=dc)
            owners[ds["metadata"]["name"]] = ds["metadata"].get("uid", "")
        pods = pods_by_node_and_owner(ctx.list(POD, namespace=key.namespace), owners)

        # 3. per node
        counts = {op.suffix: [0, 0] for op in wanted}  # desired, available
        driver_available = 0
        for node, faults in matched:
            name = node["metadata"]["name"]
            labels = labels_of(node)
            gpu = amd_gpu(self._profile(node))
            driver_ok = FAULT_DRIVER_NOT_LOADED not in faults and (kmm or (gpu is None or gpu.driver_loaded))
            label_changes: dict[str, str | None] = {}
            annotations: dict[str, str | None] = {}
            if NODE_OWNER_ANNOTATION not in annotations_of(node):
                annotations[NODE_OWNER_ANNOTATION] = marker
            if kmm:
                if driver_ok and kmm_label not in labels:
                    label_changes[kmm_label] = ""
                elif not driver_ok and kmm_label in labels:
                    label_changes[kmm_label] = None
                driver_available += int(driver_ok)
            elif kmm_label in labels:
                label_changes[kmm_label] = None
            ready: dict[str, bool] = {}
            for op in wanted:
                if op.gated_by_driver and kmm and not driver_ok:
                    continue  # the DaemonSet does not select the node
                counts[op.suffix][0] += 1
                pod = pods.get((name, key.name + op.suffix))
                plan = PodPlan() if driver_ok else PodPlan("init", "driver-init")
                if pod is not None:
                    pod = apply_pod_plan(ctx, pod, plan)
                ready[op.suffix] = pod is not None and plan.kind == "ok" and is_pod_ready(pod)
                counts[op.suffix][1] += int(ready[op.suffix])
            want_labels = labeller_labels(gpu) if gpu is not None and ready.get(NODE_LABELLER.suffix) else {}
            for k in LABELLER_LABELS:
                if labels.get(k) != want_labels.get(k):
                    label_changes[k] = want_labels.get(k)
            resource = gpu.count if gpu is not None and ready.get(DEVICE_PLUGIN.suffix) else None
            self._set_node(ctx, node, label_changes, annotations, resource)

        # 4. status
        now = rfc3339(ctx.now())
        existing = (dc.get("status") or {}).get("conditions")
        status: dict[str, Any] = {}
        if conflicts:
            conds = [
                {
                    "type": "Error",
                    "status": "True",
                    "reason": "ValidationError",
                    "message": "Validation failed: " + "; ".join(conflicts),
                },
                {"type": "Ready", "status": "False", "reason": "OperatorReady", "message": ""},
            ]
        elif not matched:
            msg = no_matching_nodes_message(selector)
            conds = [
                {"type": "Error", "status": "True", "reason": "NoMatchingNodes", "message": msg},
                {"type": "Ready", "status": "False", "reason": "NoMatchingNodes", "message": msg},
            ]
        else:
            conds = [{"type": "Ready", "status": "True", "reason": "OperatorReady", "message": ""}]
            status["observedGeneration"] = int(dc["metadata"].get("generation") or 1)
        for op in (DEVICE_PLUGIN, METRICS_EXPORTER):
            field = op.status_field or ""
            if op in wanted:
                desired, available = counts[op.suffix]
                status[field] = deployment_status(len(matched), desired, available)
            elif field in (dc.get("status") or {}):
                status[field] = None
        if kmm:
            status["driver"] = deployment_status(len(matched), len(matched), driver_available)
        elif "driver" in (dc.get("status") or {}):
            status["driver"] = None
        status["conditions"] = build_conditions(existing, conds, now)
        ctx.patch_status(dc, status)
        return None


__all__ = ["AMD_FAULTS", "DEVICE_CONFIG", "DeviceConfigHandler"]
