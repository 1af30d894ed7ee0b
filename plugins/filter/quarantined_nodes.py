# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: quarantined_nodes
short_description: The nodes the remediation marked, and why
version_added: 0.5.0
author: gpuops.platform maintainers
description:
  - From Node objects, the ones labelled C(gpuops.platform/remediation) (C(quarantined), C(notified), C(break-fix))
    with what their annotations say (the collection's private module_utils C(remediation._policy),
    C(quarantined_view)). C(playbooks/diagnose.yml) prints them as its QUARANTINED table.
options:
  _input:
    description: Node objects.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: The quarantined nodes
  ansible.builtin.debug:
    msg: "{{ _nodes.resources | gpuops.platform.quarantined_nodes }}"
"""

RETURN = r"""
_value:
  description:
    - Per marked node, sorted by name - C(node), C(state), C(alert), C(fault_class), C(gpu) (in words), C(since) (the
      alert's start), C(at) (when gpuops acted), C(unschedulable), C(break_fix) (when it was handed to people).
  type: list
  elements: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._plain import plain  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _policy  # noqa: E402


def quarantined_nodes(nodes: Any) -> list[dict[str, Any]]:
    if not isinstance(nodes, list) or not all(isinstance(n, Mapping) for n in nodes):
        raise AnsibleFilterError("quarantined_nodes expects a list of Node objects")
    return _policy.quarantined_view(plain(nodes))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"quarantined_nodes": quarantined_nodes}
