# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: dig
short_description: The value at a key path in nested mappings, or null
version_added: 0.1.0
author: gpuops.platform maintainers
description:
  - Follows O(path) through nested mappings and returns the value found there, or null when a key is missing or a
    value on the way is not a mapping. Used to compare requested values with a live object's spec field by field.
positional: path
options:
  _input:
    description: The nested mapping.
    type: raw
    required: true
  path:
    description: The keys to follow, outermost first.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The MIG strategy of a ClusterPolicy spec
  ansible.builtin.debug:
    msg: "{{ spec | gpuops.platform.dig(['mig', 'strategy']) }}"
"""

RETURN = r"""
_value:
  description: The value at the path, or null.
  type: raw
"""


def dig(data, path):
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


class FilterModule:
    def filters(self):
        return {"dig": dig}
