"""The simulated kernel on a tree (outside any namespace): SR-IOV, modules, bindings, reboot."""

from __future__ import annotations

import struct

import pytest
from gpuops_lab.hostsim import kernel, power, probe
from gpuops_lab.hostsim.hostfs import Host

PF = "0000:14:00.0"


def numvfs(tree, value: str, pf: str = PF) -> list[str]:
    (tree / f"sys/bus/pci/devices/{pf}/sriov_numvfs").write_text(value)
    return kernel.apply(Host(tree))


def sriov_field(tree, off: int, pf: str = PF) -> int:
    cfg = probe.config(tree, pf)
    base = probe.ext_capabilities(cfg)[0x0010]
    return struct.unpack_from("<H", cfg, base + off)[0]


def test_vfs_appear_and_go_like_the_kernel(fresh):
    tree = fresh("pcie-l40s")
    numvfs(tree, "4\n")
    pci = probe.pci(tree)
    vfs = ["0000:14:00.1", "0000:14:00.2", "0000:14:00.3", "0000:14:00.4"]
    assert pci[PF]["vfs"] == vfs and pci[PF]["sriov_numvfs"] == "4"
    for vf in vfs:
        assert pci[vf]["physfn"] == PF
        assert pci[vf]["device"] == "0x101e" and pci[vf]["driver"] == "mlx5_core"
        assert pci[vf]["iommu_group"] not in (None, pci[PF]["iommu_group"])
        assert pci[vf]["net"] and pci[vf]["infiniband"]
    assert sriov_field(tree, 0x10) == 4 and sriov_field(tree, 0x08) & 0x1
    assert probe.netdevs(tree)["enp20s0f1"]["device"] == "0000:14:00.1"
    numvfs(tree, "0")
    pci = probe.pci(tree)
    assert pci[PF]["vfs"] == [] and not set(vfs) & set(pci)
    assert sriov_field(tree, 0x10) == 0 and not sriov_field(tree, 0x08) & 0x1
    assert "enp20s0f1" not in probe.netdevs(tree)
    assert len(probe.ibdevs(tree)) == 2


@pytest.mark.parametrize(
    ("first", "second", "expect_vfs", "log"),
    [
        ("4", "8", 4, "4 VFs already enabled. Disable before enabling 8 VFs (-EBUSY)"),
        ("0", "9", 0, "-ERANGE"),
        ("2", "two", 2, "-EINVAL"),
        ("2", "2", 2, None),
    ],
)
def test_refused_numvfs_writes_are_undone_and_logged(fresh, first, second, expect_vfs, log):
    tree = fresh("pcie-l40s")
    numvfs(tree, first)
    numvfs(tree, second)
    pci = probe.pci(tree)
    assert len(pci[PF]["vfs"]) == expect_vfs and pci[PF]["sriov_numvfs"] == str(expect_vfs)
    if log:
        assert any(log in line for line in probe.kernel_log(tree)), probe.kernel_log(tree)


def test_numvfs_needs_a_pf_driver_and_driver_removal_drops_vfs(fresh):
    tree = fresh("pcie-l40s")
    host = Host(tree)
    numvfs(tree, "2")
    kernel.unload(host, "mlx5_ib")
    kernel.unload(host, "mlx5_core")
    kernel.apply(host)
    pci = probe.pci(tree)
    assert pci[PF]["driver"] is None and pci[PF]["vfs"] == [] and pci[PF]["sriov_numvfs"] == "0"
    numvfs(tree, "2")
    assert probe.pci(tree)[PF]["vfs"] == []
    assert any("no driver bound to device" in line for line in probe.kernel_log(tree))
    assert "mlx5_core" not in {p.name for p in (tree / "sys/bus/pci/drivers").iterdir()}


def test_module_load_and_unload_follow_dependencies(fresh):
    tree = fresh("pcie-l40s")
    host = Host(tree)
    with pytest.raises(kernel.KernelError, match="Module nouveau is in use"):
        kernel.unload(host, "nouveau")
    with pytest.raises(kernel.KernelError, match="not found in directory /lib/modules/5.15.0-119-generic"):
        kernel.load(host, "nvidia")
    # like kmod: the dependencies nothing else uses go too (a bound PCI driver holds no module reference)
    gone = kernel.unload(host, "mlx5_ib")
    assert gone[0] == "mlx5_ib" and {"ib_uverbs", "ib_core", "mlx5_core", "mlxfw"} <= set(gone)
    assert kernel.unload(host, "mlx5_ib") == []  # not loaded: not an error (modprobe -r semantics)
    assert kernel.load(host, "vfio-pci") == ["vfio", "irqbypass", "vfio_pci_core", "vfio_pci"]
    kernel.apply(host)
    mods = probe.modules(tree)
    assert mods["vfio"]["used_by"] == ["vfio_pci", "vfio_pci_core"] and mods["vfio"]["refcount"] == 2
    pci = probe.pci(tree)
    assert pci["0000:13:00.0"]["driver"] == "nouveau"
    assert pci[PF]["driver"] is None and pci[PF]["net"] == []
    assert probe.ibdevs(tree) == {}


def test_unbind_override_and_probe(fresh):
    tree = fresh("pcie-l40s")
    host = Host(tree)
    kernel.load(host, "vfio_pci")
    kernel.apply(host)
    dev = tree / f"sys/bus/pci/devices/{PF}"
    (dev / "driver_override").write_text("vfio-pci\n")
    (tree / "sys/bus/pci/drivers/mlx5_core/unbind").write_text(PF)
    kernel.apply(host)
    assert probe.pci(tree)[PF]["driver"] is None  # stays unbound until probed
    kernel.apply(host)
    assert probe.pci(tree)[PF]["driver"] is None
    (tree / "sys/bus/pci/drivers_probe").write_text(PF)
    kernel.apply(host)
    pci = probe.pci(tree)
    assert pci[PF]["driver"] == "vfio-pci" and pci[PF]["net"] == []
    assert (tree / "sys/bus/pci/drivers/vfio-pci" / PF).is_symlink()


@pytest.mark.parametrize(
    ("blacklist", "regenerate_initramfs", "nouveau_after"),
    [(False, False, True), (True, False, True), (True, True, False)],
    ids=["nothing", "blacklist-only", "blacklist-and-initramfs"],
)
def test_reboot_honours_blacklists_and_the_initramfs(fresh, blacklist, regenerate_initramfs, nouveau_after):
    from gpuops_lab.hostsim import shims

    tree = fresh("pcie-l40s")
    host = Host(tree)
    if blacklist:
        (tree / "etc/modprobe.d/blacklist-nouveau.conf").write_text("blacklist nouveau\noptions nouveau modeset=0\n")
    if regenerate_initramfs:
        shims._snapshot(host, "update-initramfs")
    numvfs(tree, "2")
    power.reboot(host)
    mods = probe.modules(tree)
    assert ("nouveau" in mods) == nouveau_after
    if nouveau_after:
        assert mods["nouveau"]["refcount"] == 1  # the console holds it again
    pci = probe.pci(tree)
    assert pci["0000:13:00.0"]["driver"] == ("nouveau" if nouveau_after else None)
    assert pci[PF]["vfs"] == [] and pci[PF]["driver"] == "mlx5_core"  # VFs do not survive a reboot


def test_reboot_restores_acs_and_applies_the_new_cmdline(fresh):
    tree = fresh("cpu-only")
    host = Host(tree)
    port = tree / "sys/bus/pci/devices/0000:10:01.0/config"
    assert probe.acs_ctrl(tree, "0000:10:01.0") == 0
    (tree / "boot/grub/grub.cfg").write_text(
        "menuentry 'Linux' {\n\tlinux /boot/vmlinuz-5.15.0-119-generic root=UUID=x ro intel_iommu=on\n}\n"
    )
    power.reboot(host)
    assert probe.cmdline(tree).endswith("ro intel_iommu=on")
    assert probe.acs_ctrl(tree, "0000:10:01.0") == 0x001D  # Linux enables ACS once an IOMMU is on
    assert probe.pci(tree)["0000:11:00.0"]["iommu_group"] is not None
    cfg = bytearray(port.read_bytes())
    off = probe.ext_capabilities(bytes(cfg))[0x000D]
    cfg[off + 6 : off + 8] = b"\x00\x00"  # setpci ECAP_ACS+6.w=0000
    port.write_bytes(bytes(cfg))
    power.reboot(host)
    assert probe.acs_ctrl(tree, "0000:10:01.0") == 0x001D
    assert probe.modules(tree).keys() == {"ice"}
