# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The drain of a quarantined node (``gpu_node_drain``): per pod the namespace's policy (evict, wait for it to finish,
leave it), evictions through the Eviction API so that PodDisruptionBudgets apply (a refused eviction is tried again
every round until the timeout), DaemonSet and static pods left. A timeout fails naming the pods left and the budgets
that held them; the node stays quarantined."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import (
    HostStateError,
    NotFound,
    WaitTimeout,
)
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _policy


class Drain:
    """One run. ``api``: a _api.ClusterApi; ``clock`` and ``sleep`` injectable for tests."""

    def __init__(
        self,
        params: Mapping[str, Any],
        api: Any,
        check_mode: bool,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self.p, self.api, self.check_mode, self.clock, self.sleep = params, api, check_mode, clock, sleep
        self.pods: dict[str, dict[str, Any]] = {}

    def _plan(self, node: str) -> list[dict[str, Any]]:
        pods = self.api.pods_on(node)
        self.pods = {
            f"{(p.get('metadata') or {}).get('namespace')}/{(p.get('metadata') or {}).get('name')}": p for p in pods
        }
        return _policy.drain_plan(pods, self.p["namespaces"], self.p["default"])

    def run(self) -> dict[str, Any]:
        name = self.p["node"]
        node = self.api.node(name)
        if node is None:
            raise NotFound(f"node {name} does not exist in the cluster: nothing to drain.", node=name)
        acting = self.p["mode"] == "act" and not self.check_mode
        # (in check mode the quarantine before it only planned the cordon)
        if acting and not (node.get("spec") or {}).get("unschedulable"):
            raise HostStateError(
                f"node {name} is not cordoned: a drain now would see the evicted pods scheduled back on it. Nothing "
                "was evicted. Fix: quarantine the node first (gpuops.platform.gpu_node_quarantine, "
                f"playbooks/remediate.yml) or cordon it (kubectl cordon {name}).",
                node=name,
            )
        start = self.clock()
        deadline = start + max(self.p["timeout"], 0)
        evicted: list[str] = []
        blocked: dict[str, str] = {}
        plan = self._plan(name)
        first = plan
        while acting:
            pdbs = None
            blocked = {}
            for row in plan:
                if row["decision"] != "evict" or row["terminating"] or row["pod"] in evicted:
                    continue
                ns, pod = row["pod"].split("/", 1)
                status, message = self.api.evict(ns, pod)
                if status == 429:
                    if pdbs is None:
                        pdbs = self.api.pdbs()
                    budgets = _policy.blocking_pdbs(self.pods.get(row["pod"]) or {}, pdbs)
                    blocked[row["pod"]] = f"{message} (PodDisruptionBudget {', '.join(budgets) or 'unknown'})"
                elif status != 404:
                    evicted.append(row["pod"])
            plan = self._plan(name)
            left = [r for r in plan if r["decision"] in ("evict", "wait")]
            if not left:
                break
            if self.clock() >= deadline:
                raise WaitTimeout(
                    self._timeout_message(name, left, blocked), node=name, evicted=evicted, blocked=blocked
                )
            self.sleep(self.p["poll"])
        result = {
            "changed": bool(evicted) or (self.check_mode and self.p["mode"] == "act" and _would(first)),
            "node": name,
            "mode": self.p["mode"],
            "plan": first,
            "evicted": evicted,
            "blocked": blocked,
            "left": [r["pod"] for r in first if r["decision"] == "leave"],
            "elapsed": round(self.clock() - start, 1),
        }
        words = ", ".join(r["pod"] for r in first if r["decision"] in ("evict", "wait")) or "no pod"
        key = self.p.get("key") or ""
        if self.p["mode"] == "dry_run":
            result["msg"] = f"dry run: the drain of node {name} would evict or wait for {words}; nothing was evicted"
            if not self.check_mode:
                self.api.record(node, "GpuopsRemediationPlanned", result["msg"], f"plan/drain/{key}")
        else:
            result["msg"] = f"node {name} drained: evicted {', '.join(evicted) or 'no pod'}"
            if acting and evicted:
                self.api.record(node, "GpuopsDrained", result["msg"], f"drain/{key}")
        return result

    def _timeout_message(self, node: str, left: list[dict[str, Any]], blocked: Mapping[str, str]) -> str:
        rows = []
        for r in left:
            why = blocked.get(r["pod"]) or (
                "terminating" if r["terminating"] else "waiting for it to finish" if r["decision"] == "wait" else ""
            )
            rows.append(f"{r['pod']} ({why})" if why else r["pod"])
        return (
            f"the drain of node {node} did not finish within {self.p['timeout']} s; pods still on it: "
            f"{'; '.join(rows)}. "
            "The node stays quarantined (cordoned). Fix: let the budgets' other pods become ready (or raise the "
            "PodDisruptionBudget's allowance), then rerun the drain; or set the namespace's drain policy to leave."
        )


def _would(plan: list[dict[str, Any]]) -> bool:
    return any(r["decision"] == "evict" and not r["terminating"] for r in plan)
