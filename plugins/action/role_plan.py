# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of gpuops.platform.role_plan: a role's plan in one task (see the module's docs) - the role's reads
in one gpuops.platform.cluster_objects_info run, then its rules in Python (the role's ``plan`` in module_utils), then
the verdict (module_utils.common._judge, as gpuops.platform.judge gives it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from ansible.plugins.action import ActionBase
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue
from ansible_collections.gpuops.platform.plugins.module_utils.common import _judge
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _cluster_rules, _k8s, _owned
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _plan as _monitoring_plan
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network_owned

Queries = Callable[[Mapping[str, Any]], list[dict[str, Any]]]
# (variables, objects, planning) -> the plan; a phase after a change also takes previous= (the preflight's plan)
Plan = Callable[..., dict[str, Any]]

# (role, phase) -> (its reads, its rules)
PLANS: dict[tuple[str, str], tuple[Queries, Plan]] = {
    ("kueue", "preflight"): (_kueue.plan_queries, _kueue.plan),
    ("monitoring", "preflight"): (_monitoring_plan.preflight_queries, _monitoring_plan.preflight_plan),
    ("monitoring", "release"): (_monitoring_plan.release_queries, _monitoring_plan.release_plan),
    ("nfd", "preflight"): (_cluster_rules.nfd_plan_queries, _cluster_rules.nfd_plan),
}

Objects = list[dict[str, Any]]
# phase landed: role -> (the objects its plan applied, from the plan; the rule that compares them with the live ones)
LANDED: dict[str, tuple[Callable[[Mapping[str, Any]], Objects], Callable[[Objects, Objects], Objects]]] = {
    "kueue": (lambda built: list(built["objects"]), _kueue.landing_findings),
    "monitoring": (lambda built: list(built["objects"]), _monitoring_plan.landing_findings),
    "network_operator": (
        lambda built: [built["nic_cluster_policy"], *built["ip_pools"], *built["networks"]],
        _network_owned.landing_findings,
    ),
}

# the connection options, passed on to cluster_objects_info as they are (it applies their environment fallbacks)
AUTH_SPEC: dict[str, dict[str, Any]] = {
    k: {o: v for o, v in cast("dict[str, Any]", spec).items() if o != "fallback"}
    for k, spec in _k8s.AUTH_ARG_SPEC.items()
}

ARGUMENT_SPEC = {
    "role": {"type": "str", "required": True, "choices": sorted({role for role, _phase in PLANS} | set(LANDED))},
    "phase": {"type": "str", "default": "preflight", "choices": sorted({phase for _role, phase in PLANS} | {"landed"})},
    "variables": {"type": "dict"},
    "planning": {"type": "bool", "default": False},
    "previous": {"type": "dict"},
    "stop": {"type": "str", "default": "Nothing was changed."},
    "quiet": {"type": "bool", "default": False},
    **AUTH_SPEC,
}


def plan_result(
    role: str,
    variables: Mapping[str, Any],
    read: Mapping[str, Any],
    planning: bool,
    stop: str,
    phase: str = "preflight",
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The task's result from the plan's cluster read (cluster_objects_info's result): what the role's ``plan`` built,
    with the verdict on its findings (``failed``, ``msg``, ``lines``, ``counts``). ``previous``: the preflight's plan,
    for a phase after a change that keeps it when there is nothing to rebuild."""
    if read.get("failed"):
        return {"failed": True, "changed": False, "msg": f"{role}: the plan's cluster read failed: {read.get('msg')}"}
    objects = {key: entry.get("resources") or [] for key, entry in (read.get("objects") or {}).items()}
    plan = PLANS[(role, phase)][1]
    built = plan(variables, objects, planning) if phase == "preflight" else plan(variables, objects, planning, previous)
    verdict = _judge.verdict(role, built["findings"], "error", stop, "no finding")
    if verdict["failed"]:  # the verdict alone: what was built is not applied, and would bury the message
        return {"changed": False, "findings": built["findings"], **verdict}
    return {**built, "changed": False, **verdict}


def landed_result(role: str, previous: Mapping[str, Any], read: Mapping[str, Any], stop: str) -> dict[str, Any]:
    """Phase landed: every value the role's plan (``previous``) applied must be the live object's (the role's
    ``landing_findings`` over ``read``, the live copies); the verdict on those findings."""
    if read.get("failed"):
        return {"failed": True, "changed": False, "msg": f"{role}: the landing check's read failed: {read.get('msg')}"}
    wanted = LANDED[role][0](previous)
    live = [o for entry in (read.get("objects") or {}).values() for o in entry.get("resources") or []]
    findings = LANDED[role][1](wanted, live)
    return {"changed": False, "findings": findings, **_judge.verdict(role, findings, "error", stop, "no finding")}


def phases(role: str) -> list[str]:
    return sorted({p for r, p in PLANS if r == role} | ({"landed"} if role in LANDED else set()))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        key = (args["role"], args["phase"])
        if args["phase"] not in phases(args["role"]):
            result.update(
                failed=True,
                msg=f"role_plan: {args['role']} has no {args['phase']} phase; its phases: "
                + ", ".join(phases(args["role"])),
            )
            return result
        auth = {k: args[k] for k in AUTH_SPEC if args.get(k) is not None}
        if args["phase"] == "landed":
            if not args["previous"]:
                result.update(failed=True, msg="role_plan: phase landed needs previous (the role's plan it applied)")
                return result
            wanted = LANDED[args["role"]][0](args["previous"])
            read = self._execute_module(
                module_name="gpuops.platform.cluster_objects_info",
                module_args={**auth, "queries": _owned.landed_queries(wanted)},
                task_vars=task_vars or {},
            )
            result.update(landed_result(args["role"], args["previous"], read, args["stop"]))
            return result
        if args["variables"] is None:
            result.update(failed=True, msg=f"role_plan: phase {args['phase']} needs variables (the role's variables)")
            return result
        read = self._execute_module(
            module_name="gpuops.platform.cluster_objects_info",
            module_args={**auth, "queries": PLANS[key][0](args["variables"])},
            task_vars=task_vars or {},
        )
        result.update(
            plan_result(
                args["role"], args["variables"], read, args["planning"], args["stop"], args["phase"], args["previous"]
            )
        )
        if not result.get("failed") and result.get("findings") and not args["quiet"]:
            # the findings that did not fail are shown as the run's warnings, one line each (severity first): the
            # result itself holds the whole plan, too much to show
            result["warnings"] = list(result["lines"])
        return result
