# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: sriov_input_findings
short_description: Input rules of the sriov_network_operator role (policies, networks, operator config, source)
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - The input rules of the SR-IOV Network Operator role (the collection's private module_utils C(_sriov_policy),
    C(policy_input_findings)) - each policy, network and the operator config field by field, duplicate names,
    networks whose resource no policy provides, the source choice against the Network Operator's bundled copy, and
    the operator's webhooks turned on without the chart's certificates (C(operator.admissionControllers.enabled)).
  - Returns the findings C({id, severity, object, evidence, cause, fix}); each names the variable path.
positional: bundled_enabled
options:
  _input:
    description: The role's variables, keyed by their full names.
    type: dict
    required: true
  bundled_enabled:
    description: Whether the NVIDIA Network Operator the playbooks manage enables its bundled SR-IOV operator.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Stop on bad input
  ansible.builtin.assert:
    that: _findings | selectattr('severity', 'eq', 'error') | length == 0
  vars:
    _findings: "{{ sriov_variables | gpuops.platform.sriov_input_findings(false) }}"
"""

RETURN = r"""
_value:
  description: The findings.
  type: list
  elements: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.sriov import _sriov_inputs  # noqa: E402

PREFIX = "sriov_network_operator_"


def sriov_input_findings(variables: Any, bundled_enabled: bool = False) -> list[dict[str, Any]]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("sriov_input_findings expects the sriov_network_operator_* variables as a dict")
    return _sriov_inputs.policy_input_findings(
        variables.get(PREFIX + "policies"),
        variables.get(PREFIX + "networks"),
        variables.get(PREFIX + "ib_networks"),
        variables.get(PREFIX + "config"),
        variables.get(PREFIX + "source", "standalone"),
        bool(bundled_enabled),
        variables.get(PREFIX + "values"),
    )


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"sriov_input_findings": sriov_input_findings}
