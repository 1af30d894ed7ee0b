# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: sharing_restart
short_description: The device-plugin pods the gpu_sharing role restarts so that new ConfigMap content is loaded
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - The device plugin's config-manager reloads on a change of the node's C(nvidia.com/device-plugin.config) label
    only; an entry's content (a new C(replicas)) is read when the pod starts. With the collection's private
    module_utils C(_sharing_status.restart_plan) - the entries whose content this run changes, the annotation
    C(gpuops.platform/stale-device-plugin-pods) to write with the new content (the UIDs of the device-plugin pods then
    running on the nodes that use a changed entry; the recorded value when nothing changes) and the pods to restart
    (those the record names that still exist), so a run that fails before the restart is finished by the next one.
positional: configs, nodes, label_patches, pods
options:
  _input:
    description: The device-plugin ConfigMap as it is before this run's write, or null when it does not exist.
    type: dict
    required: true
  configs:
    description: The entries this run writes (C(sharing_plan)'s C(configs)).
    type: dict
    required: true
  nodes:
    description: The Node objects, as listed before this run's label patches.
    type: list
    elements: dict
    required: true
  label_patches:
    description: This run's label patches (C(sharing_plan)'s C(labels)).
    type: list
    elements: dict
    required: true
  pods:
    description: The device-plugin pods (label C(app=nvidia-device-plugin-daemonset)) of the operator namespace.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the restart
  ansible.builtin.set_fact:
    _restart: "{{ _cm_before | gpuops.platform.sharing_restart(_plan.configs, _nodes, _plan.labels, _pods) }}"
"""

RETURN = r"""
_value:
  description: C(changed_entries), C(annotation) (JSON list of pod UIDs), C(pods) and C(nodes) to restart.
  type: dict
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils import _sharing_status  # noqa: E402


def sharing_restart(config_map: Any, configs: Any, nodes: Any, label_patches: Any, pods: Any) -> dict[str, Any]:
    if not isinstance(configs, dict):
        raise AnsibleFilterError("sharing_restart expects the ConfigMap entries (dict)")
    if not isinstance(nodes, list) or not isinstance(label_patches, list) or not isinstance(pods, list):
        raise AnsibleFilterError("sharing_restart expects the nodes, the label patches and the pods as lists")
    return _sharing_status.restart_plan(config_map or None, configs, nodes, label_patches, pods)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"sharing_restart": sharing_restart}
