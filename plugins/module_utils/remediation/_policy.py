# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The remediation's decisions as pure functions of what was read: which node is a GPU node of the platform, the
marks a quarantine puts on a node (and takes off when it returns), the circuit breaker's arithmetic, what the drain
does with each pod, and the next step of the repair ladder."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.remediation._event import parse_time
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_views
from ansible_collections.gpuops.platform.plugins.module_utils.status._remediation_marks import (
    ANNOTATIONS,
    BY,
    LABEL,
    PREFIX,
    gpu_words,
    taint_text,
)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)  # noqa: UP017 - modules run on Python < 3.11 too


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- which nodes --------------------------------------------------------------------------------------------------
def is_gpu_node(node: Mapping[str, Any]) -> bool:
    """A GPU node of the platform, as the inventory plugin and the cluster status tell one (vendor labels or
    advertised GPUs)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return _cluster_views.gpu_vendor(labels, alloc) is not None


def remediation_state(node: Mapping[str, Any]) -> str | None:
    return ((node.get("metadata") or {}).get("labels") or {}).get(LABEL)


def quarantined_view(nodes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The nodes gpuops marked, with why: {node, state, alert, fault_class, gpu, since, at, cordoned, break_fix}."""
    out = []
    for node in nodes:
        meta = node.get("metadata") or {}
        state = (meta.get("labels") or {}).get(LABEL)
        if not state:
            continue
        ann = meta.get("annotations") or {}
        gpu = {
            "uuid": ann.get(ANNOTATIONS["gpu_uuid"]),
            "pci_bus_id": ann.get(ANNOTATIONS["gpu_pci_bus_id"]),
            "index": ann.get(ANNOTATIONS["gpu_index"]),
        }
        out.append(
            {
                "node": meta.get("name"),
                "state": state,
                "alert": ann.get(ANNOTATIONS["alert"]),
                "fault_class": ann.get(ANNOTATIONS["fault_class"]),
                "gpu": gpu_words(gpu),
                "since": ann.get(ANNOTATIONS["fault_since"]),
                "at": ann.get(ANNOTATIONS["at"]),
                "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
                "break_fix": ann.get(ANNOTATIONS["break_fix"]),
            }
        )
    return sorted(out, key=lambda r: str(r["node"]))


# -- the node's marks ---------------------------------------------------------------------------------------------
def desired_marks(
    node: Mapping[str, Any], event: Mapping[str, Any], state: str, taint: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """What the node should carry after marking it ``state`` (quarantined, notified or break-fix) for ``event``:
    {labels, annotations (None deletes), unschedulable, taints}. The first fault's time of action and whether gpuops
    cordoned it are kept, so a repeated event changes nothing; a node a person cordoned is not claimed."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    ann = dict(meta.get("annotations") or {})
    already = remediation_state(node)
    gpu = event["gpu"]
    marks: dict[str, Any] = {
        ANNOTATIONS["alert"]: event["alert"],
        ANNOTATIONS["fault_class"]: event["fault_class"],
        ANNOTATIONS["severity"]: event["severity"],
        ANNOTATIONS["gpu_uuid"]: gpu.get("uuid"),
        ANNOTATIONS["gpu_pci_bus_id"]: gpu.get("pci_bus_id"),
        ANNOTATIONS["gpu_index"]: None if gpu.get("index") is None else str(gpu["index"]),
        ANNOTATIONS["fault_since"]: event["starts_at"],
        ANNOTATIONS["fingerprint"]: event["fingerprint"],
        ANNOTATIONS["by"]: BY,
        ANNOTATIONS["at"]: ann.get(ANNOTATIONS["at"]) if already else stamp(now),
    }
    if (already == "break-fix" and state != "break-fix") or (already == "quarantined" and state == "notified"):
        state = already  # a later or lesser alert does not lift a quarantine or take a node back from break-fix
    unschedulable = bool(spec.get("unschedulable"))
    taints = [dict(t) for t in spec.get("taints") or []]
    if state in ("quarantined", "break-fix"):
        cordoned_by_us = ann.get(ANNOTATIONS["cordoned"]) == "true" or not unschedulable
        marks[ANNOTATIONS["cordoned"]] = "true" if cordoned_by_us else None
        unschedulable = True
        if taint:
            if not any(t.get("key") == taint["key"] and t.get("effect") == taint["effect"] for t in taints):
                taints.append({k: v for k, v in taint.items() if v not in (None, "")})
            marks[ANNOTATIONS["taint"]] = taint_text(taint)
    if state == "break-fix":
        marks[ANNOTATIONS["break_fix"]] = ann.get(ANNOTATIONS["break_fix"]) or stamp(now)
    return {"labels": {LABEL: state}, "annotations": marks, "unschedulable": unschedulable, "taints": taints}


def returned_marks(node: Mapping[str, Any]) -> dict[str, Any]:
    """The node as it was before gpuops marked it: gpuops' label and annotations gone, uncordoned only when gpuops
    cordoned it, gpuops' taint removed."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    ann = meta.get("annotations") or {}
    ours = ann.get(ANNOTATIONS["taint"])
    taints = [dict(t) for t in spec.get("taints") or [] if not ours or taint_text(t) != ours]
    unschedulable = bool(spec.get("unschedulable")) and ann.get(ANNOTATIONS["cordoned"]) != "true"
    return {
        "labels": {LABEL: None},
        "annotations": {k: None for k in ann if k.startswith(PREFIX)},
        "unschedulable": unschedulable,
        "taints": taints,
    }


def differences(node: Mapping[str, Any], marks: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, current, desired) for every mark that differs: the changes to make, the diff to show."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    out: list[tuple[str, Any, Any]] = []
    for kind in ("labels", "annotations"):
        current = meta.get(kind) or {}
        for key, value in sorted(marks[kind].items()):
            if current.get(key) != value:
                out.append((f"metadata.{kind}[{key}]", current.get(key), value))
    if bool(spec.get("unschedulable")) != marks["unschedulable"]:
        out.append(("spec.unschedulable", bool(spec.get("unschedulable")), marks["unschedulable"]))
    if (spec.get("taints") or []) != marks["taints"]:
        out.append(("spec.taints", spec.get("taints") or [], marks["taints"]))
    return out


def node_patch(node: Mapping[str, Any], diffs: Sequence[tuple[str, Any, Any]]) -> dict[str, Any]:
    """A merge patch of the differences, carrying the resourceVersion read (the API server refuses it with 409 when
    the node changed since)."""
    meta: dict[str, Any] = {"resourceVersion": (node.get("metadata") or {}).get("resourceVersion")}
    spec: dict[str, Any] = {}
    for field, _current, desired in diffs:
        if field.startswith("metadata."):
            kind, key = field[len("metadata.") :].split("[", 1)
            meta.setdefault(kind, {})[key[:-1]] = desired
        else:
            spec[field.split(".", 1)[1]] = desired
    return {"metadata": meta, **({"spec": spec} if spec else {})}


def diff_view(diffs: Sequence[tuple[str, Any, Any]]) -> dict[str, Any]:
    return {
        "before": {f: json.dumps(c, sort_keys=True) if isinstance(c, list) else c for f, c, _d in diffs},
        "after": {f: json.dumps(d, sort_keys=True) if isinstance(d, list) else d for f, _c, d in diffs},
    }


# -- the circuit breaker ------------------------------------------------------------------------------------------
DEFAULT_BREAKER = {"max_nodes": 2, "max_percent": 10, "max_actions": 3, "window": 600}


def node_limit(limits: Mapping[str, Any], gpu_nodes: int) -> int | None:
    """How many GPU nodes may be quarantined at once: the smaller of max_nodes and max_percent of the GPU nodes
    (rounded down, at least 1, so one faulty node of a small fleet can be taken out); None when both are 0 (off)."""
    bounds = []
    if limits.get("max_nodes"):
        bounds.append(int(limits["max_nodes"]))
    if limits.get("max_percent"):
        bounds.append(max(1, math.floor(gpu_nodes * float(limits["max_percent"]) / 100.0)))
    return min(bounds) if bounds else None


def recent(actions: Iterable[Mapping[str, Any]], now: datetime, window: int) -> list[dict[str, Any]]:
    """The actions of the last ``window`` seconds (unreadable times are dropped)."""
    out = []
    for action in actions:
        try:
            at = parse_time(str(action.get("at")))
        except ValueError:
            continue
        if now - at < timedelta(seconds=window):
            out.append(dict(action))
    return out


def breaker_decision(
    limits: Mapping[str, Any],
    gpu_nodes: int,
    quarantined: Iterable[str],
    actions: Iterable[Mapping[str, Any]],
    node: str,
    now: datetime,
    tripped: str | None = None,
) -> dict[str, Any]:
    """May ``node`` be quarantined? {allowed, reason, quarantined, limit, actions, max_actions, window}. A node that is
    already quarantined is always allowed (nothing new is taken out); a tripped breaker refuses every new node until a
    person closes it."""
    held = sorted(set(quarantined))
    limit = node_limit(limits, gpu_nodes)
    window = int(limits.get("window") or 0)
    in_window = recent(actions, now, window) if window else list(actions)
    max_actions = int(limits.get("max_actions") or 0) or None
    out: dict[str, Any] = {
        "allowed": True,
        "reason": "",
        "gpu_nodes": gpu_nodes,
        "quarantined": held,
        "limit": limit,
        "actions": len(in_window),
        "max_actions": max_actions,
        "window": window,
    }
    if node in held:
        out["reason"] = f"node {node} is already quarantined"
        return out
    if tripped:
        out.update(allowed=False, reason=f"the circuit breaker is open since an earlier refusal: {tripped}")
    elif limit is not None and len(held) + 1 > limit:
        out.update(
            allowed=False,
            reason=f"{len(held)} of {gpu_nodes} GPU nodes are quarantined already ({', '.join(held)}); the limit is "
            f"{limit} (max_nodes {limits.get('max_nodes') or 'off'}, max_percent {limits.get('max_percent') or 'off'})",
        )
    elif max_actions is not None and len(in_window) + 1 > max_actions:
        out.update(
            allowed=False,
            reason=f"{len(in_window)} quarantines in the last {window} s "
            f"({', '.join(str(a.get('node')) for a in in_window)}); the limit is {max_actions} per window",
        )
    return out


# -- the drain ------------------------------------------------------------------------------------------------------
DRAIN_POLICIES = ("evict", "wait", "leave")


def pod_decision(pod: Mapping[str, Any], policies: Mapping[str, str], default: str) -> tuple[str, str]:
    """What the drain does with a pod on the node: (evict | wait | leave | done, why). DaemonSet and static (mirror)
    pods are left (they belong to the node); finished pods are done; otherwise the namespace's policy."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return "done", f"finished ({phase})"
    if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
        return "leave", "DaemonSet pod"
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return "leave", "static pod"
    ns = meta.get("namespace") or ""
    if ns in policies:
        return policies[ns], f"namespace {ns}: {policies[ns]}"
    return default, f"default: {default}"


def drain_plan(pods: Iterable[Mapping[str, Any]], policies: Mapping[str, str], default: str) -> list[dict[str, Any]]:
    """Per pod {pod (ns/name), decision, why, terminating}, sorted."""
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        decision, why = pod_decision(pod, policies, default)
        out.append(
            {
                "pod": f"{meta.get('namespace')}/{meta.get('name')}",
                "decision": decision,
                "why": why,
                "terminating": meta.get("deletionTimestamp") is not None,
            }
        )
    return sorted(out, key=lambda r: r["pod"])


def blocking_pdbs(pod: Mapping[str, Any], pdbs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The PodDisruptionBudgets of the pod's namespace whose selector (matchLabels and matchExpressions) selects it."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    out = []
    for pdb in pdbs:
        pmeta = pdb.get("metadata") or {}
        if pmeta.get("namespace") != meta.get("namespace"):
            continue
        selector = (pdb.get("spec") or {}).get("selector")
        if selector is None:
            continue
        if _selects(selector, labels):
            out.append(f"{pmeta.get('namespace')}/{pmeta.get('name')}")
    return sorted(out)


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return True  # policy/v1: an empty selector selects every pod of the namespace
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(str(op), False)
        if not ok:
            return False
    return True


# -- the repair ladder ----------------------------------------------------------------------------------------------
REPAIR_STEPS = ("reset", "reboot", "break_fix")
# Per fault class, the steps to try in order (NVIDIA's XID catalog's resolution buckets: RESET_GPU, RESTART_BM).
# A GPU that fell off the bus does not come back with a reset; a row remap is applied at the next reset.
DEFAULT_LADDER: dict[str, list[str]] = {
    "bus": ["reboot", "break_fix"],
    "memory": ["reset", "reboot", "break_fix"],
    "hardware": ["reset", "reboot", "break_fix"],
    "nvlink": ["reset", "reboot", "break_fix"],
    "row_remap_failure": ["break_fix"],
}


def repair_step(
    fault_class: str,
    tried: Sequence[str],
    allow_reboot: bool,
    gpu_idle: bool | None,
    gpu_index: Any,
    has_host: bool,
    ladder: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """The next step of the ladder for ``fault_class`` after the steps ``tried``: {step, why, skipped: [(step,
    why)]}. A reset needs the GPU's index, a host to run it on and an idle GPU; a reboot needs allow_reboot and a host;
    break_fix (hand the node to people) is where every ladder ends. A class without a ladder goes to break_fix."""
    steps = list((ladder or DEFAULT_LADDER).get(fault_class) or ["break_fix"])
    if "break_fix" not in steps:
        steps.append("break_fix")
    skipped: list[tuple[str, str]] = []
    for step in steps:
        if step in tried:
            skipped.append((step, "tried already"))
            continue
        if step == "reset":
            if not has_host:
                skipped.append((step, "no host-prep connection to the node's host in the inventory"))
            elif gpu_index is None:
                skipped.append((step, "the event names no GPU index"))
            elif gpu_idle is False:
                skipped.append((step, "the GPU still runs processes"))
            else:
                return {"step": step, "why": f"fault class {fault_class}: GPU reset", "skipped": skipped}
            continue
        if step == "reboot":
            if not allow_reboot:
                skipped.append((step, "gpuops_allow_reboot is false"))
            elif not has_host:
                skipped.append((step, "no host-prep connection to the node's host in the inventory"))
            else:
                return {"step": step, "why": f"fault class {fault_class}: reboot", "skipped": skipped}
            continue
        return {"step": "break_fix", "why": f"fault class {fault_class}: hand to break-fix", "skipped": skipped}
    return {"step": "break_fix", "why": "every step was tried", "skipped": skipped}
