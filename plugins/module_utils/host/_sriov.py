# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""sriov_vfs: the PF's sriov_numvfs through sysfs, a bounded wait for the VFs, and a udev rule that
re-applies the count at boot."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._diff import DifferenceTracker, file_diff
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import (
    GpuOpsError,
    HostStateError,
    InvalidInput,
    NotFound,
    Unsupported,
    WaitTimeout,
    for_option,
)
from ansible_collections.gpuops.platform.plugins.module_utils.host import _pci

# Linux dev_valid_name(): 1-15 bytes, no '/', ':' or whitespace; we also refuse shell metacharacters.
NETDEV_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,14}\Z")
RULES_PATH = "/etc/udev/rules.d/70-gpuops-sriov.rules"
RULES_HEADER = "# Managed by gpuops.platform.sriov_vfs: SR-IOV VF counts, applied when the PF's netdev appears.\n"
RULE = 'ACTION=="add", SUBSYSTEM=="net", KERNELS=="%s", ATTR{device/sriov_numvfs}=="0", ATTR{device/sriov_numvfs}="%d"'
RULE_KEY_RE = re.compile(r'KERNELS=="([^"]+)"')


def resolve_pf(fs: Any, pf: str, option: str = "pf") -> str:
    """PCI address of the PF named by netdev or PCI address. Every error names ``option``, the option that gave
    the value (the module's pf)."""
    if not isinstance(pf, str) or not pf:
        raise InvalidInput(f"{option} must be a network interface name or a PCI address, got: {pf}")
    if ":" in pf or _pci.is_address(pf):
        try:
            return _pci.require_device(fs, pf)
        except GpuOpsError as exc:
            raise for_option(option, exc) from None
    if pf in (".", "..") or not NETDEV_RE.match(pf):
        raise InvalidInput(
            f"{option} {pf} is neither a PCI address nor a valid interface name (1-15 characters of A-Z a-z 0-9 _ . @ "
            "-, no '/', whitespace or shell metacharacters)"
        )
    link = f"/sys/class/net/{pf}"
    if not fs.lexists(link):
        raise NotFound(f"{option}: unknown PF {pf}: no network interface {link} (list them with: ip -br link)")
    real = fs.realpath(link + "/device") if fs.lexists(link + "/device") else ""
    address = real.rsplit("/", 1)[-1]
    if not _pci.is_address(address):
        raise Unsupported(
            f"{option}: interface {pf} is not backed by a PCI device ({link}/device missing): it cannot have VFs"
        )
    return address


def read_state(fs: Any, address: str) -> dict[str, Any]:
    base = _pci.device_path(address)
    total = fs.read_attr(base + "/sriov_totalvfs")
    if total is None:
        raise Unsupported(
            f"PCI device {address} is not SR-IOV capable: {base}/sriov_totalvfs is absent (SR-IOV disabled in "
            "firmware or BIOS, or the PF driver is not bound)"
        )
    vfs = vf_addresses(fs, address)
    numvfs = int(fs.read_attr(base + "/sriov_numvfs") or 0)
    return {
        "address": address,
        "vendor_id": (fs.read_attr(base + "/vendor") or "")[2:],
        "netdevs": fs.listdir(base + "/net"),
        "totalvfs": int(total),
        "numvfs": numvfs,
        "vfs": vfs,
        "vfs_complete": vfs_complete(vfs, numvfs),
    }


def vf_addresses(fs: Any, address: str) -> list[str | None]:
    """The VF addresses the PF's virtfnN links name, in N order; None for a link whose device is gone."""
    base = _pci.device_path(address)
    links = [n for n in fs.listdir(base) if n.startswith("virtfn") and n[6:].isdigit()]
    links.sort(key=lambda n: int(n[6:]))
    return [fs.link_name(f"{base}/{n}") if fs.exists(f"{base}/{n}") else None for n in links]


def vfs_complete(vfs: Sequence[str | None], count: int) -> bool:
    """Whether exactly ``count`` VF devices exist (sriov_numvfs can read N while the VFs are missing, after
    a PF driver error or an interrupted run)."""
    return len(vfs) == count and all(vfs)


def vf_details(fs: Any, vfs: Sequence[str]) -> list[dict[str, Any]]:
    return [{"address": a, "netdevs": fs.listdir(_pci.device_path(a) + "/net")} for a in vfs]


def check_request(state: Mapping[str, Any], num_vfs: int) -> None:
    if num_vfs < 0:
        raise InvalidInput(f"num_vfs must be 0 or more, got {num_vfs}")
    if num_vfs > state["totalvfs"]:
        raise Unsupported(
            f"num_vfs={num_vfs} is above the firmware limit of PF {state['address']}: sriov_totalvfs is "
            f"{state['totalvfs']}. {raise_hint(state)}"
        )


def raise_hint(state: Mapping[str, Any]) -> str:
    if state["vendor_id"] == "15b3":
        return (
            "Raise it in the NIC firmware: mlxconfig -d {} set SRIOV_EN=1 NUM_OF_VFS=<n>, then reboot (or "
            "mlxfwreset); also enable SR-IOV in the BIOS".format(state["address"])
        )
    return "Raise it in the NIC firmware or BIOS SR-IOV settings (vendor tool), then reboot"


def plan_writes(current: int, desired: int, complete: bool = True) -> list[int]:
    """Values to write to sriov_numvfs: a non-zero count changes only through 0 (the kernel refuses
    non-zero → other non-zero with EBUSY). The right count with VF devices missing is re-created (0, then
    the count), so that a run never reports success over VFs that do not exist."""
    if current == desired:
        return [] if complete or desired == 0 else [0, desired]
    if current > 0 and desired > 0:
        return [0, desired]
    return [desired]


def wait_for_vfs(
    fs: Any,
    address: str,
    count: int,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    interval: float = 0.25,
) -> list[str | None]:
    deadline = clock() + timeout
    while True:
        vfs = vf_addresses(fs, address)
        if vfs_complete(vfs, count):
            return vfs
        if clock() >= deadline:
            raise WaitTimeout(
                f"PF {address}: {len(vfs)} VF devices after {timeout}s, {count} expected (virtfn* links in "
                f"{_pci.device_path(address)}); check dmesg for the PF driver's error"
            )
        sleep(interval)


def write_numvfs(fs: Any, address: str, value: int) -> None:
    path = _pci.device_path(address) + "/sriov_numvfs"
    try:
        fs.write_attr(path, str(value))
    except OSError as exc:
        raise HostStateError(
            f"writing {value} to {path} failed: {exc.strerror or exc} (EBUSY: VFs still in use, detach them "
            "first; ENOMEM/ERANGE: not enough bus numbers or MMIO, check BIOS SR-IOV and pci=realloc)"
        ) from exc


# -- persistence: one udev rule line per PF, other lines kept ----------------------------------------
def render_rules(text: str | None, address: str, num_vfs: int) -> str | None:
    """New rules file text (None when no rule is left) with this PF's line set for ``num_vfs`` (0 removes)."""
    rules = [ln for ln in (text or "").splitlines() if ln.strip() and not ln.startswith("#")]
    rules = [ln for ln in rules if RULE_KEY_RE.search(ln) is None or RULE_KEY_RE.search(ln).group(1) != address]  # type: ignore[union-attr]
    if num_vfs > 0:
        rules.append(RULE % (address, num_vfs))
    if not rules:
        return None
    rules.sort(key=lambda ln: RULE_KEY_RE.search(ln).group(1) if RULE_KEY_RE.search(ln) else ln)  # type: ignore[union-attr]
    return RULES_HEADER + "\n".join(rules) + "\n"


def _write_rules(fs: Any, text: str | None) -> None:
    """Write (or remove, for None) the rules file; an error names the rules file, never the temporary file that
    write_file makes next to it."""
    try:
        if text is None:
            fs.remove(RULES_PATH)
        else:
            fs.write_file(RULES_PATH, text)
    except OSError as exc:
        raise HostStateError(
            f"persist=true: writing {RULES_PATH} failed: {exc.strerror or exc}; the VF count is set now but is not "
            f"re-applied at boot until the file is written: make {RULES_PATH.rsplit('/', 1)[0]} writable and rerun, "
            "or set persist=false"
        ) from exc


def check_params(params: Mapping[str, Any]) -> None:
    """Option values that cannot be right, before anything is read or written."""
    for name in ("num_vfs", "timeout"):
        if params[name] < 0:
            raise InvalidInput(f"{name} must be 0 or more, got {params[name]}")


def run(
    ctx: Any, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
) -> dict[str, Any]:
    fs, params = ctx.fs, ctx.params
    check_params(params)
    address = resolve_pf(fs, params["pf"])
    try:
        state = read_state(fs, address)
    except Unsupported as exc:  # the device pf names cannot have VFs
        raise for_option("pf", exc) from None
    check_request(state, params["num_vfs"])
    writes = plan_writes(state["numvfs"], params["num_vfs"], state["vfs_complete"])
    found = len([v for v in state["vfs"] if v])
    if writes and state["numvfs"] == params["num_vfs"]:
        ctx.warn(
            f"PF {address}: sriov_numvfs reads {state['numvfs']} but {found} VF devices exist (an earlier run "
            "failed or was interrupted, or the PF driver failed): re-creating the VFs through 0"
        )

    tracker = DifferenceTracker()
    tracker.add("sriov_numvfs", state["numvfs"], params["num_vfs"])
    tracker.add("vf_devices", found, params["num_vfs"])
    rules_before = fs.read_text(RULES_PATH) if params["persist"] else None
    rules_after = render_rules(rules_before, address, params["num_vfs"]) if params["persist"] else None
    rules_changed = params["persist"] and rules_before != rules_after
    if rules_changed and not fs.writable(RULES_PATH):  # checked before the VFs change, in check mode too
        raise HostStateError(
            f"persist=true: cannot write {RULES_PATH}: its directory is not writable (a read-only file system, or "
            f"not root: become: true); nothing was changed. Make {RULES_PATH.rsplit('/', 1)[0]} writable, or set "
            "persist=false (host_prep: host_prep_sriov_persist: false) and re-create the VFs after every reboot "
            "another way"
        )

    vfs = state["vfs"]
    if not ctx.check_mode:
        for value in writes:
            write_numvfs(fs, address, value)
            ctx.did(f"wrote {value} to {_pci.device_path(address)}/sriov_numvfs")
        if writes:
            vfs = wait_for_vfs(fs, address, params["num_vfs"], params["timeout"], clock=clock, sleep=sleep)
        if rules_changed:
            _write_rules(fs, rules_after)
            ctx.did(f"{'removed' if rules_after is None else 'wrote'} {RULES_PATH}")

    result = {
        "changed": bool(writes) or bool(rules_changed),
        "pf": address,
        "pf_netdevs": state["netdevs"],
        "sriov_totalvfs": state["totalvfs"],
        "num_vfs_before": state["numvfs"],
        "num_vfs": params["num_vfs"],
        "writes": writes,
        "vfs": vf_details(fs, vfs) if not ctx.check_mode or not writes else [],
        "rules_path": RULES_PATH if params["persist"] else None,
    }
    if ctx.diff_mode:
        result["diff"] = [tracker.diff(f"{address} sriov_numvfs")]
        if params["persist"]:
            result["diff"].append(file_diff(RULES_PATH, rules_before, rules_after))
    return result
