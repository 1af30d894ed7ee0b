#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: pcie_acs
short_description: Disable or enable PCIe Access Control Services on GPU and RDMA NIC paths
version_added: 0.1.0
author: gpuops.platform contributors (@gpuops)
description:
  - GPUDirect peer-to-peer and GPUDirect RDMA need ACS redirection off on the PCIe bridges and switch ports between
    GPUs and NICs; otherwise P2P traffic goes up to the root complex (and through the IOMMU).
  - Finds the ACS extended capability (ID 0x000d) by walking the extended capability list of each device's config
    space (C(/sys/bus/pci/devices/<address>/config)) and reads and writes its ACS Control register (capability offset
    + 6), which is what C(setpci -s <address> ECAP_ACS+0x6.w=<value>) does. Each write is read back.
  - Targets, by default, every bridge and switch port with an ACS capability on the path from each GPU and RDMA NIC
    up to its root port; or exactly the devices listed in O(devices).
  - ACS Control resets at every reboot. O(persist=true) installs C(/etc/systemd/system/gpuops-pcie-acs.service), a
    oneshot unit that runs C(setpci) for each target at boot, reloads systemd and enables the unit. The reload is
    recorded as pending (under C(/var/lib/gpuops-platform/pending/)) before the unit file changes and the record is
    removed once C(systemctl daemon-reload) succeeded, so a run that failed in between reloads on the next run.
extends_documentation_fragment:
  - gpuops.platform._attributes.full_support
attributes:
  check_mode:
    details:
      - Reads every register and computes the values; writes no register or unit and runs no systemctl change.
  diff_mode:
    details:
      - Shows the ACS Control value of each device before and after, and the unit file.
options:
  state:
    description:
      - V(disabled) writes 0 to ACS Control.
      - V(enabled) writes what Linux writes when it enables ACS, the supported subset of Source Validation, P2P Request
        Redirect, P2P Completion Redirect and Upstream Forwarding (capability AND 0x001d).
    type: str
    choices: [disabled, enabled]
    default: disabled
  devices:
    description:
      - PCI addresses (C(DDDD:BB:DD.F), or C(BB:DD.F) for domain 0000) to set, instead of the default targets.
      - A listed device without the ACS capability is an error, and nothing is changed. Errors name the item, for
        example C(devices[1]).
    type: list
    elements: str
  persist:
    description:
      - Install and enable the boot-time unit that re-applies the values. Needs C(setpci) (pciutils) and systemd
        running as the host's init (C(/run/systemd/system) present, as sd_booted(3) checks), and a writable
        C(/etc/systemd/system); all three are checked before any register or file is written, so a host without
        them fails with nothing changed.
      - V(false) leaves an existing unit as it is.
    type: bool
    default: false
notes:
  - Must run as root (C(become=true)); without root the kernel exposes only the first 64 bytes of config space.
  - With the IOMMU enabled, Linux sets ACS at boot as it enumerates devices; the unit runs after that.
"""

EXAMPLES = r"""
- name: Disable ACS above all GPUs and RDMA NICs, also after reboots
  gpuops.platform.pcie_acs:
    state: disabled
    persist: true
  become: true

- name: Disable ACS on two switch ports only
  gpuops.platform.pcie_acs:
    devices: ["0000:16:02.0", "0000:16:03.0"]
  become: true
"""

RETURN = r"""
state:
  description: The requested state.
  returned: always
  type: str
  sample: disabled
devices:
  description: Each target with its ACS capability offset, capability register, and control value before and after.
  returned: always
  type: list
  elements: dict
  contains:
    address:
      description: PCI address.
      type: str
    acs_offset:
      description: Offset of the ACS extended capability in config space.
      type: str
    capability:
      description: ACS Capability register.
      type: str
    before:
      description: ACS Control before the task.
      type: str
    after:
      description: ACS Control after the task (in check mode, the value that would be written).
      type: str
    changed:
      description: Whether this device's register changes.
      type: bool
  sample:
    - {"address": "0000:16:02.0", "acs_offset": "0x220", "capability": "0x005f", "before": "0x001d", "after": "0x0000",
       "changed": true}
unit:
  description: The boot-time unit when O(persist=true) - C(path), C(changed) and C(enabled); null otherwise.
  returned: always
  type: dict
  sample: {"path": "/etc/systemd/system/gpuops-pcie-acs.service", "changed": true, "enabled": true}
"""

from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.host import _acs  # noqa: E402

ARGUMENT_SPEC = {
    "state": {"type": "str", "choices": ["disabled", "enabled"], "default": "disabled"},
    "devices": {"type": "list", "elements": "str"},
    "persist": {"type": "bool", "default": False},
}


def main() -> None:
    run_module(_acs.run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()
