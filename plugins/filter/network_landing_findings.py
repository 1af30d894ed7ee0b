# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: network_landing_findings
short_description: The values the network_operator role asked for that did not land in the live objects
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - The landing rule of the NVIDIA Network Operator role (in the collection's private module_utils
    C(_network_owned.landing_findings)) - every leaf of each wanted object's C(spec) and labels (the NicClusterPolicy,
    the IPPools, the networks) must hold the same value, type included, in the live object of the same kind,
    namespace and name; fields the live object adds (CRD defaults) are not differences.
  - Returns one finding C({id, severity, object, evidence, cause, fix}) per object that is missing or differs, one
    evidence line per field (the field, then C(wanted <json>, live <json>)), or an empty list.
options:
  _input:
    description: The objects the role applied.
    type: list
    elements: dict
    required: true
  live:
    description: The live objects (for example the C(resources) of C(kubernetes.core.k8s_info) reads).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Fail when a requested NicClusterPolicy value did not land
  ansible.builtin.assert:
    that: _findings | length == 0
    fail_msg: "{{ _findings | map(attribute='evidence') | flatten | join('; ') }}"
  vars:
    _findings: "{{ [built.nic_cluster_policy] | gpuops.platform.network_landing_findings(live_policies) }}"
"""

RETURN = r"""
_value:
  description: The findings, empty when everything landed.
  type: list
  elements: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network_owned  # noqa: E402


def network_landing_findings(wanted: Any, live: Any) -> list[dict[str, Any]]:
    for name, value in (("input", wanted), ("live", live)):
        if not isinstance(value, list) or not all(isinstance(o, Mapping) for o in value):
            raise AnsibleFilterError(f"network_landing_findings expects {name} as a list of objects")
    return _network_owned.landing_findings(wanted, live)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"network_landing_findings": network_landing_findings}
