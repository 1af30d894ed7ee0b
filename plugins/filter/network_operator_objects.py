# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: network_operator_objects
short_description: What the network_operator role applies, built from its variables
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - The builders of the NVIDIA Network Operator role (in the collection's private module_utils C(_network)) - the
    chart values the role owns, the NicClusterPolicy C(nic-cluster-policy) (the only name the operator reconciles)
    and the nv-ipam IPPools and MacvlanNetwork / HostDeviceNetwork / IPoIBNetwork objects in apply order.
  - Check the variables with C(gpuops.platform.network_input_findings) first; this builds, it does not judge.
options:
  _input:
    description:
      - The role's variables, keyed by their full names (C(network_operator_mode), ...); C(network_operator_nfd_managed)
        is the collection's C(gpuops_nfd_managed).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Apply the NicClusterPolicy
  kubernetes.core.k8s:
    definition: "{{ (network_operator_variables | gpuops.platform.network_operator_objects).nic_cluster_policy }}"
    apply: true
"""

RETURN = r"""
_value:
  description: The built objects.
  type: dict
  contains:
    chart_values:
      description: The chart values the role owns (C(nfd.enabled), C(sriovNetworkOperator.enabled)).
      type: dict
    nic_cluster_policy:
      description: The NicClusterPolicy.
      type: dict
    ip_pools:
      description: The nv-ipam IPPools (in the operator's namespace), labelled as the role's (C(owner_selector)).
      type: list
      elements: dict
    networks:
      description:
        - The MacvlanNetworks, HostDeviceNetworks and IPoIBNetworks (cluster-scoped), labelled as the role's.
      type: list
      elements: dict
    prune:
      description: The O(gpuops.platform.k8s_apply#module:prune) option of the role's apply (its labels, its kinds).
      type: dict
    owner_selector:
      description:
        - The label selector of the IPPools and networks the role owns (gpuops.platform.k8s_apply with C(prune)
          deletes those the variables no longer hold).
      type: str
    waits:
      description: The networks as C(gpuops.platform.gpu_cluster_status) wait objects C({kind, name}).
      type: list
      elements: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.network import (  # noqa: E402
    _network,
    _network_owned,
)


def network_operator_objects(variables: Any) -> dict[str, Any]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError(
            f"network_operator_objects expects a dict of network_operator_* variables, got {type(variables).__name__}"
        )
    cfg = _network.from_variables(variables)
    objects = [_network_owned.owned(o) for o in _network.network_objects(cfg)]
    networks = [o for o in objects if o["kind"] != "IPPool"]
    return {
        "chart_values": _network.chart_values(cfg),
        "nic_cluster_policy": _network.nic_cluster_policy(cfg),
        "ip_pools": [o for o in objects if o["kind"] == "IPPool"],
        "networks": networks,
        "waits": [{"kind": o["kind"], "name": o["metadata"]["name"]} for o in networks],
        "owner_selector": _network_owned.OWNER_SELECTOR,
        "prune": _network_owned.PRUNE,
    }


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"network_operator_objects": network_operator_objects}
