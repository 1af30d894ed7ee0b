#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: sriov_vfs
short_description: Set the number of SR-IOV virtual functions of a NIC
version_added: 0.1.0
author: gpuops.platform contributors (@gpuops)
description:
  - Writes C(/sys/bus/pci/devices/<pf>/sriov_numvfs). A count above the PF's C(sriov_totalvfs) (the firmware limit)
    fails with the limit and how to raise it, and nothing is changed.
  - Changing one non-zero count to another goes through 0, as the kernel requires (it refuses the direct change with
    EBUSY).
  - Waits, at most O(timeout) seconds, for the VF devices (C(virtfn*) links of the PF) to appear, and returns their
    PCI addresses and netdevs.
  - Every run checks that the VF devices exist. When C(sriov_numvfs) already reads the requested count but VF devices
    are missing (an earlier run timed out or was interrupted, or the PF driver failed), the VFs are created again
    (0, then the count) and waited for; a run never reports success over VFs that do not exist.
  - O(persist=true) keeps one udev rule per PF in C(/etc/udev/rules.d/70-gpuops-sriov.rules) that writes the count when
    the PF's netdev appears at boot (C(ACTION=="add", SUBSYSTEM=="net", KERNELS=="<pf address>")). udevd notices the
    changed file by itself. O(num_vfs=0) removes the PF's rule.
extends_documentation_fragment:
  - gpuops.platform._attributes.full_support
attributes:
  check_mode:
    details:
      - Validates the request against the device and computes the writes; writes nothing and does not wait.
  diff_mode:
    details:
      - Shows the VF count before and after, and the rules file.
options:
  pf:
    description:
      - The physical function, by network interface name (for example C(ens1f0np0)) or PCI address (C(DDDD:BB:DD.F)).
      - Names with C(/), whitespace or shell metacharacters are rejected.
    type: str
    required: true
  num_vfs:
    description: Number of VFs wanted, from 0 to the PF's C(sriov_totalvfs).
    type: int
    required: true
  persist:
    description:
      - Keep the count across reboots with a udev rule.
      - The rules folder must be writable; that is checked before the VF count changes (a read-only folder fails
        with nothing changed, naming C(/etc/udev/rules.d/70-gpuops-sriov.rules)).
    type: bool
    default: false
  timeout:
    description:
      - Seconds to wait for the VF devices to appear, 0 or more (a negative value is refused before any write).
    type: int
    default: 30
notes:
  - Must run as root (C(become=true)).
  - For NVIDIA ConnectX NICs the firmware limit is raised with
    C(mlxconfig -d <pf address> set SRIOV_EN=1 NUM_OF_VFS=<n>) and a reboot.
"""

EXAMPLES = r"""
- name: Eight VFs on the first ConnectX port, kept across reboots
  gpuops.platform.sriov_vfs:
    pf: ens1f0np0
    num_vfs: 8
    persist: true
  become: true

- name: Remove the VFs of a PF by address
  gpuops.platform.sriov_vfs:
    pf: "0000:3b:00.0"
    num_vfs: 0
  become: true
"""

RETURN = r"""
pf:
  description: PCI address of the PF.
  returned: always
  type: str
  sample: "0000:3b:00.0"
pf_netdevs:
  description: Network interfaces of the PF.
  returned: always
  type: list
  elements: str
  sample: ["ens1f0np0"]
sriov_totalvfs:
  description: The firmware limit.
  returned: always
  type: int
  sample: 16
num_vfs_before:
  description: VF count before the task.
  returned: always
  type: int
  sample: 0
num_vfs:
  description: VF count after the task (requested).
  returned: always
  type: int
  sample: 8
writes:
  description: Values written to C(sriov_numvfs), in order (in check mode, the values that would be written).
  returned: always
  type: list
  elements: int
  sample: [0, 8]
vfs:
  description: The VFs after the task, C(address) and C(netdevs) each (empty in check mode when the count changes).
  returned: always
  type: list
  elements: dict
  sample: [{"address": "0000:3b:00.2", "netdevs": ["ens1f0v0"]}]
rules_path:
  description: The udev rules file when O(persist=true), else null.
  returned: always
  type: str
  sample: /etc/udev/rules.d/70-gpuops-sriov.rules
"""

from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.host import _sriov  # noqa: E402

ARGUMENT_SPEC = {
    "pf": {"type": "str", "required": True},
    "num_vfs": {"type": "int", "required": True},
    "persist": {"type": "bool", "default": False},
    "timeout": {"type": "int", "default": 30},
}


def main() -> None:
    run_module(_sriov.run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
