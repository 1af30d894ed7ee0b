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
positional: facts, labels, vfs
options:
  _input:
    description: The role's variables, keyed by their full names.
    type: dict
    required: true
  facts:
    description:
      - Each inventory host (= node name) of the group mapped to its C(gpuops_host) facts (null when not known). The
        hosts judged are its keys.
    type: dict
    required: true
  labels:
    description: Node name to the node's labels (a host with no node here is judged with labels not known).
    type: dict
    default: {}
  vfs:
    description: Inventory host to host_prep's VF requests for it (C(host_prep_sriov_vfs); none when missing).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Stop when a guard fails
  ansible.builtin.assert:
    that: _findings | selectattr('severity', 'eq', 'error') | length == 0
  vars:
    _findings: "{{ sriov_variables | gpuops.platform.sriov_host_findings(facts_by_host, labels_by_node, vfs_by_host) }}"
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


def sriov_host_findings(variables: Any, facts: Any, labels: Any = None, vfs: Any = None) -> list[dict[str, Any]]:
    labels, vfs = labels or {}, vfs or {}
    if not all(isinstance(x, Mapping) for x in (variables, facts, labels, vfs)):
        raise AnsibleFilterError(
            "sriov_host_findings expects the sriov_network_operator_* variables, then the facts, node labels and "
            "host_prep VF requests per host, as dicts"
        )
    if not facts:
        return []
    hosts = {
        h: {"facts": f, "labels": labels.get(h), "host_prep_sriov_vfs": list(vfs.get(h) or [])}
        for h, f in facts.items()
    }
    return _sriov_hosts.policy_host_findings(variables.get("sriov_network_operator_policies") or [], hosts)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"sriov_host_findings": sriov_host_findings}
