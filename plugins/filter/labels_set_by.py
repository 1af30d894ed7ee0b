# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: labels_set_by
short_description: The objects whose labels a field manager set, and which of them
version_added: 0.4.0
author: gpuops.platform maintainers
description:
  - For each object (as read with C(metadata.managedFields), for example nodes), the label keys that the given field
    manager set and no other manager also holds - the labels to remove when what set them is removed. A label a user
    also set (C(kubectl label), another tool) is held by that manager too, and is kept (the collection's private
    module_utils C(_owned.labels_set_by)).
positional: field_manager, keys
options:
  _input:
    description: The objects.
    type: list
    elements: dict
    required: true
  field_manager:
    description: The field manager of the server-side apply that set the labels.
    type: str
    required: true
  keys:
    description: Only these label keys (all the manager's labels when omitted).
    type: list
    elements: str
  kind:
    description: The objects' kind, for C(release) (they may be read as C(PartialObjectMetadata)); cluster-scoped.
    type: str
    default: Node
  api_version:
    description: The objects' apiVersion, for C(release).
    type: str
    default: v1
"""

EXAMPLES = r"""
- name: The nodes whose driver label the gpu_operator guards set
  ansible.builtin.debug:
    msg: >-
      {{ _nodes.resources
         | gpuops.platform.labels_set_by('gpuops-gpu-operator-guards', ['nvidia.com/gpu.deploy.driver']) }}
"""

RETURN = r"""
_value:
  description:
    - "C({name, labels, release}) per object with at least one such label (labels sorted), in the input's order."
    - C(release) is the object with no labels (O(api_version), O(kind), name); server-side applied with
      O(field_manager) it makes the API server remove the labels that manager alone held.
  type: list
  elements: dict
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned  # noqa: E402


def labels_set_by(
    objs: Any, field_manager: Any, keys: Any = None, kind: str = "Node", api_version: str = "v1"
) -> list[dict[str, Any]]:
    if not isinstance(objs, list) or not all(isinstance(o, dict) for o in objs):
        raise AnsibleFilterError("labels_set_by expects a list of objects")
    if not isinstance(field_manager, str) or not field_manager:
        raise AnsibleFilterError("labels_set_by expects the field manager (a string)")
    out = []
    for obj in objs:
        labels = _owned.labels_set_by(obj, field_manager, keys)
        if labels:
            name = (obj.get("metadata") or {}).get("name")
            # applied with the same field manager, an object without the labels makes the API server drop them (the
            # objects may have been read as PartialObjectMetadata: their kind is given)
            release = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}
            out.append({"name": name, "labels": labels, "release": release})
    return out


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"labels_set_by": labels_set_by}
