# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: nfd_conflicts
short_description: Findings for NFD instances other than the one the nfd role manages
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - The "never two NFDs" rule (in the collection's private module_utils C(_cluster_rules.second_nfd)). Given the
    NFD worker DaemonSets of the cluster, returns one finding C({id, severity, object, evidence, cause, fix}) per
    worker outside O(namespace), or an empty list.
positional: namespace
options:
  _input:
    description: The NFD worker DaemonSets (C(kubernetes.core.k8s_info) resources).
    type: list
    elements: dict
    required: true
  namespace:
    description: The namespace of the NFD the nfd role manages.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse a second NFD
  ansible.builtin.assert:
    that: _conflicts | length == 0
    fail_msg: "{{ _conflicts | map(attribute='evidence') | flatten | join('; ') }}"
  vars:
    _conflicts: "{{ workers.resources | gpuops.platform.nfd_conflicts('node-feature-discovery') }}"
"""

RETURN = r"""
_value:
  description: The findings, empty when no other NFD runs.
  type: list
  elements: dict
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402 - after the documentation, as ansible-test expects
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _cluster_rules  # noqa: E402


def nfd_conflicts(workers: Any, namespace: Any) -> list[dict[str, Any]]:
    if not isinstance(workers, list):
        raise AnsibleFilterError(f"nfd_conflicts expects a list of DaemonSets, got {type(workers).__name__}")
    return _cluster_rules.second_nfd(workers, namespace)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"nfd_conflicts": nfd_conflicts}
