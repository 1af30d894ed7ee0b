# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: smoke_results
short_description: The smoke_tests role's results from the live pods
version_added: 0.4.0
author: gpuops.platform maintainers
description:
  - From the plan of P(gpuops.platform.smoke_plan#filter) and the live test pods (and the logs of the pods that
    finished on real nodes) - each test's result (V(pass), V(fail), or V(not-measured) on a simulated node, whatever
    its pod printed), the Node objects that record it (a label per test, an annotation with the time and the detail)
    and the table.
positional: pods, logs, final, timestamp, phase
options:
  _input:
    description: The plan (the value of P(gpuops.platform.smoke_plan#filter)).
    type: dict
    required: true
  pods:
    description: The live test pods.
    type: list
    elements: dict
    required: true
  logs:
    description: Pod name to its log, for the pods in RV(_value.read_logs).
    type: dict
    default: {}
  final:
    description: The wait is over - a pod still pending or running is a failure (the reason in its detail).
    type: bool
    default: false
  timestamp:
    description: The time written in the result annotations.
    type: str
    default: ""
  phase:
    description:
      - Only the tests of this phase (C(tests[].phase) of the plan) - the wait of one phase. Unset, every test.
    type: int
"""

EXAMPLES = r"""
- name: The results
  ansible.builtin.set_fact:
    _results: "{{ _plan | gpuops.platform.smoke_results(_pods.resources, _logs, true, now(utc=true).isoformat()) }}"
"""

RETURN = r"""
_value:
  description:
    - C(done) (every pod finished, or runs on a simulated node), C(results) (per test - C(test), C(phase), C(key),
      C(nodes), C(placed_on), C(product), C(pods), C(pod_records) (node, image, requests, node selector as the API
      had them), C(result), C(detail), C(value), C(threshold)), C(read_logs) (the pods whose logs to read),
      C(holding) (pods that exist and have not ended - they hold their node's resources), C(nodes) (the Node objects
      to apply) and C(table) (aligned text).
  type: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.smoke import _smoke_results  # noqa: E402


def smoke_results(
    built: Any, pods: Any, logs: Any = None, final: bool = False, timestamp: str = "", phase: Any = None
) -> dict[str, Any]:
    if not isinstance(built, Mapping) or "tests" not in built:
        raise AnsibleFilterError("smoke_results expects the plan of gpuops.platform.smoke_plan")
    if not isinstance(pods, list) or not all(isinstance(p, Mapping) for p in pods):
        raise AnsibleFilterError("smoke_results expects pods as a list of Pod objects")
    if phase is not None and (isinstance(phase, bool) or not str(phase).isdigit()):
        raise AnsibleFilterError("smoke_results expects phase as a phase number of the plan")
    return _smoke_results.results(
        built, pods, dict(logs or {}), bool(final), str(timestamp or ""), None if phase is None else int(phase)
    )


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"smoke_results": smoke_results}
