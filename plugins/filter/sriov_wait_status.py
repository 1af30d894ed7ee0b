# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: sriov_wait_status
short_description: What the sriov_network_operator role still waits for (policies not applied, resources missing)
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - With O(what=policies) and the live SriovNetworkNodeStates, the names of the role's policies the operator has not
    written into any state yet (C(_sriov_policy.unapplied_policies); empty as soon as a state is Failed, which the
    state wait then reports).
  - With O(what=resources) and the live Nodes, one line per node a policy selects that does not advertise the
    policy's resource C(<prefix>/<resourceName>) (C(_sriov_policy.missing_resources)).
  - Empty when there is nothing to wait for.
positional: objects, what
options:
  _input:
    description: The role's variables, keyed by their full names.
    type: dict
    required: true
  objects:
    description: The live SriovNetworkNodeStates (O(what=policies)) or Nodes (O(what=resources)).
    type: list
    elements: dict
    required: true
  what:
    description: What to judge.
    type: str
    choices: [policies, resources]
    required: true
"""

EXAMPLES = r"""
- name: Wait until the operator applied the policies
  kubernetes.core.k8s_info:
    api_version: sriovnetwork.openshift.io/v1
    kind: SriovNetworkNodeState
    namespace: sriov-network-operator
  register: states
  until: sriov_variables | gpuops.platform.sriov_wait_status(states.resources, 'policies') | length == 0
"""

RETURN = r"""
_value:
  description: Policy names, or one line per node and missing resource.
  type: list
  elements: str
"""

from collections.abc import Mapping  # noqa: E402 - after the documentation, as ansible-test expects

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils import _sriov_policy  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._errors import InvalidInput  # noqa: E402

PREFIX = "sriov_network_operator_"


def sriov_wait_status(variables, objects, what):
    if not isinstance(variables, Mapping) or not isinstance(objects, list):
        raise AnsibleFilterError("sriov_wait_status expects the sriov_network_operator_* variables and a list")
    try:
        policies = [_sriov_policy.node_policy(p) for p in variables.get(PREFIX + "policies") or []]
        if what == "policies":
            return _sriov_policy.unapplied_policies(policies, objects)
        if what == "resources":
            prefix = _sriov_policy.resource_prefix(
                variables.get(PREFIX + "source", "standalone"), variables.get(PREFIX + "values") or {}
            )
            return _sriov_policy.missing_resources(policies, objects, prefix)
    except InvalidInput as exc:
        raise AnsibleFilterError(f"sriov_network_operator: {exc}") from exc
    raise AnsibleFilterError(f"sriov_wait_status: what must be policies or resources, got {what!r}")


class FilterModule:
    def filters(self):
        return {"sriov_wait_status": sriov_wait_status}
