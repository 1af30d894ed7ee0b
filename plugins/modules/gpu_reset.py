#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_reset
short_description: Reset one idle NVIDIA GPU of a host (the first step of the remediation's repair ladder)
version_added: 0.5.0
description:
  - Runs on the GPU host. Lists the GPUs (C(nvidia-smi --query-gpu=index,uuid,pci.bus_id)), checks that the GPU at
    O(index) is the one the event names (O(uuid), O(pci_bus_id)) - indexes can change across reboots - and that no
    process uses it (C(nvidia-smi --query-compute-apps -i <index>)), then resets it (C(nvidia-smi -r -i <index>)).
  - A GPU still in use is not reset; the result says which processes hold it (RV(idle) false, RV(reset) false) and
    the task does not fail, so the ladder can take its next step. A GPU that is not listed or whose identity does
    not match fails the task, naming both.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes.full_support
attributes:
  check_mode:
    details:
      - Identifies the GPU and checks idleness; does not reset.
  diff_mode:
    support: none
    details:
      - A reset has no before and after to show.
  idempotent:
    support: none
    details:
      - Every run on an idle GPU resets it again; the playbook runs it once per event.
options:
  index:
    description: The GPU's index on the host (the dcgm-exporter's C(gpu) label).
    type: int
    required: true
  uuid:
    description: The GPU's UUID as the event names it; the reset is refused when the GPU at O(index) has another.
    type: str
  pci_bus_id:
    description: The GPU's PCI bus id as the event names it; the reset is refused when it does not match.
    type: str
requirements:
  - nvidia-smi (the NVIDIA driver's utilities) on the host, root
"""

EXAMPLES = r"""
- name: Reset the faulty GPU when it is idle
  gpuops.platform.gpu_reset:
    index: 3
    uuid: GPU-5c6f1a2b-0000-1111-2222-333344445555
  become: true
  delegate_to: gpu-node-7
"""

RETURN = r"""
gpu:
  description: The GPU found at O(index) (C(index), C(uuid), C(pci_bus_id)).
  returned: when the GPU was found
  type: dict
idle:
  description: No process uses the GPU.
  returned: when the GPU was found
  type: bool
processes:
  description: The processes using the GPU (C(pid name)).
  returned: when the GPU was found
  type: list
  elements: str
reset:
  description: The GPU was reset (false in check mode and when it was busy).
  returned: when the GPU was found
  type: bool
"""

from typing import Any  # noqa: E402 - after the documentation, as ansible-test expects

from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _reset  # noqa: E402

ARGUMENT_SPEC = {
    "index": {"type": "int", "required": True},
    "uuid": {"type": "str"},
    "pci_bus_id": {"type": "str"},
}


def run(ctx: Any) -> dict[str, Any]:
    result = _reset.reset(ctx.runner, ctx.params, ctx.check_mode)
    if result.get("reset"):
        ctx.did(f"reset GPU {ctx.params['index']}")
    return result


def main() -> None:
    run_module(run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
