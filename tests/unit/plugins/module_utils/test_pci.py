from __future__ import annotations

import struct

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput, NotFound
from ansible_collections.gpuops.platform.plugins.module_utils.common._fs import HostFS
from ansible_collections.gpuops.platform.plugins.module_utils.host import _pci
from hostsim import config_space


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0000:17:00.0", "0000:17:00.0"),
        ("17:00.0", "0000:17:00.0"),
        ("ABCD:EF:1F.7", "abcd:ef:1f.7"),
        ("10000:e0:06.0", "10000:e0:06.0"),  # VMD domain
    ],
)
def test_normalize_address_valid(text, expected):
    assert _pci.normalize_address(text) == expected


@pytest.mark.parametrize(
    "text", ["0000:17:00", "0000:17:20.0", "0000:17:00.8", "../../etc/passwd", "0000:17:00.0;reboot", "", None, 17]
)
def test_normalize_address_malformed(text):
    with pytest.raises(InvalidInput, match="malformed PCI address"):
        _pci.normalize_address(text)


def test_capability_walks_follow_the_chain():
    # the lab's images (gpuops_lab.hostsim.pciconfig): PM 0x40 -> MSI 0x48 -> PCIe 0x60 [-> MSI-X 0xa0];
    # AER 0x100 -> ACS 0x148 on ports, AER 0x100 -> ARI 0x148 -> SR-IOV 0x150 on a PF
    cfg = config_space("10b5", "c010", "060400", "downstream_port", acs=0x001D)
    assert _pci.capabilities(cfg) == {0x01: 0x40, 0x05: 0x48, 0x10: 0x60}
    assert _pci.ext_capabilities(cfg) == {0x0001: 0x100, 0x000D: 0x148}
    assert _pci.port_type(cfg) == "downstream_port"
    assert _pci.acs_registers(cfg) == (0x148, 0x005F, 0x001D)
    pf = config_space("15b3", "101d", "020000", sriov=(16, 4))
    assert _pci.capabilities(pf) == {0x01: 0x40, 0x05: 0x48, 0x10: 0x60, 0x11: 0xA0}
    assert _pci.ext_capabilities(pf) == {0x0001: 0x100, 0x000E: 0x148, 0x0010: 0x150}
    assert _pci.sriov_registers(pf) == (0x150, 16, 4)


@pytest.mark.parametrize(
    "cfg, acs, port",
    [
        (config_space("10de", "2330", "030200"), None, "endpoint"),  # no ACS on an endpoint
        (config_space("10b5", "c010", "060400", "root_port", acs=0, size=64), None, None),  # non-root read
        (config_space("10b5", "c010", "060400", "root_port", acs=0, size=256), None, "root_port"),
        (b"", None, None),
    ],
)
def test_registers_absent_or_unreadable(cfg, acs, port):
    assert _pci.acs_registers(cfg) == acs
    assert _pci.port_type(cfg) == port


def test_walks_stop_on_loops():
    cfg = bytearray(config_space("10b5", "c010", "060400", acs=0x1D))
    struct.pack_into("<I", cfg, 0x148, 0x000D | (1 << 16) | (0x100 << 20))  # ACS points back to AER
    cfg[0x61] = 0x40  # PCIe cap points back to PM
    assert _pci.ext_capabilities(bytes(cfg)) == {0x0001: 0x100, 0x000D: 0x148}
    assert _pci.capabilities(bytes(cfg)) == {0x01: 0x40, 0x05: 0x48, 0x10: 0x60}


def test_no_capability_list_when_status_bit_clear():
    cfg = bytearray(config_space("10de", "2330", "030200"))
    struct.pack_into("<H", cfg, 0x06, 0)
    assert _pci.capabilities(bytes(cfg)) == {}


def test_read_device_and_upstream_chain(host):
    host.bridge("0000:00:01.0", port_type="root_port")
    host.bridge("0000:01:00.0", parent="0000:00:01.0", port_type="upstream_port", acs=None)
    host.bridge("0000:02:00.0", parent="0000:01:00.0")
    host.pci("0000:03:00.0", "10de", "2330", "030200", parent="0000:02:00.0", driver="nvidia", numa=1, iommu_group=7)
    fs = HostFS()
    dev = _pci.read_device(fs, "0000:03:00.0")
    assert dev == {
        "address": "0000:03:00.0",
        "vendor_id": "10de",
        "device_id": "2330",
        "class": "030200",
        "numa_node": 1,
        "driver": "nvidia",
        "iommu_group": 7,
        "is_virtfn": False,
    }
    assert _pci.upstream_chain(fs, "0000:03:00.0") == ["0000:02:00.0", "0000:01:00.0", "0000:00:01.0"]
    assert _pci.upstream_chain(fs, "0000:00:01.0") == []
    assert _pci.list_addresses(fs) == ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"]


def test_require_device(host):
    with pytest.raises(NotFound, match="0000:99:00.0 not found"):
        _pci.require_device(HostFS(), "99:00.0")


def test_numa_minus_one_is_none(host):
    host.pci("0000:03:00.0", "10de", "2330", "030200", numa=-1)
    assert _pci.read_device(HostFS(), "0000:03:00.0")["numa_node"] is None


def test_pci_ids_lookup(host):
    host.file(
        "/usr/share/misc/pci.ids",
        "# comment\n10de  NVIDIA Corporation\n\t2330  GH100 [H100 SXM5 80GB]\n\t\t10de 16c1  H100 SXM5 80GB\n"
        "\t22a3  GH100 [H100 NVSwitch]\n15b3  Mellanox Technologies\n\t1021  MT2910 Family [ConnectX-7]\n",
    )
    ids = _pci.PciIds(HostFS())
    assert ids.device_name("10de", "2330") == "GH100 [H100 SXM5 80GB]"
    assert ids.device_name("10de", "22A3") == "GH100 [H100 NVSwitch]"
    assert ids.device_name("15b3", "1021") == "MT2910 Family [ConnectX-7]"
    assert ids.device_name("15b3", "9999") is None
    assert ids.device_name("8086", "1593") is None
