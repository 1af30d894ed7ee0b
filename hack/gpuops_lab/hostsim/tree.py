"""build_tree(): a simulated host's root directory from a hardware profile.

Layout (paths as on the host; each lives at <tree>/<path>):

  sys/devices/pci0000:RR/<root port>/<switch up>/<switch down>/<endpoint>/   PCI functions, each with
      vendor device class subsystem_vendor subsystem_device revision numa_node local_cpus local_cpulist
      config (binary, 4096 bytes) resource irq enable modalias uevent driver_override
      current/max_link_speed/width, subsystem -> bus/pci, iommu_group -> kernel/iommu_groups/N,
      driver -> bus/pci/drivers/<d> (while bound), sriov_* on SR-IOV PFs (+ virtfnN / physfn with VFs),
      net/<if>/ (NIC with a bound network driver), infiniband/mlx5_N/ports/1/link_layer (mlx5_ib loaded)
  sys/bus/pci/devices/<addr> -> the function;  sys/bus/pci/drivers/<d>/ (module loaded)
  sys/class/net/<if>, sys/class/infiniband/mlx5_N, sys/kernel/iommu_groups/N/devices/<addr>
  sys/module/<m>/ (refcnt, holders/, initstate, taint, version for nvidia and OFED modules)
  sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c (when secure_boot is known)
  sys/devices/system/node/nodeN/cpulist
  proc/cmdline  proc/modules  proc/version  proc/driver/nvidia/{version,gpus/<addr>/information} (nvidia loaded)
  etc/os-release etc/hostname etc/modprobe.d/ etc/modules-load.d/ etc/modules etc/default/grub
  etc/systemd/system/
  usr/lib/modules/<release>/{modules.dep, kernel/**.ko, updates/dkms/*.ko, build -> ../../../src/...}
  usr/src/linux-headers-<release>/ (headers installed)   usr/lib/systemd/system/<unit>
  usr/sbin/{modprobe,rmmod,lsmod,modinfo,depmod,update-grub,update-initramfs}, usr/bin/{systemctl,apt-get,
  mokutil,uname}: the shims (usr/bin/dracut instead of update-initramfs with initramfs_tool: dracut)
  var/lib/dpkg/status   boot/{vmlinuz,initrd.img}-<release>   boot/grub/grub.cfg
  run/gpuops-sim/{tree,uname.json,calls.log,kernel.log,units.json}  run/systemd/system/
  .hostsim/ (meta.json, modules.json, state.json, lock, overlay work dirs): the simulation's own
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

from . import kernel, model, packages, services, shims, sysfs
from .bootcfg import SECURE_BOOT_VAR, grub_cfg, split_cmdline
from .hostfs import META_DIR, SIM_RUN, Host, clear_dir, link, write

OVERLAY_DIRS = ("etc", "usr", "run", "var", "opt", "boot")
HACK = Path(__file__).resolve().parents[2]

OS_RELEASE = {
    ("ubuntu", "22.04"): ("Ubuntu 22.04.5 LTS", "22.04.5 LTS (Jammy Jellyfish)", "jammy"),
    ("ubuntu", "24.04"): ("Ubuntu 24.04.1 LTS", "24.04.1 LTS (Noble Numbat)", "noble"),
    ("debian", "12"): ("Debian GNU/Linux 12 (bookworm)", "12 (bookworm)", "bookworm"),
}


def os_release(os_id: str, version_id: str) -> str:
    pretty, version, codename = OS_RELEASE.get((os_id, version_id), (f"{os_id} {version_id}", version_id, ""))
    name = {"ubuntu": "Ubuntu", "debian": "Debian GNU/Linux", "rhel": "Red Hat Enterprise Linux"}.get(os_id, os_id)
    lines = [f'PRETTY_NAME="{pretty}"', f'NAME="{name}"', f'VERSION_ID="{version_id}"', f'VERSION="{version}"']
    if codename:
        lines.append(f"VERSION_CODENAME={codename}")
    lines += [f"ID={os_id}"] + (["ID_LIKE=debian"] if os_id == "ubuntu" else [])
    if os_id == "ubuntu":
        lines.append(f"UBUNTU_CODENAME={codename}")
    return "\n".join(lines) + "\n"


def uname(h: dict[str, Any]) -> dict[str, str]:
    """What uname(2) reports on the simulated host (the runner's sitecustomize and uname shim use it)."""
    rel = h["kernel_release"]
    abi = rel.split("-")[1] if "-" in rel else "1"
    return {"release": rel, "version": f"#{abi}-Ubuntu SMP Fri Aug  2 19:25:20 UTC 2024", "machine": "x86_64"}


def _assign_sysfs(devices: list[dict[str, Any]]) -> None:
    by_addr = {d["addr"]: d for d in devices}
    for d in devices:
        parent = by_addr.get(d["parent"]) if d["parent"] else None
        base = parent["sysfs"] if parent else f"devices/pci0000:{d['root_bus']:02x}"
        d["sysfs"] = f"{base}/{d['addr']}"


def write_volatile(host: Host, h: dict[str, Any]) -> None:
    """(Re)create /sys and /proc from the hardware and the command line: what a boot produces before any
    module loads. Also refreshes the topology in meta.json (ACS and IOMMU groups depend on the cmdline)."""
    devices = model.topology(h)
    _assign_sysfs(devices)
    meta = host.meta
    meta["host"] = h
    meta["devices"] = devices
    meta["iommu"] = model.iommu_enabled(h)
    write(host.t(f"{META_DIR}/meta.json"), json.dumps(meta, indent=1, sort_keys=True) + "\n")
    host.reload_meta()
    cpus = {int(k): v for k, v in meta["cpus_by_node"].items()}

    sysd, procd = host.p("/sys"), host.p("/proc")
    clear_dir(sysd)
    clear_dir(procd)
    write(procd / "cmdline", h["cmdline"] + "\n")
    u = uname(h)
    write(
        procd / "version",
        f"Linux version {u['release']} (buildd@lcy02-amd64-086) (gcc (Ubuntu) 11.4.0, GNU ld "
        f"(GNU Binutils for Ubuntu) 2.38) {u['version']}\n",
    )
    write(procd / "modules", "")
    (procd / "driver").mkdir()
    for d in (
        "bus/pci/devices",
        "bus/pci/drivers",
        "bus/pci/slots",
        "kernel/iommu_groups",
        "class/net",
        "class/infiniband",
        "module",
        "firmware",
        "fs",
    ):
        (sysd / d).mkdir(parents=True, exist_ok=True)
    write(sysd / "bus/pci/drivers_autoprobe", "1\n")
    write(sysd / "bus/pci/drivers_probe", "", 0o200)
    write(sysd / "bus/pci/rescan", "", 0o200)
    for rb in sorted({d["root_bus"] for d in devices}):
        write(sysd / f"devices/pci0000:{rb:02x}/uevent", "")
    for d in devices:
        sysfs.write_function(host, d, cpus, h["cpus"])
    lo = sysd / "devices/virtual/net/lo"
    for k, v in {
        "address": "00:00:00:00:00:00",
        "type": "772",
        "mtu": "65536",
        "ifindex": "1",
        "iflink": "1",
        "operstate": "unknown",
        "carrier": "1",
        "flags": "0x9",
        "addr_len": "6",
    }.items():
        write(lo / k, v + "\n")
    link(sysd / "class/net/lo", lo)
    nodes = sysd / "devices/system/node"
    for n, cl in sorted(cpus.items()):
        write(nodes / f"node{n}/cpulist", sysfs.cpulist(cl) + "\n")
        write(nodes / f"node{n}/cpumap", sysfs.cpumask(cl, h["cpus"]) + "\n")
    online = f"0-{len(cpus) - 1}" if len(cpus) > 1 else "0"
    for f in ("online", "possible", "has_cpu", "has_normal_memory"):
        write(nodes / f, online + "\n")
    for f in ("online", "possible", "present"):
        write(sysd / f"devices/system/cpu/{f}", f"0-{h['cpus'] - 1}\n")
    if h["secure_boot"] is not None:
        write(sysd / f"firmware/efi/efivars/{SECURE_BOOT_VAR}", bytes([0x06, 0, 0, 0, 1 if h["secure_boot"] else 0]))
        write(sysd / "firmware/efi/fw_platform_size", "64\n")


def build_tree(
    profile: str | dict[str, Any], dest: str | os.PathLike[str], *, name: str | None = None, python: str | None = None
) -> dict[str, Any]:
    """Write the simulated host root for `profile` (a profile name from tests/fixtures/hardware, or a
    loaded profile dict) at `dest` and return a summary: {tree, profile, name, devices, netdevs, ...}.
    `dest` must not exist, be empty, or be an earlier tree (it is then rebuilt)."""
    from .. import profiles  # noqa: PLC0415 - keep `import hostsim` light

    prof = profiles.load(profile) if isinstance(profile, str) else copy.deepcopy(profile)
    h = model.host_state(prof)
    dest = Path(os.path.abspath(dest))
    if dest.exists() and any(dest.iterdir()):
        if not (dest / META_DIR / "meta.json").exists():
            raise FileExistsError(f"{dest} exists and is not a hostsim tree; refusing to overwrite it")
        import shutil  # noqa: PLC0415

        shutil.rmtree(dest)
    for d in (*OVERLAY_DIRS, "sys", "proc", f"{META_DIR}/ovl"):
        (dest / d).mkdir(parents=True, exist_ok=True)
    for d in OVERLAY_DIRS:
        (dest / META_DIR / "ovl" / d).mkdir(exist_ok=True)
    prof_name = prof.get("name", "custom")
    meta = {
        "version": 1,
        "profile": prof_name,
        "name": name or prof_name,
        "tree": str(dest),
        "python": python or sys.executable,
        "hack": str(HACK),
        "cpus_by_node": {str(k): v for k, v in model.cpu_lists(h["cpus"], int(h["cpu"]["sockets"])).items()},
        "host": h,
        "devices": [],
        "iommu": model.iommu_enabled(h),
    }
    write(dest / META_DIR / "meta.json", json.dumps(meta, indent=1) + "\n")
    (dest / META_DIR / "lock").touch()
    host = Host(dest)
    rel = h["kernel_release"]

    # etc
    write(host.p("/etc/os-release"), os_release(h["os"]["id"], str(h["os"]["version_id"])))
    write(host.p("/etc/hostname"), f"{meta['name']}\n")
    for d in (
        "/etc/modprobe.d",
        "/etc/modules-load.d",
        "/etc/systemd/system/multi-user.target.wants",
        "/usr/lib/modprobe.d",
        "/usr/lib/modules-load.d",
        "/var/lib/dpkg/updates",
    ):
        host.p(d).mkdir(parents=True, exist_ok=True)
    write(host.p("/etc/modules"), "# /etc/modules: kernel modules to load at boot time.\n")
    root_args, linux_args, default_args = split_cmdline(h["cmdline"])
    write(
        host.p("/etc/default/grub"),
        f'GRUB_DEFAULT=0\nGRUB_TIMEOUT=0\nGRUB_DISTRIBUTOR="{h["os"]["id"]}"\n'
        f'GRUB_CMDLINE_LINUX_DEFAULT="{default_args}"\nGRUB_CMDLINE_LINUX="{linux_args}"\n',
    )
    # boot
    write(host.p(f"/boot/vmlinuz-{rel}"), "")
    write(host.p("/boot/grub/grub.cfg"), grub_cfg(rel, root_args, f"{linux_args} {default_args}".strip()))
    # run
    write(host.p(f"{SIM_RUN}/tree"), str(dest) + "\n")
    write(host.p(f"{SIM_RUN}/uname.json"), json.dumps(uname(h)) + "\n")
    for f in ("calls.log", "kernel.log"):
        write(host.p(f"{SIM_RUN}/{f}"), "")
    host.p("/run/systemd/system").mkdir(parents=True, exist_ok=True)
    # packages, modules, shims
    packages.write_status(host, h["packages"])
    for p in h["packages"]:
        packages.materialize(host, p, True)
    packages.depmod(host, h["packages"], built=h["headers_installed"] or bool(h["nvidia_driver"]))
    packages.ofed_info_tool(host, h["packages"])
    shims.install(host, meta["python"], meta["hack"], h["initramfs_tool"])
    _initramfs_snapshot(host, h["initramfs_tool"])
    if not (dest / "lib").exists():
        os.symlink("usr/lib", dest / "lib")

    # the running kernel
    write_volatile(host, h)
    for m in h["modules_loaded"]:
        kernel.load(host, m["name"], m["users"], check_devices=False)
    kernel.apply(host)
    services._save(host, {})
    fm = h["fabricmanager"]
    if fm["installed"]:
        unit = "nvidia-fabricmanager.service"
        if fm["active"]:
            services.enable(host, unit)
            st = services._states(host)
            st[unit] = "active"
            services._save(host, st)
    return summary(host)


def _initramfs_snapshot(host: Host, tool: str) -> None:
    texts = {}
    for d in ("/etc/modprobe.d", "/usr/lib/modprobe.d"):
        base = host.p(d)
        for f in sorted(base.glob("*.conf")) if base.is_dir() else []:
            texts[f"{d}/{f.name}"] = f.read_text()
    write(
        host.p(f"/boot/initrd.img-{host.release}"),
        json.dumps({"tool": tool, "kernel": host.release, "modprobe.d": texts}, indent=1, sort_keys=True) + "\n",
    )


def summary(host: Host) -> dict[str, Any]:
    meta = host.meta
    funcs = kernel.scan_functions(host)
    return {
        "tree": str(host.tree),
        "name": meta["name"],
        "profile": meta["profile"],
        "kernel_release": host.release,
        "iommu": meta["iommu"],
        "devices": [
            {k: d.get(k) for k in ("addr", "kind", "role", "vendor", "device", "numa_node", "iommu_group", "parent")}
            | {"driver": funcs.get(d["addr"], {}).get("driver")}
            for d in meta["devices"]
        ],
        "modules": kernel.loaded(host),
        "netdevs": sorted(p.name for p in host.p(sysfs.CLASS_NET).iterdir()),
        "ibdevs": sorted(p.name for p in host.p(sysfs.CLASS_IB).iterdir()),
    }
