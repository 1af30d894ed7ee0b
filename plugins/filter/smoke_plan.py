# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: smoke_plan
short_description: The smoke_tests role's test pods and findings
version_added: 0.4.0
author: gpuops.platform maintainers
description:
  - The rules of the smoke_tests role (in the collection's private module_utils C(_smoke)) - from the role's variables,
    the cluster's nodes and the sharing model each node runs, the test pods requested as a user would request them
    (CUDA vectorAdd and C(nvidia-smi) once per GPU product, a pod per sharing model, a DRA claim pod, an nccl-tests
    pair per product with two nodes, C(ib_write_bw) per rail resource, C(rocm-smi) per AMD product), their phases
    (the tests of one node first, then the pairs and rails; no two tests of one phase ask a node for more of a
    resource than it advertises - an error finding if they would), the DRA
    ResourceClaimTemplates, the headless Services of the NCCL pairs, and the findings (an image without a
    C(@sha256:) digest, a threshold that is not a number, an invalid mirror - errors; a test that cannot run - a
    warning).
positional: nodes, status_nodes
options:
  _input:
    description: The role's variables (C(smoke_tests_*)).
    type: dict
    required: true
  nodes:
    description: The cluster's Node objects.
    type: list
    elements: dict
    required: true
  status_nodes:
    description:
      - The nodes of M(gpuops.platform.gpu_cluster_status) run with C(sharing=true); their C(sharing.model) decides
        which pods the sharing and DRA tests make. Without it every node counts as exclusive.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Build the smoke tests
  ansible.builtin.set_fact:
    _plan: "{{ _variables | gpuops.platform.smoke_plan(_nodes.resources, _status.nodes) }}"
"""

RETURN = r"""
_value:
  description:
    - C(namespace), C(tests) (one entry per test - C(test), C(key) (the node label and annotation key), C(pods),
      C(nodes), C(product), C(kind), C(threshold)), C(pods), C(claim_templates), C(services), C(simulated) (the
      nodes kwok plays, whose results are C(not-measured)), C(phases) (in order - C(phase), C(tests), and the
      C(pods), C(services) and C(claim_templates) the role creates for the phase and deletes after it; each test
      also has its C(phase)) and C(findings).
  type: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.smoke import (  # noqa: E402
    _smoke,
    _smoke_plan,
)


def smoke_plan(variables: Any, nodes: Any, status_nodes: Any = None) -> dict[str, Any]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("smoke_plan expects the role's variables as a dict")
    if not isinstance(nodes, list) or not all(isinstance(n, Mapping) for n in nodes):
        raise AnsibleFilterError("smoke_plan expects nodes as a list of Node objects")
    return _smoke_plan.plan(variables, nodes, _smoke.sharing_models(status_nodes or []))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"smoke_plan": smoke_plan}
