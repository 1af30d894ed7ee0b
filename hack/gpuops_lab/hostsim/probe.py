"""Independent probes of a simulated host tree, for assertions in tests: they read the tree's files the
way a tool on the host would (sysfs attributes, /proc/modules columns, config-space bytes, the dpkg
status file, the call log) and share no code with the generator or the simulated kernel."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any


def _t(tree: str | os.PathLike[str], path: str) -> Path:
    return Path(tree) / path.lstrip("/")


def read(tree: str | os.PathLike[str], path: str, default: str | None = None) -> str | None:
    try:
        return _t(tree, path).read_text()
    except FileNotFoundError:
        return default


def cmdline(tree: str | os.PathLike[str]) -> str:
    return (read(tree, "/proc/cmdline") or "").strip()


def modules(tree: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """/proc/modules: name -> {size, refcount, used_by, state, taint}."""
    out = {}
    for line in (read(tree, "/proc/modules") or "").splitlines():
        f = line.split()
        out[f[0]] = {
            "size": int(f[1]),
            "refcount": int(f[2]),
            "used_by": [] if f[3] == "-" else [x for x in f[3].split(",") if x],
            "state": f[4],
            "taint": f[6].strip("()") if len(f) > 6 else "",
        }
    return out


def _link_name(p: Path) -> str | None:
    return os.path.basename(os.path.realpath(p)) if p.is_symlink() else None


def pci(tree: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """/sys/bus/pci/devices: addr -> {vendor, device, class, driver, numa_node, iommu_group, physfn,
    sriov_totalvfs, sriov_numvfs, vfs (addresses of virtfnN, by N), net, infiniband}."""
    base = _t(tree, "/sys/bus/pci/devices")
    out = {}
    for e in sorted(base.iterdir()):
        d = Path(os.path.normpath(base / os.readlink(e)))

        def attr(n: str, d: Path = d) -> str | None:
            f = d / n
            return f.read_text().strip() if f.is_file() else None

        vfs = sorted((p for p in d.iterdir() if p.name.startswith("virtfn")), key=lambda p: int(p.name[6:]))
        out[e.name] = {
            "dir": d,
            "vendor": attr("vendor"),
            "device": attr("device"),
            "class": attr("class"),
            "numa_node": attr("numa_node"),
            "driver": _link_name(d / "driver"),
            "iommu_group": _link_name(d / "iommu_group"),
            "physfn": _link_name(d / "physfn"),
            "sriov_totalvfs": attr("sriov_totalvfs"),
            "sriov_numvfs": attr("sriov_numvfs"),
            "vfs": [_link_name(v) for v in vfs],
            "net": sorted(p.name for p in (d / "net").iterdir()) if (d / "net").is_dir() else [],
            "infiniband": sorted(p.name for p in (d / "infiniband").iterdir()) if (d / "infiniband").is_dir() else [],
        }
    return out


def config(tree: str | os.PathLike[str], addr: str) -> bytes:
    return _t(tree, f"/sys/bus/pci/devices/{addr}/config").read_bytes()


def capabilities(cfg: bytes) -> dict[int, int]:
    """Standard capabilities: id -> offset (walking from the pointer at 0x34)."""
    out: dict[int, int] = {}
    if not cfg[0x06] & 0x10:
        return out
    off = cfg[0x34] & 0xFC
    while off and off not in out.values() and off < 0x100:
        out.setdefault(cfg[off], off)
        off = cfg[off + 1] & 0xFC
    return out


def ext_capabilities(cfg: bytes) -> dict[int, int]:
    """Extended capabilities: id -> offset (walking from 0x100)."""
    out: dict[int, int] = {}
    off = 0x100
    while off and len(cfg) >= off + 4 and off not in out.values():
        (hdr,) = struct.unpack_from("<I", cfg, off)
        if hdr in (0, 0xFFFFFFFF):
            break
        out.setdefault(hdr & 0xFFFF, off)
        off = hdr >> 20
    return out


def acs_ctrl(tree: str | os.PathLike[str], addr: str) -> int | None:
    cfg = config(tree, addr)
    off = ext_capabilities(cfg).get(0x000D)
    return None if off is None else struct.unpack_from("<H", cfg, off + 6)[0]


def port_type(tree: str | os.PathLike[str], addr: str) -> int | None:
    cfg = config(tree, addr)
    off = capabilities(cfg).get(0x10)
    return None if off is None else (struct.unpack_from("<H", cfg, off + 2)[0] >> 4) & 0xF


def netdevs(tree: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    base = _t(tree, "/sys/class/net")
    out = {}
    for e in sorted(base.iterdir()):
        d = Path(os.path.normpath(base / os.readlink(e)))
        out[e.name] = {
            "device": _link_name(d / "device"),
            "type": (d / "type").read_text().strip(),
            "address": (d / "address").read_text().strip(),
        }
    return out


def ibdevs(tree: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    base = _t(tree, "/sys/class/infiniband")
    out = {}
    for e in sorted(base.iterdir()):
        d = Path(os.path.normpath(base / os.readlink(e)))
        out[e.name] = {"device": _link_name(d / "device"), "link_layer": (d / "ports/1/link_layer").read_text().strip()}
    return out


def packages(tree: str | os.PathLike[str]) -> dict[str, str]:
    out, cur = {}, {}
    for line in (read(tree, "/var/lib/dpkg/status") or "").splitlines() + [""]:
        if not line.strip():
            if cur.get("Status", "").endswith("installed") and "Package" in cur:
                out[cur["Package"]] = cur.get("Version", "")
            cur = {}
        elif ":" in line:
            k, v = line.split(":", 1)
            cur[k] = v.strip()
    return out


def unit_states(tree: str | os.PathLike[str]) -> dict[str, str]:
    return json.loads(read(tree, "/run/gpuops-sim/units.json") or "{}")


def unit_enabled(tree: str | os.PathLike[str], unit: str, target: str = "multi-user.target") -> bool:
    return _t(tree, f"/etc/systemd/system/{target}.wants/{unit}").is_symlink()


def calls(tree: str | os.PathLike[str], tool: str | None = None) -> list[dict[str, Any]]:
    recs = [json.loads(x) for x in (read(tree, "/run/gpuops-sim/calls.log") or "").splitlines() if x.strip()]
    return [r for r in recs if tool is None or r["tool"] == tool]


def kernel_log(tree: str | os.PathLike[str]) -> list[str]:
    return (read(tree, "/run/gpuops-sim/kernel.log") or "").splitlines()


def secure_boot(tree: str | os.PathLike[str]) -> bool | None:
    f = _t(tree, "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c")
    return None if not f.exists() else f.read_bytes()[4] == 1
