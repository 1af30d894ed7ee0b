# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""GPU cluster status: a constant number of list calls (``collect``), then pure functions that turn the
listed objects (plain dicts as the API server returns them) into a per-node view (``build_view``) and the
module result (``result``). The views of the listed objects are in ``_cluster_views``, the waits in
``_cluster_wait``, the label selectors in ``_label_selectors``; the diagnosis rules live in ``_diagnosis``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _node as _sharing_node
from ansible_collections.gpuops.platform.plugins.module_utils.status import (
    _diag_batch,
    _diagnosis,
    _network_status,
    _readiness,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._cluster_views import build_view
from ansible_collections.gpuops.platform.plugins.module_utils.status._cluster_wait import (
    not_ready,
    sriov_not_ready,
    wait_failure_message,
    wait_targets,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._label_selectors import parse_selector

CLUSTER_POLICY = ("nvidia.com", "v1", "clusterpolicies")
DEVICE_CONFIG = ("amd.com", "v1alpha1", "deviceconfigs")


# -- collection: the only function that talks to the API server ---------------------------------------------
def collect(
    reader: Any, operator_namespace: str, amd_namespace: str, network: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """List everything the view needs: nodes, pods and DaemonSets of the operator namespace, pods of the AMD
    namespace, ClusterPolicies and DeviceConfigs. Six requests (five when both namespaces are the same),
    whatever the number of nodes; with ``network`` (``_network_status.settings``) four more."""
    raw = {
        "nodes": reader.nodes(),
        "pods": reader.pods(operator_namespace),
        "daemonsets": reader.daemonsets(operator_namespace),
        "cluster_policies": reader.cluster_custom(*CLUSTER_POLICY),
        "device_configs": reader.namespaced_custom(DEVICE_CONFIG[0], DEVICE_CONFIG[1], amd_namespace, DEVICE_CONFIG[2]),
    }
    raw["amd_pods"] = reader.pods(amd_namespace) if amd_namespace != operator_namespace else []
    if network is not None:
        raw.update(_network_status.collect(reader, network, operator_namespace, raw["pods"]))
    return raw


def collect_sharing(reader: Any, raw: Mapping[str, Any], operator_namespace: str) -> dict[str, Any]:
    """For the SHARING column: the NVIDIA DRA driver's ResourceSlices (none when ``resource.k8s.io/v1`` is not
    served) and, when the reconciled ClusterPolicy names a device-plugin ConfigMap, the ConfigMaps of
    ``operator_namespace``. One or two list requests."""
    name = _sharing_node.policy_config(raw["cluster_policies"])[0]
    out = {"resource_slices": reader.objects("resource.k8s.io", "v1", "resourceslices") or []}
    if name:
        out["configmaps"] = reader.core("configmaps", operator_namespace) or []
    return out


def gather(reader: Any, params: Mapping[str, Any], waiter: Any = None) -> dict[str, Any]:
    """collect + build_view (+ wait, when ``params['wait']`` is set: collect again until the objects and
    nodes it names are ready or ``waiter`` gives up) + diagnose: the module result (without ``changed``).
    With a wait the result has ``wait`` (ready, waited, elapsed, probes, not_ready)."""
    selector = parse_selector(params.get("node_selector"))
    wait = params.get("wait")
    targets = wait_targets(wait, params) if wait else []
    waiter = waiter or _readiness.NullWaiter()

    def probe() -> tuple[dict[str, Any], list[_readiness.NotReady]]:
        raw = collect(reader, params["operator_namespace"], params["amd_namespace"], _network_status.settings(params))
        if params.get("sharing"):
            raw.update(collect_sharing(reader, raw, params["operator_namespace"]))
        if params.get("workloads"):
            raw["all_pods"] = reader.core("pods") or []
        if params.get("batch"):
            raw["batch"] = _diag_batch.collect(reader)
        view = build_view(raw, params, selector)
        if not wait:
            return view, []
        unready = not_ready(reader, raw, view, params, targets, wait.get("nodes", True))
        return view, unready + sriov_not_ready(reader, raw, params, wait)

    outcome = waiter.wait(probe)
    view = outcome.snapshot
    findings = _diagnosis.diagnose(view)
    out = result(view, findings, api_requests=reader.requests)
    if not params.get("return_nodes", True):
        out["nodes"] = []  # read and diagnosed; not carried back (a wait that reads only its outcome)
    if "gpu_workloads" in view:
        out["gpu_workloads"] = view["gpu_workloads"]
    if "batch" in view:
        out["queues"] = _diag_batch.queue_rows(view)
    if wait:
        out["wait"] = {
            "ready": outcome.ready,
            "waited": outcome.waited,
            "elapsed": round(outcome.elapsed, 1),
            "probes": outcome.probes,
            "not_ready": [n.as_dict() for n in outcome.not_ready],
        }
        if not outcome.ready:
            out["wait"]["msg"] = wait_failure_message(outcome, waiter.timeout, findings)
    return out


# -- result -----------------------------------------------------------------------------------------------
_POD_KEYS = ("name", "component", "phase", "state", "ready", "restarts", "container", "init_step", "reason", "message")


def _public_pod(pod: Mapping[str, Any], with_node: bool = False) -> dict[str, Any]:
    out = {k: pod[k] for k in _POD_KEYS}
    if with_node:
        out = {"node": pod["node"], "namespace": pod["namespace"], **out}
    return out


def summarize(view: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    nodes = view["nodes"]
    totals: dict[str, int]
    totals = {}
    for node in nodes:
        for key, value in node["allocatable"].items():
            if isinstance(value, int):
                totals[key] = totals.get(key, 0) + value
    cps = view["cluster_policies"]
    dcs = view["device_configs"]
    active = next((c for c in cps["objects"] if c["active"]), None)
    return {
        "nodes_total": len(view["node_labels"]),
        "gpu_nodes": len(nodes),
        "gpu_nodes_by_vendor": {
            v: sum(1 for n in nodes if n["vendor"] == v) for v in sorted({n["vendor"] or "unknown" for n in nodes})
        },
        "gpu_nodes_ready": sum(1 for n in nodes if n["ready"] and n["gpus"] > 0),
        "allocatable": totals,
        "operand_pods": len(view["operand_pods"]),
        "operand_pods_ready": sum(1 for p in view["operand_pods"] if p["ready"]),
        "cluster_policy": (active or {}).get("state") if cps["installed"] else "not installed",
        "cluster_policies": len(cps["objects"]),
        "device_config": ("installed" if dcs["objects"] else "none") if dcs["installed"] else "not installed",
        "device_configs": len(dcs["objects"]),
        "findings": {s: sum(1 for f in findings if f["severity"] == s) for s in _diagnosis.SEVERITIES},
        "healthy": not any(f["severity"] == "error" for f in findings),
    }


def result(view: Mapping[str, Any], findings: list[dict[str, Any]], api_requests: Any) -> dict[str, Any]:
    nodes = []
    for node in view["nodes"]:
        node = dict(node)
        node["operands"] = [_public_pod(p) for p in node["operands"]]
        nodes.append(node)
    out = {
        "nodes": nodes,
        "operator": {
            "namespace": view["operator_namespace"],
            "pods": [_public_pod(p, with_node=True) for p in view["operator_pods"]],
            "daemonsets": [view["daemonsets"][k] for k in sorted(view["daemonsets"])],
        },
        "cluster_policies": view["cluster_policies"],
        "device_configs": view["device_configs"],
        "summary": summarize(view, findings),
        "diagnosis": findings,
        "api_requests": api_requests,
    }
    if view.get("network") is not None:
        out["network"] = _network_status.result(view["network"])
    return out
