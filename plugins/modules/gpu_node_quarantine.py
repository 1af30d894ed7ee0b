#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_node_quarantine
short_description: Quarantine a GPU node for a GPU fault event, hand it to break-fix, or return it to service
version_added: 0.5.0
description:
  - Takes one remediation event (O(event), the rulebook's C(gpuops_remediation_event)), checks it field by field, and
    refuses a node that does not exist or is not a GPU node of the platform (no GPU vendor label, no GPU resources -
    the inventory plugin's rule) - nothing changed in either case.
  - With O(state=quarantined) and the event's C(action=quarantine), the node is cordoned, optionally tainted
    (O(taint), off by default), labelled C(gpuops.platform/remediation=quarantined) and annotated with the alert, the
    fault class, the severity, the GPU (UUID, PCI bus id, index), the alert's start time, its fingerprint, the time
    gpuops acted and C(by=gpuops); a Kubernetes Event on the Node records it, so C(kubectl describe node) tells the
    whole story. C(action=label) (throttling) only labels C(notified), annotates and records the Event - no cordon.
    C(action=none) and resolved events change nothing.
  - A node a person had cordoned before is not claimed - the return leaves it cordoned.
  - The circuit breaker - at most O(breaker.max_nodes) nodes or O(breaker.max_percent) % of the GPU nodes
    quarantined at once and at most O(breaker.max_actions) quarantines per O(breaker.window) seconds - is asked
    before a new node is cordoned. Its state is a ConfigMap (C(gpuops-remediation-breaker) in O(state_namespace)),
    written with the resourceVersion read, so concurrent runs cannot both take the last place. Past a limit the node
    is left alone, the breaker opens (C(status=TRIPPED)) and stays open until a person closes it, a Warning Event is
    recorded on the node and the task fails with a message that leaves the decision to a person.
  - With O(mode=dry_run) (the default) nothing is changed but Events - C(GpuopsRemediationPlanned) on the node, with
    what would be cordoned, drained (per pod, with O(plan_drain)) and repaired (the ladder's first step) - and the
    plan is returned in RV(plan).
  - O(state=break_fix) marks the node C(break-fix) (cordoned, annotated with the hand-off time) for people to
    repair. O(state=returned) takes gpuops' marks off again - label, annotations, gpuops' taint - and uncordons the
    node when gpuops cordoned it.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._k8s_auth
  - gpuops.platform._attributes.full_support
attributes:
  check_mode:
    details:
      - Reads the node and the breaker and reports what would change; writes nothing, not even Events.
  diff_mode:
    details:
      - The node's labels, annotations, C(spec.unschedulable) and C(spec.taints) before and after.
  idempotent:
    details:
      - A second identical event changes nothing and records no second Event (Events are named after the node, the
        state, the alert's fingerprint and start time).
options:
  event:
    description:
      - "The event: C(node), C(alert), C(fault_class), C(action) (V(quarantine), V(label) or V(none)), C(severity),
        C(gpu) (C(uuid), C(pci_bus_id), C(index); null values for an alert about the whole node), C(starts_at)
        (RFC 3339), C(fingerprint), C(labels), C(annotations), C(status) (V(firing) or V(resolved))."
    type: dict
    required: true
  mode:
    description: V(dry_run) records the plan only (Events); V(act) changes the node.
    type: str
    choices: [dry_run, act]
    default: dry_run
  state:
    description:
      - V(quarantined) - what the event's C(action) says; V(break_fix) - hand the node to people; V(returned) -
        take gpuops' marks off and uncordon the node when gpuops cordoned it.
    type: str
    choices: [quarantined, break_fix, returned]
    default: quarantined
  taint:
    description: A taint to add to a quarantined node (removed on its return); none by default.
    type: dict
    suboptions:
      key:
        description: Taint key, for example V(gpuops.platform/quarantined).
        type: str
        required: true
      value:
        description: Taint value.
        type: str
      effect:
        description: Taint effect (V(NoExecute) also evicts pods that do not tolerate it, past the drain's policy).
        type: str
        choices: [NoSchedule, PreferNoSchedule, NoExecute]
        default: NoSchedule
  breaker:
    description: The circuit breaker's limits; 0 turns one off.
    type: dict
    default: {}
    suboptions:
      max_nodes:
        description: Most GPU nodes quarantined at once.
        type: int
        default: 2
      max_percent:
        description: Most GPU nodes quarantined at once, in percent of the GPU nodes (rounded down, at least 1).
        type: int
        default: 10
      max_actions:
        description: Most new quarantines per O(breaker.window).
        type: int
        default: 3
      window:
        description: The window of O(breaker.max_actions), in seconds.
        type: int
        default: 600
  state_namespace:
    description: Namespace of the breaker's ConfigMap (it must exist).
    type: str
    default: kube-system
  plan_drain:
    description: Put the drain's plan (what happens to each pod on the node) in RV(plan) and the Event (one list call).
    type: bool
    default: true
  drain:
    description: The drain's policy, for the plan (M(gpuops.platform.gpu_node_drain) takes the same).
    type: dict
    default: {}
    suboptions:
      default:
        description: What happens to a pod of a namespace not in O(drain.namespaces).
        type: str
        choices: [evict, wait, leave]
        default: evict
      namespaces:
        description: Namespace to V(evict), V(wait) (for the pod to finish) or V(leave).
        type: dict
        default: {}
  allow_reboot:
    description: Whether the repair ladder may reboot the node's host (for the plan).
    type: bool
    default: false
  has_host:
    description: Whether the inventory has the node's host (the host-prep connection a GPU reset needs; for the plan).
    type: bool
    default: false
  ladder:
    description:
      - Per fault class, the repair steps in order (V(reset), V(reboot), V(break_fix)); the built-in ladder for
        classes not given (C(bus) reboot; C(memory), C(hardware), C(nvlink) reset then reboot; anything else
        break-fix).
    type: dict
    default: {}
requirements:
  - kubernetes (Python client)
notes:
  - The user needs get, list and patch on nodes, create on events in namespace C(default), get, create and update on
    configmaps in O(state_namespace), and list on pods (O(plan_drain)).
"""

EXAMPLES = r"""
- name: Quarantine the node of an XID 79 (dry run first)
  gpuops.platform.gpu_node_quarantine:
    event: "{{ gpuops_remediation_event }}"
    mode: "{{ gpuops_remediation_mode | default('dry_run') }}"
    breaker: {max_nodes: 2, max_percent: 10}
  register: quarantine

- name: Return the node once it passed its re-validation
  gpuops.platform.gpu_node_quarantine:
    event: "{{ gpuops_remediation_event }}"
    mode: act
    state: returned
"""

RETURN = r"""
node:
  description: The node.
  returned: always
  type: str
mode:
  description: V(dry_run) or V(act).
  returned: always
  type: str
plan:
  description:
    - "What was done (or would be, in dry run): C(node), C(mode), C(state) (the node's mark, null when nothing is to be
      done), C(changes) (in words), C(breaker) (its decision), C(drain) (per pod: C(pod), C(decision), C(why),
      C(terminating)), C(repair) (the ladder's first step: C(step), C(why), C(skipped))."
  returned: always
  type: dict
events:
  description: The Events recorded on the node (C(reason), C(message), C(type), C(created) - false when it existed).
  returned: always
  type: list
  elements: dict
breaker:
  description: The breaker's decision when it refused (C(allowed), C(reason), C(quarantined), C(limit), C(actions)).
  returned: when the breaker refused
  type: dict
"""

from typing import Any  # noqa: E402 - after the documentation, as ansible-test expects

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _api, _policy  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.remediation._event import validate_event  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.remediation._quarantine import Quarantine  # noqa: E402

DRAIN_SPEC = {
    "type": "dict",
    "default": {},
    "options": {
        "default": {"type": "str", "choices": list(_policy.DRAIN_POLICIES), "default": "evict"},
        "namespaces": {"type": "dict", "default": {}},
    },
}
ARGUMENT_SPEC = {
    **_k8s.auth_argument_spec(),
    "event": {"type": "dict", "required": True},
    "mode": {"type": "str", "choices": ["dry_run", "act"], "default": "dry_run"},
    "state": {"type": "str", "choices": ["quarantined", "break_fix", "returned"], "default": "quarantined"},
    "taint": {
        "type": "dict",
        "options": {
            "key": {"type": "str", "required": True, "no_log": False},
            "value": {"type": "str"},
            "effect": {
                "type": "str",
                "choices": ["NoSchedule", "PreferNoSchedule", "NoExecute"],
                "default": "NoSchedule",
            },
        },
    },
    "breaker": {
        "type": "dict",
        "default": {},
        "options": {k: {"type": "int", "default": v} for k, v in _policy.DEFAULT_BREAKER.items()},
    },
    "state_namespace": {"type": "str", "default": "kube-system"},
    "plan_drain": {"type": "bool", "default": True},
    "drain": DRAIN_SPEC,
    "allow_reboot": {"type": "bool", "default": False},
    "has_host": {"type": "bool", "default": False},
    "ladder": {"type": "dict", "default": {}},
}
now = _policy.utcnow


def check_options(params: dict[str, Any]) -> None:
    """Limits and policies that cannot be right, named before anything is read."""
    for key, value in params["breaker"].items():
        if value < 0 or (key == "max_percent" and value > 100):
            raise InvalidInput(
                f"breaker.{key}: {value} is not valid: a count of 0 (off) or more"
                + (", at most 100" if key == "max_percent" else "")
                + ". Nothing was changed."
            )
    for ns, policy in params["drain"]["namespaces"].items():
        if policy not in _policy.DRAIN_POLICIES:
            raise InvalidInput(f"drain.namespaces.{ns}: {policy!r} is not one of evict, wait, leave. Nothing changed.")
    for fault_class, steps in params["ladder"].items():
        if not isinstance(steps, list) or any(s not in _policy.REPAIR_STEPS for s in steps):
            raise InvalidInput(
                f"ladder.{fault_class}: {steps!r} is not valid: a list of reset, reboot, break_fix. Nothing changed."
            )


def run(ctx: Any) -> dict[str, Any]:
    _k8s.require_client(ctx.module)
    check_options(ctx.params)
    validate_event(ctx.params["event"])  # a bad event is named before any connection is made
    api = _api.ClusterApi(_k8s.new_reader(ctx.params))
    job = Quarantine(ctx.params, api, ctx.check_mode, now)
    result = job.run()
    for warning in job.warnings:
        ctx.warn(warning)
    if not ctx.diff_mode:
        result.pop("diff", None)
    return result


def main() -> None:
    run_module(run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
