# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: network_prune_objects
short_description: The IPPools and networks the network_operator role created that its variables no longer hold
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - The pruning rule of the NVIDIA Network Operator role (in the collection's private module_utils
    C(_network_owned.prune_objects)) - of the live objects, those labelled as the role's
    (C(app.kubernetes.io/managed-by=gpuops.platform), C(gpuops.platform/role=network_operator)) of kind
    MacvlanNetwork, HostDeviceNetwork, IPoIBNetwork or IPPool whose kind, namespace and name are not among the wanted
    objects; objects without the labels are never returned.
  - Returned as C({apiVersion, kind, metadata{name, namespace}}), networks before IPPools (the delete order).
options:
  _input:
    description: The objects the role applies now (IPPools and networks).
    type: list
    elements: dict
    required: true
  live:
    description: The live objects (for example the C(resources) of C(kubernetes.core.k8s_info) reads by label).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Delete what the role created and the variables dropped
  kubernetes.core.k8s:
    definition: "{{ (built.ip_pools + built.networks) | gpuops.platform.network_prune_objects(live) }}"
    state: absent
"""

RETURN = r"""
_value:
  description: The objects to delete, in delete order.
  type: list
  elements: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network_owned  # noqa: E402


def network_prune_objects(wanted: Any, live: Any) -> list[dict[str, Any]]:
    for name, value in (("input", wanted), ("live", live)):
        if not isinstance(value, list) or not all(isinstance(o, Mapping) for o in value):
            raise AnsibleFilterError(f"network_prune_objects expects {name} as a list of objects")
    return _network_owned.prune_objects(wanted, live)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"network_prune_objects": network_prune_objects}
