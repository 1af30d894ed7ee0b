# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: repair_step
short_description: The next step of the remediation's repair ladder for a fault class
version_added: 0.5.0
author: gpuops.platform maintainers
description:
  - The ladder per fault class (the collection's private module_utils C(remediation._policy), C(repair_step)) - a GPU
    reset when the event names the GPU's index, the node's host is in the inventory and the GPU is idle; a reboot only
    with O(allow_reboot) and a host; otherwise (and at the end of every ladder) the hand-off to break-fix.
  - "Built-in ladder: C(bus) (fallen off the bus) reboot; C(memory), C(hardware), C(nvlink) reset then reboot;
    C(row_remap_failure) and any other class break-fix. O(ladder) replaces it per class."
positional: tried, allow_reboot, gpu_idle, has_host, ladder
options:
  _input:
    description: The remediation event (C(gpuops_remediation_event)); its C(fault_class) and C(gpu.index) are read.
    type: dict
    required: true
  tried:
    description: The steps tried already for this event.
    type: list
    elements: str
    default: []
  allow_reboot:
    description: Whether a reboot is allowed (C(gpuops_allow_reboot)).
    type: bool
    default: false
  gpu_idle:
    description: Whether the GPU is idle; null when not known (the reset checks it itself).
    type: bool
  has_host:
    description: Whether the inventory has the node's host (the host-prep connection).
    type: bool
    default: false
  ladder:
    description: Per fault class, the steps in order (V(reset), V(reboot), V(break_fix)).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Choose the next repair step
  ansible.builtin.set_fact:
    _step: "{{ gpuops_remediation_event | gpuops.platform.repair_step([], gpuops_allow_reboot, none, true) }}"
"""

RETURN = r"""
_value:
  description: C(step) (V(reset), V(reboot) or V(break_fix)), C(why), C(skipped) (the steps passed over and why).
  type: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._plain import plain  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _policy  # noqa: E402


def repair_step(
    event: Any,
    tried: Any = (),
    allow_reboot: Any = False,
    gpu_idle: Any = None,
    has_host: Any = False,
    ladder: Any = None,
) -> dict[str, Any]:
    if not isinstance(event, Mapping) or not isinstance(event.get("fault_class"), str):
        raise AnsibleFilterError("repair_step expects the remediation event (a dict with fault_class)")
    steps = plain(ladder or {})
    for fault_class, chosen in steps.items():
        if not isinstance(chosen, list) or any(s not in _policy.REPAIR_STEPS for s in chosen):
            raise AnsibleFilterError(
                f"repair_step: ladder.{fault_class}: {chosen!r} is not a list of reset, reboot, break_fix"
            )
    gpu: Mapping[str, Any] = event["gpu"] if isinstance(event.get("gpu"), Mapping) else {}
    index = gpu.get("index")
    got = _policy.repair_step(
        event["fault_class"],
        [str(t) for t in tried or ()],
        bool(allow_reboot),
        None if gpu_idle is None else bool(gpu_idle),
        None if index in (None, "") else index,
        bool(has_host),
        steps or None,
    )
    return plain(got)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"repair_step": repair_step}
