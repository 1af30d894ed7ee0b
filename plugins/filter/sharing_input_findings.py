# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: sharing_input_findings
short_description: Input rules of the gpu_sharing role (pools, MIG strategy)
version_added: 0.2.0
positional: groups
author: gpuops.platform maintainers
description:
  - The input rules of the gpu_sharing role (the collection's private module_utils C(_sharing),
    C(pool_input_findings)) - each pool field by field (model, name, group or node selector, replicas, MIG name...),
    duplicate names, MPS with the C(mixed) MIG strategy; with O(groups), what the inventory settles about pools that
    name a group.
  - Returns the findings C({id, severity, object, evidence, cause, fix}); each names the variable path.
options:
  _input:
    description:
      - The role's variables, keyed by their full names (C(gpu_sharing_pools), C(gpu_sharing_mig_strategy),
        C(gpu_sharing_mig_configs)).
    type: dict
    required: true
  groups:
    description:
      - The inventory's groups (Ansible's C(groups)); with them, a pool's C(group) the inventory lacks, a group
        without hosts, and a host in two pools' groups are findings too (before any change, no cluster read).
    type: dict
"""

EXAMPLES = r"""
- name: Stop on bad input
  ansible.builtin.assert:
    that: _findings | length == 0
  vars:
    _findings: "{{ {'gpu_sharing_pools': gpu_sharing_pools} | gpuops.platform.sharing_input_findings }}"
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
from ansible_collections.gpuops.platform.plugins.module_utils import _sharing  # noqa: E402


def sharing_input_findings(variables: Any, groups: Any = None) -> list[dict[str, Any]]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("sharing_input_findings expects the gpu_sharing_* variables as a dict")
    if groups is not None and not isinstance(groups, Mapping):
        raise AnsibleFilterError("sharing_input_findings: groups is the inventory's groups (a dict)")
    groups = None if groups is None else {str(g): [str(h) for h in hosts or []] for g, hosts in groups.items()}
    return _sharing.pool_input_findings(
        variables.get(_sharing.VAR_POOLS), variables.get(_sharing.VAR_MIG_STRATEGY, "single"), groups
    ) + _sharing.mig_configs_input_findings(variables.get(_sharing.VAR_MIG_CONFIGS))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"sharing_input_findings": sharing_input_findings}
