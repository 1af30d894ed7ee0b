# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: network_input_findings
short_description: Findings for the network_operator role's variables
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - The input rules of the NVIDIA Network Operator role (in the collection's private module_utils
    C(_network_inputs.network_input_findings)) - kinds of the variables, the mode, device plugin resource names and
    selectors, the DOCA driver version and upgrade policy, nv-ipam IPPools, networks and the pools and resources they
    name. Returns one finding C({id, severity, object, evidence, cause, fix}) per problem, C(object.name) naming the
    variable, or an empty list.
options:
  _input:
    description:
      - The role's variables, keyed by their full names (C(network_operator_mode), ...); other keys are ignored.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Stop on a bad network_operator variable
  ansible.builtin.assert:
    that: _findings | selectattr('severity', 'eq', 'error') | length == 0
    fail_msg: "{{ _findings | map(attribute='cause') | join(' ') }}"
  vars:
    _findings: "{{ {'network_operator_mode': 'rdma_shared'} | gpuops.platform.network_input_findings }}"
"""

RETURN = r"""
_value:
  description: The findings, empty when the variables are valid.
  type: list
  elements: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.network import (  # noqa: E402
    _network,
    _network_inputs,
)


def network_input_findings(variables: Any) -> list[dict[str, Any]]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError(
            f"network_input_findings expects a dict of network_operator_* variables, got {type(variables).__name__}"
        )
    return _network_inputs.network_input_findings(_network.from_variables(variables))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"network_input_findings": network_input_findings}
