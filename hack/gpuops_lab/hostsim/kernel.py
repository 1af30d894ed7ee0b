"""The simulated kernel: what a real kernel does in response to module loads and sysfs writes.

State lives in the tree itself: /proc/modules is the list of loaded modules (with each module's users
besides other modules folded into its refcount), sysfs holds devices, bindings and VFs. `apply()`
reconciles everything else with that state, idempotently:

- /proc/modules refcounts and "used by" columns; /sys/module/<name> (refcnt, holders/, version);
- PCI driver bindings: a device whose driver's module is gone is unbound; an unbound device binds to
  its driver_override, else to the first loaded module that drives it (catalog.driver_candidates);
  writes to /sys/bus/pci/drivers/<d>/{bind,unbind} and /sys/bus/pci/drivers_probe are honoured;
- SR-IOV: a write to a PF's sriov_numvfs creates the VFs (PCI functions with `physfn`, `virtfnN` links
  on the PF, IOMMU groups, config-space NumVFs / VF Enable) or removes them. What the kernel would
  refuse is undone and logged to /run/gpuops-sim/kernel.log (the write itself cannot fail in a plain
  file): N -> M with both non-zero (-EBUSY, "N VFs already enabled. Disable before enabling M VFs"),
  more than TotalVFs (-ERANGE), no PF driver (-ENOENT), not a number (-EINVAL);
- network devices (mlx5_core/ice/iavf; IPoIB needs ib_ipoib), RDMA devices (mlx5_ib), and
  /proc/driver/nvidia while nvidia is loaded.

Inside a host's namespace the namespace's init runs `apply()` whenever a watched sysfs file changes
(runner.py), so a module that writes sriov_numvfs and then waits for the VFs sees them appear.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from . import catalog, model, pciconfig, sysfs
from .hostfs import META_DIR, Host, clear_dir, read, remove, write

PROC_MODULES = "/proc/modules"
NET_DRIVERS = ("mlx5_core", "ice", "iavf")
OUI = {"15b3": "0c:42:a1", "8086": "b4:96:91"}
# modules whose PCI drivers the simulation binds: module -> driver names it registers
PCI_DRIVER_MODULES = {
    "nvidia": ("nvidia", catalog.NVSWITCH_DRIVER),
    "nouveau": ("nouveau",),
    "amdgpu": ("amdgpu",),
    "mlx5_core": ("mlx5_core",),
    "ice": ("ice",),
    "iavf": ("iavf",),
    "vfio_pci": ("vfio-pci",),
}


class KernelError(Exception):
    """A refused operation; the message is what the real tool prints."""


# ---------------------------------------------------------------- modules


def available(host: Host) -> dict[str, dict[str, Any]]:
    """The modules /lib/modules/<release> holds (as the last depmod saw them)."""
    f = host.t(f"{META_DIR}/modules.json")
    return json.loads(f.read_text()) if f.exists() else {}


def read_modules(host: Host) -> list[dict[str, Any]]:
    """/proc/modules, newest first: name, size, extra (users that are not modules), taint."""
    out = []
    for line in read(host.p(PROC_MODULES)).splitlines():
        parts = line.split()
        if len(parts) < 6:
            continue
        holders = [] if parts[3] == "-" else [h for h in parts[3].split(",") if h]
        taint = parts[6].strip("()") if len(parts) > 6 else ""
        out.append({"name": parts[0], "size": int(parts[1]), "extra": int(parts[2]) - len(holders), "taint": taint})
    return out


def _holders(mods: list[dict[str, Any]], cat: dict[str, dict[str, Any]], name: str) -> list[str]:
    return [m["name"] for m in mods if name in cat.get(m["name"], {}).get("deps", [])]


def refcount(mods: list[dict[str, Any]], cat: dict[str, dict[str, Any]], name: str) -> int:
    m = next((m for m in mods if m["name"] == name), None)
    return 0 if m is None else max(0, m["extra"]) + len(_holders(mods, cat, name))


def write_modules(host: Host, mods: list[dict[str, Any]]) -> None:
    cat = available(host)
    lines = []
    for m in mods:
        holders = _holders(mods, cat, m["name"])
        used = ",".join(holders) + "," if holders else "-"
        taint = f" ({m['taint']})" if m["taint"] else ""
        lines.append(
            f"{m['name']} {m['size']} {max(0, m['extra']) + len(holders)} {used} Live 0x0000000000000000{taint}"
        )
    write(host.p(PROC_MODULES), "".join(line + "\n" for line in lines))


def loaded(host: Host) -> list[str]:
    return [m["name"] for m in read_modules(host)]


def load(host: Host, name: str, users: int = 0, *, check_devices: bool = True) -> list[str]:
    """Load `name` and its dependencies (like insmod in dependency order). Returns the modules newly
    loaded; raises KernelError with the modprobe message when the module is missing or refuses."""
    with host.lock():
        return _load(host, catalog.normalize_module(name), users, check_devices)


def _load(host: Host, name: str, users: int, check_devices: bool) -> list[str]:
    cat = available(host)
    if name not in cat:
        raise KernelError(f"Module {name} not found in directory /lib/modules/{host.release}")
    mods = read_modules(host)
    have = {m["name"] for m in mods}
    if name in have:
        return []
    if check_devices and name == "nvidia" and not _claimable(host, "nvidia"):
        host.kernel_log("NVRM: No NVIDIA GPU found.")
        raise KernelError("could not insert 'nvidia': No such device")
    new = []
    for n in [*catalog.transitive_deps(cat, name), name]:
        if n not in have:
            mods.insert(
                0, {"name": n, "size": cat[n]["size"], "extra": users if n == name else 0, "taint": cat[n]["taint"]}
            )
            have.add(n)
            new.append(n)
    write_modules(host, mods)
    return new


def unload(host: Host, name: str) -> list[str]:
    """Remove `name` (and its dependencies nothing else uses, like modprobe -r). A module that is not
    loaded is not an error (modprobe -r without --first-time). Raises KernelError when in use."""
    with host.lock():
        return _unload(host, catalog.normalize_module(name))


def _unload(host: Host, name: str) -> list[str]:
    cat = available(host)
    mods = read_modules(host)
    if name not in {m["name"] for m in mods}:
        return []
    if refcount(mods, cat, name) > 0:
        raise KernelError(f"Module {name} is in use.")
    mods = [m for m in mods if m["name"] != name]
    gone = [name]
    for dep in reversed(catalog.transitive_deps(cat, name) if name in cat else []):
        if dep in {m["name"] for m in mods} and refcount(mods, cat, dep) == 0:
            mods = [m for m in mods if m["name"] != dep]
            gone.append(dep)
    write_modules(host, mods)
    return gone


def _claimable(host: Host, module: str) -> bool:
    """Whether a present device is unbound (or already bound to this module) and matches it."""
    for f in scan_functions(host).values():
        if module in catalog.driver_candidates(f["vendor"], f["class"], f["is_vf"]):
            if f["driver"] is None or catalog.module_of_driver(f["driver"]) == module:
                return True
    return False


def _sync_module_dirs(host: Host, mods: list[dict[str, Any]], cat: dict[str, dict[str, Any]]) -> None:
    base = host.p("/sys/module")
    base.mkdir(parents=True, exist_ok=True)
    names = {m["name"] for m in mods}
    for d in base.iterdir():
        if d.name not in names and (d / "initstate").exists():
            remove(d)
    for m in mods:
        d = base / m["name"]
        fresh = not (d / "initstate").exists()
        write(d / "initstate", "live\n")
        write(d / "refcnt", f"{refcount(mods, cat, m['name'])}\n")
        write(d / "coresize", f"{m['size']}\n")
        write(d / "taint", f"{m['taint']}\n")
        (d / "parameters").mkdir(exist_ok=True)
        holders = d / "holders"
        holders.mkdir(exist_ok=True)
        want = set(_holders(mods, cat, m["name"]))
        for h in holders.iterdir():
            if h.name not in want:
                remove(h)
        for h in want:
            if not (holders / h).is_symlink():
                sysfs.link(holders / h, base / h)
        version = cat.get(m["name"], {}).get("version")
        if fresh and version:  # the version of the module as loaded; an upgrade on disk does not change it
            write(d / "version", f"{version}\n")


# ---------------------------------------------------------------- PCI functions


def scan_functions(host: Host) -> dict[str, dict[str, Any]]:
    out = {}
    devs = host.p(sysfs.PCI_DEVICES)
    if not devs.is_dir():
        return out
    for entry in sorted(devs.iterdir()):
        d = Path(os.path.normpath(os.path.join(devs, os.readlink(entry))))
        drv = d / "driver"
        override = read(d / "driver_override").strip()
        out[entry.name] = {
            "addr": entry.name,
            "dir": d,
            "vendor": read(d / "vendor").strip().removeprefix("0x"),
            "class": read(d / "class").strip().removeprefix("0x")[:4],
            "is_vf": (d / "physfn").is_symlink(),
            "driver": Path(drv.readlink()).name if drv.is_symlink() else None,
            "override": None if override in ("", "(null)") else override,
        }
    return out


def _meta_dev(host: Host, addr: str, funcs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The topology entry of a function; a VF inherits its PF's."""
    by_addr = {f["addr"]: f for f in host.meta["devices"]}
    if addr in by_addr:
        return by_addr[addr]
    f = funcs.get(addr)
    if f and f["is_vf"]:
        pf = (f["dir"] / "physfn").resolve().name
        return by_addr.get(pf, {})
    return {}


def _bind(host: Host, f: dict[str, Any], driver: str) -> None:
    sysfs.bind(host, f["addr"], f["dir"], driver, catalog.module_of_driver(driver))
    f["driver"] = driver


def _requests(host: Host, funcs: dict[str, dict[str, Any]], loaded_set: set[str], st: dict[str, Any]) -> None:
    """Writes to drivers/<d>/unbind, drivers/<d>/bind and drivers_probe."""
    manual = set(st.get("manual_unbound", []))
    drivers = host.p(sysfs.PCI_DRIVERS)
    for d in sorted(drivers.iterdir()) if drivers.is_dir() else []:
        for addr in read(d / "unbind").split():
            f = funcs.get(addr)
            if f and f["driver"] == d.name:
                sysfs.unbind(host, addr, f["dir"])
                f["driver"] = None
                manual.add(addr)
            else:
                host.kernel_log(f"{d.name} unbind {addr}: -ENODEV (not bound to this driver)")
        for addr in read(d / "bind").split():
            f = funcs.get(addr)
            module = catalog.module_of_driver(d.name)
            ok = (
                f is not None
                and f["driver"] is None
                and (
                    f["override"] == d.name
                    or (
                        f["override"] is None
                        and module in catalog.driver_candidates(f["vendor"], f["class"], f["is_vf"])
                    )
                )
            )
            if ok:
                _bind(host, f, d.name)
                manual.discard(addr)
            else:
                host.kernel_log(f"{d.name} bind {addr}: -ENODEV")
        for name in ("bind", "unbind"):
            if read(d / name):
                write(d / name, "")
    probe = host.p("/sys/bus/pci/drivers_probe")
    for addr in read(probe).split():
        manual.discard(addr)
    if read(probe):
        write(probe, "")
    st["manual_unbound"] = sorted(manual)


def _vf_group(host: Host, pf: dict[str, Any], funcs: dict[str, dict[str, Any]]) -> int | None:
    pf_group = pf["dir"] / "iommu_group"
    if not pf_group.is_symlink():
        return None
    parent = pf["dir"].parent
    isolated = True
    p = parent
    while (p / "config").exists():
        cls = read(p / "class").strip()
        if cls.startswith("0x0604"):
            cfg = (p / "config").read_bytes()
            ctrl = pciconfig.acs_ctrl(cfg)
            ptype = (cfg[pciconfig.OFF_EXP + 2] >> 4) & 0xF
            if ptype in (pciconfig.PORT_TYPE["root_port"], pciconfig.PORT_TYPE["downstream"]):
                isolated = (
                    isolated and ctrl is not None and ctrl & pciconfig.LINUX_ACS_FLAGS == pciconfig.LINUX_ACS_FLAGS
                )
        p = p.parent
    if not isolated and (parent / "iommu_group").is_symlink():
        return int((parent / "iommu_group").readlink().name)
    groups = host.p(sysfs.IOMMU_GROUPS)
    return max((int(g.name) for g in groups.iterdir() if g.name.isdigit()), default=-1) + 1


def _remove_function(host: Host, f: dict[str, Any]) -> None:
    sysfs.unbind(host, f["addr"], f["dir"])
    sysfs.remove_netdevs(host, f["dir"])
    sysfs.remove_ibdevs(host, f["dir"])
    sysfs.leave_iommu_group(host, f["addr"], f["dir"])
    remove(host.p(f"{sysfs.PCI_DEVICES}/{f['addr']}"))
    remove(f["dir"])


def _sriov(host: Host, funcs: dict[str, dict[str, Any]]) -> list[str]:
    events = []
    meta = host.meta
    cpus = {int(k): v for k, v in meta["cpus_by_node"].items()}
    for addr, pf in list(funcs.items()):
        numvfs = pf["dir"] / "sriov_numvfs"
        if pf["is_vf"] or not numvfs.exists():
            continue
        total = int(read(pf["dir"] / "sriov_totalvfs", "0").strip() or 0)
        vfs = sorted((v for v in pf["dir"].iterdir() if v.name.startswith("virtfn")), key=lambda v: int(v.name[6:]))
        cur = len(vfs)
        who = f"{pf['driver'] or 'pci'} {addr}"
        text = read(numvfs).strip()
        try:
            want = int(text, 0)
        except ValueError:
            host.kernel_log(f"{who}: sriov_numvfs write {text!r}: -EINVAL")
            write(numvfs, f"{cur}\n")
            continue
        forced = pf["driver"] is None and cur > 0
        if forced:
            want = 0  # the PF driver went away: it disables SR-IOV on its way out
        if want == cur:
            continue
        error = None
        if forced:
            pass
        elif want > total:
            error = f"sriov_numvfs write {want}: -ERANGE (TotalVFs {total})"
        elif pf["driver"] is None:
            error = "no driver bound to device; cannot configure SR-IOV (-ENOENT)"
        elif cur and want:
            error = f"{cur} VFs already enabled. Disable before enabling {want} VFs (-EBUSY)"
        if error:
            host.kernel_log(f"{who}: {error}")
            write(numvfs, f"{cur}\n")
            events.append(f"{addr}: {error}")
            continue
        cfg = pf["dir"] / "config"
        if want == 0:
            for v in vfs:
                vaddr = v.resolve().name
                if vaddr in funcs:
                    _remove_function(host, funcs.pop(vaddr))
                remove(v)
            write(cfg, pciconfig.set_num_vfs(cfg.read_bytes(), 0))
            if forced:
                write(numvfs, "0\n")
            host.kernel_log(f"{who}: disabled {cur} VFs")
            events.append(f"{addr}: removed {cur} VFs")
            continue
        pfm = _meta_dev(host, addr, funcs)
        s = pfm["sriov"]
        for i in range(want):
            vaddr = sysfs.addr_of_rid(sysfs.rid(addr) + s["offset"] + i * s["stride"])
            vf = dict(pfm, addr=vaddr, kind="vf", device=s["vf_device"], sriov=None, slot=None, acs_ctrl=None)
            vf["sysfs"] = str(Path(pfm["sysfs"]).parent / vaddr)
            vf["iommu_group"] = _vf_group(host, pf, funcs)
            vdir = sysfs.write_function(host, vf, cpus, meta["host"]["cpus"])
            sysfs.link(vdir / "physfn", pf["dir"])
            sysfs.link(pf["dir"] / f"virtfn{i}", vdir)
            funcs[vaddr] = {
                "addr": vaddr,
                "dir": vdir,
                "vendor": pf["vendor"],
                "class": pf["class"],
                "is_vf": True,
                "driver": None,
                "override": None,
            }
        write(cfg, pciconfig.set_num_vfs(cfg.read_bytes(), want))
        host.kernel_log(f"{who}: enabled {want} VFs")
        events.append(f"{addr}: created {want} VFs")
    return events


def _sync_devices(host: Host, funcs: dict[str, dict[str, Any]], loaded_set: set[str], st: dict[str, Any]) -> None:
    manual = set(st.get("manual_unbound", []))
    for addr in sorted(funcs):
        f = funcs[addr]
        if f["driver"] and catalog.module_of_driver(f["driver"]) not in loaded_set:
            sysfs.unbind(host, addr, f["dir"])
            f["driver"] = None
    for addr in sorted(funcs):
        f = funcs[addr]
        if f["driver"] or addr in manual:
            continue
        if f["is_vf"] and read((f["dir"] / "physfn") / "sriov_drivers_autoprobe", "1").strip() == "0":
            continue
        if f["override"]:
            if catalog.module_of_driver(f["override"]) in loaded_set:
                _bind(host, f, f["override"])
            continue
        for m in catalog.driver_candidates(f["vendor"], f["class"], f["is_vf"]):
            if m in loaded_set:
                _bind(host, f, catalog.pci_driver_name(m, f["vendor"], f["class"]))
                break


def _sync_netdevs(host: Host, funcs: dict[str, dict[str, Any]], loaded_set: set[str], st: dict[str, Any]) -> None:
    ib_class = host.p(sysfs.CLASS_IB)
    ib_class.mkdir(parents=True, exist_ok=True)
    for addr in sorted(funcs):
        f = funcs[addr]
        m = _meta_dev(host, addr, funcs)
        ll = m.get("link_layer") or "Ethernet"
        want_net: str | None = None
        want_ib = False
        if f["driver"] in NET_DRIVERS:
            if f["driver"] == "mlx5_core":
                want_ib = "mlx5_ib" in loaded_set
                if ll == "InfiniBand":
                    want_net = sysfs.ifname(addr, "ib", False) if "ib_ipoib" in loaded_set else None
                else:
                    want_net = sysfs.ifname(addr, "en", not f["is_vf"])
            else:
                want_net = sysfs.ifname(addr, "en", False)
        have_net = sorted(n.name for n in (f["dir"] / "net").iterdir()) if (f["dir"] / "net").is_dir() else []
        if have_net != ([want_net] if want_net else []):
            sysfs.remove_netdevs(host, f["dir"])
            if want_net:
                idx = st.get("next_ifindex", 2)
                st["next_ifindex"] = idx + 1
                sysfs.add_netdev(
                    host,
                    f["dir"],
                    want_net,
                    infiniband=want_net.startswith("ib"),
                    ifindex=idx,
                    seed=f"{host.meta['profile']}/{addr}",
                    oui=OUI.get(f["vendor"], "02:00:00"),
                    port_name="p0" if want_net.endswith("np0") else None,
                    speed=400000 if ll == "InfiniBand" else 100000,
                )
        have_ib = (f["dir"] / "infiniband").is_dir() and any((f["dir"] / "infiniband").iterdir())
        if want_ib and not have_ib:
            used = {int(n.name.split("_")[1]) for n in ib_class.iterdir() if n.name.startswith("mlx5_")}
            n = min(set(range(len(used) + 1)) - used)
            sysfs.add_ibdev(
                host,
                f["dir"],
                f"mlx5_{n}",
                link_layer=ll,
                hca=m.get("hca") or "MT4129",
                seed=f"{host.meta['profile']}/{addr}",
            )
        elif not want_ib and have_ib:
            sysfs.remove_ibdevs(host, f["dir"])


NVRM = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {v}  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Feb 20 23:16:41 UTC 2025\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"  # noqa: E501


def _sync_nvidia_proc(host: Host, funcs: dict[str, dict[str, Any]], loaded_set: set[str]) -> None:
    d = host.p("/proc/driver/nvidia")
    if "nvidia" not in loaded_set:
        if d.exists():
            remove(d)
        return
    version = read(host.p("/sys/module/nvidia/version")).strip()
    write(d / "version", NVRM.format(v=version))
    gpus = d / "gpus"
    clear_dir(gpus)
    for addr, f in sorted(funcs.items()):
        if f["driver"] == "nvidia":
            m = _meta_dev(host, addr, funcs)
            write(
                gpus / addr / "information",
                f"Model: \t\t {m.get('model', 'NVIDIA GPU')}\nIRQ:   \t\t {read(f['dir'] / 'irq').strip()}\n"
                f"Video BIOS: \t ??.??.??.??.??\nBus Type: \t PCIe\nBus Location: \t {addr}\n",
            )


def _sync_driver_dirs(host: Host, loaded_set: set[str]) -> None:
    base = host.p(sysfs.PCI_DRIVERS)
    base.mkdir(parents=True, exist_ok=True)
    wanted = {drv: mod for mod, drvs in PCI_DRIVER_MODULES.items() if mod in loaded_set for drv in drvs}
    for d in list(base.iterdir()):
        if d.name not in wanted:
            remove(d)
    for drv, mod in wanted.items():
        sysfs.ensure_driver_dir(host, drv, mod)


def apply(host: Host) -> list[str]:
    """Reconcile the tree with its module list and the sysfs writes made since the last call."""
    with host.lock():
        cat = available(host)
        mods = read_modules(host)
        write_modules(host, mods)
        _sync_module_dirs(host, mods, cat)
        loaded_set = {m["name"] for m in mods}
        st = host.state()
        newly = loaded_set - set(st.get("loaded", []))
        funcs = scan_functions(host)
        if newly:  # a newly loaded driver probes every unbound device, manually unbound ones included
            st["manual_unbound"] = []
        _sync_driver_dirs(host, loaded_set)
        _requests(host, funcs, loaded_set, st)
        for addr, f in funcs.items():
            if f["driver"] and catalog.module_of_driver(f["driver"]) not in loaded_set:
                sysfs.unbind(host, addr, f["dir"])
                f["driver"] = None
        events = _sriov(host, funcs)
        _sync_devices(host, funcs, loaded_set, st)
        events += _sriov(host, funcs)  # VFs requested while the PF was still unbound in this pass
        _sync_devices(host, funcs, loaded_set, st)
        _sync_netdevs(host, funcs, loaded_set, st)
        _sync_nvidia_proc(host, funcs, loaded_set)
        st["loaded"] = sorted(loaded_set)
        host.save_state(st)
        return events


def watched_files(host: Host) -> list[Path]:
    """The sysfs files whose writes the kernel reacts to (the namespace init polls them)."""
    out = [host.p("/sys/bus/pci/drivers_probe")]
    devs = host.p(sysfs.PCI_DEVICES)
    if devs.is_dir():
        out += [d / "sriov_numvfs" for d in devs.iterdir() if (d / "sriov_numvfs").exists()]
    drivers = host.p(sysfs.PCI_DRIVERS)
    if drivers.is_dir():
        out += [d / n for d in drivers.iterdir() for n in ("bind", "unbind")]
    return out


# ---------------------------------------------------------------- boot


def modprobe_config(host: Host, texts: dict[str, str] | None = None) -> dict[str, Any]:
    """blacklist / install directives of modprobe.d (the host's, or the given file texts)."""
    if texts is None:
        texts = {}
        for d in ("/usr/lib/modprobe.d", "/etc/modprobe.d", "/run/modprobe.d"):
            base = host.p(d)
            if base.is_dir():
                for f in sorted(base.glob("*.conf")):
                    texts[f"{d}/{f.name}"] = read(f)
    blacklist: set[str] = set()
    install: dict[str, str] = {}
    for text in texts.values():
        for raw in text.splitlines():
            words = raw.split("#", 1)[0].split()
            if len(words) >= 2 and words[0] == "blacklist":
                blacklist.add(catalog.normalize_module(words[1]))
            elif len(words) >= 3 and words[0] == "install":
                install[catalog.normalize_module(words[1])] = " ".join(words[2:])
    return {"blacklist": blacklist, "install": install}


def refused_by_install(cfg: dict[str, Any], name: str) -> str | None:
    cmd = cfg["install"].get(name)
    if cmd and cmd.split()[0] in ("/bin/false", "/usr/bin/false", "false"):
        return cmd
    return None


def boot_modules(host: Host, initramfs_cfg: dict[str, Any], rootfs_cfg: dict[str, Any]) -> list[str]:
    """udev's coldplug: the initramfs loads the DRM drivers (with the blacklist baked into the initramfs),
    then the root filesystem loads every device's first matching module not blacklisted, then
    /etc/modules-load.d and /etc/modules."""
    log: list[str] = []
    cat = available(host)

    def try_load(name: str, users: int = 0) -> bool:
        try:
            load(host, name, users)
            apply(host)
            log.append(name)
            return True
        except KernelError as exc:
            host.kernel_log(f"boot: modprobe {name}: {exc}")
            return False

    for stage, cfg in (("initramfs", initramfs_cfg), ("rootfs", rootfs_cfg)):
        funcs = scan_functions(host)
        tried: set[str] = set()
        for addr in sorted(funcs):
            f = funcs.get(addr)
            if f is None or f["driver"]:
                continue
            for m in catalog.driver_candidates(f["vendor"], f["class"], f["is_vf"]):
                if m not in cat or m in cfg["blacklist"] or refused_by_install(cfg, m) or m in tried:
                    continue
                if stage == "initramfs" and m not in catalog.INITRAMFS_STAGE:
                    continue
                tried.add(m)
                if try_load(m, catalog.BOOT_USERS.get(m, 0)):
                    funcs = scan_functions(host)
                    break
        if stage == "rootfs":
            for m in ("mlx5_core",):
                if m in loaded(host) and "mlx5_ib" in cat:
                    try_load("mlx5_ib")
                    ib = any(d.get("link_layer") == "InfiniBand" for d in host.meta["devices"])
                    for extra in ("ib_umad", "rdma_ucm") + (("ib_ipoib",) if ib else ()):
                        try_load(extra)
    names: list[str] = []
    for d in ("/etc/modules-load.d", "/usr/lib/modules-load.d"):
        base = host.p(d)
        if base.is_dir():
            for f in sorted(base.glob("*.conf")):
                names += [w for w in (ln.split("#", 1)[0].strip() for ln in read(f).splitlines()) if w]
    names += [w for w in (ln.split("#", 1)[0].strip() for ln in read(host.p("/etc/modules")).splitlines()) if w]
    for n in names:
        n = catalog.normalize_module(n.split()[0])
        if not refused_by_install(rootfs_cfg, n):
            try_load(n)
    return log


def initramfs_config(host: Host) -> dict[str, Any]:
    img = host.p(f"/boot/initrd.img-{host.release}")
    try:
        texts = json.loads(img.read_text()).get("modprobe.d", {})
    except (FileNotFoundError, ValueError):
        texts = {}
    return modprobe_config(host, texts)


def grub_cmdline(host: Host) -> str | None:
    """The kernel command line the boot loader configuration (written by update-grub) would boot."""
    cfg = host.p("/boot/grub/grub.cfg")
    for line in read(cfg).splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "linux":
            return f"BOOT_IMAGE={words[1]} " + " ".join(words[2:])
    return None


def iommu_on(host: Host) -> bool:
    return model.iommu_enabled(dict(host.meta["host"], cmdline=read(host.p("/proc/cmdline")).strip()))
