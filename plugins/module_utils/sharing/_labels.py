# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The node labels the gpu_sharing role owns (a merge patch per node, only its own labels removed), the MIG changes
under GPU pods, and the device-plugin restart after an entry's content changes. Pure functions, no I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _pools
from ansible_collections.gpuops.platform.plugins.module_utils.sharing._pools import DEPLOY_DEVICE_PLUGIN, _finding

DRA_NODE_LABEL = "gpuops.platform/sharing-dra"  # the DRA kubelet plugin's nodeSelector (any number of DRA pools)
OWNER_ANNOTATION = "gpuops.platform/sharing-labels"  # the labels the gpu_sharing role set on a node (JSON list)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def wanted_labels(pool: Mapping[str, Any]) -> dict[str, str]:
    """The labels a node of ``pool`` carries: the device-plugin config entry (time-slicing, MPS), the MIG config
    (MIG), the device plugin off (DRA: never two allocators for the same GPUs) or the KAI fraction label (whole GPUs
    that KAI Scheduler shares; fractional pods select the label)."""
    model = pool.get("model")
    if model in ("time_slicing", "mps"):
        return {_pools.CONFIG_LABEL: str(pool["name"])}
    if model == "mig":
        return {_pools.MIG_CONFIG_LABEL: str(pool["mig_config"])}
    if model == "dra":
        return {DEPLOY_DEVICE_PLUGIN: "false", DRA_NODE_LABEL: "true"}
    if model == "kai_fraction":
        return {_pools.KAI_FRACTION_LABEL: "true"}
    return {}


def mig_change_nodes(plan: Sequence[Mapping[str, Any]]) -> list[str]:
    """The nodes whose label patch sets a new nvidia.com/mig.config (a MIG layout change), sorted: only the pods
    there matter to :func:`mig_change_findings`."""
    return sorted(p["name"] for p in plan if _pools.MIG_CONFIG_LABEL in p["labels"])


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
            "Node",
            patch["name"],
            [
                f"{_pools.MIG_CONFIG_LABEL} -> {patch['labels'][_pools.MIG_CONFIG_LABEL]}",
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
            if key == _pools.MIG_CONFIG_LABEL:
                if labels.get(key) != _pools.MIG_DISABLED:
                    patch[key] = _pools.MIG_DISABLED
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
            if labels.get(_pools.CONFIG_LABEL) in changed and labels.get(_pools.CONFIG_LABEL) != _pools.EXCLUSIVE_ENTRY:
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
