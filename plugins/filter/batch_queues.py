# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: batch_queues
short_description: What the volcano or kai_scheduler role applies (chart values, Queues) and its findings
version_added: 0.3.0
author: gpuops.platform maintainers
description:
  - The rules of the volcano and kai_scheduler roles (in the collection's private module_utils C(batch/_volcano),
    C(batch/_kai) and C(batch/_queue_tree)) - from the role's variables and the cluster's nodes, the chart values
    and the Queues, and the findings (a queue tree whose children's quotas exceed the parent's, an unknown parent, a
    cycle, a cap above an ancestor's, Volcano's own rules on guarantee, deserved and capability, a KAI limit below its
    quota, quotas above the cluster's capacity as a warning).
positional: scheduler, nodes, crds, sharing_pools
options:
  _input:
    description: The role's variables (C(volcano_*) or C(kai_scheduler_*)).
    type: dict
    required: true
  scheduler:
    description: Which role's rules.
    type: str
    required: true
    choices: [volcano, kai_scheduler]
  nodes:
    description: The cluster's Node objects (for the capacity warnings).
    type: list
    elements: dict
    default: []
  crds:
    description:
      - The names of the cluster's CustomResourceDefinitions (KAI Scheduler - a version that watches Kueue's v1alpha1
        Topology next to Kueue's CRDs is an error, unless the role removes KAI).
    type: list
    elements: str
    default: []
  sharing_pools:
    description:
      - KAI Scheduler - C(gpu_sharing_pools); a pool whose model is C(kai_fraction) turns the chart's
        C(global.gpuSharing) on while C(kai_scheduler_gpu_sharing) is unset, and is an error with it set to false.
        Volcano does not read it.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Build the queues
  ansible.builtin.set_fact:
    _built: "{{ _variables | gpuops.platform.batch_queues('volcano', _nodes.resources) }}"
"""

RETURN = r"""
_value:
  description:
    - C(chart_values), C(queues) (the Queue objects, owner-labelled), C(owner_selector), C(findings), and what the
      shared task set of the two roles reads of the scheduler - C(scheduler) (the role), C(api_version) and C(crd)
      (its Queues' API and CRD name), C(holders) (C(api_version), C(kind), C(label_selectors) of the objects that
      hold a queue - PodGroups, or pods with the C(kai.scheduler/queue) label), C(wait_objects); Volcano adds
      C(plugin) (proportion or capacity), KAI Scheduler C(leaf_queues) (the queues pods may name).
  type: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kai, _volcano  # noqa: E402

_SCHEDULERS = ("volcano", "kai_scheduler")


def batch_queues(
    variables: Any, scheduler: Any, nodes: Any = None, crds: Any = None, sharing_pools: Any = None
) -> dict[str, Any]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("batch_queues expects the role's variables as a dict")
    if scheduler not in _SCHEDULERS:
        raise AnsibleFilterError(f"batch_queues: scheduler must be one of {', '.join(_SCHEDULERS)}, not {scheduler!r}")
    nodes = nodes or []
    if not isinstance(nodes, list) or not all(isinstance(n, Mapping) for n in nodes):
        raise AnsibleFilterError("batch_queues expects nodes as a list of Node objects")
    crd_names = [str(c) for c in crds or []]
    if scheduler == "kai_scheduler":
        return _kai.build(variables, nodes, crd_names, sharing_pools or [])
    return _volcano.build(variables, nodes, crd_names)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"batch_queues": batch_queues}
