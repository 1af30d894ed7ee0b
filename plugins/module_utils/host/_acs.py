# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""pcie_acs: the ACS Control register (ACS extended capability + 6) through sysfs config space, which is
what ``setpci -s <addr> ECAP_ACS+0x6.w=<value>`` does, and a boot-time unit that re-applies it."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._diff import DifferenceTracker, file_diff
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import (
    GpuOpsError,
    HostStateError,
    Unsupported,
    for_option,
)
from ansible_collections.gpuops.platform.plugins.module_utils.host import _hostfacts, _pci, _pending
from ansible_collections.gpuops.platform.plugins.module_utils.host._service import BOOTED_MARKER, Systemd, booted

# ACS Control bits (PCIe Base 6.0, 7.7.8.3).
SV, TB, RR, CR, UF, EC, DT = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40
# What Linux sets when it enables ACS (drivers/pci/pci.c pci_std_enable_acs): SV, RR, CR, UF where supported.
KERNEL_ENABLE_MASK = SV | RR | CR | UF
UNIT_NAME = "gpuops-pcie-acs.service"
UNIT_PATH = "/etc/systemd/system/" + UNIT_NAME
# Recorded before the unit file changes, cleared after systemctl daemon-reload succeeded: a run that fails
# in between leaves it, and the next run reloads although the file is already in place.
PENDING = "pcie-acs-daemon-reload"


def read_acs(fs: Any, address: str) -> dict[str, Any]:
    """{address, offset, capability, control}; Unsupported without the capability, HostStateError when the
    extended config space cannot be read."""
    cfg = _pci.read_config(fs, address)
    path = _pci.device_path(address) + "/config"
    if len(cfg) < _pci.CONFIG_EXTENDED_SIZE:
        raise HostStateError(
            f"cannot read the extended config space of {address}: {path} gave {len(cfg)} bytes, 4096 needed; "
            "run the task as root (become: true)"
        )
    regs = _pci.acs_registers(cfg)
    if regs is None:
        raise Unsupported(
            f"PCI device {address} has no ACS extended capability (ID 0x000d not in the extended capability list "
            f"of {path}, see lspci -vvv -s {address}); ACS is set on the bridges and switch ports above GPUs and "
            "NICs, not on endpoints: drop it from devices or leave devices unset"
        )
    return {"address": address, "offset": regs[0], "capability": regs[1], "control": regs[2]}


def desired_control(state: str, capability: int) -> int:
    return 0 if state == "disabled" else capability & KERNEL_ENABLE_MASK


def default_targets(fs: Any) -> list[str]:
    """Bridges/switch ports with ACS on the path of every GPU and RDMA NIC."""
    inv = _hostfacts.pci_inventory(fs)
    endpoints = [d["address"] for d in inv["accelerators"]]
    endpoints += [n["address"] for n in inv["nics"] if _hostfacts.is_rdma_nic(n)]
    targets = []
    for bridge in _hostfacts.bridge_paths(fs, endpoints):
        if not bridge["config_readable"]:
            read_acs(fs, bridge["address"])  # raises the "run as root" error
        if bridge["acs"] is not None:
            targets.append(bridge["address"])
    return targets


def write_control(fs: Any, address: str, offset: int, value: int) -> None:
    path = _pci.device_path(address) + "/config"
    try:
        fs.pwrite(path, offset + 6, struct.pack("<H", value))
    except OSError as exc:
        raise HostStateError(
            f"writing ACS Control 0x{value:04x} of {address} (offset 0x{offset + 6:03x} of {path}) failed: "
            f"{exc.strerror or exc}; run the task as root (become: true) and check the device with "
            f"lspci -vvv -s {address}"
        ) from exc


def render_unit(setpci: str, entries: Sequence[tuple[str, int]], state: str) -> str:
    lines = [
        "# Managed by gpuops.platform.pcie_acs: ACS Control resets at reboot; this re-applies it.",
        "[Unit]",
        f"Description=gpuops: PCIe ACS {state} on GPU/RDMA paths",
        "After=systemd-modules-load.service",
        "Before=kubelet.service containerd.service nvidia-fabricmanager.service",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
    ]
    lines += [f"ExecStart={setpci} -s {addr} ECAP_ACS+0x6.w={value:04x}" for addr, value in entries]
    lines += ["", "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


def run(ctx: Any) -> dict[str, Any]:
    fs, runner, state = ctx.fs, ctx.runner, ctx.params["state"]
    given = _given_devices(fs, ctx.params["devices"] or [])  # address -> the option item that named it
    addresses = sorted(given) if given else default_targets(fs)
    current = []
    for address in addresses:  # read everything (and fail) before any write
        try:
            current.append(read_acs(fs, address))
        except Unsupported as exc:
            if address not in given:
                raise
            raise for_option(given[address], exc) from None  # a listed device without ACS: name the item

    tracker = DifferenceTracker()
    devices = []
    for cur in current:
        want = desired_control(state, cur["capability"])
        tracker.add(cur["address"], "0x{:04x}".format(cur["control"]), f"0x{want:04x}")
        devices.append(
            {
                "address": cur["address"],
                "acs_offset": "0x{:03x}".format(cur["offset"]),
                "capability": "0x{:04x}".format(cur["capability"]),
                "before": "0x{:04x}".format(cur["control"]),
                "after": f"0x{want:04x}",
                "changed": cur["control"] != want,
            }
        )

    unit = None
    if ctx.params["persist"]:
        unit = _unit_plan(fs, runner, state, [(d["address"], int(d["after"], 16)) for d in devices])

    if not ctx.check_mode:
        for dev in devices:
            if dev["changed"]:
                _write_and_verify(fs, dev)
                ctx.did(f"ACS Control of {dev['address']} set to {dev['after']}")
    if unit:
        _unit_apply(ctx, unit)

    result = {
        "changed": tracker.has_differences or bool(unit and unit["changed"]),
        "state": state,
        "devices": devices,
        "unit": {k: unit[k] for k in ("path", "changed", "enabled")} if unit else None,
    }
    if not devices:
        result["msg"] = "no bridge or switch port with an ACS capability above the GPUs and RDMA NICs"
    if ctx.diff_mode:
        result["diff"] = [tracker.diff("PCIe ACS Control")]
        if unit:
            result["diff"].append(file_diff(UNIT_PATH, unit["before"], unit["after"]))
    return result


def _given_devices(fs: Any, devices: Sequence[Any]) -> dict[str, str]:
    """O(devices) normalized and checked: {address: 'devices[i]'} (the first item naming it); an error names the
    item (``devices[1]: malformed PCI address ...``)."""
    given: dict[str, str] = {}
    for i, text in enumerate(devices):
        try:
            address = _pci.require_device(fs, text)
        except GpuOpsError as exc:
            raise for_option(f"devices[{i}]", exc) from None
        given.setdefault(address, f"devices[{i}]")
    return given


def _write_and_verify(fs: Any, dev: Mapping[str, Any]) -> None:
    offset, want = int(dev["acs_offset"], 16), int(dev["after"], 16)
    write_control(fs, dev["address"], offset, want)
    got = _pci.acs_registers(_pci.read_config(fs, dev["address"]))
    if got is None or got[2] != want:
        raise HostStateError(
            "ACS Control of {} reads 0x{:04x} after writing 0x{:04x} at config offset 0x{:03x}: the device did not "
            "accept the value (firmware-locked ACS?); check with lspci -vvv -s {}".format(
                dev["address"], got[2] if got else -1, want, offset + 6, dev["address"]
            ),
            devices=[dev],
        )


def _unit_plan(fs: Any, runner: Any, state: str, entries: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """What persist=true does: the unit file, the reload, the enable. Everything it needs is checked here, before
    run() writes any register or file: a host where the unit cannot be installed fails with nothing changed."""
    systemd = Systemd(runner)
    if not systemd.available():
        raise Unsupported("persist=true needs systemd: systemctl not found on this host; nothing was changed")
    if not booted(fs):
        raise Unsupported(
            f"persist=true needs a running systemd, and this host does not run systemd as its init: {BOOTED_MARKER} "
            "is absent (systemctl is installed, but systemctl daemon-reload and enable cannot work without the "
            f"manager - a container or chroot?); nothing was changed: no ACS register and no {UNIT_PATH} was "
            "written. Run on a host booted with systemd, or set persist=false (host_prep: host_prep_acs_persist: "
            "false) and re-apply ACS after every reboot another way"
        )
    after = render_unit(runner.require("setpci"), entries, state)
    before = fs.read_text(UNIT_PATH)
    enabled = systemd.is_enabled(UNIT_NAME) if before is not None else False
    if enabled is None:
        raise HostStateError(
            f"cannot tell whether {UNIT_NAME} is enabled: {systemd.last_error.get(UNIT_NAME)}; persist=true "
            "needs a running systemd (check systemctl status)"
        )
    write = before != after
    if write and not fs.writable(UNIT_PATH):
        raise HostStateError(
            f"persist=true: cannot write {UNIT_PATH}: its directory is not writable (a read-only file system, or not "
            "root: become: true); nothing was changed"
        )
    reload = write or _pending.is_pending(fs, PENDING)
    return {
        "path": UNIT_PATH,
        "before": before,
        "after": after,
        "write": write,
        "reload": reload,
        "enable": not enabled,
        "changed": reload or not enabled,
        "enabled": True,
        "systemd": systemd,
    }


def _unit_apply(ctx: Any, unit: Mapping[str, Any]) -> None:
    fs, systemd = ctx.fs, unit["systemd"]
    if unit["write"]:
        if not ctx.check_mode:
            _pending.mark(fs, PENDING, f"{UNIT_PATH} changed: systemctl daemon-reload")
            fs.write_file(UNIT_PATH, unit["after"])
            ctx.did(f"wrote {UNIT_PATH}")
    elif unit["reload"]:
        ctx.warn(
            f"systemd was not reloaded after {UNIT_PATH} last changed (an earlier run failed or was "
            "interrupted): reloading it now"
        )
    if unit["reload"]:
        systemd.daemon_reload()
        if not ctx.check_mode:
            _pending.clear(fs, PENDING)
            ctx.did("systemctl daemon-reload")
    if unit["enable"]:
        systemd.enable(UNIT_NAME)
        ctx.did(f"systemctl enable {UNIT_NAME}")
