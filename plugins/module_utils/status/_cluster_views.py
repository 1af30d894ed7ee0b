# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""GPU cluster status: the objects the status reads (nodes, pods, DaemonSets, ClusterPolicies, DeviceConfigs) as
plain views - a node's GPUs, vendor and sharing model, a pod's component and failing step, a DaemonSet's rollout.
Pure functions (no I/O).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _node as _sharing_node
from ansible_collections.gpuops.platform.plugins.module_utils.status import (
    _diag_batch,
    _diag_scheduling,
    _network_status,
    _workloads,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._gpu_labels import (
    AMD_GPU,
    AMD_LABELS,
    AMD_OPERATOR_LABELS,
    GPU_PRESENT,
    NFD,
    NVIDIA_GPU,
    NVIDIA_NFD_LABELS,
    OPERATOR_LABELS,
    VENDORS,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._label_selectors import selector_matches

# gpuops.platform/sharing-: the gpu_sharing role's node labels (a DRA pool's node has no device plugin on purpose)
_LABEL_PREFIXES = (
    "nvidia.com/",
    "amd.com/",
    "beta.amd.com/",
    f"{NFD}/pci-10de",
    f"{NFD}/pci-03",
    f"{NFD}/pci-1002",
    "gpuops.platform/sharing-",
)
_GPU_RESOURCE = re.compile(r"^(nvidia\.com/gpu(\.shared)?|nvidia\.com/mig-.+|amd\.com/gpu.*)\Z")


# -- objects -> plain views -------------------------------------------------------------------------------
def gpu_vendor(labels: Mapping[str, Any], allocatable: Mapping[str, Any] | None = None) -> str | None:
    """'nvidia', 'amd' or None, from the operator/NFD labels or advertised resources."""
    allocatable = allocatable or {}
    if labels.get(GPU_PRESENT) == "true" or any(labels.get(k) == "true" for k in NVIDIA_NFD_LABELS):
        return "nvidia"
    if any(k == NVIDIA_GPU or k.startswith("nvidia.com/mig-") for k in allocatable):
        return "nvidia"
    if any(labels.get(k) == "true" for k in AMD_LABELS) or AMD_GPU in allocatable:
        return "amd"
    return None


def _quantity(value: Any) -> int | str:
    try:
        return int(str(value))
    except ValueError:
        return str(value)


def gpu_resources(resources: Mapping[str, Any] | None) -> dict[str, int | str]:
    return {k: _quantity(v) for k, v in sorted((resources or {}).items()) if _GPU_RESOURCE.match(k)}


def condition(conditions: Iterable[Mapping[str, Any]] | None, ctype: str) -> Any:
    return next((c for c in conditions or () if c.get("type") == ctype), None)


def pod_node(pod: Mapping[str, Any]) -> str | None:
    """The node a pod runs on or, for a DaemonSet pod not yet scheduled, the node its affinity binds it to
    (matchFields metadata.name)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        or {}
    ).get("nodeSelectorTerms") or ()
    for term in required:
        for field in term.get("matchFields") or ():
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and field.get("values"):
                return field["values"][0]
    return None


def pod_component(pod: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(component, owner kind): the owning DaemonSet's name, else the app label."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == "DaemonSet":
            return ref.get("name"), "DaemonSet"
    labels = meta.get("labels") or {}
    kind = (meta.get("ownerReferences") or [{}])[0].get("kind")
    return labels.get("app") or labels.get("app.kubernetes.io/name") or meta.get("name"), kind


def _waiting(cstatus: Mapping[str, Any] | None) -> Any:
    return ((cstatus or {}).get("state") or {}).get("waiting")


def _terminated_ok(cstatus: Any) -> bool:
    term: Any = ((cstatus or {}).get("state") or {}).get("terminated")
    return bool(term) and term.get("exitCode") == 0


def failing_init_step(pod: Mapping[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """The first init container not terminated successfully, with its status (None when all are done)."""
    spec_names = [c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or ()]
    statuses = {c.get("name"): c for c in (pod.get("status") or {}).get("initContainerStatuses") or ()}
    for name in spec_names or list(statuses):
        if not _terminated_ok(statuses.get(name)):
            return name, statuses.get(name)
    return None, None


def _describe_container(cstatus: Mapping[str, Any] | None) -> str:
    if not cstatus:
        return "not started"
    state = cstatus.get("state") or {}
    for key in ("waiting", "running", "terminated"):
        if key in state and state[key] is not None:
            s = state[key]
            bits = [key]
            if s.get("reason"):
                bits.append(s["reason"])
            if key == "terminated":
                bits.append(f"exit {s.get('exitCode')}")
            if s.get("message"):
                bits.append(str(s["message"])[:200])
            return " ".join(bits)
    return "unknown"


def pod_view(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    component, owner_kind = pod_component(pod)
    phase = status.get("phase") or "Unknown"
    containers = status.get("containerStatuses") or []
    inits = status.get("initContainerStatuses") or []
    ready_cond = condition(status.get("conditions"), "Ready")
    sched_cond = condition(status.get("conditions"), "PodScheduled")
    ready = bool(ready_cond) and ready_cond.get("status") == "True" and phase == "Running"
    restarts = sum(int(c.get("restartCount") or 0) for c in containers + inits)
    crash = next(
        (c for c in inits + containers if (_waiting(c) or {}).get("reason") == "CrashLoopBackOff"),
        None,
    )
    init_step, init_status = failing_init_step(pod) if phase == "Pending" else (None, None)
    scheduled = bool(spec.get("nodeName")) and not (sched_cond and sched_cond.get("status") == "False")
    reason, message, container = status.get("reason"), status.get("message"), None
    if meta.get("deletionTimestamp"):
        state = "Terminating"
    elif crash is not None and int(crash.get("restartCount") or 0) > 0:
        state, container = "CrashLoopBackOff", crash.get("name")
        reason, message = "CrashLoopBackOff", _describe_container(crash)
        last = (crash.get("lastState") or {}).get("terminated")
        if last:
            message = f"last exit {last.get('exitCode')} {last.get('reason') or ''}".strip()
            if last.get("message"):
                message += f": {str(last['message'])[:300]}"
    elif phase == "Pending" and not scheduled:
        state = "Unschedulable" if sched_cond and sched_cond.get("status") == "False" else "Pending"
        if sched_cond:
            reason, message = sched_cond.get("reason") or reason, sched_cond.get("message") or message
    elif phase == "Pending" and init_step:
        state, container = "Init", init_step
        waiting = _waiting(init_status) or {}
        reason, message = waiting.get("reason") or reason, _describe_container(init_status)
    elif phase == "Pending":
        waiting = next((_waiting(c) for c in containers if _waiting(c)), None) or {}
        state = waiting.get("reason") or "Pending"
        reason, message = waiting.get("reason") or reason, waiting.get("message") or message
    elif phase == "Running":
        state = "Running" if ready else "NotReady"
        if not ready:
            waiting = next((c for c in containers if not c.get("ready")), None)
            container = (waiting or {}).get("name")
            message = _describe_container(waiting) if waiting else message
    else:
        state = phase
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "node": pod_node(pod),
        "component": component,
        "owner_kind": owner_kind,
        "phase": phase,
        "state": state,
        "ready": ready,
        "restarts": restarts,
        "scheduled": scheduled,
        "container": container,
        "init_step": init_step,
        "reason": reason,
        "message": message,
        "node_selector": dict(spec.get("nodeSelector") or {}),
        "labels": dict(meta.get("labels") or {}),
    }


def node_view(
    node: Mapping[str, Any], vendor: str | None, tolerations: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    meta, status, spec = node.get("metadata") or {}, node.get("status") or {}, node.get("spec") or {}
    labels = meta.get("labels") or {}
    ready = condition(status.get("conditions"), "Ready") or {}
    info = status.get("nodeInfo") or {}
    alloc = gpu_resources(status.get("allocatable"))
    return {
        "name": meta.get("name"),
        "vendor": vendor,
        "product": labels.get("nvidia.com/gpu.product")
        or labels.get("amd.com/gpu.product-name")
        or labels.get("beta.amd.com/gpu.product-name"),
        "ready": ready.get("status") == "True",
        "ready_reason": ready.get("reason"),
        "ready_message": ready.get("message"),
        "unschedulable": bool(spec.get("unschedulable")),
        "scheduling": _diag_scheduling.node_scheduling(node, tolerations if vendor == "nvidia" else ()),
        "problems": [
            {k: c.get(k) for k in ("type", "reason", "message")}
            for c in status.get("conditions") or ()
            if c.get("type") != "Ready" and c.get("status") == "True"
        ],
        "kernel": info.get("kernelVersion"),
        "kubelet_version": info.get("kubeletVersion"),
        "labels": {k: v for k, v in sorted(labels.items()) if k.startswith(_LABEL_PREFIXES) or k == f"{NFD}/amd-gpu"},
        "allocatable": alloc,
        "capacity": gpu_resources(status.get("capacity")),
        "gpus": sum(v for k, v in alloc.items() if isinstance(v, int) and k in (NVIDIA_GPU, AMD_GPU))
        + sum(v for k, v in alloc.items() if isinstance(v, int) and k.startswith("nvidia.com/mig-")),
        "operands": [],
        "host_facts": False,
    }


def daemonset_view(ds: Mapping[str, Any]) -> dict[str, Any]:
    meta, spec, status = ds.get("metadata") or {}, ds.get("spec") or {}, ds.get("status") or {}
    tmpl = (spec.get("template") or {}).get("spec") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "node_selector": dict(tmpl.get("nodeSelector") or {}),
        "desired": status.get("desiredNumberScheduled", 0),
        "ready": status.get("numberReady", 0),
        "available": status.get("numberAvailable", 0),
        "misscheduled": status.get("numberMisscheduled", 0),
    }


def _conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {k: c.get(k) for k in ("type", "status", "reason", "message", "lastTransitionTime")}
        for c in ((obj.get("status") or {}).get("conditions") or ())
    ]


def cluster_policies_view(items: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """Installed flag, the items (name, state, conditions, created, active) and the active name: the
    operator reconciles the oldest ClusterPolicy (creationTimestamp, then name) and marks the others ignored."""
    if items is None:
        return {"installed": False, "active": None, "objects": []}
    ordered = sorted(items, key=lambda o: ((o["metadata"].get("creationTimestamp") or ""), o["metadata"]["name"]))
    active = ordered[0]["metadata"]["name"] if ordered else None
    out = []
    for obj in ordered:
        status = obj.get("status") or {}
        out.append(
            {
                "name": obj["metadata"]["name"],
                "state": status.get("state"),
                "namespace": status.get("namespace"),
                "created": obj["metadata"].get("creationTimestamp"),
                "active": obj["metadata"]["name"] == active,
                "conditions": _conditions(obj),
                "spec": obj.get("spec") or {},
            }
        )
    return {"installed": True, "active": active, "objects": out}


def device_configs_view(items: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    if items is None:
        return {"installed": False, "objects": []}
    out = []
    for obj in sorted(items, key=lambda o: o["metadata"]["name"]):
        status = obj.get("status") or {}
        out.append(
            {
                "name": obj["metadata"]["name"],
                "namespace": obj["metadata"].get("namespace"),
                "selector": dict((obj.get("spec") or {}).get("selector") or {}),
                "device_plugin": dict(status.get("devicePlugin") or {}),
                "driver": dict(status.get("driver") or {}),
                "metrics_exporter": dict(status.get("metricsExporter") or {}),
                "node_module_status": dict(status.get("nodeModuleStatus") or {}),
                "conditions": _conditions(obj),
                "spec": obj.get("spec") or {},
            }
        )
    return {"installed": True, "objects": out}


def _has_labels(labels: Mapping[str, Any], pairs: Iterable[tuple[str, str]]) -> bool:
    return any(labels.get(k) == v for k, v in pairs)


def match_host_facts(host_facts: Mapping[str, Any] | None, node_names: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """node name -> gpuops_host facts. Keys match a node by name or by short name (first DNS label); a value
    may be the facts themselves or a dict holding them under ``gpuops_host`` (or ``ansible_facts``)."""
    if not host_facts:
        return {}
    by_short: dict[str, Any]
    by_short = {}
    for key, facts in host_facts.items():
        if isinstance(facts, dict):
            facts = (facts.get("ansible_facts") or facts).get("gpuops_host") or facts
        by_short.setdefault(str(key), facts)
        by_short.setdefault(str(key).split(".", maxsplit=1)[0], facts)
    out = {}
    for name in node_names:
        facts = by_short.get(name, by_short.get(name.split(".", maxsplit=1)[0]))
        if isinstance(facts, dict):
            out[name] = facts
    return out


def sharing_of(raw: Mapping[str, Any], gpu_nodes: Mapping[Any, dict[str, Any]]) -> None:
    """Set ``sharing`` (``_sharing_node.node_sharing``) on the NVIDIA nodes of ``gpu_nodes``."""
    name, default = _sharing_node.policy_config(raw["cluster_policies"])
    configs = None
    if name:
        cm = next((c for c in raw.get("configmaps") or () if (c.get("metadata") or {}).get("name") == name), None)
        configs = dict((cm or {}).get("data") or {})
    devices = _sharing_node.slice_devices(raw["resource_slices"])
    for node in gpu_nodes.values():
        if node["vendor"] == "nvidia" or node["name"] in devices:
            node["sharing"] = _sharing_node.node_sharing(
                node["labels"], node["allocatable"], configs, default, devices.get(node["name"])
            )


def build_view(
    raw: Mapping[str, Any], params: Mapping[str, Any], selector: list[tuple[str, str, set[str]]] | None = None
) -> dict[str, Any]:
    """Everything the diagnosis rules and the result need, from the listed objects."""
    all_labels: dict[Any, Any]
    gpu_nodes: dict[Any, dict[str, Any]]
    all_labels, gpu_nodes = {}, {}
    vendors = set(params["vendor"]) if params.get("vendor") else None
    tolerations = _diag_scheduling.operand_tolerations(raw["daemonsets"])
    for node in raw["nodes"]:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        all_labels[meta.get("name")] = labels
        vendor = gpu_vendor(labels, (node.get("status") or {}).get("allocatable"))
        selected = selector_matches(selector, labels) if selector is not None else vendor is not None
        if selected and vendors is not None and vendor not in vendors:
            selected = False  # another vendor's node: judged by its own role, or when no vendor is given
        if selected:
            gpu_nodes[meta.get("name")] = node_view(node, vendor, tolerations)
    operator_pods, operand_pods = [], []
    for pod, vendor in [(p, "nvidia") for p in raw["pods"]] + [(p, "amd") for p in raw.get("amd_pods") or ()]:
        if vendors is not None and vendor not in vendors:
            continue
        view = pod_view(pod)
        view["vendor"] = vendor
        labels = view["labels"]
        if view["owner_kind"] != "DaemonSet" and (
            _has_labels(labels, OPERATOR_LABELS) or (vendor == "amd" and _has_labels(labels, AMD_OPERATOR_LABELS))
        ):
            operator_pods.append(view)
        elif view["owner_kind"] == "DaemonSet" or (view["owner_kind"] is None and "app" in labels and view["node"]):
            # DaemonSet pods, and bare pods labelled app=<operand> (as the operands label theirs)
            operand_pods.append(view)
            if view["node"] in gpu_nodes:
                gpu_nodes[view["node"]]["operands"].append(view)
    pods_by_node: dict[str, list[dict[str, Any]]]
    pods_by_node = {}
    for pod in operand_pods:
        pods_by_node.setdefault(pod["node"], []).append(pod)
    for node in gpu_nodes.values():
        node["operands"].sort(key=lambda p: (p["component"] or "", p["name"]))
    net = _network_status.settings(params)
    network = None
    if net is not None:
        network = _network_status.build(
            raw,
            net,
            raw["nodes"],
            lambda name, labels: selector_matches(selector, labels) if selector is not None else True,
            pod_view,
        )
        network["host_facts"] = match_host_facts(params.get("host_facts"), [n["name"] for n in network["nodes"]])
    facts = match_host_facts(params.get("host_facts"), list(gpu_nodes))
    for name in facts:
        gpu_nodes[name]["host_facts"] = True
    if "resource_slices" in raw:
        sharing_of(raw, gpu_nodes)
    view = {
        "operator_namespace": params["operator_namespace"],
        "amd_namespace": params["amd_namespace"],
        "nodes": [gpu_nodes[n] for n in sorted(gpu_nodes)],
        "node_labels": all_labels,
        "node_ready": {
            (n.get("metadata") or {}).get("name"): (
                condition((n.get("status") or {}).get("conditions"), "Ready") or {}
            ).get("status")
            == "True"
            for n in raw["nodes"]
        },
        "kubelet_versions": sorted(
            {((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or "unknown" for n in raw["nodes"]}
        ),
        "operand_pods": operand_pods,
        "pods_by_node": pods_by_node,
        "node_index": gpu_nodes,
        "operator_pods": operator_pods,
        "daemonsets": {d["name"]: d for d in (daemonset_view(ds) for ds in raw["daemonsets"])},
        "cluster_policies": cluster_policies_view(raw["cluster_policies"]),
        "device_configs": device_configs_view(raw["device_configs"]),
        "host_facts": facts,
        "vendors": sorted(vendors) if vendors is not None else list(VENDORS),
        "network": network,
    }
    if "all_pods" in raw:
        skip = {params["operator_namespace"], params["amd_namespace"]}
        view["gpu_workloads"] = _workloads.gpu_workloads(raw["all_pods"], skip)
    if "batch" in raw:
        view["batch"] = _diag_batch.view(raw["batch"], raw["nodes"])
    return view
