#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: smoke_tests_pods
short_description: Read the smoke tests' pods, waiting until a phase of the plan has settled
version_added: 0.4.0
description:
  - Lists the pods the C(gpuops.platform.smoke_tests) role made (its owner labels) in O(namespace). Read-only.
  - With O(wait), reads them again until every pod of O(phase) of O(plan) has settled - finished, failed to start,
    or runs on a simulated node, where nothing more is to be learnt - or O(wait.timeout) has passed. The predicate
    is the role's own rule (the collection's private module_utils C(_smoke), C(results)); a timeout is not an
    error - the pods still waiting are then judged failures by the role, with their reason.
  - The waiting reads the cluster after 1, 2, 4... seconds, at most every O(wait.sleep) seconds; in check mode it
    looks once.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._k8s_auth
  - gpuops.platform._attributes.info_module
options:
  namespace:
    description: The smoke tests' namespace.
    type: str
    required: true
  plan:
    description: The plan the role built (filter P(gpuops.platform.smoke_plan#filter)); needed with O(wait).
    type: dict
  phase:
    description: The phase of O(plan) whose pods are waited for; all phases when not set.
    type: int
  wait:
    description: Wait until the pods of O(phase) have settled.
    type: dict
    suboptions:
      timeout:
        description: Seconds to wait at most.
        type: int
        default: 600
      sleep:
        description: Longest pause between two reads, in seconds.
        type: int
        default: 5
"""

EXAMPLES = r"""
- name: Wait for phase 1's pods
  gpuops.platform.smoke_tests_pods:
    namespace: gpuops-smoke-tests
    plan: "{{ _smoke_tests_plan }}"
    phase: 1
    wait: {timeout: 600}
  register: _pods
"""

RETURN = r"""
resources:
  description: The role's pods in O(namespace), as the API returns them.
  returned: always
  type: list
  elements: dict
settled:
  description: Every pod of O(phase) settled (always true without O(wait)).
  returned: always
  type: bool
waiting:
  description: The pods of O(phase) that had not settled when the wait ended.
  returned: always
  type: list
  elements: str
elapsed:
  description: Seconds waited.
  returned: always
  type: float
"""

from collections.abc import Mapping, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import (  # noqa: E402
    _k8s,
    _owned,
)
from ansible_collections.gpuops.platform.plugins.module_utils.smoke import _smoke_results  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.status import _readiness  # noqa: E402

OWNER_LABELS = _owned.owner_labels("smoke_tests")

ARGUMENT_SPEC = dict(
    _k8s.auth_argument_spec(),
    namespace={"type": "str", "required": True},
    plan={"type": "dict"},
    phase={"type": "int"},
    wait={
        "type": "dict",
        "options": {"timeout": {"type": "int", "default": 600}, "sleep": {"type": "int", "default": 5}},
    },
)


def waiting_pods(
    plan: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], phase: int | None
) -> list[_readiness.NotReady]:
    """The pods of ``phase`` that have not settled, as NotReady (the role's rule: ``_smoke_results.results``)."""
    judged = _smoke_results.results(plan, pods, {}, False, "", phase)
    return [
        _readiness.NotReady("Pod", None, name, "not settled")
        for row in judged["results"]
        if row["result"] == "waiting"
        for name in row["pods"]
    ]


def run(ctx: Any) -> dict[str, Any]:
    _k8s.require_client(ctx.module)
    p = ctx.params
    wait = p["wait"]
    if wait and not p["plan"]:
        raise InvalidInput("smoke_tests_pods: wait needs the plan (filter gpuops.platform.smoke_plan)")
    if wait and (wait["timeout"] < 0 or wait["sleep"] < 1):
        raise InvalidInput(
            f"wait.timeout {wait['timeout']} / wait.sleep {wait['sleep']}: the timeout must be 0 or more seconds and "
            "the sleep at least 1 second"
        )
    reader = _k8s.new_reader(p)

    def probe() -> tuple[Any, list[_readiness.NotReady]]:
        pods = [pod for pod in reader.core("pods", p["namespace"]) if _owned.is_owned(pod, OWNER_LABELS)]
        return pods, (waiting_pods(p["plan"], pods, p["phase"]) if wait else [])

    waiter = (
        _readiness.Waiter(timeout=wait["timeout"], interval=wait["sleep"])
        if wait and not ctx.check_mode
        else _readiness.NullWaiter()
    )
    outcome = waiter.wait(probe)
    return {
        "changed": False,
        "resources": outcome.snapshot,
        "settled": outcome.ready,
        "waiting": sorted(n.name for n in outcome.not_ready),
        "elapsed": round(outcome.elapsed, 1),
    }


def main() -> None:
    run_module(run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
