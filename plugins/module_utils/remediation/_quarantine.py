# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The quarantine of one node for one event (``gpu_node_quarantine``): read the node once, refuse what is not a GPU
node of the platform, ask the circuit breaker, compute the marks' differences, then act (mode ``act``) or record the
plan as an Event (mode ``dry_run``). Also the node's hand-off to break-fix and its return."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError, InvalidInput, NotFound
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _policy
from ansible_collections.gpuops.platform.plugins.module_utils.remediation._api import BREAKER, Conflict, close_command
from ansible_collections.gpuops.platform.plugins.module_utils.remediation._event import validate_event, validate_mode
from ansible_collections.gpuops.platform.plugins.module_utils.status._remediation_marks import gpu_words

RETRIES = 8  # reads and decisions again after a conflicting write (another run marked a node meanwhile)
TARGET = {"quarantine": "quarantined", "label": "notified"}
REASONS = {
    "quarantined": "GpuopsQuarantined",
    "notified": "GpuopsNotified",
    "break-fix": "GpuopsBreakFix",
    "returned": "GpuopsReturned",
}


def _words(diffs: list[tuple[str, Any, Any]]) -> list[str]:
    """The changes in words, the cordon first: cordon; taints ...; label k=v; annotate (keys); remove (keys)."""
    out: list[str] = []
    annotate: list[str] = []
    remove: list[str] = []
    for field, _current, desired in diffs:
        if field == "spec.unschedulable":
            out.insert(0, "cordon" if desired else "uncordon")
        elif field == "spec.taints":
            out.append("set taints " + (", ".join(_policy.taint_text(t) for t in desired) or "none"))
        elif field.startswith("metadata.labels["):
            out.append(f"remove label {field[16:-1]}" if desired is None else f"label {field[16:-1]}={desired}")
        else:
            (remove if desired is None else annotate).append(field[21:-1].rsplit(".", 1)[-1])
    if annotate:
        out.append(f"annotate {_policy.ANNOTATIONS['alert'].rsplit('.', 1)[0]}.* ({', '.join(annotate)})")
    if remove:
        out.append(f"remove the annotations {', '.join(remove)}")
    return out


class Quarantine:
    """One run of the module. ``api``: a _api.ClusterApi; ``now``: the clock (injectable for tests)."""

    def __init__(self, params: Mapping[str, Any], api: Any, check_mode: bool, now: Callable[[], datetime]) -> None:
        self.p, self.api, self.check_mode, self.now = params, api, check_mode, now
        self.events: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.event: dict[str, Any] = {}

    # -- helpers
    def _record(self, node: Mapping[str, Any], reason: str, message: str, key: str, warning: bool = False) -> None:
        entry = {"reason": reason, "message": message, "type": "Warning" if warning else "Normal"}
        if not self.check_mode:
            entry["created"] = self.api.record(node, reason, message, key, warning)
        self.events.append(entry)

    def _node(self, name: str) -> dict[str, Any]:
        node = self.api.node(name)
        if node is None:
            raise NotFound(
                f"node {name} does not exist in the cluster: refused, nothing was changed. Fix: check that the alert's "
                "Hostname label (the dcgm-exporter's node name) is the Kubernetes node's name.",
                node=name,
            )
        return node

    def _gpu_node(self, node: Mapping[str, Any]) -> None:
        if not _policy.is_gpu_node(node):
            name = (node.get("metadata") or {}).get("name")
            raise InvalidInput(
                f"node {name} is not a GPU node of this platform (no nvidia.com/gpu.present or NFD GPU vendor label, "
                "no GPU resources advertised): refused, nothing was changed. Fix: route only GPU nodes' alerts to the "
                "remediation, or label the node as the GPU Operator does if it is a GPU node.",
                node=name,
            )

    # -- the breaker
    def _ask_breaker(self, node_name: str, record: bool) -> dict[str, Any]:
        """The breaker's decision for quarantining ``node_name``; with ``record`` (act mode, not check mode) a
        permitted quarantine is written into the breaker's ConfigMap before the node is touched, and a refusal opens
        the breaker - both with the resourceVersion read, retried on a conflict."""
        limits = self.p["breaker"]
        ns = self.p["state_namespace"]
        for _attempt in range(RETRIES):
            state, rv = self.api.breaker(ns)
            nodes = self.api.nodes()
            gpu = [n for n in nodes if _policy.is_gpu_node(n)]
            names = {str((n.get("metadata") or {}).get("name")) for n in gpu}
            held = {
                str((n.get("metadata") or {}).get("name"))
                for n in gpu
                if _policy.remediation_state(n) in ("quarantined", "break-fix")
            }
            held |= {n for n in state["active"] if n in names}
            now = self.now()
            decision = _policy.breaker_decision(
                limits,
                len(gpu),
                held,
                state["actions"],
                node_name,
                now,
                tripped=state["reason"] if state["status"] == "TRIPPED" else None,
            )
            decision["state"] = f"{ns}/{BREAKER}"
            if not record or node_name in held:
                return decision
            window = int(limits.get("window") or 0)
            kept = _policy.recent(state["actions"], now, window) if window else state["actions"]
            if decision["allowed"]:
                new = {
                    "status": "CLOSED",
                    "reason": "",
                    "active": {**state["active"], node_name: _policy.stamp(now)},
                    "actions": [*kept, {"node": node_name, "at": _policy.stamp(now), "alert": self.event["alert"]}],
                }
            elif state["status"] == "TRIPPED":
                return decision
            else:
                new = {**state, "status": "TRIPPED", "reason": f"{_policy.stamp(now)}: {decision['reason']}"}
            try:
                self.api.write_breaker(ns, new, rv)
            except Conflict:
                continue
            return decision
        raise GpuOpsError(
            f"the circuit breaker's ConfigMap {ns}/{BREAKER} kept changing under {RETRIES} attempts to read and write "
            "it: nothing was done to the node. Fix: rerun; the event is handled once the concurrent runs are done.",
        )

    def _release(self, node_name: str) -> None:
        ns = self.p["state_namespace"]
        for _attempt in range(RETRIES):
            state, rv = self.api.breaker(ns)
            if node_name not in state["active"]:
                return
            active = {k: v for k, v in state["active"].items() if k != node_name}
            try:
                self.api.write_breaker(ns, {**state, "active": active}, rv)
            except Conflict:
                continue
            return

    # -- the node
    def _apply(self, name: str, marks_of: Callable[[dict[str, Any]], dict[str, Any]]) -> tuple[dict, list]:
        """Read the node, compute the differences, patch them (act, not check mode); again on a conflict."""
        for _attempt in range(RETRIES):
            node = self._node(name)
            diffs = _policy.differences(node, marks_of(node))
            if not diffs or self.check_mode or self.p["mode"] != "act":
                return node, diffs
            try:
                self.api.patch_node(name, _policy.node_patch(node, diffs))
            except Conflict:
                continue
            return node, diffs
        raise GpuOpsError(f"node {name} kept changing under {RETRIES} attempts to mark it. Fix: rerun.", node=name)

    def _plan(self, node: Mapping[str, Any], state: str, diffs: list, breaker: dict[str, Any] | None) -> dict:
        ev = self.event
        plan: dict[str, Any] = {
            "node": ev["node"],
            "mode": self.p["mode"],
            "state": state,
            "changes": _words(diffs),
            "breaker": breaker,
        }
        if state == "quarantined" and self.p["plan_drain"]:
            pods = self.api.pods_on(ev["node"])
            drain = self.p["drain"]
            plan["drain"] = _policy.drain_plan(pods, drain["namespaces"], drain["default"])
        if state in ("quarantined", "break-fix"):
            plan["repair"] = _policy.repair_step(
                ev["fault_class"],
                [],
                self.p["allow_reboot"],
                None,
                ev["gpu"]["index"],
                self.p["has_host"],
                self.p["ladder"] or None,
            )
        return plan

    def _summary(self, plan: Mapping[str, Any]) -> str:
        ev = self.event
        what = "would" if self.p["mode"] == "dry_run" else "did"
        parts = [
            f"{ev['alert']} ({ev['fault_class']}, {ev['severity']}) on {gpu_words(ev['gpu'])} of node {ev['node']} "
            f"since {ev['starts_at']}, fingerprint {ev['fingerprint']}: gpuops {what}: "
            + ("; ".join(plan["changes"]) or "nothing (the node carries the marks already)")
        ]
        if plan.get("drain") is not None:
            evict = [r["pod"] for r in plan["drain"] if r["decision"] == "evict"]
            wait = [r["pod"] for r in plan["drain"] if r["decision"] == "wait"]
            parts.append(f"drain: evict {', '.join(evict) or 'no pod'}; wait for {', '.join(wait) or 'no pod'}")
        if plan.get("repair"):
            parts.append(f"repair: {plan['repair']['step']}")
        return ". ".join(parts)

    # -- the states
    def run(self) -> dict[str, Any]:
        self.event = ev = validate_event(self.p["event"])
        validate_mode(self.p["mode"])
        state = self.p["state"]
        if state == "returned":
            return self._return()
        node = self._node(ev["node"])
        self._gpu_node(node)
        result: dict[str, Any] = {"changed": False, "node": ev["node"], "mode": self.p["mode"], "events": self.events}
        target = "break-fix" if state == "break_fix" else TARGET.get(ev["action"])
        if target is None or ev["status"] != "firing":
            why = f"action {ev['action']}" if target is None else f"the alert is {ev['status']}"
            result["plan"] = {"node": ev["node"], "mode": self.p["mode"], "state": None, "changes": [], "why": why}
            result["msg"] = f"{ev['alert']} on node {ev['node']}: {why}, nothing to do to the node"
            return result
        breaker = None
        if target in ("quarantined", "break-fix") and _policy.remediation_state(node) not in (
            "quarantined",
            "break-fix",
        ):
            record = self.p["mode"] == "act" and not self.check_mode
            breaker = self._ask_breaker(ev["node"], record)
            if not breaker["allowed"]:
                return self._refused(node, breaker, result)
        taint = self.p["taint"] if self.p["taint"] and self.p["taint"].get("key") else None
        now = self.now()
        node, diffs = self._apply(ev["node"], lambda n: _policy.desired_marks(n, ev, target, taint, now))
        plan = self._plan(node, target, diffs, breaker)
        summary = self._summary(plan)
        # one Event per node, state and alert (Alertmanager's fingerprint and start time): a repeat adds none
        key = f"{target}/{ev['fingerprint']}/{ev['starts_at']}"
        if self.p["mode"] == "dry_run":
            self._record(node, "GpuopsRemediationPlanned", "dry run: " + summary, "plan/" + key)
        elif diffs:
            self._record(node, REASONS[target], summary, key, warning=True)
        result.update(changed=bool(diffs) and self.p["mode"] == "act", plan=plan, msg=summary)
        if self.p["mode"] == "dry_run" and diffs:
            result["msg"] = "dry run (gpuops_remediation_mode=dry_run): nothing was changed but this Event. " + summary
        result["diff"] = _policy.diff_view(diffs)
        return result

    def _refused(self, node: Mapping[str, Any], breaker: Mapping[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        ev = self.event
        ns = self.p["state_namespace"]
        msg = (
            f"circuit breaker: node {ev['node']} was NOT quarantined for {ev['alert']} ({ev['fault_class']}) on "
            f"{gpu_words(ev['gpu'])}: {breaker['reason']}. Nothing was done to the node. A person decides: look at the "
            f"quarantined nodes (playbooks/diagnose.yml) - a fleet-wide fault or a bad rule trips the breaker - then "
            f"quarantine this node by hand (kubectl cordon {ev['node']}) or close the breaker ({close_command(ns)}) "
            "and resend the event."
        )
        result["plan"] = {"node": ev["node"], "mode": self.p["mode"], "state": None, "changes": [], "breaker": breaker}
        if self.p["mode"] == "dry_run":
            msg = "dry run: " + msg.replace("was NOT quarantined", "would NOT be quarantined")
            self._record(node, "GpuopsRemediationPlanned", msg, f"plan/refused/{ev['fingerprint']}", warning=True)
            self.warnings.append(msg)
            result["msg"] = msg
            return result
        self._record(node, "GpuopsCircuitBreakerOpen", msg, f"refused/{ev['fingerprint']}", warning=True)
        result.update(failed=True, msg=msg, breaker=breaker)
        return result

    def _return(self) -> dict[str, Any]:
        ev = self.event
        result: dict[str, Any] = {"changed": False, "node": ev["node"], "mode": self.p["mode"], "events": self.events}
        node = self.api.node(ev["node"])
        if node is None or not _policy.remediation_state(node):
            result["plan"] = {"node": ev["node"], "mode": self.p["mode"], "state": None, "changes": []}
            result["msg"] = f"node {ev['node']} carries no gpuops remediation marks: nothing to return"
            return result
        node, diffs = self._apply(ev["node"], _policy.returned_marks)
        plan = {"node": ev["node"], "mode": self.p["mode"], "state": "returned", "changes": _words(diffs)}
        what = "would return" if self.p["mode"] == "dry_run" else "returned"
        summary = f"node {ev['node']} {what} to service after {ev['alert']} ({ev['fault_class']}): " + (
            "; ".join(plan["changes"]) or "nothing to change"
        )
        key = f"returned/{ev['fingerprint']}/{ev['starts_at']}"
        if self.p["mode"] == "dry_run":
            self._record(node, "GpuopsRemediationPlanned", "dry run: " + summary, "plan/" + key)
        else:
            if not self.check_mode:
                self._release(ev["node"])
            if diffs:
                self._record(node, REASONS["returned"], summary, key)
        result.update(changed=bool(diffs) and self.p["mode"] == "act", plan=plan, msg=summary)
        result["diff"] = _policy.diff_view(diffs)
        return result
