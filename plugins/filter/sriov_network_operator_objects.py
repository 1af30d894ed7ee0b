# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: sriov_network_operator_objects
short_description: The custom resources and chart values of the sriov_network_operator role
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - Builds, with the builders of the collection's private module_utils C(_sriov_policy), the SriovOperatorConfig
    C(default), one SriovNetworkNodePolicy per rail, the SriovNetworks and SriovIBNetworks (all in the operator's
    namespace), the chart values the role owns and the node resource prefix.
  - Raises an error on input that C(gpuops.platform.sriov_input_findings) reports; the role runs that check first.
options:
  _input:
    description: The role's variables, keyed by their full names (C(sriov_network_operator_policies), ...).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the objects
  ansible.builtin.set_fact:
    built: "{{ sriov_variables | gpuops.platform.sriov_network_operator_objects }}"
"""

RETURN = r"""
_value:
  description: The objects.
  type: dict
  contains:
    operator_config:
      description: The SriovOperatorConfig C(default).
      type: dict
    policies:
      description: The SriovNetworkNodePolicies.
      type: list
      elements: dict
    networks:
      description: The SriovNetworks and SriovIBNetworks.
      type: list
      elements: dict
    chart_values:
      description: The chart values the role owns (C(sriovOperatorConfig.deploy=false)).
      type: dict
    prefix:
      description: The node resource prefix (V(openshift.io) standalone, V(nvidia.com) bundled).
      type: str
    resources:
      description: The node resources the policies advertise, C(<prefix>/<resourceName>).
      type: list
      elements: str
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.sriov import (  # noqa: E402
    _sriov_config,
    _sriov_networks,
    _sriov_policy,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status import _sriov_ready  # noqa: E402

PREFIX = "sriov_network_operator_"


def sriov_network_operator_objects(variables: Any) -> dict[str, Any]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError(
            f"sriov_network_operator_objects expects a dict of sriov_network_operator_* variables, got "
            f"{type(variables).__name__}"
        )
    ns = variables.get(PREFIX + "namespace")
    source = variables.get(PREFIX + "source", "standalone")
    try:
        policies = [_sriov_policy.node_policy(p, ns) for p in variables.get(PREFIX + "policies") or []]
        networks = [_sriov_networks.sriov_network(n, ns) for n in variables.get(PREFIX + "networks") or []]
        networks += [_sriov_networks.sriov_ib_network(n, ns) for n in variables.get(PREFIX + "ib_networks") or []]
        config = _sriov_config.operator_config(variables.get(PREFIX + "config") or {}, ns)
        prefix = _sriov_policy.resource_prefix(source, variables.get(PREFIX + "values") or {})
    except InvalidInput as exc:
        raise AnsibleFilterError(f"sriov_network_operator: {exc}") from exc
    return {
        "operator_config": config,
        "policies": policies,
        "networks": networks,
        "chart_values": {"sriovOperatorConfig": {"deploy": False}},
        "prefix": prefix,
        "resources": sorted({_sriov_ready.resource(prefix, p["spec"]["resourceName"]) for p in policies}),
    }


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"sriov_network_operator_objects": sriov_network_operator_objects}
