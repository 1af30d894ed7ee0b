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
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _cluster_rules, _k8s
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _plan as _monitoring_plan

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

# the connection options, passed on to cluster_objects_info as they are (it applies their environment fallbacks)
AUTH_SPEC: dict[str, dict[str, Any]] = {
    k: {o: v for o, v in cast("dict[str, Any]", spec).items() if o != "fallback"}
    for k, spec in _k8s.AUTH_ARG_SPEC.items()
}

ARGUMENT_SPEC = {
    "role": {"type": "str", "required": True, "choices": sorted({role for role, _phase in PLANS})},
    "phase": {"type": "str", "default": "preflight", "choices": sorted({phase for _role, phase in PLANS})},
    "variables": {"type": "dict", "required": True},
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


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        key = (args["role"], args["phase"])
        if key not in PLANS:
            result.update(
                failed=True,
                msg=f"role_plan: {args['role']} has no {args['phase']} phase; its phases: "
                + ", ".join(sorted(p for r, p in PLANS if r == args["role"])),
            )
            return result
        auth = {k: args[k] for k in AUTH_SPEC if args.get(k) is not None}
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
