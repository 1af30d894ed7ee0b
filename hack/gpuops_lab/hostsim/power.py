"""The simulated host's power cycle: a reboot rebuilds sysfs and procfs from the hardware, loads the modules the
boot would, starts the enabled units and replays the udev SR-IOV rules. Above the kernel, the services and the tree
(each of which it uses); nothing below imports it, so the host simulation's imports have no cycle."""

from __future__ import annotations

import os
import re
import shlex
import subprocess

from . import kernel, services, tree
from .hostfs import SIM_RUN, Host, read, remove, write


def reboot(host: Host) -> list[str]:
    """Power-cycle the simulated host: sysfs and procfs are rebuilt from the hardware (ACS back to what
    Linux sets for the new command line, no VFs, no bindings), the modules load as udev would with the
    initramfs and modprobe.d blacklists, /run starts empty (the simulation's logs kept), enabled units
    start. Returns the modules loaded at boot."""
    meta = host.meta
    cmdline = kernel.grub_cmdline(host) or read(host.p("/proc/cmdline")).strip()
    h = dict(meta["host"], cmdline=cmdline)
    with host.lock():
        tree.write_volatile(host, h)
        keep = {n: read(host.p(f"{SIM_RUN}/{n}")) for n in ("tree", "uname.json", "calls.log", "kernel.log")}
        for child in host.p("/run").iterdir():
            remove(child)
        for n, text in keep.items():
            write(host.p(f"{SIM_RUN}/{n}"), text)
        host.p("/run/systemd/system").mkdir(parents=True, exist_ok=True)
        host.save_state({})
    host.kernel_log(f"Linux version {host.release} (simulated boot) {cmdline}")
    kernel.apply(host)
    loaded_at_boot = kernel.boot_modules(host, kernel.initramfs_config(host), kernel.modprobe_config(host))
    services.boot(host)
    run_boot_units(host)
    apply_udev_sriov_rules(host)
    return loaded_at_boot


_UDEV_SRIOV = re.compile(r'KERNELS=="([0-9a-f:.]+)".*ATTR\{device/sriov_numvfs\}="(\d+)"')


def apply_udev_sriov_rules(host: Host) -> list[str]:
    """What udev does at boot for rules that set a PF's sriov_numvfs when its netdev appears (the form
    gpuops.platform.sriov_vfs writes); other rules are not simulated."""
    done = []
    rules = host.p("/etc/udev/rules.d")
    for rule in sorted(rules.glob("*.rules")) if rules.is_dir() else []:
        for line in rule.read_text().splitlines():
            m = _UDEV_SRIOV.search(line)
            dev = host.p(f"/sys/bus/pci/devices/{m.group(1)}") if m else None
            if m and dev is not None and (dev / "sriov_numvfs").exists() and (dev / "driver").exists():
                write(dev / "sriov_numvfs", m.group(2) + "\n")
                kernel.apply(host)
                done.append(f"{m.group(1)}={m.group(2)}")
                host.kernel_log(f"udev: {rule.name}: {m.group(1)} sriov_numvfs={m.group(2)}")
    return done


def run_boot_units(host: Host) -> list[list[str]]:
    """Run the ExecStart= lines of enabled oneshot units that call setpci (as the boot would), with the
    real setpci pointed at the host's sysfs; other commands are logged as not simulated."""
    ran = []
    for unit in services.all_units(host):
        if services.enabled_state(host, unit) != "enabled":
            continue
        path = next(
            (host.p(f"{d}/{unit}") for d in (services.ETC, services.LIB) if host.p(f"{d}/{unit}").exists()), None
        )
        text = path.read_text() if path else ""
        if "Type=oneshot" not in text:
            continue
        for line in text.splitlines():
            if not line.startswith("ExecStart="):
                continue
            argv = shlex.split(line.split("=", 1)[1])
            if os.path.basename(argv[0]) != "setpci":
                host.kernel_log(f"systemd[1]: {unit}: ExecStart {argv[0]} not simulated")
                continue
            sysfs_pci = str(host.p("/sys/bus/pci"))
            cmd = ["setpci", "-A", "linux-sysfs", "-O", f"sysfs.path={sysfs_pci}", *argv[1:]]
            rc = subprocess.run(cmd, capture_output=True, text=True, check=False).returncode
            host.kernel_log(f"systemd[1]: {unit}: {' '.join(argv)} -> {rc}")
            ran.append(argv)
    return ran
