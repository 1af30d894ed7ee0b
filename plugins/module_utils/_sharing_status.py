# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""GPU sharing status (issue 9): what each pool's nodes carry and advertise against what ``_sharing`` expects.

``collect`` reads the cluster with a constant number of list requests whatever the node count (nodes, pods in all
namespaces, ResourceSlices and DeviceClasses of ``resource.k8s.io/v1``, ConfigMaps of the operator namespace when a
device-plugin ConfigMap is named); ``view`` is a pure function of those lists: per pool and node the model, the
sharing labels, expected vs advertised capacity, DRA slices, GPU pods on MIG nodes, the findings, and what is not
ready yet (the ``wait`` of ``gpu_sharing_status``: every MIG node ``success`` and capacity as expected)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils import (
    _cluster_status,
    _gpu_catalog,
    _readiness,
    _sharing,
    _workloads,
)
from ansible_collections.gpuops.platform.plugins.module_utils._gpu_labels import base_product

Obj = dict[str, Any]
DRA_DRIVER = "gpu.nvidia.com"
DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")
DEPLOY_DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
DRIVER_FULL_LABEL = "nvidia.com/cuda.driver-version.full"
DRIVER_MAJOR_LABEL = "nvidia.com/cuda.driver.major"
NVIDIA_VENDOR = "10de"


def collect(reader: Any, namespace: str, config_map: str | None, dra: bool) -> dict[str, Any]:
    """The lists ``view`` needs; DRA objects only when a pool uses DRA, ConfigMaps only when one is named."""
    raw: dict[str, Any] = {"nodes": reader.nodes(), "pods": reader.core("pods")}
    if config_map:
        raw["configmaps"] = reader.core("configmaps", namespace) or []
    if dra:
        raw["slices"] = reader.objects("resource.k8s.io", "v1", "resourceslices")
        raw["device_classes"] = reader.objects("resource.k8s.io", "v1", "deviceclasses")
    return raw


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _ids_of_product(product: str | None) -> dict[str, str]:
    """GFD's nvidia.com/gpu.product (model with '-' for spaces; '-SHARED' or '-MIG-<profile>' appended) -> PCI ids."""
    base = base_product(product)
    for (vendor, device), entry in _gpu_catalog.GPUS.items():
        if base and str(entry.get("model", "")).replace(" ", "-") == base:
            return {"vendor_id": vendor, "device_id": device}
    return {}


def nvidia_gpus(
    facts: Mapping[str, Any] | None, labels: Mapping[str, str], mig_configs: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The node's NVIDIA GPUs: the host facts' accelerators, else as many GPUs as GFD's gpu.count label, of the
    model its gpu.product label names (under MIG strategy single: MIG devices / devices per GPU, from the custom
    config the node's nvidia.com/mig.config names when ``mig_configs`` has it)."""
    accel = (facts or {}).get("accelerators") or []
    gpus = [
        dict(a)
        for a in accel
        if str(a.get("vendor_id", "")).lower().removeprefix("0x") == NVIDIA_VENDOR
        and str(a.get("class", "03")).startswith("03")
    ]
    if gpus or facts:
        return gpus
    try:
        count = int(labels.get(GPU_COUNT_LABEL, "0"))
    except ValueError:
        count = 0
    product = str(labels.get(GPU_PRODUCT_LABEL) or "")
    ids = _ids_of_product(product)
    if "-MIG-" in product and ids:
        # strategy single: GFD counts the MIG devices (internal/lm/mig-strategy.go); the GPUs are count / per GPU
        profile = product.split("-MIG-", 1)[1]
        per_gpu = _gpu_catalog.mig_profiles(ids["vendor_id"], ids["device_id"]).get(profile)
        entries = (mig_configs or {}).get(labels.get(_sharing.MIG_CONFIG_LABEL) or "")
        if isinstance(entries, list):  # single strategy: one profile on every GPU (mig_strategy_findings)
            layout = _sharing.mig_layouts(entries, (ids["vendor_id"], ids["device_id"]), 1)[0]
            per_gpu = (layout or {}).get(profile) or per_gpu
        if per_gpu:
            count //= per_gpu
    return [dict(ids) for _i in range(count)]


def driver_version(facts: Mapping[str, Any] | None, labels: Mapping[str, str]) -> str | None:
    """The host's NVIDIA driver version: the host facts', else GFD's nvidia.com/cuda.driver-version.full or
    cuda.driver.major label."""
    version = ((facts or {}).get("nvidia_driver") or {}).get("version")
    return version or labels.get(DRIVER_FULL_LABEL) or labels.get(DRIVER_MAJOR_LABEL)


def gpu_pods(pods: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """node -> namespace/name of the running or pending pods that hold GPUs there (``_workloads.gpu_resources``)."""
    out: dict[str, list[str]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if _workloads.gpu_resources(pod):
            out.setdefault(node, []).append(f"{_meta(pod).get('namespace')}/{_meta(pod).get('name')}")
    return {k: sorted(v) for k, v in out.items()}


def _finding(fid: str, node: str, evidence: list[str], cause: str, fix: str, kind: str = "Node") -> dict[str, Any]:
    return {
        "id": fid,
        "severity": "error",
        "object": {"kind": kind, "name": node},
        "evidence": evidence,
        "cause": cause,
        "fix": fix,
    }


def _slices_by_node(slices: Sequence[Mapping[str, Any]] | None) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for s in slices or ():
        spec = s.get("spec") or {}
        if spec.get("driver") != DRA_DRIVER or not spec.get("nodeName"):
            continue
        out.setdefault(spec["nodeName"], []).append(
            {"name": _meta(s).get("name"), "devices": len(spec.get("devices") or ())}
        )
    return out


def _advertised(node: Mapping[str, Any]) -> dict[str, int]:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {k: int(v) for k, v in _cluster_status.gpu_resources(alloc).items() if k.startswith("nvidia.com/")}


def _mig_failed_reason(
    pool: Mapping[str, Any],
    node: str,
    gpus: list[dict[str, Any]],
    pods: list[str],
    mig_configs: Mapping[str, Any] | None = None,
) -> str:
    invalid = _sharing.mig_findings([pool], {pool["name"]: [node]}, {node: gpus}, mig_configs)
    if invalid:
        return "; ".join(invalid[0]["evidence"])
    if pods:
        return "the GPUs are in use by " + ", ".join(pods) + " (mig-manager cannot reconfigure a GPU in use)"
    return "see the nvidia-mig-manager pod's log on the node"


def _node_row(
    pool: Mapping[str, Any],
    name: str,
    node: Mapping[str, Any],
    gpus: Any,
    strategy: Any,
    slices: Any,
    pods: Any,
    configs: Any,
    mig_configs: Any = None,
) -> tuple[dict[str, Any], list[dict[str, Any]], Any]:
    labels = _meta(node).get("labels") or {}
    model = pool["model"]
    expected = _sharing.expected_capacity(pool, gpus, strategy, mig_configs)
    row: dict[str, Any] = {
        "name": name,
        "pool": pool["name"],
        "model": model,
        "gpus": len(gpus),
        "labels": {
            k: labels.get(k)
            for k in (_sharing.CONFIG_LABEL, _sharing.MIG_CONFIG_LABEL, _sharing.MIG_STATE_LABEL, DEPLOY_DEVICE_PLUGIN)
        },
        "expected": expected,
        "advertised": _advertised(node),
        "gpu_pods": pods,
        "resource_slices": slices,
    }
    findings: list[dict[str, Any]] = []
    unmet: list[str] = []
    if model != "dra":
        findings += _sharing.capacity_findings({name: expected}, {name: row["advertised"]}, {name: pool["name"]})
    if model in ("time_slicing", "mps"):
        entry = labels.get(_sharing.CONFIG_LABEL)
        if entry != pool["name"]:
            unmet.append(f"label {_sharing.CONFIG_LABEL} is {entry!r}, want {pool['name']!r}")
        if configs is not None and entry and entry not in configs:
            findings.append(
                _finding(
                    "sharing-config-entry-missing",
                    name,
                    [f"{_sharing.CONFIG_LABEL}={entry}", "entries: " + (", ".join(sorted(configs)) or "none")],
                    f"The device plugin fails on this node: 'specified config {entry} does not exist'.",
                    "Add the entry to the device-plugin ConfigMap (the gpu_sharing role writes one per pool) or fix "
                    "the label.",
                )
            )
    if model == "mig":
        want, state = pool.get("mig_config"), labels.get(_sharing.MIG_STATE_LABEL)
        if labels.get(_sharing.MIG_CONFIG_LABEL) != want:
            unmet.append(
                f"label {_sharing.MIG_CONFIG_LABEL} is {labels.get(_sharing.MIG_CONFIG_LABEL)!r}, want {want!r}"
            )
        elif state == "failed":
            reason = _mig_failed_reason(pool, name, gpus, pods, mig_configs)
            row["mig_failed_reason"] = reason
            findings.append(
                _finding(
                    "sharing-mig-config-failed",
                    name,
                    [f"{_sharing.MIG_CONFIG_LABEL}={want}", f"{_sharing.MIG_STATE_LABEL}=failed", reason],
                    "mig-manager could not apply the MIG configuration.",
                    "Fix the cause (a name valid on the GPU; stop the GPU pods on the node), then change the label "
                    "again: mig-manager retries only on a label change.",
                )
            )
        elif state != "success":
            unmet.append(f"{_sharing.MIG_STATE_LABEL} is {state!r}, want 'success'")
    if model == "dra":
        devices = sum(s["devices"] for s in slices)
        if devices != len(gpus):
            unmet.append(
                f"ResourceSlices of driver {DRA_DRIVER} publish {devices} device(s), the node has {len(gpus)} GPU(s)"
            )
        if labels.get(DEPLOY_DEVICE_PLUGIN) != "false" or any(row["advertised"].values()):
            findings.append(
                _finding(
                    "sharing-dra-and-device-plugin",
                    name,
                    [
                        f"{DEPLOY_DEVICE_PLUGIN}={labels.get(DEPLOY_DEVICE_PLUGIN)}",
                        "advertised: "
                        + (", ".join(f"{k}={v}" for k, v in sorted(row["advertised"].items())) or "none"),
                    ],
                    "The device plugin may advertise the GPUs that the DRA driver also publishes: two allocators for "
                    "the same devices.",
                    f"Label the node {DEPLOY_DEVICE_PLUGIN}=false (the gpu_sharing role does for its DRA pools).",
                )
            )
    return row, findings, unmet


def view(raw: Mapping[str, Any], pools: Sequence[Mapping[str, Any]], params: Mapping[str, Any]) -> dict[str, Any]:
    """Per pool and node the sharing state, the findings and what is not ready (``_readiness.NotReady``)."""
    nodes: dict[str, Mapping[str, Any]] = {str(_meta(n).get("name")): n for n in raw.get("nodes") or ()}
    groups = params.get("groups") or {}
    member_input = {
        name: {"labels": _meta(n).get("labels") or {}, "groups": [g for g, hosts in groups.items() if name in hosts]}
        for name, n in nodes.items()
    }
    members, findings = _sharing.pool_members(pools, member_input)
    facts = _cluster_status.match_host_facts(params.get("host_facts"), list(nodes))
    slices = _slices_by_node(raw.get("slices"))
    pods = gpu_pods(raw.get("pods") or ())
    configs = None
    if "configmaps" in raw:
        cm = next((c for c in raw["configmaps"] if _meta(c).get("name") == params.get("config_map")), None)
        configs = set((cm or {}).get("data") or {}) if cm else set()
    strategy = params.get("mig_strategy") or "single"
    not_ready: list[_readiness.NotReady] = []
    out_pools = []
    for pool in pools:
        rows = []
        for name in members.get(pool["name"], ()):
            labels = _meta(nodes[name]).get("labels") or {}
            gpus = nvidia_gpus(facts.get(name), labels, params.get("mig_configs"))
            row, got, unmet = _node_row(
                pool,
                name,
                nodes[name],
                gpus,
                strategy,
                slices.get(name, []),
                pods.get(name, []) if pool["model"] == "mig" else [],
                configs,
                params.get("mig_configs") or None,
            )
            rows.append(row)
            findings += got
            # a failed MIG change is final (mig-manager retries on the next label change only): no use waiting
            unmet += [f"{f['id']}: " + "; ".join(f["evidence"]) for f in got if f["id"] != "sharing-mig-config-failed"]
            not_ready += [_readiness.NotReady("Node", None, name, text) for text in unmet]
        out_pools.append({"name": pool["name"], "model": pool["model"], "nodes": rows})
    if any(p["model"] == "dra" for p in pools):
        present = {_meta(c).get("name") for c in raw.get("device_classes") or ()}
        for dc in DEVICE_CLASSES:
            if dc not in present:
                not_ready.append(_readiness.NotReady("DeviceClass", None, dc, "not found"))
                findings.append(
                    _finding(
                        "sharing-dra-deviceclass-missing",
                        dc,
                        [f"DeviceClass {dc} not found"],
                        "The dra-driver-nvidia-gpu chart creates the DeviceClasses claims refer to.",
                        "Install the dra-driver-nvidia-gpu release (the gpu_sharing role does for DRA pools).",
                        kind="DeviceClass",
                    )
                )
    return {"pools": out_pools, "diagnosis": findings, "not_ready": not_ready}


DRA_NODE_LABEL = "gpuops.platform/sharing-dra"  # the DRA kubelet plugin's nodeSelector (any number of DRA pools)
OWNER_ANNOTATION = "gpuops.platform/sharing-labels"  # the labels the gpu_sharing role set on a node (JSON list)
MIG_DISABLED = "all-disabled"


def wanted_labels(pool: Mapping[str, Any]) -> dict[str, str]:
    """The labels a node of ``pool`` carries: the device-plugin config entry (time-slicing, MPS), the MIG config
    (MIG), the device plugin off (DRA: never two allocators for the same GPUs) or the KAI fraction label (whole GPUs
    that KAI Scheduler shares; fractional pods select the label)."""
    model = pool.get("model")
    if model in ("time_slicing", "mps"):
        return {_sharing.CONFIG_LABEL: str(pool["name"])}
    if model == "mig":
        return {_sharing.MIG_CONFIG_LABEL: str(pool["mig_config"])}
    if model == "dra":
        return {DEPLOY_DEVICE_PLUGIN: "false", DRA_NODE_LABEL: "true"}
    if model == "kai_fraction":
        return {_sharing.KAI_FRACTION_LABEL: "true"}
    return {}


def mig_change_nodes(plan: Sequence[Mapping[str, Any]]) -> list[str]:
    """The nodes whose label patch sets a new nvidia.com/mig.config (a MIG layout change), sorted: only the pods
    there matter to :func:`mig_change_findings`."""
    return sorted(p["name"] for p in plan if _sharing.MIG_CONFIG_LABEL in p["labels"])


def mig_change_findings(
    plan: Sequence[Mapping[str, Any]], pods: Mapping[str, Sequence[str]], allowed: bool
) -> list[dict[str, Any]]:
    """A MIG change (a new nvidia.com/mig.config on a node) while pods hold GPUs there fails on that node
    (mig-manager cannot reconfigure a GPU in use): an error naming the pods, a warning when ``allowed``."""
    out = []
    changing = set(mig_change_nodes(plan))
    for patch in plan:
        if patch["name"] not in changing or not pods.get(patch["name"]):
            continue
        finding = _finding(
            "sharing-mig-change-gpu-pods-running",
            patch["name"],
            [
                f"{_sharing.MIG_CONFIG_LABEL} -> {patch['labels'][_sharing.MIG_CONFIG_LABEL]}",
                "pods holding GPUs: " + ", ".join(pods[patch["name"]]),
            ],
            "Changing the MIG layout of a node stops its GPU workloads; mig-manager fails while they run.",
            "Drain the GPU pods from the node first, or set gpu_sharing_allow_mig_change_with_gpu_pods: true.",
        )
        if allowed:
            finding["severity"] = "warning"
        out.append(finding)
    return out


def _owned(node: Mapping[str, Any]) -> list[str]:
    text = (_meta(node).get("annotations") or {}).get(OWNER_ANNOTATION)
    try:
        got = json.loads(text) if text else []
    except ValueError:
        return []
    return sorted(str(k) for k in got) if isinstance(got, list) else []


def label_plan(
    nodes: Sequence[Mapping[str, Any]], pools: Sequence[Mapping[str, Any]], members: Mapping[str, Sequence[str]]
) -> list[dict[str, Any]]:
    """Per node whose sharing labels must change: ``{name, labels, annotations}`` for a merge patch (a None value
    removes). Only the labels the role set (listed in the node's OWNER_ANNOTATION) are ever removed or replaced
    when they are not wanted any more; a label set by someone else on a node outside every pool is left alone. A
    node leaving a MIG pool gets ``mig.config=all-disabled`` (whole GPUs again), which the role then no longer owns
    (the GPU Operator's own default)."""
    pool_of = {node: pool for pool in pools for node in members.get(pool["name"], ())}
    out = []
    for node in nodes:
        name = _meta(node).get("name")
        labels = _meta(node).get("labels") or {}
        owned = _owned(node)
        want = wanted_labels(pool_of[name]) if name in pool_of else {}
        patch: dict[str, str | None] = {k: v for k, v in want.items() if labels.get(k) != v}
        for key in owned:
            if key in want or key not in labels:
                continue
            if key == _sharing.MIG_CONFIG_LABEL:
                if labels.get(key) != MIG_DISABLED:
                    patch[key] = MIG_DISABLED
            else:
                patch[key] = None
        new_owned = sorted(want)
        annotations: dict[str, str | None] = {}
        if new_owned != owned:
            annotations[OWNER_ANNOTATION] = json.dumps(new_owned) if new_owned else None
        if patch or annotations:
            out.append({"name": name, "labels": patch, "annotations": annotations})
    return sorted(out, key=lambda p: p["name"])


# -- device-plugin restart: new ConfigMap content reaches a node only when its device-plugin pod is recreated ---------
# k8s-device-plugin v0.20.0's config-manager sidecar follows the node's nvidia.com/device-plugin.config label and
# reloads on a label change only; an entry's content (a new replicas) is read when the pod starts. When the role
# changes an entry's content it records, in the same write of the ConfigMap (annotation STALE_ANNOTATION), the UIDs of
# the device-plugin pods then running on the nodes that use the entry; it then deletes those pods (their DaemonSet
# recreates them). A run that fails in between leaves the record, and the next run deletes the pods still there; a run
# that changes no content keeps the record, whose pods are gone: nothing to do. No clocks are compared.
STALE_ANNOTATION = "gpuops.platform/stale-device-plugin-pods"
DEVICE_PLUGIN_APP = "nvidia-device-plugin-daemonset"  # the pods' app label (gpu-operator assets/state-device-plugin)


def restart_plan(
    before: Mapping[str, Any] | None,
    configs: Mapping[str, str],
    nodes: Sequence[Mapping[str, Any]],
    label_patches: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """``{changed_entries, annotation, pods, nodes}``: the entries whose content this run changes (against the
    ConfigMap as it was, ``before``; all of them when it did not exist), the STALE_ANNOTATION value to write with the
    new content (the UIDs of the device-plugin pods on the nodes that use a changed entry after this run's label
    patches; the recorded value when nothing changes), and the device-plugin pods (names) and nodes to restart now:
    those whose UID the record names."""
    old = dict((before or {}).get("data") or {}) if before else None
    changed = sorted(e for e, text in configs.items() if old is None or old.get(e) != text)
    dp_pods = [p for p in pods if (_meta(p).get("labels") or {}).get("app") == DEVICE_PLUGIN_APP]
    if changed:
        patched = {p["name"]: p.get("labels") or {} for p in label_patches}
        using = set()
        for node in nodes:
            name = str(_meta(node).get("name"))
            labels = {**(_meta(node).get("labels") or {}), **patched.get(name, {})}
            if (
                labels.get(_sharing.CONFIG_LABEL) in changed
                and labels.get(_sharing.CONFIG_LABEL) != _sharing.EXCLUSIVE_ENTRY
            ):
                using.add(name)
        stale = sorted(str(_meta(p).get("uid")) for p in dp_pods if (p.get("spec") or {}).get("nodeName") in using)
    else:
        try:
            stale = json.loads(((_meta(before or {}).get("annotations") or {}).get(STALE_ANNOTATION)) or "[]")
        except ValueError:
            stale = []
        stale = sorted(str(u) for u in stale) if isinstance(stale, list) else []
    chosen = [p for p in dp_pods if str(_meta(p).get("uid")) in stale]
    return {
        "changed_entries": changed,
        "annotation": json.dumps(stale),
        "pods": sorted(str(_meta(p).get("name")) for p in chosen),
        "nodes": sorted({str((p.get("spec") or {}).get("nodeName")) for p in chosen}),
    }
