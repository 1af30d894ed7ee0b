from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.host import _acs, _pending
from ansible_collections.gpuops.platform.plugins.modules import pcie_acs
from hostsim import dgx_like


@pytest.fixture
def dgx(host):
    return dgx_like(host)


def test_disables_every_acs_port_above_gpus_and_nics(host, dgx, four_step):
    results = four_step(pcie_acs, {"state": "disabled"})
    check, real = results[0], results[1]
    assert check["devices"] == real["devices"]
    assert len(real["devices"]) == 12
    assert all(d["before"] == "0x001d" and d["after"] == "0x0000" and d["changed"] for d in real["devices"])
    targets = [d["address"] for d in real["devices"]]
    assert all(host.acs_control(a) == 0 for a in targets)
    assert host.acs_control("0000:00:10.0") == 0x001D  # NVSwitch root port untouched
    assert "0000:00:01.0: 0x001d\n" in check["diff"][0]["before"]
    assert results[3]["devices"][0]["before"] == "0x0000"


def test_enabled_restores_the_kernel_default(host, four_step):
    host.bridge("0000:00:01.0", port_type="root_port", acs=0x0000)
    results = four_step(pcie_acs, {"state": "enabled", "devices": ["00:01.0"]})
    assert results[1]["devices"][0]["after"] == "0x001d" and host.acs_control("0000:00:01.0") == 0x1D


@pytest.mark.parametrize("check_mode", [True, False])
@pytest.mark.parametrize(
    "devices, match",
    [
        (["0000:00:01.0", "0000:10:00.0"], "0000:10:00.0 has no ACS extended capability"),  # switch upstream port
        (["0000:12:00.0"], "0000:12:00.0 has no ACS extended capability"),  # a GPU
        (["0000:00:01.0", "0000:00:01"], "malformed PCI address '0000:00:01'"),
        (["0000:ee:00.0"], "PCI device 0000:ee:00.0 not found"),
    ],
)
def test_bad_devices_fail_with_nothing_changed(host, dgx, commands, run_module, check_mode, devices, match):
    snap = host.snapshot()
    result, failed = run_module(pcie_acs, {"devices": devices}, check_mode=check_mode)
    assert failed and match in result["msg"]
    assert host.snapshot() == snap and commands.mutations() == []


def test_unreadable_config_space_names_the_fix(host, run_module):
    host.bridge("0000:00:01.0", port_type="root_port", config_size=64)
    host.pci("0000:01:00.0", "10de", "2330", "030200", parent="0000:00:01.0")
    result, failed = run_module(pcie_acs, {})
    assert failed and "0000:00:01.0" in result["msg"] and "become" in result["msg"]


def test_readback_mismatch_is_an_error(host, run_module, monkeypatch):
    host.bridge("0000:00:01.0", port_type="root_port")
    monkeypatch.setattr(_acs, "write_control", lambda fs, address, offset, value: None)
    result, failed = run_module(pcie_acs, {"devices": ["0000:00:01.0"]})
    assert failed and "reads 0x001d after writing 0x0000" in result["msg"]


def systemd_booted(host):
    """What systemd makes at boot as PID 1 (sd_booted(3) tests it): an empty tree has none."""
    host.p("/run/systemd/system").mkdir(parents=True, exist_ok=True)


def test_persist_installs_and_enables_the_unit(host, dgx, commands, four_step):
    commands.tools |= {"systemctl", "setpci"}
    systemd_booted(host)
    enabled = {"value": False}

    def is_enabled(argv):
        return (0, "enabled\n", "") if enabled["value"] else (1, "disabled\n", "")

    def enable(argv):
        enabled["value"] = True
        return (0, "", "")

    commands.on(r"^systemctl is-enabled gpuops-pcie-acs.service$", is_enabled)
    commands.on(r"^systemctl enable gpuops-pcie-acs.service$", enable)
    results = four_step(pcie_acs, {"persist": True})
    assert results[1]["unit"] == {"path": _acs.UNIT_PATH, "changed": True, "enabled": True}
    unit = host.read(_acs.UNIT_PATH)
    assert unit.count("ExecStart=/usr/bin/setpci -s ") == 12 and "ECAP_ACS+0x6.w=0000" in unit
    assert commands.mutations() == ["systemctl daemon-reload", "systemctl enable gpuops-pcie-acs.service"]
    assert results[0]["diff"][1]["after"] == unit
    assert not [r for r in results if r.get("warnings")]  # a first install is not a pending reload


def test_persist_without_setpci_fails_before_writing(host, dgx, commands, run_module):
    commands.tools |= {"systemctl"}
    systemd_booted(host)
    snap = host.snapshot()
    result, failed = run_module(pcie_acs, {"persist": True})
    assert failed and "setpci" in result["msg"] and "pciutils" in result["msg"]
    assert host.snapshot() == snap


def test_persist_reloads_when_a_reload_is_pending(host, dgx, commands, run_module):
    """The unit file is in place but an earlier run failed before systemctl daemon-reload: check mode says so,
    the run reloads once and clears the record."""
    commands.tools |= {"systemctl", "setpci"}
    systemd_booted(host)
    commands.on(r"^systemctl is-enabled gpuops-pcie-acs.service$", (0, "enabled\n", ""))
    result, failed = run_module(pcie_acs, {"persist": True})
    assert not failed and commands.mutations() == [
        "systemctl daemon-reload",
        "systemctl enable gpuops-pcie-acs.service",
    ]
    host.file(_pending.path(_acs.PENDING), "unit changed\n")
    commands.calls.clear()
    for check_mode in (True, False):
        result, failed = run_module(pcie_acs, {"persist": True}, check_mode=check_mode)
        assert not failed and result["changed"] and result["unit"]["changed"]
        assert "systemd was not reloaded" in str(result["warnings"])
    assert commands.mutations() == ["systemctl daemon-reload"]
    assert not host.p(_pending.path(_acs.PENDING)).exists()
    result, failed = run_module(pcie_acs, {"persist": True})
    assert not failed and not result["changed"]


@pytest.mark.parametrize("check_mode", [True, False])
def test_persist_without_a_running_systemd_fails_before_any_change(host, dgx, commands, run_module, check_mode):
    """Issue 27: systemctl installed, systemd not running (a container, a chroot): it wrote the twelve registers and
    the unit file, then daemon-reload failed, and promised that a rerun would finish, which it cannot. Now it checks
    first: nothing written, no systemctl change, changed false, the option and the evidence named."""
    commands.tools |= {"systemctl", "setpci"}
    commands.on(r"^systemctl is-enabled gpuops-pcie-acs.service$", (1, "disabled\n", ""))  # answers from the files
    commands.on(
        r"^systemctl daemon-reload$", (1, "", "System has not been booted with systemd as init system (PID 1).")
    )
    snap = host.snapshot()
    result, failed = run_module(pcie_acs, {"persist": True}, check_mode=check_mode)
    assert failed and result["changed"] is False
    msg = result["msg"]
    assert "persist=true needs a running systemd" in msg and "/run/systemd/system is absent" in msg
    assert "nothing was changed" in msg and "the next run finishes the job" not in msg
    assert host.snapshot() == snap and commands.mutations() == []
    assert all(host.acs_control(a) == 0x001D for a in dgx["bridges"] if host.acs_control(a) is not None)
    # without persist the same host is fine: the registers are set, no unit is needed
    result, failed = run_module(pcie_acs, {"persist": False}, check_mode=check_mode)
    assert not failed and result["changed"] is True and result["unit"] is None


# Issue 27: a bad item of devices is named by its index, not only by its value, and nothing changes.
@pytest.mark.parametrize("check_mode", [True, False])
@pytest.mark.parametrize(
    "devices, match",
    [
        (["0000:00:01"], "devices[0]: malformed PCI address '0000:00:01'"),
        (["0000:00:01.0", ""], "devices[1]: malformed PCI address ''"),
        (["0000:00:01.0", "0000:ee:00.0"], "devices[1]: PCI device 0000:ee:00.0 not found"),
        (["0000:00:01.0", "0000:12:00.0"], "devices[1]: PCI device 0000:12:00.0 has no ACS extended capability"),
        (["00:01.0", "0000:00:01.0", "10:00.0"], "devices[2]: PCI device 0000:10:00.0 has no ACS"),
        (["0000:10:00.0", "10:00.0"], "devices[0]: PCI device 0000:10:00.0 has no ACS"),  # the first naming it
    ],
)
def test_bad_devices_name_the_item(host, dgx, commands, run_module, check_mode, devices, match):
    snap = host.snapshot()
    result, failed = run_module(pcie_acs, {"devices": devices}, check_mode=check_mode)
    assert failed and result["msg"].startswith(match), result["msg"]
    assert result["changed"] is False and host.snapshot() == snap and commands.mutations() == []


def test_a_read_only_unit_folder_is_refused_before_any_register(host, dgx, commands, run_module, monkeypatch):
    from ansible_collections.gpuops.platform.plugins.module_utils.common import _fs

    commands.tools |= {"systemctl", "setpci"}
    systemd_booted(host)
    host.p("/etc/systemd/system").mkdir(parents=True, exist_ok=True)  # as on a real host
    units = str(host.p("/etc/systemd/system"))
    real_access = _fs.os.access
    monkeypatch.setattr(_fs.os, "access", lambda p, m: False if str(p).startswith(units) else real_access(p, m))
    snap = host.snapshot()
    result, failed = run_module(pcie_acs, {"persist": True})
    assert failed and result["changed"] is False and f"cannot write {_acs.UNIT_PATH}" in result["msg"]
    assert host.snapshot() == snap and commands.mutations() == []
