# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: smoke_recorded
short_description: The smoke test results recorded on the nodes
version_added: 0.5.0
author: gpuops.platform maintainers
description:
  - The results the smoke_tests role's last run recorded on the nodes - a label C(gpuops.platform/smoke.<test>) per
    test, V(pass), V(fail) or V(not-measured) (the collection's private module_utils C(smoke._smoke_results),
    C(recorded)).
options:
  _input:
    description: The Node objects (as kubernetes.core.k8s_info returns them).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Fail on a recorded failure
  ansible.builtin.assert:
    that: _recorded.failed | length == 0
  vars:
    _recorded: "{{ nodes.resources | gpuops.platform.smoke_recorded }}"
"""

RETURN = r"""
_value:
  description:
    - C(rows) (C(node), C(test), C(result), by node then test), C(failed) (C(<node> <label>) of each failed result)
      and C(text) (one C(NODE  TEST  RESULT) line per result, or V(no smoke test result recorded)).
  type: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.smoke import _smoke_results  # noqa: E402


def smoke_recorded(nodes: Any) -> dict[str, Any]:
    if not isinstance(nodes, list) or not all(isinstance(n, Mapping) for n in nodes):
        raise AnsibleFilterError("smoke_recorded expects a list of Node objects")
    return _smoke_results.recorded(nodes)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"smoke_recorded": smoke_recorded}
