# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: pods_started_before
short_description: The pods started before a field manager last changed the ConfigMap they read at start
version_added: 0.3.0
author: gpuops.platform maintainers
description:
  - For a ConfigMap that pods read only when they start (the dcgm-exporter's collectors CSV), the names of the pods
    created before the given field manager last changed it - the time of that manager's C(managedFields) entry,
    which the API server moves whenever the manager changes a value it owns. Restarting those pods loads the new
    content; a run that failed between the write and the restart is finished by the next run (the collection's
    private module_utils C(_owned.pods_started_before)).
  - Creation times have one-second resolution - a pod created in the same second as the change counts as started
    after it.
positional: pods, field_manager
options:
  _input:
    description: The ConfigMap as read after this run's write, or null when it does not exist (then no pod).
    type: dict
    required: true
  pods:
    description: The pods that read it.
    type: list
    elements: dict
    required: true
  field_manager:
    description: The field manager of the role's server-side apply.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Restart the exporter pods that still run the old collectors
  kubernetes.core.k8s:
    state: absent
    kind: Pod
    namespace: gpu-operator
    name: "{{ item }}"
  loop: >-
    {{ _cm.resources | first | default(none)
       | gpuops.platform.pods_started_before(_pods.resources, 'gpuops-gpu-operator') }}
"""

RETURN = r"""
_value:
  description: The names of the pods to restart, sorted.
  type: list
  elements: str
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned  # noqa: E402


def pods_started_before(config_map: Any, pods: Any, field_manager: Any) -> list[str]:
    if config_map is not None and not isinstance(config_map, dict):
        raise AnsibleFilterError("pods_started_before expects the ConfigMap (a dict) or null")
    if not isinstance(pods, list) or not isinstance(field_manager, str) or not field_manager:
        raise AnsibleFilterError("pods_started_before expects the pods (a list) and the field manager (a string)")
    return _owned.pods_started_before(config_map, pods, field_manager)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"pods_started_before": pods_started_before}
