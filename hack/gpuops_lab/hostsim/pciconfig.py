"""PCI configuration-space images: the 4096 bytes a Linux `/sys/bus/pci/devices/<addr>/config` returns.

Layout of every image (offsets are fixed so that tests can name them, but readers should walk the lists):

- 0x00-0x3f  type 0 (endpoint) or type 1 (bridge) header, Capabilities List bit set, pointer 0x40
- 0x40       Power Management (cap 0x01)
- 0x48       MSI, 64-bit (cap 0x05)
- 0x60       PCI Express, version 2 (cap 0x10) with the device/port type
- 0xa0       MSI-X (cap 0x11), endpoints only
- 0x100      Advanced Error Reporting (ext cap 0x0001)
- 0x148      ACS (ext cap 0x000D) on root ports and switch downstream ports:
             ACS Capability at +4, ACS Control at +6
- 0x148      ARI (ext cap 0x000E) on SR-IOV physical functions, then
- 0x150      SR-IOV (ext cap 0x0010): TotalVFs +0x0e, NumVFs +0x10, First VF Offset +0x14, VF Stride +0x16,
             VF Device ID +0x1a
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

CONFIG_SIZE = 4096
CAP_PM, CAP_MSI, CAP_EXP, CAP_MSIX = 0x01, 0x05, 0x10, 0x11
EXT_AER, EXT_ACS, EXT_ARI, EXT_SRIOV = 0x0001, 0x000D, 0x000E, 0x0010
PORT_TYPE = {"endpoint": 0x0, "root_port": 0x4, "upstream": 0x5, "downstream": 0x6}
# ACS Capability / Control bits
ACS_SV, ACS_TB, ACS_RR, ACS_CR, ACS_UF, ACS_EC, ACS_DT = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40
ACS_CAPS = ACS_SV | ACS_TB | ACS_RR | ACS_CR | ACS_UF | ACS_DT  # what the simulated ports implement
LINUX_ACS_FLAGS = ACS_SV | ACS_RR | ACS_CR | ACS_UF  # what Linux enables (pci_std_enable_acs) with an IOMMU on
SRIOV_CTRL_VFE, SRIOV_CTRL_MSE = 0x01, 0x08

OFF_PM, OFF_MSI, OFF_EXP, OFF_MSIX = 0x40, 0x48, 0x60, 0xA0
OFF_AER, OFF_ACS, OFF_ARI, OFF_SRIOV = 0x100, 0x148, 0x148, 0x150


@dataclass
class Spec:
    vendor: int
    device: int
    class_code: int  # 24 bits: base class, subclass, prog-if (0x030200)
    port_type: str = "endpoint"  # endpoint, root_port, upstream, downstream
    revision: int = 0xA1
    subsystem_vendor: int = 0
    subsystem_device: int = 0
    link_speed: int = 4  # 1..5 = 2.5 .. 32 GT/s
    link_width: int = 16
    port_number: int = 0
    slot: int | None = None  # physical slot number of a root/downstream port with a slot
    primary_bus: int = 0
    secondary_bus: int = 0
    subordinate_bus: int = 0
    acs_ctrl: int | None = None  # None: no ACS capability
    sriov: dict | None = None  # total, num, offset, stride, vf_device
    is_vf: bool = False
    bars: list[tuple[int, int, bool]] = field(default_factory=list)  # (address, size, prefetchable), 64-bit


def _u8(b: bytearray, off: int, v: int) -> None:
    b[off] = v & 0xFF


def _u16(b: bytearray, off: int, v: int) -> None:
    struct.pack_into("<H", b, off, v & 0xFFFF)


def _u32(b: bytearray, off: int, v: int) -> None:
    struct.pack_into("<I", b, off, v & 0xFFFFFFFF)


def _ext_header(b: bytearray, off: int, cap_id: int, version: int, next_off: int) -> None:
    _u32(b, off, cap_id | (version << 16) | (next_off << 20))


def build(spec: Spec) -> bytes:
    b = bytearray(CONFIG_SIZE)
    bridge = spec.port_type != "endpoint"
    _u16(b, 0x00, spec.vendor)
    _u16(b, 0x02, spec.device)
    _u16(b, 0x04, 0x0007 if bridge else (0x0404 if spec.is_vf else 0x0406))  # I/O|Mem|Master; INTx off
    _u16(b, 0x06, 0x0010)  # status: capabilities list
    _u8(b, 0x08, spec.revision)
    _u8(b, 0x09, spec.class_code & 0xFF)
    _u8(b, 0x0A, (spec.class_code >> 8) & 0xFF)
    _u8(b, 0x0B, (spec.class_code >> 16) & 0xFF)
    _u8(b, 0x0C, 0x10)  # cache line size
    _u8(b, 0x0E, 0x01 if bridge else 0x00)
    _u8(b, 0x34, OFF_PM)
    _u8(b, 0x3C, 0xFF)
    if bridge:
        _u8(b, 0x18, spec.primary_bus)
        _u8(b, 0x19, spec.secondary_bus)
        _u8(b, 0x1A, spec.subordinate_bus)
        _u16(b, 0x1C, 0x00F0)  # I/O window disabled (base > limit)
        _u16(b, 0x20, 0xFFF0)  # memory window disabled
        _u16(b, 0x22, 0x0000)
        _u16(b, 0x24, 0xFFF1)  # prefetchable window: 64-bit, disabled
        _u16(b, 0x26, 0x0001)
    else:
        for i, (addr, _size, pref) in enumerate(spec.bars[:3]):
            off = 0x10 + 8 * i
            _u32(b, off, (addr & 0xFFFFFFF0) | 0x4 | (0x8 if pref else 0))
            _u32(b, off + 4, addr >> 32)
        _u16(b, 0x2C, spec.subsystem_vendor)
        _u16(b, 0x2E, spec.subsystem_device)
        _u8(b, 0x3D, 0 if spec.is_vf else 1)  # INTA

    # Power Management
    _u8(b, OFF_PM, CAP_PM)
    _u8(b, OFF_PM + 1, OFF_MSI)
    _u16(b, OFF_PM + 2, 0x0003)
    _u16(b, OFF_PM + 4, 0x0008)  # D0, No_Soft_Reset
    # MSI (64-bit capable)
    _u8(b, OFF_MSI, CAP_MSI)
    _u8(b, OFF_MSI + 1, OFF_EXP)
    _u16(b, OFF_MSI + 2, 0x0080)
    # PCI Express capability (version 2)
    has_slot = spec.slot is not None and spec.port_type in ("root_port", "downstream")
    ptype = PORT_TYPE[spec.port_type]
    e = OFF_EXP
    _u8(b, e, CAP_EXP)
    _u8(b, e + 1, 0 if bridge else OFF_MSIX)
    _u16(b, e + 2, 0x2 | (ptype << 4) | ((1 if has_slot else 0) << 8))
    devcap = 0x2 | (7 << 6) | (7 << 9) | (1 << 15)  # MPS 512, L0s/L1 unlimited, role-based errors
    if not bridge:
        devcap |= 1 << 28  # function level reset
    _u32(b, e + 0x04, devcap)
    _u16(b, e + 0x08, (1 << 4) | (1 << 5) | (1 << 11) | (2 << 12))  # RlxdOrd, MPS 256, NoSnoop, MRRS 512
    downstream_facing = spec.port_type in ("root_port", "downstream")
    linkcap = spec.link_speed | (spec.link_width << 4) | (2 << 10) | (spec.port_number << 24)
    if downstream_facing:
        linkcap |= 1 << 20  # data link layer link active reporting
    _u32(b, e + 0x0C, linkcap)
    linksta = spec.link_speed | (spec.link_width << 4) | (1 << 12)
    if downstream_facing:
        linksta |= 1 << 13  # DL_Active
    _u16(b, e + 0x12, linksta)
    if has_slot:
        _u32(b, e + 0x14, (spec.slot or 0) << 19)
        _u16(b, e + 0x1A, 1 << 6)  # presence detect state
    devcap2 = 0x1F if downstream_facing else 0x0F  # completion timeout ranges (+ ARI forwarding on ports)
    _u32(b, e + 0x24, devcap2)
    _u32(b, e + 0x2C, ((1 << spec.link_speed) - 1) << 1)  # supported link speeds vector
    _u16(b, e + 0x30, spec.link_speed)  # target link speed
    if not bridge:
        # MSI-X: 64 vectors, table at BAR0+0x2000, PBA at BAR0+0x3000
        _u8(b, OFF_MSIX, CAP_MSIX)
        _u8(b, OFF_MSIX + 1, 0)
        _u16(b, OFF_MSIX + 2, 63)
        _u32(b, OFF_MSIX + 4, 0x2000)
        _u32(b, OFF_MSIX + 8, 0x3000)

    # Extended capabilities
    after_aer = 0
    if spec.acs_ctrl is not None:
        after_aer = OFF_ACS
    elif spec.sriov:
        after_aer = OFF_ARI
    _ext_header(b, OFF_AER, EXT_AER, 2, after_aer)
    _u32(b, OFF_AER + 0x0C, 0x00462030)  # uncorrectable error severity (defaults)
    _u32(b, OFF_AER + 0x14, 0x00002000)  # correctable error mask: advisory non-fatal
    if spec.acs_ctrl is not None:
        _ext_header(b, OFF_ACS, EXT_ACS, 1, 0)
        _u16(b, OFF_ACS + 4, ACS_CAPS)
        _u16(b, OFF_ACS + 6, spec.acs_ctrl)
    elif spec.sriov:
        _ext_header(b, OFF_ARI, EXT_ARI, 1, OFF_SRIOV)
        _ext_header(b, OFF_SRIOV, EXT_SRIOV, 1, 0)
        s, o = spec.sriov, OFF_SRIOV
        _u32(b, o + 0x04, 0)
        _u16(b, o + 0x08, (SRIOV_CTRL_VFE | SRIOV_CTRL_MSE) if s.get("num") else 0)
        _u16(b, o + 0x0C, s["total"])  # InitialVFs
        _u16(b, o + 0x0E, s["total"])
        _u16(b, o + 0x10, s.get("num", 0))
        _u16(b, o + 0x14, s["offset"])
        _u16(b, o + 0x16, s["stride"])
        _u16(b, o + 0x1A, s["vf_device"])
        _u32(b, o + 0x1C, 0x00000553)  # supported page sizes
        _u32(b, o + 0x20, 0x00000001)  # system page size 4K
        _u32(b, o + 0x24, 0x0000000C)  # VF BAR0: 64-bit prefetchable
    return bytes(b)


def find_ext_cap(config: bytes, cap_id: int) -> int | None:
    """Offset of extended capability `cap_id`, walking the list from 0x100."""
    off, seen = 0x100, set()
    while off and off not in seen and off + 4 <= len(config):
        seen.add(off)
        (hdr,) = struct.unpack_from("<I", config, off)
        if hdr & 0xFFFF == cap_id:
            return off
        off = (hdr >> 20) & 0xFFC
    return None


def set_num_vfs(config: bytes, num: int) -> bytes:
    """The image with the SR-IOV NumVFs field and VF Enable / VF MSE bits set for `num` VFs."""
    off = find_ext_cap(config, EXT_SRIOV)
    if off is None:
        return config
    b = bytearray(config)
    _u16(b, off + 0x10, num)
    ctrl = struct.unpack_from("<H", b, off + 0x08)[0] & ~(SRIOV_CTRL_VFE | SRIOV_CTRL_MSE)
    _u16(b, off + 0x08, ctrl | ((SRIOV_CTRL_VFE | SRIOV_CTRL_MSE) if num else 0))
    return bytes(b)


def acs_ctrl(config: bytes) -> int | None:
    off = find_ext_cap(config, EXT_ACS)
    return None if off is None else struct.unpack_from("<H", config, off + 6)[0]
