from __future__ import annotations

import errno

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common import _fs
from ansible_collections.gpuops.platform.plugins.module_utils.host import _sriov
from ansible_collections.gpuops.platform.plugins.modules import sriov_vfs
from hostsim import lab_host

# The lab's pcie-l40s profile: two ConnectX-6 Dx ports, sriov_totalvfs 8, VFs at PF + 1, stride 1.
PF, PF_NETDEV = "0000:14:00.0", "enp20s0np0"


@pytest.fixture
def host(monkeypatch):
    """A lab-built host (overrides conftest's empty tree: four_step snapshots this one)."""
    tree, sim = lab_host("pcie-l40s", monkeypatch)
    tree.sim = sim
    return tree


@pytest.fixture
def kernel(host):
    return host.sim


def test_creates_vfs_and_waits(host, kernel, four_step):
    results = four_step(sriov_vfs, {"pf": PF_NETDEV, "num_vfs": 4})
    check, real = results[0], results[1]
    assert check["writes"] == real["writes"] == [4]
    assert check["vfs"] == []  # not created in check mode
    assert [v["address"] for v in real["vfs"]] == ["0000:14:00.1", "0000:14:00.2", "0000:14:00.3", "0000:14:00.4"]
    assert all(len(v["netdevs"]) == 1 and host.p(f"/sys/class/net/{v['netdevs'][0]}").exists() for v in real["vfs"])
    assert real["pf"] == PF and real["sriov_totalvfs"] == 8 and real["num_vfs_before"] == 0
    assert kernel.writes == [(PF, 4)]
    assert check["diff"][0]["before"] == "sriov_numvfs: 0\nvf_devices: 0\n"
    assert check["diff"][0]["after"] == "sriov_numvfs: 4\nvf_devices: 4\n"


def test_changes_non_zero_count_through_zero(host, kernel, run_module):
    kernel.write_attr(_fs.HostFS(), f"/sys/bus/pci/devices/{PF}/sriov_numvfs", "2")
    kernel.writes.clear()
    result, failed = run_module(sriov_vfs, {"pf": PF, "num_vfs": 6})
    assert not failed and result["writes"] == [0, 6] and kernel.writes == [(PF, 0), (PF, 6)]
    assert len(result["vfs"]) == 6


@pytest.mark.parametrize("check_mode", [True, False])
@pytest.mark.parametrize(
    "args, match",
    [
        (
            {"pf": PF_NETDEV, "num_vfs": 9},
            "num_vfs=9 is above the firmware limit of PF 0000:14:00.0: sriov_totalvfs is 8",
        ),
        ({"pf": PF_NETDEV, "num_vfs": -1}, "num_vfs must be 0 or more"),
        ({"pf": "eth7", "num_vfs": 1}, "unknown PF eth7:"),
        ({"pf": "enp20s0np0;reboot", "num_vfs": 1}, "neither a PCI address nor a valid interface name"),
        ({"pf": "../enp20s0np0", "num_vfs": 1}, "neither a PCI address nor a valid interface name"),
        ({"pf": "0000:14:00", "num_vfs": 1}, "malformed PCI address"),
    ],
)
def test_bad_input_changes_nothing(host, kernel, commands, run_module, check_mode, args, match):
    snap = host.snapshot()
    result, failed = run_module(sriov_vfs, args, check_mode=check_mode)
    assert failed and match in result["msg"]
    assert host.snapshot() == snap and kernel.writes == [] and commands.calls == []


def test_timeout_when_vfs_do_not_appear(host, kernel, run_module):
    kernel.create_vfs = False
    result, failed = run_module(sriov_vfs, {"pf": PF, "num_vfs": 2, "timeout": 0})
    assert failed and "0 VF devices after 0s, 2 expected" in result["msg"] and result["changed"] is True


def test_kernel_refuses_a_direct_change_of_a_non_zero_count(host, kernel):
    """What plan_writes avoids: the lab's kernel refuses 2 -> 6 as Linux does (EBUSY) and keeps 2."""
    path = f"/sys/bus/pci/devices/{PF}/sriov_numvfs"
    kernel.write_attr(_fs.HostFS(), path, "2")
    with pytest.raises(OSError) as exc:
        kernel.write_attr(_fs.HostFS(), path, "6")
    assert exc.value.errno == errno.EBUSY and "Disable before enabling 6 VFs" in str(exc.value)
    assert host.read(path).strip() == "2"


def test_persist_writes_one_rule_per_pf(host, kernel, four_step):
    host.file(_sriov.RULES_PATH, _sriov.RULES_HEADER + _sriov.RULE % ("0000:24:00.0", 4) + "\n")
    results = four_step(sriov_vfs, {"pf": PF, "num_vfs": 2, "persist": True})
    text = host.read(_sriov.RULES_PATH)
    assert _sriov.RULE % (PF, 2) in text and _sriov.RULE % ("0000:24:00.0", 4) in text
    assert results[0]["diff"][1]["after"] == text
    results = four_step(sriov_vfs, {"pf": PF, "num_vfs": 0, "persist": True})
    assert _sriov.RULE % (PF, 2) not in host.read(_sriov.RULES_PATH)


def first_gpu(host):
    """A PCI device of the profile that is not a NIC (an L40S): it has no SR-IOV capability."""
    for dev in sorted(host.p("/sys/bus/pci/devices").iterdir()):
        if (dev / "vendor").read_text().strip() == "0x10de":
            return dev.name
    raise AssertionError("no GPU in the profile")


# Issue 27: every bad value names its option (pf, num_vfs, timeout), not only the value, and changes nothing.
@pytest.mark.parametrize(
    "args, option, match",
    [
        ({"pf": "0000:14:00", "num_vfs": 1}, "pf", "pf: malformed PCI address '0000:14:00'"),
        ({"pf": "14:00.9", "num_vfs": 1}, "pf", "pf: malformed PCI address '14:00.9'"),
        ({"pf": "0000:ee:00.0", "num_vfs": 1}, "pf", "pf: PCI device 0000:ee:00.0 not found"),
        ({"pf": "eth7", "num_vfs": 1}, "pf", "pf: unknown PF eth7:"),
        ({"pf": "enp20s0np0;reboot", "num_vfs": 1}, "pf", "pf enp20s0np0;reboot is neither"),
        ({"pf": "", "num_vfs": 1}, "pf", "pf must be a network interface name or a PCI address"),
        ({"pf": "GPU", "num_vfs": 1}, "pf", "is not SR-IOV capable"),
        ({"pf": PF, "num_vfs": -1}, "num_vfs", "num_vfs must be 0 or more, got -1"),
        ({"pf": PF, "num_vfs": 9}, "num_vfs", "num_vfs=9 is above the firmware limit"),
        ({"pf": PF, "num_vfs": 1, "timeout": -1}, "timeout", "timeout must be 0 or more, got -1"),
    ],
)
def test_bad_input_names_its_option(host, kernel, commands, run_module, args, option, match):
    if args["pf"] == "GPU":
        args = dict(args, pf=first_gpu(host))
    snap = host.snapshot()
    result, failed = run_module(sriov_vfs, args)
    assert failed and match in result["msg"], result["msg"]
    assert result["msg"].startswith(option), result["msg"]
    assert result["changed"] is False and host.snapshot() == snap and kernel.writes == []


def test_a_read_only_rules_folder_is_refused_before_the_vfs_change(host, kernel, commands, run_module, monkeypatch):
    """Issue 27: the error named the temporary file (.gpuops-XXXX) and came after the VFs changed. Now the folder
    is checked first (check mode too) and the message names the rules file and the option."""
    rules_dir = host.p(_sriov.RULES_PATH).parent
    rules_dir.mkdir(parents=True, exist_ok=True)  # as on a real host
    real_access = _fs.os.access
    monkeypatch.setattr(
        _fs.os, "access", lambda p, mode: False if str(p).startswith(str(rules_dir)) else real_access(p, mode)
    )
    snap = host.snapshot()
    for check_mode in (True, False):
        result, failed = run_module(sriov_vfs, {"pf": PF, "num_vfs": 2, "persist": True}, check_mode=check_mode)
        assert failed and result["changed"] is False
        assert f"persist=true: cannot write {_sriov.RULES_PATH}" in result["msg"] and ".gpuops-" not in result["msg"]
        assert "nothing was changed" in result["msg"]
    assert host.snapshot() == snap and kernel.writes == []
    # without persist the same host is fine
    result, failed = run_module(sriov_vfs, {"pf": PF, "num_vfs": 2})
    assert not failed and result["rules_path"] is None


def test_a_rules_write_that_fails_names_the_rules_file_not_the_temp_file(host, kernel, run_module, monkeypatch):
    """access(2) can say yes and the write still fail (root squash, a mount changing under the run): the error
    names 70-gpuops-sriov.rules, as write_file raises it, never the temporary file next to it."""

    def read_only(prefix, dir):
        raise OSError(errno.EROFS, "Read-only file system", f"{dir}/{prefix}k3j2h1")

    monkeypatch.setattr(_fs.tempfile, "mkstemp", read_only)
    result, failed = run_module(sriov_vfs, {"pf": PF, "num_vfs": 2, "persist": True})
    assert failed and f"writing {_sriov.RULES_PATH} failed: Read-only file system" in result["msg"]
    assert ".gpuops-" not in result["msg"] and "k3j2h1" not in result["msg"]
    assert result["changed"] is True  # the VFs were set; the message says so
    assert "the VF count is set now" in result["msg"]
