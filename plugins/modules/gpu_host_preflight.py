#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_host_preflight
short_description: Check a GPU host against what is planned for it, before changing anything
version_added: 0.1.0
description:
  - Compares the host (the facts of gpuops.platform.gpu_host_facts, given in O(facts) or gathered) with the plan the
    roles pass in, and returns findings, each with an C(id), a C(severity) (V(error), V(warning), V(info)), a
    C(message) that names the evidence and a C(remedy).
  - "Checks: kernel headers missing while a driver build is planned; nouveau loaded (or not blacklisted) while an
    NVIDIA driver is planned; a host NVIDIA driver while the driver container is planned; host MLNX_OFED/DOCA-OFED
    while the Network Operator's DOCA driver is planned; NVSwitches without a running Fabric Manager of the driver's
    version; GPUDirect with ACS enabled above GPUs/NICs or the IOMMU translating; SR-IOV VF counts above the firmware
    limit or on unknown PFs; Secure Boot with unsigned modules planned."
  - Fails when a finding is at or above O(fail_on), with all findings in the result.
author:
  - gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes
  - gpuops.platform._attributes.info_module
options:
  facts:
    description: The C(gpuops_host) facts to check; gathered from the host when omitted.
    type: dict
  nvidia_driver:
    description:
      - Which NVIDIA driver is planned - V(host) (packages on the host), V(container) (GPU Operator driver container)
        or V(none).
    type: str
    choices: [none, host, container]
    default: none
  driver_build:
    description: Whether a kernel module build (DKMS or driver container compiling for this kernel) is planned.
    type: bool
    default: false
  ofed:
    description:
      - Which RDMA driver stack is planned - V(host) (MLNX_OFED/DOCA-OFED on the host), V(operator) (Network Operator
        DOCA driver container) or V(none).
    type: str
    choices: [none, host, operator]
    default: none
  gpudirect:
    description: Whether GPUDirect P2P/RDMA is requested.
    type: bool
    default: false
  sriov:
    description: The VF counts planned per PF.
    type: list
    elements: dict
    suboptions:
      pf:
        description: PF netdev name or PCI address.
        type: str
        required: true
      num_vfs:
        description: VF count planned.
        type: int
        required: true
  unsigned_modules:
    description:
      - Whether unsigned kernel modules (for example a locally built driver without module signing) are planned.
    type: bool
    default: false
  fail_on:
    description: Fail at findings of this severity or worse; V(never) only reports.
    type: str
    choices: [error, warning, never]
    default: error
"""

EXAMPLES = r"""
- name: Preflight for a host driver build with GPUDirect RDMA and SR-IOV
  gpuops.platform.gpu_host_preflight:
    nvidia_driver: host
    driver_build: true
    ofed: operator
    gpudirect: true
    sriov:
      - {pf: ens1f0np0, num_vfs: 8}
  become: true

- name: Check already gathered facts, report only
  gpuops.platform.gpu_host_preflight:
    facts: "{{ ansible_facts.gpuops_host }}"
    nvidia_driver: container
    fail_on: never
  register: preflight
"""

RETURN = r"""
findings:
  description: Every finding, in check order.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Stable identifier, for example V(kernel-headers-missing), V(acs-enabled), V(sriov-vfs-above-limit).
      type: str
    severity:
      description: V(error), V(warning) or V(info).
      type: str
    message:
      description: What is wrong, naming the device, file or version.
      type: str
    remedy:
      description: How to fix it.
      type: str
  sample:
    - id: nouveau-loaded
      severity: error
      message: nouveau is loaded (not in use) while the NVIDIA driver (host) is planned
      remedy: run gpuops.platform.nouveau_blacklist (state=present), then reboot if reboot_required
summary:
  description: Number of findings per severity.
  returned: always
  type: dict
  sample: {"error": 1, "warning": 0, "info": 0}
passed:
  description: Whether no finding reached O(fail_on).
  returned: always
  type: bool
plan:
  description: The plan checked against.
  returned: always
  type: dict
"""

from ansible_collections.gpuops.platform.plugins.module_utils import _preflight  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils._module import run_module  # noqa: E402

ARGUMENT_SPEC = {
    "facts": {"type": "dict"},
    "nvidia_driver": {"type": "str", "choices": ["none", "host", "container"], "default": "none"},
    "driver_build": {"type": "bool", "default": False},
    "ofed": {"type": "str", "choices": ["none", "host", "operator"], "default": "none"},
    "gpudirect": {"type": "bool", "default": False},
    "sriov": {
        "type": "list",
        "elements": "dict",
        "options": {"pf": {"type": "str", "required": True}, "num_vfs": {"type": "int", "required": True}},
    },
    "unsigned_modules": {"type": "bool", "default": False},
    "fail_on": {"type": "str", "choices": ["error", "warning", "never"], "default": "error"},
}


def main():
    run_module(_preflight.run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
