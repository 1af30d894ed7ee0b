#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_host_facts
short_description: Gather GPU host facts (accelerators, NVSwitches, NICs, PCIe ACS, drivers, IOMMU)
version_added: 0.1.0
description:
  - Reads C(/sys), C(/proc), C(/lib/modules) and C(/etc/modprobe.d) and runs a few read-only commands (C(modinfo),
    C(ofed_info -s), C(dpkg-query) or C(rpm), C(systemctl is-active)/C(is-enabled)) to describe a GPU host.
  - Sets C(ansible_facts.gpuops_host). The other host modules and roles of this collection read these facts
    instead of re-deriving them.
  - Accelerators are NVIDIA (vendor 0x10de, class 0x0300/0x0302), AMD (0x1002, class 0x0300/0x0380/0x1200) and
    Intel Gaudi (0x1da3, class 0x1200) PCI functions; NVSwitches are NVIDIA class 0x0680 functions; NICs are
    network-class (0x02xx) physical functions.
  - The PCIe bridges and switch ports listed are those on the path from each accelerator and RDMA NIC up to its
    root port, with the ACS extended capability read from their config space. Reading extended config space
    needs root (C(become=true)); without it C(config_readable) is V(false) and C(acs) is V(null).
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes.info_module
  - gpuops.platform._attributes.facts
options: {}
notes:
  - Model names come from C(/proc/driver/nvidia/gpus/<address>/information), the sysfs C(product_name) attribute,
    the collection's table of supported GPUs and NVSwitches (by PCI device ID, so a host whose C(pci.ids) predates
    an H200 or a B200 still names it), or the host's C(pci.ids), in that order. See C(docs/host_prep.md).
  - OFED flavor is V(mlnx_ofed) when C(ofed_info -s) prints C(MLNX_OFED_LINUX-<version>:), V(doca_ofed) when it
    prints C(OFED-internal-<version>:) (DOCA-Host/DOCA-OFED), V(inbox) when there is no C(ofed_info) but the
    kernel's C(mlx5_core) or C(ib_core) is loaded, V(none) otherwise.
"""

EXAMPLES = r"""
- name: Gather GPU host facts
  gpuops.platform.gpu_host_facts:
  become: true

- name: Show the accelerators
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpuops_host.accelerators | map(attribute='model') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts set on the host.
  returned: always
  type: dict
  contains:
    gpuops_host:
      description: The GPU host description.
      returned: always
      type: dict
      contains:
        kernel:
          description:
            - Running kernel C(release), C(headers_installed) (C(/lib/modules/<release>/build/Makefile) exists) and
              C(headers_path).
          type: dict
          sample:
            release: 5.15.0-119-generic
            headers_installed: true
            headers_path: /usr/src/linux-headers-5.15.0-119-generic
        accelerators:
          description:
            - One entry per GPU or accelerator PCI function, sorted by address, with C(address), C(vendor_id),
              C(device_id), C(class), C(model), C(numa_node), C(driver) (bound driver or null), C(iommu_group), and
              from the collection's GPU table C(architecture), C(memory_gb) and C(mig_capable) (null for a device
              the table does not list).
          type: list
          elements: dict
          sample:
            - {"address": "0000:1b:00.0", "vendor_id": "10de", "device_id": "2330", "class": "030200",
               "model": "NVIDIA H100 80GB HBM3", "numa_node": 0, "driver": "nvidia", "iommu_group": 30,
               "architecture": "Hopper", "memory_gb": 80, "mig_capable": true}
        nvswitches:
          description:
            - NVSwitch PCI functions, with the keys of RV(ansible_facts.gpuops_host.accelerators) but the GPU table's,
              and C(generation) (2 for HGX A100, 3 for HGX H100/H200; null when not in the table).
          type: list
          elements: dict
        nics:
          description:
            - Network PCI physical functions with the accelerator keys plus C(netdevs), C(netdev) (first netdev),
              C(rdma_device), C(link_layer) (V(InfiniBand) or V(Ethernet)), C(sriov_totalvfs) and C(sriov_numvfs)
              (null when the device is not SR-IOV capable).
          type: list
          elements: dict
          sample:
            - {"address": "0000:18:00.0", "vendor_id": "15b3", "device_id": "1021", "netdev": "ibp24s0",
               "rdma_device": "mlx5_0", "link_layer": "InfiniBand", "sriov_totalvfs": 16, "sriov_numvfs": 0}
        pcie_bridges:
          description:
            - Bridges and switch ports upstream of accelerators and RDMA NICs, with C(address), C(vendor_id),
              C(device_id), C(port_type) (V(root_port), V(upstream_port), V(downstream_port), ...),
              C(config_readable), C(downstream) (the endpoints below) and C(acs) (null without the ACS capability,
              else C(offset), C(capability), C(control) as hex strings and C(enabled), true when the control register
              is not zero).
          type: list
          elements: dict
          sample:
            - {"address": "0000:16:02.0", "port_type": "downstream_port", "config_readable": true,
               "acs": {"offset": "0x220", "capability": "0x005f", "control": "0x001d", "enabled": true},
               "downstream": ["0000:18:00.0", "0000:1b:00.0"]}
        nouveau:
          description:
            - C(loaded), C(refcount), C(holders), C(in_use), C(blacklisted) and C(blacklist_sources).
            - C(refcount) is null on a kernel built without module unloading (its C(/proc/modules) prints C(-)); such a
              module counts as in use (only a reboot removes it).
          type: dict
        nvidia_driver:
          description:
            - C(loaded), C(version) of the loaded module (from C(/proc/driver/nvidia/version)), C(kernel_module_flavor)
              (V(open) or V(proprietary)) and C(installed_version) (C(modinfo -F version nvidia), null when the host has
              no nvidia module for the running kernel).
          type: dict
        nvidia_peermem:
          description: C(loaded) - whether C(nvidia_peermem) is loaded.
          type: dict
        ofed:
          description:
            - C(flavor) (V(mlnx_ofed), V(doca_ofed), V(inbox), V(none), V(unknown)), C(version) and C(raw)
              (first line of C(ofed_info -s)).
          type: dict
        fabricmanager:
          description:
            - C(installed), C(package), C(package_version), C(version) (upstream part), C(active), C(enabled).
            - C(active) and C(enabled) are null (unknown) when C(systemctl) is missing or cannot answer (no systemd
              running as PID 1), never V(false) on a guess.
          type: dict
        iommu:
          description:
            - C(cmdline) (IOMMU parameters of the kernel command line), C(enabled) (IOMMU groups exist), C(groups),
              C(default_domain) (type of the first group, for example V(identity), V(DMA), V(DMA-FQ)) and C(passthrough)
              (null when the IOMMU is off).
          type: dict
        secure_boot:
          description:
            - C(efi) (booted with UEFI) and C(state) (V(enabled), V(disabled), or V(unknown) when the EFI variable is
              not readable).
          type: dict
"""

from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.host import _hostfacts  # noqa: E402


def gather(ctx: Any) -> dict[str, Any]:
    return {"changed": False, "ansible_facts": {"gpuops_host": _hostfacts.gather(ctx.fs, ctx.runner)}}


def main() -> None:
    run_module(gather, argument_spec={}, supports_check_mode=True)


if __name__ == "__main__":
    main()
