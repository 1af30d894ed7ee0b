# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: sriov_host_findings
short_description: Host guards of the sriov_network_operator role (PFs, VF limits, one owner per PF)
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - The policies of the SR-IOV Network Operator role against the hosts' C(gpuops_host) facts (the collection's
    private module_utils C(_sriov_policy), C(policy_host_findings)) - num_vfs above a PF's C(sriov_totalvfs), a PF
    name or root device no host has, a selector matching no NIC, two policies on one PF with different counts or
    overlapping VF ranges, and one owner per PF against host_prep's C(sriov_vfs).
  - Returns the findings C({id, severity, object, evidence, cause, fix}); findings that differ only in the host are
    merged into one naming the hosts.
positional: hosts
options:
  _input:
    description: The role's variables, keyed by their full names.
    type: dict
    required: true
  hosts:
    description:
      - Each inventory host (= node name) mapped to C({facts, labels, host_prep_sriov_vfs}) - its C(gpuops_host)
        facts, its node labels (null when not known) and host_prep's VF requests for it.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Stop when a guard fails
  ansible.builtin.assert:
    that: _findings | selectattr('severity', 'eq', 'error') | length == 0
  vars:
    _findings: "{{ sriov_variables | gpuops.platform.sriov_host_findings(hosts) }}"
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
from ansible_collections.gpuops.platform.plugins.module_utils.sriov import _sriov_hosts  # noqa: E402


def sriov_host_findings(variables: Any, hosts: Any) -> list[dict[str, Any]]:
    if not isinstance(variables, Mapping) or not isinstance(hosts, Mapping):
        raise AnsibleFilterError(
            "sriov_host_findings expects the sriov_network_operator_* variables and the hosts as dicts"
        )
    if not hosts:
        return []
    return _sriov_hosts.policy_host_findings(variables.get("sriov_network_operator_policies") or [], hosts)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"sriov_host_findings": sriov_host_findings}
