# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of gpuops.platform.role_plan: a role's plan in one task (see the module's docs) - the role's reads
in one gpuops.platform.cluster_objects_info run, then its rules in Python (the role's ``plan`` in module_utils), then
the verdict (module_utils.common._judge, as gpuops.platform.judge gives it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from ansible.plugins.action import ActionBase
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue
from ansible_collections.gpuops.platform.plugins.module_utils.common import _judge
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _cluster_rules, _k8s

Queries = Callable[[Mapping[str, Any]], list[dict[str, Any]]]
Plan = Callable[[Mapping[str, Any], Mapping[str, Sequence[Mapping[str, Any]]], bool], dict[str, Any]]

# role -> (its reads, its rules)
PLANS: dict[str, tuple[Queries, Plan]] = {
    "kueue": (_kueue.plan_queries, _kueue.plan),
    "nfd": (_cluster_rules.nfd_plan_queries, _cluster_rules.nfd_plan),
}

# the connection options, passed on to cluster_objects_info as they are (it applies their environment fallbacks)
AUTH_SPEC: dict[str, dict[str, Any]] = {
    k: {o: v for o, v in cast("dict[str, Any]", spec).items() if o != "fallback"}
    for k, spec in _k8s.AUTH_ARG_SPEC.items()
}

ARGUMENT_SPEC = {
    "role": {"type": "str", "required": True, "choices": sorted(PLANS)},
    "variables": {"type": "dict", "required": True},
    "planning": {"type": "bool", "default": False},
    "stop": {"type": "str", "default": "Nothing was changed."},
    **AUTH_SPEC,
}


def plan_result(
    role: str, variables: Mapping[str, Any], read: Mapping[str, Any], planning: bool, stop: str
) -> dict[str, Any]:
    """The task's result from the plan's cluster read (cluster_objects_info's result): what the role's ``plan`` built,
    with the verdict on its findings (``failed``, ``msg``, ``lines``, ``counts``)."""
    if read.get("failed"):
        return {"failed": True, "changed": False, "msg": f"{role}: the plan's cluster read failed: {read.get('msg')}"}
    objects = {key: entry.get("resources") or [] for key, entry in (read.get("objects") or {}).items()}
    built = PLANS[role][1](variables, objects, planning)
    verdict = _judge.verdict(role, built["findings"], "error", stop, "no finding")
    return {**built, "changed": False, **verdict}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        auth = {k: args[k] for k in AUTH_SPEC if args.get(k) is not None}
        read = self._execute_module(
            module_name="gpuops.platform.cluster_objects_info",
            module_args={**auth, "queries": PLANS[args["role"]][0](args["variables"])},
            task_vars=task_vars or {},
        )
        result.update(plan_result(args["role"], args["variables"], read, args["planning"], args["stop"]))
        if not result.get("failed") and result.get("findings"):
            result["_ansible_verbose_always"] = True  # the findings that did not fail are shown, as judge shows them
        return result
