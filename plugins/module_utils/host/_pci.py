# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""PCI: address validation, sysfs device reading, config-space parsing.

Config space layout (PCI Local Bus 3.0, PCIe Base 6.0):
- 0x06 Status (bit 4: capability list present), 0x0e header type, 0x34 capability pointer.
- Capability list: byte ID, byte next pointer; PCI Express capability ID 0x10, its register at +2 holds
  the device/port type in bits 7:4.
- Extended capabilities from 0x100: 32-bit header, ID bits 15:0, next offset bits 31:20.
  ACS = 0x000D (capability register +4, control register +6, both 16 bit); SR-IOV = 0x0010
  (TotalVFs +0x0E, NumVFs +0x10).
Without root the kernel exposes only the first 64 bytes of ``config``; callers report that.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput, NotFound

SYS_PCI_DEVICES = "/sys/bus/pci/devices"
PCI_IDS_PATHS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids")

ADDRESS_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-1][0-9a-fA-F])\.(?P<fn>[0-7])\Z"
)

CAP_ID_EXP = 0x10
ECAP_ID_ACS = 0x000D
ECAP_ID_SRIOV = 0x0010
CONFIG_EXTENDED_SIZE = 4096

PORT_TYPES = {
    0x0: "endpoint",
    0x1: "legacy_endpoint",
    0x4: "root_port",
    0x5: "upstream_port",
    0x6: "downstream_port",
    0x7: "pcie_to_pci_bridge",
    0x8: "pci_to_pcie_bridge",
    0x9: "rc_integrated_endpoint",
    0xA: "rc_event_collector",
}


def is_address(text: str | None) -> bool:
    return bool(ADDRESS_RE.match(text or ""))


def normalize_address(text: Any) -> str:
    """``DDDD:BB:DD.F`` in lower case (domain 0000 added when left out); InvalidInput when malformed."""
    m = ADDRESS_RE.match(text or "") if isinstance(text, str) else None
    if not m:
        raise InvalidInput(
            f"malformed PCI address {text!r}: expected DDDD:BB:DD.F, for example 0000:17:00.0 (see lspci -D)"
        )
    domain = (m.group("domain") or "0000").lower()
    return "{}:{}:{}.{}".format(domain, m.group("bus").lower(), m.group("dev").lower(), m.group("fn"))


def device_path(address: str) -> str:
    return f"{SYS_PCI_DEVICES}/{address}"


def list_addresses(fs: Any) -> list[str]:
    return [a for a in fs.listdir(SYS_PCI_DEVICES) if is_address(a)]


def require_device(fs: Any, address: str) -> str:
    address = normalize_address(address)
    if not fs.exists(device_path(address)):
        raise NotFound(f"PCI device {address} not found: {device_path(address)} does not exist (see lspci -D)")
    return address


def _hex_attr(fs: Any, path: str) -> str | None:
    value = fs.read_attr(path)
    if not value:
        return None
    return value[2:].lower() if value.lower().startswith("0x") else value.lower()


def _int_attr(fs: Any, path: str) -> int | None:
    value = fs.read_attr(path)
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def read_device(fs: Any, address: str) -> dict[str, Any]:
    """The sysfs attributes of one device, as a dict (all strings hex without 0x)."""
    base = device_path(address)
    numa = _int_attr(fs, base + "/numa_node")
    group = fs.link_name(base + "/iommu_group")
    return {
        "address": address,
        "vendor_id": _hex_attr(fs, base + "/vendor"),
        "device_id": _hex_attr(fs, base + "/device"),
        "class": _hex_attr(fs, base + "/class"),
        "numa_node": numa if numa is not None and numa >= 0 else None,
        "driver": fs.link_name(base + "/driver"),
        "iommu_group": int(group) if group and group.isdigit() else None,
        "is_virtfn": fs.lexists(base + "/physfn"),
    }


def upstream_chain(fs: Any, address: str) -> list[str]:
    """PCI addresses of the bridges above ``address``, nearest first, up to the root port.

    The upstream bridge is the parent directory of the device in the resolved /sys/devices path.
    """
    real = fs.realpath(device_path(address))
    parts = [p for p in real.split("/") if p]
    # parts: sys, devices, pci0000:00, 0000:00:01.0, ..., <address>
    chain = [p for p in parts[:-1] if is_address(p)]
    chain.reverse()
    return chain


# -- config space ----------------------------------------------------------------------------------
def read_config(fs: Any, address: str) -> bytes:
    return fs.read_bytes(device_path(address) + "/config") or b""


def _u8(cfg: bytes, off: int) -> int | None:
    return cfg[off] if off < len(cfg) else None


def _u16(cfg: bytes, off: int) -> int | None:
    return struct.unpack_from("<H", cfg, off)[0] if off + 2 <= len(cfg) else None


def _u32(cfg: bytes, off: int) -> int | None:
    return struct.unpack_from("<I", cfg, off)[0] if off + 4 <= len(cfg) else None


def capabilities(cfg: bytes) -> dict[int, int]:
    """Walk the conventional capability list from 0x34: {cap_id: offset} (first occurrence)."""
    found: dict[int, int] = {}
    status = _u16(cfg, 0x06)
    if status is None or not status & 0x10:
        return found
    ptr = (_u8(cfg, 0x34) or 0) & 0xFC
    seen: set[int] = set()
    while ptr >= 0x40 and ptr not in seen and len(seen) < 48:
        seen.add(ptr)
        cap_id, nxt = _u8(cfg, ptr), _u8(cfg, ptr + 1)
        if cap_id is None or nxt is None:
            break
        found.setdefault(cap_id, ptr)
        ptr = nxt & 0xFC
    return found


def ext_capabilities(cfg: bytes) -> dict[int, int]:
    """Walk the extended capability list from 0x100: {ecap_id: offset} (first occurrence)."""
    found: dict[int, int] = {}
    off = 0x100
    seen: set[int] = set()
    while off >= 0x100 and off not in seen and len(seen) < 512:
        seen.add(off)
        header = _u32(cfg, off)
        if header is None or header in (0, 0xFFFFFFFF):
            break
        found.setdefault(header & 0xFFFF, off)
        off = (header >> 20) & 0xFFC
    return found


def port_type(cfg: bytes) -> str | None:
    """PCIe device/port type name from the PCI Express capability, or None (conventional PCI)."""
    off = capabilities(cfg).get(CAP_ID_EXP)
    if off is None:
        return None
    reg = _u16(cfg, off + 2)
    if reg is None:
        return None
    kind = (reg >> 4) & 0xF
    return PORT_TYPES.get(kind, f"type_0x{kind:x}")


def acs_registers(cfg: bytes) -> tuple[int, int, int] | None:
    """(offset, capability, control) of the ACS extended capability, or None when absent."""
    off = ext_capabilities(cfg).get(ECAP_ID_ACS)
    if off is None:
        return None
    cap, ctrl = _u16(cfg, off + 4), _u16(cfg, off + 6)
    if cap is None or ctrl is None:
        return None
    return off, cap, ctrl


def sriov_registers(cfg: bytes) -> tuple[int, int | None, int | None] | None:
    """(offset, total_vfs, num_vfs) of the SR-IOV extended capability, or None."""
    off = ext_capabilities(cfg).get(ECAP_ID_SRIOV)
    if off is None:
        return None
    return off, _u16(cfg, off + 0x0E), _u16(cfg, off + 0x10)


# -- names -----------------------------------------------------------------------------------------
class PciIds:
    """Lazy lookups in the host's pci.ids (what lspci uses), one pass per vendor."""

    def __init__(self, fs: Any) -> None:
        self._fs = fs
        self._text: str | None = None
        self._vendors: dict[str, dict[str, str]] = {}

    def _load(self) -> str:
        if self._text is None:
            self._text = ""
            for path in PCI_IDS_PATHS:
                text = self._fs.read_text(path)
                if text:
                    self._text = text
                    break
        return self._text

    def _vendor_table(self, vendor: str) -> dict[str, str]:
        if vendor in self._vendors:
            return self._vendors[vendor]
        table: dict[str, str] = {}
        text = self._load()
        start = text.find(f"\n{vendor}  ")
        if start >= 0:
            for line in text[start + 1 :].splitlines()[1:]:
                if not line.startswith("\t"):
                    if line.startswith("#"):
                        continue
                    break
                if line.startswith("\t\t"):
                    continue
                dev, _sep, name = line[1:].partition("  ")
                table[dev.lower()] = name.strip()
        self._vendors[vendor] = table
        return table

    def device_name(self, vendor: str, device: str) -> str | None:
        if not vendor or not device:
            return None
        return self._vendor_table(vendor.lower()).get(device.lower())
