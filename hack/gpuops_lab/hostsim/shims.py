"""Shims for the tools that touch a real kernel, boot loader, init system or package manager.

Each shim is a small script at the tool's real path in the tree (usr/sbin/modprobe, usr/bin/systemctl,
...), so that inside the host's namespace (where the tree's usr is overlaid on /usr) `modprobe` and
`/usr/sbin/modprobe` are the shim. It runs `main()` below, which refuses to run outside the namespace
(it would otherwise act on the real paths). Every call is recorded in /run/gpuops-sim/calls.log.

Not shimmed because the real tool works on the simulated files: dpkg-query / dpkg -l (read the tree's
/var/lib/dpkg/status), lspci / setpci (read and write the tree's sysfs config files)."""

from __future__ import annotations

import importlib
import json
import shlex
import sys
from collections.abc import Callable
from typing import Any

from . import catalog, packages, services
from .bootcfg import SECURE_BOOT_VAR, grub_cfg, split_cmdline
from .hostfs import SIM_RUN, Host, read, write


class _OnFirstUse:
    """A sibling module imported when first used. Every shim call is a new Python process, and the simulated
    kernel (with the PCI and hardware models it imports) is two thirds of a shim's import time: the tools that
    never touch it (systemctl, apt-get, uname, update-grub, ...) do not load it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(f"{__package__}.{self._name}"), attr)


kernel = _OnFirstUse("kernel")

SBIN = ("modprobe", "rmmod", "lsmod", "modinfo", "depmod", "update-grub")
BIN = ("systemctl", "apt-get", "mokutil", "uname", "nvidia-smi")


def install(host: Host, python: str, hack: str, initramfs_tool: str) -> None:
    tools = [(f"/usr/sbin/{t}", t) for t in SBIN] + [(f"/usr/bin/{t}", t) for t in BIN]
    tools.append(
        ("/usr/sbin/update-initramfs", "update-initramfs")
        if initramfs_tool == "update-initramfs"
        else ("/usr/bin/dracut", "dracut")
    )
    code = "import sys; sys.path.insert(0, sys.argv[1]); from gpuops_lab.hostsim.shims import main; sys.exit(main())"
    for path, tool in tools:
        script = (
            f"#!/bin/sh\n# gpuops hostsim shim for {tool} (simulated host {host.tree})\n"
            f"exec {shlex.quote(python)} -I -c {shlex.quote(code)} {shlex.quote(hack)} "
            f'{shlex.quote(str(host.tree))} {tool} "$@"\n'
        )
        write(host.p(path), script, 0o755)


def err(msg: str) -> None:
    print(msg, file=sys.stderr)


# ---------------------------------------------------------------- kmod


def modprobe(host: Host, args: list[str]) -> int:
    remove = quiet = verbose = dry = first_time = use_blacklist = ignore_install = all_ = False
    show_config = show_depends = False
    names: list[str] = []
    it = iter(args)
    long = {
        "--remove": "r",
        "--quiet": "q",
        "--verbose": "v",
        "--dry-run": "n",
        "--show": "n",
        "--all": "a",
        "--force": "f",
        "--use-blacklist": "b",
        "--ignore-install": "i",
        "--syslog": "s",
        "--showconfig": "c",
        "--show-depends": "D",
        "--first-time": "F",
        "--version": "V",
        "--force-vermagic": "f",
        "--force-modversion": "f",
        "--remove-dependencies": "R",
    }
    for a in it:
        if a in long:
            flags = long[a]
        elif a.split("=", 1)[0] in ("--config", "--dirname", "--set-version"):
            if "=" not in a:
                next(it, None)
            continue
        elif a in ("-C", "-d", "-S", "-o"):
            next(it, None)
            continue
        elif a.startswith("-") and len(a) > 1 and not a.startswith("--"):
            flags = a[1:]
        elif a.startswith("--"):
            err(f"modprobe: unrecognized option '{a}'")
            return 1
        else:
            names.append(a)
            continue
        for c in flags:
            remove |= c == "r"
            quiet |= c == "q"
            verbose |= c == "v"
            dry |= c == "n"
            all_ |= c == "a"
            use_blacklist |= c == "b"
            ignore_install |= c == "i"
            show_config |= c == "c"
            show_depends |= c == "D"
            first_time |= c == "F"
            if c == "V":
                print("kmod version 29\n+ZSTD +XZ -ZLIB +LIBCRYPTO -EXPERIMENTAL")
                return 0
    cat = kernel.available(host)
    cfg = kernel.modprobe_config(host)
    if show_config:
        for b in sorted(cfg["blacklist"]):
            print(f"blacklist {b}")
        for m, c in sorted(cfg["install"].items()):
            print(f"install {m} {c}")
        return 0
    if not names:
        err("modprobe: ERROR: missing parameters. See -h.")
        return 1
    if not remove and not all_:
        names = names[:1]  # the rest are module parameters
    rel = host.release
    rc = 0
    for raw in names:
        name = catalog.normalize_module(raw)
        if show_depends:
            if name not in cat:
                err(f"modprobe: FATAL: Module {name} not found in directory /lib/modules/{rel}")
                return 1
            for n in [*catalog.transitive_deps(cat, name), name]:
                print(f"insmod /lib/modules/{rel}/{cat[n]['path']} ")
            continue
        if remove:
            mods = kernel.loaded(host)
            if name not in cat and name not in mods:
                err(f"modprobe: FATAL: Module {name} not found.")
                rc = 1
                continue
            if name not in mods:
                if first_time:
                    err(f"modprobe: FATAL: Module {name} is not in kernel.")
                    rc = 1
                continue
            if dry:
                print(f"rmmod {name}") if verbose else None
                continue
            try:
                gone = kernel.unload(host, name)
            except kernel.KernelError as exc:
                err(f"modprobe: FATAL: {exc}")
                rc = 1
                continue
            if verbose:
                for g in gone:
                    print(f"rmmod {g}")
            continue
        # load
        if not ignore_install and (cmd := kernel.refused_by_install(cfg, name)):
            if not quiet:
                err(
                    f"modprobe: ERROR: ../libkmod/libkmod-module.c:1034 command_do() Error running install command "
                    f"'{cmd}' for module {name}: retcode 1"
                )
                err(f"modprobe: ERROR: could not insert '{name}': Invalid argument")
            rc = 1
            continue
        if use_blacklist and name in cfg["blacklist"]:
            rc = 1
            continue
        if name not in cat:
            if not quiet:
                err(f"modprobe: FATAL: Module {name} not found in directory /lib/modules/{rel}")
            rc = 1
            continue
        if name in kernel.loaded(host):
            if first_time:
                err(f"modprobe: ERROR: could not insert '{name}': Module already in kernel")
                rc = 1
            continue
        if dry:
            if verbose:
                for n in [*catalog.transitive_deps(cat, name), name]:
                    print(f"insmod /lib/modules/{rel}/{cat[n]['path']} ")
            continue
        try:
            new = kernel.load(host, name)
        except kernel.KernelError as exc:
            err(f"modprobe: ERROR: {exc}")
            rc = 1
            continue
        if verbose:
            for n in new:
                print(f"insmod /lib/modules/{rel}/{cat[n]['path']} ")
    kernel.apply(host)
    return rc


def rmmod(host: Host, args: list[str]) -> int:
    names = [a for a in args if not a.startswith("-")]
    if not names:
        err("rmmod: ERROR: missing module name.")
        return 1
    rc = 0
    cat = kernel.available(host)
    for raw in names:
        name = catalog.normalize_module(raw)
        with host.lock():
            rc = _rmmod_one(host, cat, name) or rc
    kernel.apply(host)
    return rc


def _rmmod_one(host: Host, cat: dict, name: str) -> int:
    mods = kernel.read_modules(host)
    if name not in {m["name"] for m in mods}:
        err(f"rmmod: ERROR: Module {name} is not currently loaded")
        return 1
    if kernel.refcount(mods, cat, name):
        holders = kernel._holders(mods, cat, name)
        err(f"rmmod: ERROR: Module {name} is in use" + (f" by: {' '.join(holders)}" if holders else ""))
        return 1
    kernel.write_modules(host, [m for m in mods if m["name"] != name])
    return 0


def lsmod(host: Host, args: list[str]) -> int:
    mods = kernel.read_modules(host)
    cat = kernel.available(host)
    print("Module                  Size  Used by")
    for m in mods:
        holders = ",".join(kernel._holders(mods, cat, m["name"]))
        print(f"{m['name']:<19} {m['size']:>8}  {kernel.refcount(mods, cat, m['name'])} {holders}".rstrip())
    return 0


def modinfo(host: Host, args: list[str]) -> int:
    field = None
    names = []
    it = iter(args)
    for a in it:
        if a in ("-F", "--field"):
            field = next(it, None)
        elif a.startswith("--field="):
            field = a.split("=", 1)[1]
        elif a in ("-k", "--set-version", "-b", "--basedir"):
            next(it, None)
        elif not a.startswith("-"):
            names.append(a)
    if not names:
        err("modinfo: ERROR: missing module or filename.")
        return 1
    cat = kernel.available(host)
    rc = 0
    for raw in names:
        name = catalog.normalize_module(raw)
        if name not in cat:
            err(f"modinfo: ERROR: Module {name} not found.")
            rc = 1
            continue
        m = cat[name]
        info = {"filename": f"/lib/modules/{host.release}/{m['path']}"}
        if m["version"]:
            info["version"] = m["version"]
        info.update(
            license="NVIDIA" if m["taint"] == "POE" else "Dual BSD/GPL" if m["taint"] else "GPL",
            depends=",".join(m["deps"]),
            name=name,
            vermagic=f"{host.release} SMP mod_unload modversions ",
        )
        if m["taint"]:
            info["retpoline"] = "Y"
        if field:
            if field in info:
                print(info[field])
        else:
            for k, v in info.items():
                print(f"{k + ':':<16}{v}")
    return rc


def depmod(host: Host, args: list[str]) -> int:
    packages.depmod(host)
    return 0


# ---------------------------------------------------------------- boot


def _snapshot(host: Host, tool: str) -> str:
    texts = {}
    for d in ("/etc/modprobe.d", "/usr/lib/modprobe.d"):
        base = host.p(d)
        for f in sorted(base.glob("*.conf")) if base.is_dir() else []:
            texts[f"{d}/{f.name}"] = read(f)
    img = f"/boot/initrd.img-{host.release}"
    data = {"tool": tool, "kernel": host.release, "modprobe.d": texts}
    write(host.p(img), json.dumps(data, indent=1, sort_keys=True) + "\n")
    return img


def update_initramfs(host: Host, args: list[str]) -> int:
    if not {"-u", "-c", "-d"} & set(args):
        err("Usage: update-initramfs {-c|-d|-u} [-k version] [-v] [-b directory]")
        return 2
    kver = args[args.index("-k") + 1] if "-k" in args and args.index("-k") + 1 < len(args) else host.release
    if kver not in ("all", host.release):
        err(f"update-initramfs: {kver} has no modules directory")
        return 1
    if "-d" in args:
        (host.p(f"/boot/initrd.img-{host.release}")).unlink(missing_ok=True)
        print(f"update-initramfs: Deleting /boot/initrd.img-{host.release}")
        return 0
    print(f"update-initramfs: Generating {_snapshot(host, 'update-initramfs')}")
    return 0


def dracut(host: Host, args: list[str]) -> int:
    force = bool({"-f", "--force"} & set(args)) or "--regenerate-all" in args
    img = host.p(f"/boot/initrd.img-{host.release}")
    if img.exists() and not force:
        err(
            f"dracut: Will not override existing initramfs ({img.as_posix().replace(str(host.root), '', 1)}) "
            "without --force"
        )
        return 1
    _snapshot(host, "dracut")
    return 0


def _shell_vars(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            try:
                parts = shlex.split(v)
            except ValueError:
                parts = [v]
            out[k.strip()] = " ".join(parts)
    return out


def update_grub(host: Host, args: list[str]) -> int:
    conf = _shell_vars(read(host.p("/etc/default/grub")))
    for f in sorted(host.p("/etc/default/grub.d").glob("*.cfg")) if host.p("/etc/default/grub.d").is_dir() else []:
        conf.update(_shell_vars(read(f)))
    root_args, _init, _rest = split_cmdline(read(host.p("/proc/cmdline")))
    extra = " ".join(x for x in (conf.get("GRUB_CMDLINE_LINUX", ""), conf.get("GRUB_CMDLINE_LINUX_DEFAULT", "")) if x)
    write(host.p("/boot/grub/grub.cfg"), grub_cfg(host.release, root_args, extra))
    err("Sourcing file `/etc/default/grub'\nGenerating grub configuration file ...")
    err(f"Found linux image: /boot/vmlinuz-{host.release}\nFound initrd image: /boot/initrd.img-{host.release}\ndone")
    return 0


def mokutil(host: Host, args: list[str]) -> int:
    if "--sb-state" not in args:
        err("mokutil (simulated): only --sb-state is supported")
        return 1
    var = host.p(f"/sys/firmware/efi/efivars/{SECURE_BOOT_VAR}")
    if not var.exists():
        err("EFI variables are not supported on this system")
        return 1
    print("SecureBoot enabled" if var.read_bytes()[4:5] == b"\x01" else "SecureBoot disabled")
    return 0


def uname(host: Host, args: list[str]) -> int:
    """uname(1) with the simulated kernel's release and version (the real one asks the real kernel)."""
    import os  # noqa: PLC0415

    u = json.loads(read(host.p(f"{SIM_RUN}/uname.json")))
    r = os.uname()
    fields = {
        "s": r.sysname,
        "n": r.nodename,
        "r": u["release"],
        "v": u["version"],
        "m": u["machine"],
        "p": u["machine"],
        "i": u["machine"],
        "o": "GNU/Linux",
    }
    long = {
        "--kernel-name": "s",
        "--nodename": "n",
        "--kernel-release": "r",
        "--kernel-version": "v",
        "--machine": "m",
        "--processor": "p",
        "--hardware-platform": "i",
        "--operating-system": "o",
        "--all": "a",
    }
    want: list[str] = []
    for a in args:
        if a in long:
            want.append(long[a])
        elif a.startswith("-") and not a.startswith("--"):
            want += list(a[1:])
        else:
            err(f"uname: unrecognized option '{a}'")
            return 1
    if "a" in want:
        want = ["s", "n", "r", "v", "m", "o"]
    want = want or ["s"]
    order = "snrvmpio"
    print(" ".join(fields[k] for k in sorted(set(want), key=order.index) if k in fields))
    return 0


# ---------------------------------------------------------------- systemctl


SHOW_PROPS = (
    "Id",
    "Names",
    "Description",
    "LoadState",
    "ActiveState",
    "SubState",
    "UnitFileState",
    "FragmentPath",
    "MainPID",
    "Result",
    "ExecMainStatus",
)


def _show(host: Host, unit: str) -> dict[str, str]:
    f = services.unit_file(host, unit)
    load = "masked" if services.masked(host, unit) else ("loaded" if f else "not-found")
    active = services.active_state(host, unit)
    desc = (
        next((ln.split("=", 1)[1] for ln in read(f).splitlines() if ln.startswith("Description=")), unit) if f else unit
    )
    return {
        "Id": unit,
        "Names": unit,
        "Description": desc,
        "LoadState": load,
        "ActiveState": active,
        "SubState": {"active": "running", "failed": "failed"}.get(active, "dead"),
        "UnitFileState": services.enabled_state(host, unit) or "",
        "FragmentPath": str(f).replace(str(host.root).rstrip("/"), "", 1) if f else "",
        "MainPID": str(4242 if active == "active" else 0),
        "Result": "exit-code" if active == "failed" else "success",
        "ExecMainStatus": "1" if active == "failed" else "0",
    }


def systemctl(host: Host, args: list[str]) -> int:
    props: list[str] = []
    value_only = now = False
    words: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-p", "--property"):
            props += (next(it, "") or "").split(",")
        elif a.startswith("--property="):
            props += a.split("=", 1)[1].split(",")
        elif a.startswith("-p") and len(a) > 2:
            props += a[2:].split(",")
        elif a == "--value":
            value_only = True
        elif a == "--now":
            now = True
        elif a == "--version":
            print("systemd 249 (249.11-0ubuntu3.12)\n+PAM +AUDIT +SELINUX +APPARMOR +SECCOMP")
            return 0
        elif a.startswith("-"):
            continue  # --no-pager, --quiet, --no-block, --system, --type=..., --all, ...
        else:
            words.append(a)
    if not words:
        words = ["list-units"]
    cmd, units = words[0], [services.unit_name(u) for u in words[1:]]
    if cmd in ("daemon-reload", "daemon-reexec"):
        return 0
    if cmd == "reset-failed":
        for u in units or [None]:
            services.reset_failed(host, u)
        return 0
    if cmd == "is-active":
        states = [services.active_state(host, u) for u in units]
        if "--quiet" not in args and "-q" not in args:
            print("\n".join(states))
        return 0 if states and all(s == "active" for s in states) else 3
    if cmd == "is-failed":
        states = [services.active_state(host, u) for u in units]
        if "--quiet" not in args and "-q" not in args:
            print("\n".join(states))
        return 0 if any(s == "failed" for s in states) else 1
    if cmd == "is-enabled":
        rc = 1
        for u in units:
            st = services.enabled_state(host, u)
            if st is None:
                err(f"Failed to get unit file state for {u}: No such file or directory")
                continue
            if "--quiet" not in args and "-q" not in args:
                print(st)
            if st in ("enabled", "static"):
                rc = 0
        return rc
    if cmd in ("start", "restart", "reload", "try-restart", "reload-or-restart", "stop"):
        for u in units:
            if not services.exists(host, u):
                err(f"Failed to {cmd} {u}: Unit {u} not found.")
                return 5
            if services.masked(host, u) and cmd != "stop":
                err(f"Failed to {cmd} {u}: Unit {u} is masked.")
                return 1
            if cmd == "stop" or (cmd == "try-restart" and services.active_state(host, u) != "active"):
                if cmd == "stop":
                    services.stop(host, u)
                continue
            if services.start(host, u):
                err(
                    f"Job for {u} failed because the control process exited with error code.\n"
                    f'See "systemctl status {u}" and "journalctl -xeu {u}" for details.'
                )
                return 1
        return 0
    if cmd in ("enable", "disable", "mask", "unmask"):
        for u in units:
            if cmd in ("enable", "disable") and services.unit_file(host, u) is None:
                if cmd == "enable" and services.masked(host, u):
                    err(f"Failed to enable unit: Unit file {services.ETC}/{u} is masked.")
                else:
                    err(f"Failed to {cmd} unit: Unit file {u} does not exist.")
                return 1
            if cmd == "enable":
                for m in services.enable(host, u):
                    err(m)
                if now and services.start(host, u):
                    err(f"Job for {u} failed because the control process exited with error code.")
                    return 1
            elif cmd == "disable":
                for m in services.disable(host, u):
                    err(m)
                if now:
                    services.stop(host, u)
            elif cmd == "mask":
                services.mask(host, u)
                err(f"Created symlink {services.ETC}/{u} \u2192 /dev/null.")
            else:
                services.unmask(host, u)
        return 0
    if cmd == "show":
        for i, u in enumerate(units):
            info = _show(host, u)
            keys = props or list(SHOW_PROPS)
            if i:
                print()
            for k in keys:
                v = info.get(k, "")
                print(v if value_only else f"{k}={v}")
        return 0
    if cmd == "status":
        rc = 0
        for u in units:
            info = _show(host, u)
            if info["LoadState"] == "not-found":
                err(f"Unit {u} could not be found.")
                rc = 4
                continue
            print(f"\u25cf {u} - {info['Description']}")
            print(f"     Loaded: {info['LoadState']} ({info['FragmentPath']}; {info['UnitFileState']})")
            print(f"     Active: {info['ActiveState']} ({info['SubState']})")
            if info["ActiveState"] != "active":
                rc = max(rc, 3)
        return rc
    if cmd in ("list-unit-files", "list-units"):
        print("UNIT FILE                              STATE           VENDOR PRESET")
        for u in services.all_units(host):
            if cmd == "list-units":
                print(f"{u:<38} {_show(host, u)['LoadState']} {services.active_state(host, u)}")
            else:
                print(f"{u:<38} {services.enabled_state(host, u) or '':<15} enabled")
        return 0
    err(f"Unknown command verb {cmd}.")
    return 1


# ---------------------------------------------------------------- apt-get


def apt_get(host: Host, args: list[str]) -> int:
    words: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-o", "-c", "-t", "--target-release", "--option", "--config-file"):
            next(it, None)
        elif not a.startswith("-"):
            words.append(a)
    if not words:
        err("E: No command given (simulated apt-get)")
        return 100
    cmd, names = words[0], words[1:]
    if cmd in ("update", "clean", "autoclean", "autoremove", "check"):
        print("Reading package lists... Done")
        return 0
    installed = packages.read_status(host)
    avail = dict(host.meta["host"].get("apt_available", {}))
    if cmd in ("install", "reinstall", "upgrade", "dist-upgrade", "full-upgrade"):
        print("Reading package lists...\nBuilding dependency tree...\nReading state information...")
        todo: list[tuple[str, str]] = []
        for n in names:
            name, _eq, want = n.partition("=")
            if want:
                if avail.get(name) != want and installed.get(name) != want:
                    err(f"E: Version '{want}' for '{name}' was not found")
                    return 100
                todo.append((name, want))
            elif name in avail:
                todo.append((name, avail[name]))
            elif name in installed:
                print(f"{name} is already the newest version ({installed[name]}).")
            else:
                err(f"E: Unable to locate package {name}")
                return 100
        for name, version in todo:
            if installed.get(name) == version and cmd != "reinstall":
                print(f"{name} is already the newest version ({version}).")
                continue
            try:
                for line in packages.install(host, name, version):
                    print(line)
            except packages.PackageError as exc:
                err(str(exc))
                return exc.rc
        return 0
    if cmd in ("remove", "purge"):
        print("Reading package lists...\nBuilding dependency tree...\nReading state information...")
        for n in names:
            for line in packages.uninstall(host, n):
                print(line)
        return 0
    err(f"E: Invalid operation {cmd}")
    return 100


# ---------------------------------------------------------------- nvidia-smi (the remediation's GPU reset)

# What a test sets in the host's /run (SIM_RUN): the processes using a GPU (gpu-processes/<index>, "pid, name" lines)
# and the GPUs that fell off the bus (gpu-lost/<bus id>: not listed); each reset is appended to gpu-resets.log.
NVIDIA_CLASSES = ("0x0300", "0x0302")


def _nvidia_gpus(host: Host) -> list[dict[str, Any]]:
    """The NVIDIA GPUs bound to the nvidia driver, by PCI address (NVML's 8-digit domain), indexed in that order;
    a UUID derived from the host's tree and the address (stable across calls)."""
    import os
    import uuid

    base = host.p("/sys/bus/pci/devices")
    out = []
    for bdf in sorted(os.listdir(base)) if base.is_dir() else []:
        dev = base / bdf
        if read(dev / "vendor").strip() != "0x10de" or not read(dev / "class").strip().startswith(NVIDIA_CLASSES):
            continue
        if not (dev / "driver").exists() or os.path.basename(os.readlink(dev / "driver")) != "nvidia":
            continue
        if host.p(f"/{SIM_RUN}/gpu-lost/{bdf}").exists():
            continue
        bus = f"0000{bdf}".upper() if len(bdf.split(":")[0]) == 4 else bdf.upper()
        out.append({"bus": bus, "uuid": f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{host.tree}/{bdf}')}"})
    return [dict(g, index=i) for i, g in enumerate(out)]


def nvidia_smi(host: Host, args: list[str]) -> int:
    """The queries and the reset the remediation uses: --query-gpu=index,uuid,pci.bus_id, --query-compute-apps=pid,
    process_name (-i N), -r -i N; --format=csv,noheader. Without the nvidia module loaded it fails as the real one."""
    if "nvidia" not in kernel.loaded(host):
        print(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
            "NVIDIA driver is installed and running."
        )
        return 9
    gpus = _nvidia_gpus(host)
    index = int(args[args.index("-i") + 1]) if "-i" in args else None
    chosen = [g for g in gpus if index is None or g["index"] == index]
    if index is not None and not chosen:
        err(f"No devices were found matching the index {index}")
        return 6
    if "--query-gpu=index,uuid,pci.bus_id" in args:
        for g in chosen:
            print(f"{g['index']}, {g['uuid']}, {g['bus']}")
        return 0
    if "--query-compute-apps=pid,process_name" in args:
        for g in chosen:
            print(read(host.p(f"/{SIM_RUN}/gpu-processes/{g['index']}")).strip() or "", end="")
        print()
        return 0
    if "-r" in args and chosen and index is not None:
        g = chosen[0]
        if read(host.p(f"/{SIM_RUN}/gpu-processes/{index}")).strip():
            err(f"Unable to reset GPU {g['bus']} because it's being used by some other process.")
            return 255
        log = host.p(f"/{SIM_RUN}/gpu-resets.log")
        write(log, read(log) + f"{g['index']} {g['uuid']} {g['bus']}\n")
        print(f"GPU {g['bus']} was successfully reset.")
        return 0
    err(f"nvidia-smi (gpuops hostsim shim): not simulated: {' '.join(args)}")
    return 2


TOOLS: dict[str, Callable[[Host, list[str]], int]] = {
    "modprobe": modprobe,
    "rmmod": rmmod,
    "lsmod": lsmod,
    "modinfo": modinfo,
    "depmod": depmod,
    "update-initramfs": update_initramfs,
    "dracut": dracut,
    "update-grub": update_grub,
    "mokutil": mokutil,
    "systemctl": systemctl,
    "apt-get": apt_get,
    "uname": uname,
    "nvidia-smi": nvidia_smi,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[2:] if argv is None else argv  # sys.argv: ['-c', HACK, TREE, TOOL, args...]
    tree, tool, args = argv[0], argv[1], argv[2:]
    marker = read(Host("/", inside=True).p(f"{SIM_RUN}/tree")).strip()
    if marker != str(Host(tree).tree):
        err(
            f"{tool}: gpuops hostsim shim for {tree} called outside that host's namespace; refusing "
            f"(run it with: python -m gpuops_lab.hostsim run --tree {tree} -- {tool} ...)"
        )
        return 126
    host = Host(tree, inside=True)
    try:
        rc = TOOLS[tool](host, args)
    except Exception as exc:  # a shim bug must not look like the tool's own failure
        err(f"{tool} (gpuops hostsim shim) crashed: {exc!r}")
        rc = 125
    if tool != "uname":  # too frequent to be interesting
        host.call_log(tool, [tool, *args], rc)
    return rc
