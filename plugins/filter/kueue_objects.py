# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: kueue_objects
short_description: What the kueue role applies (chart values, flavors, queues) and its findings
version_added: 0.3.0
author: gpuops.platform maintainers
description:
  - The kueue role's rules (in the collection's private module_utils C(_kueue)) - from the role's variables and the
    cluster's nodes, one ResourceFlavor per GPU product the nodes carry (C(nvidia.com/gpu.product),
    C(amd.com/gpu.product-name)) plus C(kueue_flavors), one ClusterQueue per team (quotas per flavor, cohort,
    borrowing and lending limits, preemption, a namespace selector that is never nil), one LocalQueue per team
    namespace, the chart values (the manager's Configuration, the image pinned to the chart version), and the
    findings (an unknown flavor or GPU product lists the real ones; limits without a cohort; a lending limit above the
    nominal quota; a team selecting no namespace; quota above the flavor's nodes' capacity, as a warning).
  - The same plan as M(gpuops.platform.role_plan) makes for the kueue role (C(_kueue.plan)); with C(kueue_state)
    absent it has no findings.
positional: nodes, crds, check_mode
options:
  _input:
    description: The role's variables (C(kueue_*)).
    type: dict
    required: true
  nodes:
    description: The cluster's Node objects.
    type: list
    elements: dict
    required: true
  crds:
    description: The names of the cluster's CustomResourceDefinitions (KAI Scheduler's next to Kueue is an error).
    type: list
    elements: str
    default: []
  check_mode:
    description:
      - The run is in check mode. When no node carries a GPU product label yet (the GPU Operator has not run), a quota
        on a GPU product is a warning and its team is left out, instead of an error.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Build the queues
  ansible.builtin.set_fact:
    _built: "{{ _variables | gpuops.platform.kueue_objects(_nodes.resources, _crd_names) }}"
"""

RETURN = r"""
_value:
  description:
    - C(chart_values), C(resource_flavors), C(cluster_queues), C(local_queues), C(objects) (the three, in apply
      order), C(namespaces) (those the LocalQueues need), C(flavors) (name, product, nodes, allocatable GPUs),
      C(flavors_used), C(owner_selector), C(findings), C(crds_present) (Kueue's ClusterQueue CRD among O(crds)).
  type: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue  # noqa: E402


def kueue_objects(variables: Any, nodes: Any, crds: Any = None, check_mode: bool = False) -> dict[str, Any]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("kueue_objects expects the role's variables as a dict")
    if not isinstance(nodes, list) or not all(isinstance(n, Mapping) for n in nodes):
        raise AnsibleFilterError("kueue_objects expects nodes as a list of Node objects")
    # the role's plan (_kueue.plan, as gpuops.platform.role_plan makes it), from the CRDs' names
    return _kueue.plan(
        variables, {"nodes": nodes, "crds": [{"metadata": {"name": str(c)}} for c in crds or []]}, bool(check_mode)
    )


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"kueue_objects": kueue_objects}
