"""The generated PCI config-space images decode: an independent parser here (no generator code) and
lspci (pciutils) as a second, external reader."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest

# (profile, address, header type, PCIe device/port type, vendor, ACS Control or None, SR-IOV TotalVFs or None)
CASES = [
    ("dgx-h100", "0000:10:01.0", 1, 0x4, 0x8086, 0x001D, None),  # root port, IOMMU on (intel_iommu=on)
    ("dgx-h100", "0000:11:00.0", 1, 0x5, 0x1000, None, None),  # switch upstream port: no ACS
    ("dgx-h100", "0000:12:00.0", 1, 0x6, 0x1000, 0x001D, None),  # switch downstream port: ACS enabled
    ("dgx-h100", "0000:12:01.0", 1, 0x6, 0x1000, 0x001D, None),
    ("dgx-h100", "0000:13:00.0", 0, 0x0, 0x10DE, None, None),  # H100
    ("dgx-h100", "0000:14:00.0", 0, 0x0, 0x15B3, None, 16),  # ConnectX-7 with SR-IOV (16 VFs)
    ("dgx-h100", "0000:53:00.0", 0, 0x0, 0x10DE, None, None),  # NVSwitch behind socket 0's switch
    ("dgx-h100", "0000:93:00.0", 0, 0x0, 0x10DE, None, None),  # GPU 4: socket 1
    ("pcie-l40s", "0000:12:01.0", 1, 0x6, 0x1000, 0x001D, None),  # AMD: IOMMU on by default
    ("pcie-l40s", "0000:14:00.0", 0, 0x0, 0x15B3, None, 8),  # ConnectX-6 Dx with SR-IOV
    ("pcie-l40s", "0000:24:00.0", 0, 0x0, 0x15B3, None, 8),
    ("amd-mi300x", "0000:10:01.0", 1, 0x4, 0x1022, 0x001D, None),
    ("amd-mi300x", "0000:13:00.0", 0, 0x0, 0x1002, None, None),
    ("cpu-only", "0000:10:01.0", 1, 0x4, 0x8086, 0x0000, None),  # IOMMU off: Linux leaves ACS off
    ("cpu-only", "0000:11:00.0", 0, 0x0, 0x8086, None, None),
]
IDS = [f"{c[0]}-{c[1]}" for c in CASES]


def u16(b: bytes, off: int) -> int:
    return int.from_bytes(b[off : off + 2], "little")


def u32(b: bytes, off: int) -> int:
    return int.from_bytes(b[off : off + 4], "little")


def parse(cfg: bytes) -> dict:
    """A minimal PCI config-space decoder, written from the PCI/PCIe specifications."""
    out = {
        "vendor": u16(cfg, 0),
        "device": u16(cfg, 2),
        "class": u32(cfg, 8) >> 8,
        "header_type": cfg[0x0E] & 0x7F,
        "caps": {},
        "ext": {},
    }
    off = cfg[0x34] if u16(cfg, 6) & 0x10 else 0
    while off:
        assert 0x40 <= off < 0x100 and off % 4 == 0, f"capability pointer {off:#x} out of range"
        assert cfg[off] not in out["caps"], "capability list loops"
        out["caps"][cfg[off]] = off
        off = cfg[off + 1]
    off = 0x100
    while off:
        hdr = u32(cfg, off)
        if hdr == 0:
            break
        assert off % 4 == 0 and off >= 0x100, f"extended capability at {off:#x}"
        out["ext"][hdr & 0xFFFF] = (off, (hdr >> 16) & 0xF)
        off = hdr >> 20
    return out


@pytest.mark.parametrize(("profile", "addr", "htype", "ptype", "vendor", "acs", "vfs"), CASES, ids=IDS)
def test_config_space_parses(trees, profile, addr, htype, ptype, vendor, acs, vfs):
    dev = trees[profile] / "sys/bus/pci/devices" / addr
    cfg = (dev / "config").read_bytes()
    assert len(cfg) == 4096  # PCIe: the full extended configuration space
    p = parse(cfg)
    assert p["header_type"] == htype
    assert p["vendor"] == vendor == int((dev / "vendor").read_text(), 16)
    assert p["device"] == int((dev / "device").read_text(), 16)
    assert p["class"] == int((dev / "class").read_text(), 16)
    assert {0x01, 0x05, 0x10} <= set(p["caps"])  # power management, MSI, PCI Express
    exp = p["caps"][0x10]
    assert u16(cfg, exp + 2) & 0xF == 2  # PCIe capability version 2
    assert (u16(cfg, exp + 2) >> 4) & 0xF == ptype
    if htype == 1:
        bus = int(addr.split(":")[1], 16)
        assert cfg[0x18] == bus and cfg[0x19] > bus and cfg[0x1A] >= cfg[0x19]
        assert int((dev / "secondary_bus_number").read_text()) == cfg[0x19]
    else:
        assert 0x11 in p["caps"]  # MSI-X on endpoints
    assert p["ext"][0x0001][0] == 0x100  # AER first
    if acs is None:
        assert 0x000D not in p["ext"]
    else:
        off, ver = p["ext"][0x000D]
        assert (off, ver) == (0x148, 1)
        assert u16(cfg, off + 4) & 0x1F == 0x1F  # SV TB RR CR UF implemented
        assert u16(cfg, off + 6) == acs
    if vfs is None:
        assert 0x0010 not in p["ext"]
        assert not (dev / "sriov_totalvfs").exists()
    else:
        off, _ver = p["ext"][0x0010]
        assert off == 0x150
        assert u16(cfg, off + 0x0E) == vfs == int((dev / "sriov_totalvfs").read_text())
        assert u16(cfg, off + 0x10) == 0 == int((dev / "sriov_numvfs").read_text())
        assert (u16(cfg, off + 0x14), u16(cfg, off + 0x16)) == (1, 1)  # first VF offset, stride
        assert u16(cfg, off + 0x1A) == 0x101E == int((dev / "sriov_vf_device").read_text(), 16)


def lspci(tree, *args: str) -> str:
    exe = shutil.which("lspci")
    assert exe, "lspci (Debian package pciutils) is missing: run hack/host-deps.sh"
    res = subprocess.run(
        [exe, "-A", "linux-sysfs", "-O", f"sysfs.path={tree}/sys/bus/pci", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


PORT_TEXT = {0x0: "Endpoint", 0x4: "Root Port (Slot+)", 0x5: "Upstream Port", 0x6: "Downstream Port (Slot+)"}


@pytest.mark.parametrize(("profile", "addr", "htype", "ptype", "vendor", "acs", "vfs"), CASES, ids=IDS)
def test_lspci_decodes_the_config_space(trees, profile, addr, htype, ptype, vendor, acs, vfs):
    out = lspci(trees[profile], "-vvv", "-nn", "-s", addr)
    assert f"[{vendor:04x}:" in out
    assert f"Express (v2) {PORT_TEXT[ptype]}" in out
    if acs is None:
        assert "Access Control Services" not in out
    else:
        bits = {
            name: bool(acs & bit)
            for name, bit in (
                ("SrcValid", 1),
                ("TransBlk", 2),
                ("ReqRedir", 4),
                ("CmpltRedir", 8),
                ("UpstreamFwd", 0x10),
            )
        }
        want = " ".join(f"{n}{'+' if on else '-'}" for n, on in bits.items())
        assert re.search(r"ACSCtl:\s+" + re.escape(want), out), out
    if vfs is None:
        assert "SR-IOV" not in out
    else:
        assert f"Initial VFs: {vfs}, Total VFs: {vfs}, Number of VFs: 0" in out
        assert "VF offset: 1, stride: 1, Device ID: 101e" in out


@pytest.mark.parametrize("profile", ["dgx-h100", "pcie-l40s", "amd-mi300x", "cpu-only"])
def test_lspci_sees_every_function_with_its_driver(trees, profile):
    tree = trees[profile]
    listed = [ln.split()[0] for ln in lspci(tree, "-D", "-n").splitlines()]
    assert listed == sorted(p.name for p in (tree / "sys/bus/pci/devices").iterdir())
    verbose = lspci(tree, "-D", "-k")
    for dev in (tree / "sys/bus/pci/devices").iterdir():
        if (dev / "driver").is_symlink():
            block = verbose.split(dev.name, 1)[1].split("\n0000:", 1)[0]
            assert f"Kernel driver in use: {(dev / 'driver').readlink().name}" in block


def test_lspci_sees_created_vfs(fresh):
    from gpuops_lab.hostsim import kernel
    from gpuops_lab.hostsim.hostfs import Host

    tree = fresh("pcie-l40s")
    (tree / "sys/bus/pci/devices/0000:14:00.0/sriov_numvfs").write_text("3\n")
    kernel.apply(Host(tree))
    out = lspci(tree, "-D", "-nn")
    vfs = [ln for ln in out.splitlines() if "[15b3:101e]" in ln]
    assert [ln.split()[0] for ln in vfs] == ["0000:14:00.1", "0000:14:00.2", "0000:14:00.3"]
    pf = lspci(tree, "-vvv", "-s", "14:00.0")
    assert "Number of VFs: 3" in pf
    assert re.search(r"IOVCtl:\s+Enable\+", pf)


def test_capability_offsets_match_the_documented_layout():
    from gpuops_lab.hostsim import pciconfig

    spec = pciconfig.Spec(
        vendor=0x15B3,
        device=0x101D,
        class_code=0x020000,
        sriov={"total": 16, "offset": 2, "stride": 1, "vf_device": 0x101E},
    )
    cfg = pciconfig.build(spec)
    p = parse(cfg)
    assert p["caps"] == {0x01: 0x40, 0x05: 0x48, 0x10: 0x60, 0x11: 0xA0}
    assert p["ext"] == {0x0001: (0x100, 2), 0x000E: (0x148, 1), 0x0010: (0x150, 1)}
    assert u16(cfg, 0x150 + 0x0E) == 16 and u16(cfg, 0x150 + 0x14) == 2
    cfg4 = pciconfig.set_num_vfs(cfg, 4)
    assert u16(cfg4, 0x150 + 0x10) == 4 and u16(cfg4, 0x150 + 0x08) & 0x9 == 0x9  # VF Enable, VF MSE
    assert struct.unpack_from("<H", pciconfig.set_num_vfs(cfg4, 0), 0x150 + 0x08)[0] & 0x9 == 0
