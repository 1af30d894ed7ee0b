"""DraKubeletPluginHandler: plays the kubelet plugin of kubernetes-sigs/dra-driver-nvidia-gpu 0.4.1 on kwok nodes.

Upstream (cmd/gpu-kubelet-plugin, tag v0.4.1): the plugin runs as the DaemonSet `<chart>-kubelet-plugin` (pod
labels `app.kubernetes.io/name=dra-driver-nvidia-gpu`, `app.kubernetes.io/component=kubelet-plugin`; the chart's
`kubeletPlugin.nodeSelector` picks the nodes) and publishes, through the kubelet's resourceslice helper, one
pool named after the node (driver.go: `Pools: {nodeName: ...}`) holding a ResourceSlice (resource.k8s.io/v1,
driver `gpu.nvidia.com`, `spec.nodeName`, owned by the Node) with one device per full GPU named `gpu-<minor>`
(deviceinfo.go CanonicalName), attributes `type=gpu`, `uuid`, `productName`, `brand`, `architecture`,
`cudaComputeCapability`, `driverVersion` (versions) and capacity `memory` (partitions.go fullGpuCapacity). The
DeviceClasses (`gpu.nvidia.com`: `device.attributes['gpu.nvidia.com'].type == 'gpu'`, `mig.nvidia.com`: `== 'mig'`)
come from the chart. The real kube-scheduler of the lab allocates claims against these slices.

Here: a node whose kubelet-plugin pod is Running and Ready gets the slice `<node>-gpu.nvidia.com` (*sim*: a fixed
name; upstream's helper uses generateName `<node>-gpu.nvidia.com-`) with the node's NVIDIA GPUs from its hardware
profile (label `gpuops.io/hardware-profile`; uuids derived from the node name, *sim*); no such pod (the release
uninstalled, the node no longer selected) -> the slice is deleted (upstream: the kubelet removes the slices of an
unregistered plugin). MIG devices and the compute-domain plugin are not played.

Instances: as ClusterPolicyHandler, by the node label `sim.gpuops.io/instance`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from ..framework import DAEMONSET, NODE, POD, Cache, Context, Handler, Key, Kind, Obj
from .nvidia import DEFAULT_INSTANCE, PROFILE_LABEL, GpuInfo, gpu_info, in_scope, is_pod_ready, labels_of, load_profile

RESOURCE_SLICE = Kind("resource.k8s.io/v1", "ResourceSlice")
DRIVER = "gpu.nvidia.com"
PLUGIN_LABELS = {"app.kubernetes.io/name": "dra-driver-nvidia-gpu", "app.kubernetes.io/component": "kubelet-plugin"}
SLICE_NODE_LABEL = "sim.gpuops.io/dra-node"
GPU_CONTAINER = "gpus"
# reconciled when no plugin DaemonSet is left (its slices are deleted)
CLEANUP_KEY = Key("~dra", "~cleanup")


def slice_name(node: str) -> str:
    return f"{node}-{DRIVER}"


def is_plugin_pod(pod: Obj) -> bool:
    labels = labels_of(pod)
    return all(labels.get(k) == v for k, v in PLUGIN_LABELS.items())


def gpu_uuid(node: str, index: int) -> str:
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpuops-sim/{node}/{index}"))


def resource_slice(node: Obj, gpu: GpuInfo) -> Obj:
    """The ResourceSlice the kubelet plugin publishes for `node` (one device per GPU)."""
    name = node["metadata"]["name"]
    devices = []
    for index in range(gpu.count):
        attrs: dict[str, Any] = {
            "type": {"string": "gpu"},
            "uuid": {"string": gpu_uuid(name, index)},
            "productName": {"string": gpu.product.replace("-", " ")},
            "brand": {"string": "Nvidia"},
        }
        if gpu.model is not None:
            attrs["architecture"] = {"string": gpu.model.family.replace("-", " ").title()}
            attrs["cudaComputeCapability"] = {"version": f"{gpu.model.compute[0]}.{gpu.model.compute[1]}.0"}
        if gpu.host_driver and gpu.host_driver.count(".") == 2 and gpu.host_driver.replace(".", "").isdigit():
            # the API server wants semver 2.0.0: 570.124.06 is published as 570.124.6 (a semver parser's String())
            attrs["driverVersion"] = {"version": ".".join(str(int(p)) for p in gpu.host_driver.split("."))}
        devices.append(
            {"name": f"gpu-{index}", "attributes": attrs, "capacity": {"memory": {"value": f"{gpu.memory_mib}Mi"}}}
        )
    return {
        "apiVersion": RESOURCE_SLICE.api_version,
        "kind": RESOURCE_SLICE.kind,
        "metadata": {"name": slice_name(name), "labels": {SLICE_NODE_LABEL: name}},
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def is_plugin_daemonset(ds: Obj) -> bool:
    return labels_of(ds).get("app.kubernetes.io/name") == PLUGIN_LABELS["app.kubernetes.io/name"] and str(
        (ds.get("metadata") or {}).get("name", "")
    ).endswith("-kubelet-plugin")


class DraKubeletPluginHandler(Handler):
    """The dra-driver-nvidia-gpu kubelet plugin (see the module docstring). Primary: the kubelet-plugin DaemonSets
    (other DaemonSets are skipped at once); each reconcile publishes the slices of every node where a plugin pod is
    ready and deletes the others, so a resync costs one pass over the plugin pods and the slices, not one per
    node."""

    name = "DraKubeletPlugin"
    primary = DAEMONSET
    # ResourceSlices are watched so that reads come from the cache and a deleted slice is republished; Nodes for
    # their hardware profile and instance label (a node's change alone reconciles nothing: the resync does)
    watches = (POD, RESOURCE_SLICE, NODE)

    def __init__(self, instance: str | None = None) -> None:
        self.instance = instance or DEFAULT_INSTANCE
        if self.instance != DEFAULT_INSTANCE:
            self.name = f"DraKubeletPlugin[{self.instance}]"
        self._profiles: dict[str, dict[str, Any] | None] = {}

    def map_to_primary(self, obj: Obj, cache: Cache) -> Iterable[Key]:
        kind = obj.get("kind")
        if (kind == "Pod" and is_plugin_pod(obj)) or (kind == "ResourceSlice" and labels_of(obj).get(SLICE_NODE_LABEL)):
            return [Key.of(ds) for ds in cache.list(DAEMONSET) if is_plugin_daemonset(ds)] or [CLEANUP_KEY]
        return []

    def _gpu(self, node: Obj) -> GpuInfo | None:
        profile = labels_of(node).get(PROFILE_LABEL)
        if not profile:
            return None
        if profile not in self._profiles:
            self._profiles[profile] = load_profile(profile)
        return gpu_info(self._profiles[profile])

    def reconcile(self, ctx: Context, key: Key) -> float | None:
        ds = ctx.primary
        if ds is not None and not is_plugin_daemonset(ds):
            return None
        serving = {
            str((p.get("spec") or {}).get("nodeName"))
            for p in ctx.list(POD, labels=PLUGIN_LABELS)
            if is_plugin_pod(p) and (p.get("spec") or {}).get("nodeName") and is_pod_ready(p)
        }
        published: set[str] = set()
        for name in sorted(serving):
            node = ctx.get(NODE, name)
            if node is None or not in_scope(node, self.instance):
                continue
            gpu = self._gpu(node)
            if gpu is not None and gpu.count > 0:
                ctx.apply_object(resource_slice(node, gpu), owner=node)
                published.add(name)
        for rs in ctx.list(RESOURCE_SLICE, labels={SLICE_NODE_LABEL: None}):
            name = labels_of(rs)[SLICE_NODE_LABEL]
            if name in published or rs["metadata"]["name"] != slice_name(name):
                continue
            node = ctx.get(NODE, name)
            if node is None or in_scope(node, self.instance):
                ctx.delete_object(rs)
        return None


__all__ = ["DRIVER", "RESOURCE_SLICE", "DraKubeletPluginHandler", "resource_slice"]
