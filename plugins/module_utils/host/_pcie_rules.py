# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Host rules of the PCIe fabric, once: PCIe ACS for GPUDirect peer traffic, GPUDirect RDMA (a NIC beside the
GPUs), and SR-IOV VFs. Pure functions of the ``gpuops_host`` facts and the intent that return findings (see
``_host_findings``).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput, for_option
from ansible_collections.gpuops.platform.plugins.module_utils.host import _pci
from ansible_collections.gpuops.platform.plugins.module_utils.host._host_findings import (
    Facts,
    Finding,
    Intent,
    _get,
    _words,
    finding,
    ref,
)


def _acs_targets(facts: Facts, intent: Intent) -> list[dict[str, Any]]:
    bridges = [b for b in facts.get("pcie_bridges") or [] if b.get("acs")]
    devices = (intent["acs"] or {}).get("devices") or []
    if devices:
        wanted = set(devices)
        bridges = [b for b in bridges if b.get("address") in wanted]
    return bridges


def acs(facts: Facts, intent: Intent) -> list[Finding]:
    managed = intent["acs"]
    want = (managed or {}).get("state") or ("disabled" if intent["gpudirect"] else None)
    if want is None:
        return []
    validate = intent["stage"] == "validate"
    targets = _acs_targets(facts, intent)
    out = []
    if want == "disabled":
        on = [b for b in targets if b["acs"].get("enabled")]
        if on:
            why = "GPUDirect is requested" if intent["gpudirect"] else "host_prep_acs=disable"
            out.append(
                finding(
                    "acs-enabled",
                    "error",
                    ref("PCIDevice", on[0]["address"]),
                    [f"{b['address']} ACS control {b['acs'].get('control')}" for b in on],
                    f"{why} but ACS is still enabled on {len(on)} bridge(s)/switch port(s) above GPUs/NICs: "
                    f"{', '.join(b['address'] for b in on)} (peer-to-peer traffic goes through the root complex, "
                    "so GPUDirect RDMA fails or slows down)",
                    "run host_prep with host_prep_acs=disable (gpuops.platform.pcie_acs state=disabled, persist=true)",
                    "acs",
                )
            )
    else:
        if intent["gpudirect"]:
            out.append(
                finding(
                    "acs-enabled-with-gpudirect",
                    "error",
                    ref("Host", intent["node"]),
                    ["host_prep_acs: enable", "GPUDirect: requested"],
                    "GPUDirect is requested but host_prep_acs=enable keeps ACS on above the GPUs/NICs",
                    "set host_prep_acs to auto or disable, or turn GPUDirect off (host_prep_gpudirect: false)",
                )
            )
        off = [b for b in targets if not b["acs"].get("enabled")]
        if off:
            out.append(
                finding(
                    "acs-disabled",
                    "error" if validate else "warning",
                    ref("PCIDevice", off[0]["address"]),
                    [f"{b['address']} ACS control {b['acs'].get('control')}" for b in off],
                    f"host_prep_acs=enable but ACS is disabled on {', '.join(b['address'] for b in off)}",
                    "run host_prep with host_prep_acs=enable",
                    "acs",
                )
            )
    unreadable = [b["address"] for b in facts.get("pcie_bridges") or [] if not b.get("config_readable", True)]
    if unreadable:
        out.append(
            finding(
                "acs-unknown",
                "warning",
                ref("PCIDevice", unreadable[0]),
                [f"{a}: extended config space not readable" for a in unreadable],
                "ACS state unknown on " + ", ".join(unreadable),
                "gather facts as root (become: true)",
            )
        )
    return out


def gpudirect(facts: Facts, intent: Intent) -> list[Finding]:
    if not intent["gpudirect"]:
        return []
    out = []
    iommu = facts.get("iommu") or {}
    if iommu.get("enabled") and iommu.get("passthrough") is not True:
        out.append(
            finding(
                "iommu-not-passthrough",
                "error",
                ref("Host", intent["node"]),
                [
                    f"default IOMMU domain: {iommu.get('default_domain') or 'unknown'}",
                    f"kernel command line: {_words(iommu.get('cmdline'))}",
                ],
                "GPUDirect is requested but the IOMMU translates DMA",
                "add iommu=pt to the kernel command line (with intel_iommu=on or amd_iommu=on) and reboot, "
                "or disable the IOMMU",
            )
        )
    drv = facts.get("nvidia_driver") or {}
    if drv.get("loaded") and not _get(facts, "nvidia_peermem", "loaded"):
        out.append(
            finding(
                "nvidia-peermem-not-loaded",
                "info",
                ref("KernelModule", "nvidia_peermem"),
                [f"nvidia {drv.get('version')} loaded", "nvidia_peermem not loaded"],
                "GPUDirect RDMA is requested and the NVIDIA driver is loaded, but nvidia_peermem is not",
                "modprobe nvidia_peermem (or let the GPU Operator load it: driver.rdma.enabled=true)",
            )
        )
    return out


def _find_nic(nics: list[dict[str, Any]], pf: str) -> dict[str, Any] | None:
    for nic in nics:
        if pf in (nic.get("address"), nic.get("netdev")) or pf in (nic.get("netdevs") or []):
            return nic
    return None


def resolve_sriov(facts: Facts, requests: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Finding]]:
    """PF resolution and VF limits: each request ``{pf, num_vfs}`` (netdev or PCI address, short forms such as
    ``14:00.0`` accepted) -> ``{pf, address, num_vfs, current}`` for the valid ones, findings for the others. A
    finding about a request names its item (``sriov[1].pf``; host_prep passes host_prep_sriov_vfs as it is)."""
    nics = facts.get("nics") or []
    resolved, out = [], []
    for i, req in enumerate(requests or []):
        pf, want = req.get("pf"), req.get("num_vfs")
        item = f"sriov[{i}]"
        where = f"set {item}.pf (host_prep: host_prep_sriov_vfs[{i}].pf)"
        key = pf
        if isinstance(pf, str) and ":" in pf:
            try:
                key = _pci.normalize_address(pf)
            except InvalidInput as exc:
                out.append(
                    finding(
                        "sriov-pf-invalid",
                        "error",
                        ref("PCIDevice", str(pf)),
                        [str(for_option(f"{item}.pf", exc))],
                        f"{item}.pf {pf} is not a PCI address (SR-IOV requested on it)",
                        f"{where} to the PF's netdev (ip -br link) or PCI address DDDD:BB:DD.F (lspci -D)",
                    )
                )
                continue
        if not isinstance(want, int) or isinstance(want, bool) or want < 0:
            out.append(
                finding(
                    "sriov-vfs-invalid",
                    "error",
                    ref("PCIDevice", str(key)),
                    [f"{item}.num_vfs: {want}"],
                    f"{item}.num_vfs {want} requested on PF {pf}: num_vfs must be an integer >= 0",
                    f"set {item}.num_vfs (host_prep: host_prep_sriov_vfs[{i}].num_vfs) to 0 or more",
                )
            )
            continue
        nic = _find_nic(nics, key) if isinstance(key, str) else None
        if nic is None:
            known = ", ".join(f"{n.get('netdev') or '-'} ({n.get('address')})" for n in nics) or "none"
            out.append(
                finding(
                    "sriov-pf-unknown",
                    "error",
                    ref("PCIDevice", str(key)),
                    [f"network PFs on the host: {known}"],
                    f"{item}.pf {pf}: no such PF on the host (SR-IOV requested on it)",
                    f"{where} to an existing PF, by netdev (ip -br link) or PCI address (lspci -D)",
                )
            )
            continue
        addr = nic["address"]
        name = f"PF {pf}" if pf == addr else f"PF {pf} ({addr})"
        total = nic.get("sriov_totalvfs")
        if total is None:
            out.append(
                finding(
                    "sriov-not-capable",
                    "error",
                    ref("PCIDevice", addr),
                    [f"{addr}: no sriov_totalvfs in sysfs"],
                    f"{item}.pf: {name} has no SR-IOV capability: SR-IOV is off in firmware/BIOS",
                    f"enable SR-IOV in the BIOS and NIC firmware "
                    f"(mlxconfig -d {addr} set SRIOV_EN=1 NUM_OF_VFS={want})",
                )
            )
            continue
        if want > total:
            out.append(
                finding(
                    "sriov-vfs-above-limit",
                    "error",
                    ref("PCIDevice", addr),
                    [f"sriov_totalvfs: {total}", f"requested: {want}"],
                    f"{item}.num_vfs: {want} VFs requested on {name} but the firmware limit sriov_totalvfs is {total}",
                    f"raise it in firmware: mlxconfig -d {addr} set SRIOV_EN=1 NUM_OF_VFS={want}, then reboot",
                )
            )
            continue
        resolved.append({"pf": pf, "address": addr, "num_vfs": want, "current": nic.get("sriov_numvfs")})
    return resolved, out


def sriov(facts: Facts, intent: Intent) -> list[Finding]:
    resolved, out = resolve_sriov(facts, intent["sriov"])
    validate = intent["stage"] == "validate"
    for r in resolved:
        if r["current"] != r["num_vfs"]:
            name = f"PF {r['pf']}" if r["pf"] == r["address"] else f"PF {r['pf']} ({r['address']})"
            out.append(
                finding(
                    "sriov-vfs-mismatch",
                    "error" if validate else "info",
                    ref("PCIDevice", r["address"]),
                    [f"sriov_numvfs: {r['current']}", f"requested: {r['num_vfs']}"],
                    f"{name} has {r['current']} VFs, {r['num_vfs']} requested",
                    "run host_prep (sriov_vfs goes through 0 as the kernel requires); check dmesg if it does not hold",
                    "sriov",
                )
            )
    return out
