# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: landing_differences
short_description: The requested fields that did not land in a live object's spec
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - The landing rule of the release path (the rule itself lives in the collection's private module_utils
    C(_helm_release.landing_differences)). For every key path in O(paths), a value requested in the input (not
    null, not empty) must be the value at the same path of O(live); returns one line per field that differs,
    naming the path and both values, or an empty list when everything landed.
  - Used after an install or upgrade to catch a value that a CRD pruned (CRDs not upgraded) or the chart ignored.
positional: live, paths
options:
  _input:
    description: The requested configuration (for example the ClusterPolicy spec the role asked for).
    type: dict
    required: true
  live:
    description: The live object's spec.
    type: dict
    required: true
  paths:
    description: The key paths to compare, each a list of keys, outermost first.
    type: list
    elements: list
    required: true
"""

EXAMPLES = r"""
- name: Fail when a requested ClusterPolicy field did not land
  ansible.builtin.assert:
    that: _missing | length == 0
    fail_msg: "{{ _missing | join('; ') }}"
  vars:
    _missing: "{{ wanted | gpuops.platform.landing_differences(live_spec, [['mig', 'strategy'], ['cdi', 'enabled']]) }}"
"""

RETURN = r"""
_value:
  description:
    - One line per requested field whose live value differs, for example C(mig.strategy asked "mixed", live "single").
  type: list
  elements: str
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402 - after the documentation, as ansible-test expects
from ansible_collections.gpuops.platform.plugins.module_utils.release import _helm_release  # noqa: E402


def landing_differences(want: Any, live: Any, paths: Any) -> list[str]:
    if not isinstance(paths, list) or not all(isinstance(p, list) for p in paths):
        raise AnsibleFilterError(
            "landing_differences expects paths as a list of key lists, for example [['mig', 'strategy']]"
        )
    return _helm_release.landing_differences(want or {}, live or {}, paths)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"landing_differences": landing_differences}
