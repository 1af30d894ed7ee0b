#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_node_drain
short_description: Drain a quarantined GPU node, respecting PodDisruptionBudgets, with a per-namespace policy
version_added: 0.5.0
description:
  - Lists the pods on O(node) and decides per pod - DaemonSet and static pods are left (they belong to the node),
    finished pods are done, and the others follow their namespace's policy in O(namespaces) (V(evict), V(wait) for
    the pod to finish, V(leave)) or O(default).
  - Evicts through the Eviction API (C(pods/eviction)), so the API server applies the PodDisruptionBudgets; a refused
    eviction (HTTP 429) is tried again every O(poll) seconds until O(timeout). The module returns when no pod to
    evict or to wait for is left on the node. At the timeout it fails naming each pod left and the budget that held
    it; the node stays cordoned.
  - With O(mode=act) the node must be cordoned already (M(gpuops.platform.gpu_node_quarantine)); otherwise evicted
    pods would be scheduled back on it, and the module refuses before evicting anything.
  - With O(mode=dry_run) (the default) nothing is evicted; the plan is returned (RV(plan)) and recorded as an Event
    (C(GpuopsRemediationPlanned)) on the node. A drain that evicted pods records C(GpuopsDrained).
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._k8s_auth
  - gpuops.platform._attributes.full_support
attributes:
  check_mode:
    details:
      - Reads the pods and reports the plan; evicts nothing, records no Event.
  diff_mode:
    support: none
    details:
      - The result's RV(plan) and RV(evicted) say what was (or would be) evicted.
  idempotent:
    details:
      - A drained node has nothing left to evict; the second run changes nothing.
options:
  node:
    description: The node to drain.
    type: str
    required: true
  mode:
    description: V(dry_run) plans only; V(act) evicts.
    type: str
    choices: [dry_run, act]
    default: dry_run
  default:
    description: What happens to a pod of a namespace not in O(namespaces).
    type: str
    choices: [evict, wait, leave]
    default: evict
  namespaces:
    description:
      - Namespace to V(evict), V(wait) (for its pods to finish, for batch jobs that cannot restart) or V(leave).
    type: dict
    default: {}
  timeout:
    description: Seconds to wait for the pods to be evicted or to finish.
    type: int
    default: 300
  poll:
    description: Seconds between two rounds of evictions.
    type: int
    default: 5
  key:
    description: A word naming the event handled (the playbook passes the alert's fingerprint), so a repeated drain
      records no second Event.
    type: str
    default: ""
requirements:
  - kubernetes (Python client)
notes:
  - The user needs get on nodes, list on pods and poddisruptionbudgets, create on pods/eviction and events.
"""

EXAMPLES = r"""
- name: Drain the node (batch jobs of namespace training finish first; monitoring is left)
  gpuops.platform.gpu_node_drain:
    node: gpu-node-7
    mode: act
    namespaces: {training: wait, monitoring: leave}
    timeout: 600
"""

RETURN = r"""
plan:
  description: Per pod on the node when the drain began - C(pod) (namespace/name), C(decision) (evict, wait, leave,
    done), C(why), C(terminating).
  returned: always
  type: list
  elements: dict
evicted:
  description: The pods evicted (namespace/name).
  returned: always
  type: list
  elements: str
blocked:
  description: Pods whose last eviction a PodDisruptionBudget refused, with the API server's message and the budget.
  returned: always
  type: dict
left:
  description: The pods left on the node by policy.
  returned: always
  type: list
  elements: str
elapsed:
  description: Seconds the drain took.
  returned: always
  type: float
"""

import time  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _api, _policy  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.remediation._drain import Drain  # noqa: E402

ARGUMENT_SPEC = {
    **_k8s.auth_argument_spec(),
    "node": {"type": "str", "required": True},
    "mode": {"type": "str", "choices": ["dry_run", "act"], "default": "dry_run"},
    "default": {"type": "str", "choices": list(_policy.DRAIN_POLICIES), "default": "evict"},
    "namespaces": {"type": "dict", "default": {}},
    "timeout": {"type": "int", "default": 300},
    "poll": {"type": "int", "default": 5},
    "key": {"type": "str", "default": "", "no_log": False},
}


def run(ctx: Any) -> dict[str, Any]:
    _k8s.require_client(ctx.module)
    p = ctx.params
    for ns, policy in p["namespaces"].items():
        if policy not in _policy.DRAIN_POLICIES:
            raise InvalidInput(f"namespaces.{ns}: {policy!r} is not one of evict, wait, leave. Nothing was evicted.")
    if p["timeout"] < 0 or p["poll"] < 1:
        raise InvalidInput(
            f"timeout {p['timeout']} / poll {p['poll']}: the timeout must be 0 or more seconds and the poll at least 1"
        )
    api = _api.ClusterApi(_k8s.new_reader(p))
    return Drain(p, api, ctx.check_mode, time.monotonic, time.sleep).run()


def main() -> None:
    run_module(run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
