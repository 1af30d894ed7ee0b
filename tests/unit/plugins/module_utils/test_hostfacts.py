from __future__ import annotations

import time

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._fs import HostFS
from ansible_collections.gpuops.platform.plugins.module_utils.common._runner import Runner
from ansible_collections.gpuops.platform.plugins.module_utils.host import _hostfacts, _pci
from hostsim import dgx_like

NV_PROPRIETARY = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Release Build  (dvs-builder@U16-I3-B03-4-3)  "
    "Tue Mar 18 12:41:36 UTC 2025\nGCC version:  gcc version 12.3.0\n"
)
NV_OPEN = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  (dvs-builder@U22)  Sat May 24\n"
)


class _Module:
    check_mode = False


def runner():
    return Runner(_Module())


@pytest.fixture
def dgx(host, commands):
    addrs = dgx_like(host)
    host.modules(
        "nvidia_peermem 16384 0 - Live 0x0",
        "nvidia 1 2 nvidia_peermem, Live 0x0",
        "mlx5_core 1 1 - Live 0x0",
        "ib_core 1 5 - Live 0x0",
    )
    host.file("/proc/driver/nvidia/version", NV_PROPRIETARY)
    host.file(
        "/proc/driver/nvidia/gpus/{}/information".format(addrs["gpus"][0]),
        "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ: 1\n",
    )
    host.file("/etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau\n")
    host.file("/sys/kernel/iommu_groups/1/type", "identity\n")
    commands.tools |= {"modinfo", "ofed_info", "dpkg-query", "systemctl"}
    commands.on(r"^modinfo -F version nvidia$", (0, "570.124.06\n", ""))
    commands.on(r"^ofed_info -s$", (0, "MLNX_OFED_LINUX-24.10-1.1.4.0:\n", ""))
    commands.on(
        r"^dpkg-query -W",
        (
            0,
            "nvidia-fabricmanager-570\t570.124.06-1\tinstalled\nnvidia-fabricmanager-dev-570\t570.124.06-1\tinstalled\n",
            "",
        ),
    )
    commands.on(r"^systemctl is-active nvidia-fabricmanager", (0, "active\n", ""))
    commands.on(r"^systemctl is-enabled nvidia-fabricmanager", (0, "enabled\n", ""))
    return addrs


def test_dgx_inventory_and_software(dgx, commands):
    facts = _hostfacts.gather(HostFS(), runner())
    assert [g["address"] for g in facts["accelerators"]] == sorted(dgx["gpus"])
    assert len(facts["nvswitches"]) == 4 and len(facts["nics"]) == 8
    gpu = facts["accelerators"][0]
    assert gpu["model"] == "NVIDIA H100 80GB HBM3" and gpu["driver"] == "nvidia" and gpu["iommu_group"] == 20
    nic = facts["nics"][0]
    assert nic["link_layer"] == "InfiniBand" and nic["rdma_device"] == "mlx5_0" and nic["sriov_totalvfs"] == 16
    assert nic["netdev"] == nic["netdevs"][0]
    # 4 switches x (root port, upstream, 2 downstream); NVSwitch root ports are not on a GPU/NIC path.
    assert len(facts["pcie_bridges"]) == 16
    with_acs = [b for b in facts["pcie_bridges"] if b["acs"]]
    assert len(with_acs) == 12 and all(b["acs"]["enabled"] and b["acs"]["control"] == "0x001d" for b in with_acs)
    down = next(b for b in facts["pcie_bridges"] if b["port_type"] == "downstream_port")
    assert len(down["downstream"]) == 2
    assert facts["nvidia_driver"] == {
        "loaded": True,
        "version": "570.124.06",
        "kernel_module_flavor": "proprietary",
        "installed_version": "570.124.06",
    }
    assert facts["nvidia_peermem"] == {"loaded": True}
    assert facts["ofed"] == {"flavor": "mlnx_ofed", "version": "24.10-1.1.4.0", "raw": "MLNX_OFED_LINUX-24.10-1.1.4.0:"}
    assert facts["fabricmanager"] == {
        "installed": True,
        "package": "nvidia-fabricmanager-570",
        "package_version": "570.124.06-1",
        "version": "570.124.06",
        "active": True,
        "enabled": True,
    }
    assert facts["nouveau"]["blacklisted"] and not facts["nouveau"]["loaded"]
    assert facts["iommu"]["passthrough"] is True and facts["secure_boot"] == {"efi": False, "state": "disabled"}
    assert facts["kernel"]["headers_installed"]
    assert not any(commands.mutations())


def test_gather_is_fast_on_dgx_profile(dgx):
    start = time.monotonic()
    _hostfacts.gather(HostFS(), runner())
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize(
    "text, loaded, version, flavor",
    [
        (NV_PROPRIETARY, True, "570.124.06", "proprietary"),
        (NV_OPEN, True, "575.57.08", "open"),
        (None, False, None, None),
    ],
)
def test_nvidia_driver_version(host, commands, text, loaded, version, flavor):
    if text:
        host.file("/proc/driver/nvidia/version", text)
    facts = _hostfacts.nvidia_driver_facts(HostFS(), runner(), {"nvidia": {}} if loaded else {})
    assert (facts["loaded"], facts["version"], facts["kernel_module_flavor"], facts["installed_version"]) == (
        loaded,
        version,
        flavor,
        None,
    )


@pytest.mark.parametrize(
    "has_tool, out, modules, expected",
    [
        (True, "MLNX_OFED_LINUX-24.10-1.1.4.0:\n", {}, ("mlnx_ofed", "24.10-1.1.4.0")),
        (True, "OFED-internal-25.01-0.6.0:\n", {}, ("doca_ofed", "25.01-0.6.0")),
        (True, "something-else\n", {}, ("unknown", None)),
        (False, "", {"mlx5_core": {}}, ("inbox", None)),
        (False, "", {}, ("none", None)),
    ],
)
def test_ofed_flavors(commands, has_tool, out, modules, expected):
    if has_tool:
        commands.tools.add("ofed_info")
        commands.on("^ofed_info -s$", (0, out, ""))
    facts = _hostfacts.ofed_facts(runner(), modules)
    assert (facts["flavor"], facts["version"]) == expected


@pytest.mark.parametrize(
    "groups, domain, cmdline, expected",
    [
        (0, None, "", {"enabled": False, "passthrough": None}),
        (2, "identity", "intel_iommu=on iommu=pt", {"enabled": True, "passthrough": True}),
        (2, "DMA-FQ", "intel_iommu=on", {"enabled": True, "passthrough": False}),
        (2, None, "amd_iommu=on iommu=pt", {"enabled": True, "passthrough": True}),
    ],
)
def test_iommu(host, groups, domain, cmdline, expected):
    for g in range(groups):
        host.file(f"/sys/kernel/iommu_groups/{g}/devices/.keep")
        if domain:
            host.file(f"/sys/kernel/iommu_groups/{g}/type", domain + "\n")
    from ansible_collections.gpuops.platform.plugins.module_utils.host._kmod import parse_cmdline

    facts = _hostfacts.iommu_facts(HostFS(), parse_cmdline(cmdline))
    assert {k: facts[k] for k in expected} == expected
    assert facts["groups"] == groups


@pytest.mark.parametrize(
    "efi, data, state",
    [
        (False, None, "disabled"),
        (True, None, "unknown"),
        (True, b"\x06\0\0\0\x01", "enabled"),
        (True, b"\x06\0\0\0\x00", "disabled"),
    ],
)
def test_secure_boot(host, efi, data, state):
    if efi:
        host.p("/sys/firmware/efi").mkdir(parents=True)
    if data is not None:
        host.file(_hostfacts.SECURE_BOOT_VAR, data)
    assert _hostfacts.secure_boot_facts(HostFS())["state"] == state


def test_headers_missing_when_build_link_dangles(host):
    host.kernel(headers=False)
    assert _hostfacts.kernel_facts(HostFS()) == {
        "release": "5.15.0-119-generic",
        "headers_path": None,
        "headers_installed": False,
    }


def test_bridges_without_root_have_no_acs(host):
    host.bridge("0000:00:01.0", port_type="root_port", config_size=64)
    host.pci("0000:01:00.0", "10de", "2330", "030200", parent="0000:00:01.0")
    (bridge,) = _hostfacts.bridge_paths(HostFS(), ["0000:01:00.0"])
    assert bridge["config_readable"] is False and bridge["acs"] is None


def test_virtual_functions_are_not_listed(host):
    host.pci("0000:3b:00.0", "15b3", "101d", "020000", sriov=(8, 1))
    host.add_vf("0000:3b:00.0", 0, "0000:3b:00.2")
    inv = _hostfacts.pci_inventory(HostFS())
    assert [n["address"] for n in inv["nics"]] == ["0000:3b:00.0"]
    assert inv["nics"][0]["link_layer"] == "Ethernet" and inv["nics"][0]["sriov_numvfs"] == 1


def test_virtio_netdev_is_found_under_the_virtio_device(host):
    base = host.pci("0000:00:03.0", "1af4", "1041", "020000", driver="virtio-pci")
    host.file(base + "/virtio0/net/eth0/type", "1\n")
    (nic,) = _hostfacts.pci_inventory(HostFS())["nics"]
    assert nic["netdevs"] == ["eth0"] and nic["rdma_device"] is None


# A pci.ids from before Hopper/Blackwell: it names the A100 and the L40S, not the H200, the B200 or the H100 NVSwitch.
OLD_PCI_IDS = (
    "# Version: 2021.06.01\n10de  NVIDIA Corporation\n\t20b2  GA100 [A100 SXM4 80GB]\n\t26b9  AD102GL [L40S]\n"
    "\t2ffe  Unknown to the table\n15b3  Mellanox Technologies\n"
)


@pytest.mark.parametrize(
    ("device", "klass", "role", "expected"),
    [
        (
            "2335",
            "030200",
            "accelerators",
            {"model": "NVIDIA H200", "architecture": "Hopper", "memory_gb": 141, "mig_capable": True},
        ),
        (
            "2901",
            "030200",
            "accelerators",
            {"model": "NVIDIA B200", "architecture": "Blackwell", "memory_gb": 180, "mig_capable": True},
        ),
        (
            "2941",
            "030200",
            "accelerators",
            {"model": "NVIDIA GB200", "architecture": "Blackwell", "memory_gb": 186, "mig_capable": True},
        ),
        (
            "31c2",
            "030200",
            "accelerators",
            {"model": "NVIDIA GB300", "architecture": "Blackwell", "memory_gb": 288, "mig_capable": True},
        ),
        ("26b9", "030200", "accelerators", {"model": "NVIDIA L40S", "mig_capable": False}),  # the table before pci.ids
        (
            "2ffe",
            "030200",
            "accelerators",
            {"model": "Unknown to the table", "architecture": None, "mig_capable": None},
        ),
        ("22a3", "068000", "nvswitches", {"model": "NVIDIA H100 NVSwitch", "generation": 3}),
        ("1af1", "068000", "nvswitches", {"model": "NVIDIA A100 NVSwitch", "generation": 2}),
    ],
)
def test_identity_does_not_depend_on_the_hosts_pci_ids(host, device, klass, role, expected):
    host.file("/usr/share/misc/pci.ids", OLD_PCI_IDS)
    host.pci("0000:1b:00.0", "10de", device, klass)
    fs = HostFS()
    (dev,) = _hostfacts.pci_inventory(fs, _pci.PciIds(fs))[role]
    assert {k: dev[k] for k in expected} == expected
