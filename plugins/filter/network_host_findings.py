# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: network_host_findings
short_description: Host guards of the network_operator role (device plugin selectors against the NICs, MOFED)
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - The host rules of the NVIDIA Network Operator role (in the collection's private module_utils C(_network)),
    judged with the hosts' C(gpuops_host) facts (C(gpuops.platform.gpu_host_facts)) - C(nic_selector_findings) (a
    device plugin resource of the chosen mode that selects no NIC of any host is an error whose evidence lists every
    NIC the hosts have; one that selects only NICs without an RDMA device is a warning) and C(mofed_findings) (the
    DOCA driver container on a host with MLNX_OFED/DOCA-OFED; the GPU Operator's C(useHostMofed) against the driver
    container or the hosts' MOFED).
  - Returns the findings C({id, severity, object, evidence, cause, fix}); empty when nothing is wrong or when no
    host is given (nothing to judge). A host that could not be read (O(unreachable)) is an error.
positional: hosts, gpu_operator, unreachable
options:
  _input:
    description: The role's variables, keyed by their full names (C(network_operator_mode), ...).
    type: dict
    required: true
  hosts:
    description: Each inventory host's C(gpuops_host) facts, keyed by the host.
    type: dict
    required: true
  gpu_operator:
    description:
      - The GPU Operator's intent when the playbooks manage it - C(rdma) (C(driver.rdma.enabled)),
        C(use_host_mofed) (C(driver.rdma.useHostMofed)), C(driver) (V(container), V(host) or V(none)); empty or
        null when the GPU Operator is not managed.
    type: dict
  unreachable:
    description:
      - The hosts of the group that could not be read; each is an error finding (C(network-host-unreachable)) and
        nothing else is judged (their NICs and MOFED are unknown).
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Stop when a guard fails
  ansible.builtin.assert:
    that: _findings | selectattr('severity', 'eq', 'error') | length == 0
  vars:
    _findings: >-
      {{ network_operator_variables | gpuops.platform.network_host_findings(host_facts,
         {'rdma': true, 'use_host_mofed': false, 'driver': 'container'}) }}
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
from ansible_collections.gpuops.platform.plugins.module_utils.network import (  # noqa: E402
    _network,
    _network_hosts,
)


def network_host_findings(
    variables: Any, hosts: Any, gpu_operator: Any = None, unreachable: Any = None
) -> list[dict[str, Any]]:
    if not isinstance(variables, Mapping) or not isinstance(hosts, Mapping):
        raise AnsibleFilterError(
            "network_host_findings expects the network_operator_* variables and the hosts' gpuops_host facts as dicts"
        )
    if unreachable:
        group = str(variables.get("network_operator_host_group") or "")
        return _network_hosts.unreachable_findings([str(h) for h in unreachable], group)
    if not hosts:
        return []
    cfg = _network.config(_network.from_variables(variables))
    mode = cfg["mode"]
    out = []
    if mode in ("rdma_shared", "host_device"):
        key = "rdma_shared_resources" if mode == "rdma_shared" else "host_device_resources"
        resources = [r for r in cfg[key] if isinstance(r, Mapping)]
        out += _network_hosts.nic_selector_findings(resources, hosts, key)
    out += _network_hosts.mofed_findings(hosts, cfg, gpu_operator or None)
    return out


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"network_host_findings": network_host_findings}
