# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: batch_queues_owned
short_description: The Queues the volcano or kai_scheduler role owns - to prune, landed, holding workloads
version_added: 0.3.0
author: gpuops.platform maintainers
description:
  - With O(check=prune), the live Queues carrying the role's labels that the wanted list no longer holds, children
    before parents (both schedulers refuse deleting a queue with children). Queues without the labels are never
    returned.
  - With O(check=landed), one finding per wanted Queue whose spec or labels are not the live object's.
  - With O(check=admitted), the input is the role's live Queues and O(live) the workloads - Volcano PodGroups, or
    pods for KAI Scheduler (label C(kai.scheduler/queue)); a finding names the queues that still hold running or
    queued ones (an error, a warning with O(force)).
positional: live, scheduler, check, force
options:
  _input:
    description: The wanted Queues (prune, landed) or the role's live Queues (admitted).
    type: list
    elements: dict
    required: true
  live:
    description: The live Queues (prune, landed) or the workloads (admitted).
    type: list
    elements: dict
    required: true
  scheduler:
    description: Which role's Queues.
    type: str
    required: true
    choices: [volcano, kai_scheduler]
  check:
    description: What to compute.
    type: str
    default: prune
    choices: [prune, landed, admitted]
  force:
    description: With O(check=admitted), report held queues as a warning instead of an error.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Delete the Queues the role created and the variables dropped
  kubernetes.core.k8s:
    definition: "{{ item }}"
    state: absent
  loop: "{{ wanted | gpuops.platform.batch_queues_owned(live, 'volcano') }}"
"""

RETURN = r"""
_value:
  description: The Queues to delete, in delete order (prune), or the findings (landed, admitted).
  type: list
  elements: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kai, _volcano  # noqa: E402

_RULES = {"volcano": _volcano, "kai_scheduler": _kai}


def batch_queues_owned(
    wanted: Any, live: Any, scheduler: Any, check: str = "prune", force: bool = False
) -> list[dict[str, Any]]:
    for name, value in (("input", wanted), ("live", live)):
        if not isinstance(value, list) or not all(isinstance(o, Mapping) for o in value):
            raise AnsibleFilterError(f"batch_queues_owned expects {name} as a list of objects")
    rules = _RULES.get(scheduler)
    if rules is None:
        raise AnsibleFilterError(f"batch_queues_owned: scheduler must be one of {', '.join(_RULES)}, not {scheduler!r}")
    if check == "prune":
        return rules.prune_objects(wanted, live)
    if check == "landed":
        return rules.landing_findings(wanted, live)
    if check == "admitted":
        return rules.admitted_findings(wanted, live, bool(force))
    raise AnsibleFilterError(f"batch_queues_owned: check must be prune, landed or admitted, not {check!r}")


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"batch_queues_owned": batch_queues_owned}
