"""The simulated package database (a real dpkg status file, so the real `dpkg-query` and `dpkg -l`
read it inside the namespace) and what installing a package does to the host: kernel headers appear,
DKMS builds the NVIDIA modules (only with headers), packaged systemd units appear; `depmod` rewrites
/lib/modules/<release>/modules.dep from what is installed."""

from __future__ import annotations

import json
from typing import Any

from . import catalog
from .hostfs import META_DIR, Host, read, remove, write

STATUS = "/var/lib/dpkg/status"
UNIT_DIR = "/usr/lib/systemd/system"


class PackageError(Exception):
    def __init__(self, message: str, rc: int = 100) -> None:
        super().__init__(message)
        self.rc = rc


def read_status(host: Host) -> dict[str, str]:
    out: dict[str, str] = {}
    for stanza in read(host.p(STATUS)).split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if ":" in line and not line.startswith(" "):
                k, v = line.split(":", 1)
                fields[k.strip()] = v.strip()
        if fields.get("Package") and fields.get("Status", "").endswith(" installed"):
            out[fields["Package"]] = fields.get("Version", "")
    return out


def write_status(host: Host, pkgs: dict[str, str]) -> None:
    stanzas = [
        f"Package: {name}\nStatus: install ok installed\nPriority: optional\nSection: misc\nInstalled-Size: 1024\n"
        f"Maintainer: gpuops hostsim <hostsim@localhost>\nArchitecture: amd64\nVersion: {version}\n"
        f"Description: {name} (simulated package)\n"
        for name, version in sorted(pkgs.items())
    ]
    write(host.p(STATUS), "\n".join(stanzas))
    avail = host.p("/var/lib/dpkg/available")
    if not avail.exists():
        write(avail, "")


def headers_present(host: Host) -> bool:
    return host.p(f"/usr/lib/modules/{host.release}/build").is_dir()


def ofed_of(pkgs: dict[str, str]) -> dict[str, str] | None:
    if "mlnx-ofed-kernel-dkms" not in pkgs:
        return None
    kind = "doca" if "doca-ofed" in pkgs else "mlnx_ofed"
    return {"kind": kind, "version": catalog.upstream_version(pkgs["mlnx-ofed-kernel-dkms"])}


OFED_INFO = "/usr/bin/ofed_info"


def ofed_info_tool(host: Host, pkgs: dict[str, str] | None = None) -> None:
    """/usr/bin/ofed_info as MLNX_OFED and DOCA-OFED install it: a shell script with the release baked in
    (``-s``: ``MLNX_OFED_LINUX-<version>:`` or, for DOCA-OFED, ``OFED-internal-<version>:``; ``-n``: the version);
    gone when the stack is removed, so a host without MOFED has no ofed_info, as on a real one. A plain script,
    not a namespace shim: it reads nothing of the host."""
    pkgs = read_status(host) if pkgs is None else pkgs
    ofed = ofed_of(pkgs)
    path = host.p(OFED_INFO)
    if ofed is None:
        remove(path)
        return
    short = f"{'OFED-internal' if ofed['kind'] == 'doca' else 'MLNX_OFED_LINUX'}-{ofed['version']}:"
    listing = "".join(f"{n}: {v}\\n" for n, v in sorted(pkgs.items()) if n in ("mlnx-ofed-kernel-dkms", "doca-ofed"))
    write(
        path,
        f"#!/bin/sh\n# ofed_info of {ofed['kind']} {ofed['version']} (gpuops hostsim, as the package installs it)\n"
        'case "$1" in\n'
        f"  -s) echo '{short}' ;;\n"
        f"  -n) echo '{ofed['version']}' ;;\n"
        f"  '') printf '{short}\\n\\n{listing}' ;;\n"
        '  *) echo "Usage: $0 [-s|-n]" >&2; exit 1 ;;\n'
        "esac\n",
        0o755,
    )


def depmod(host: Host, pkgs: dict[str, str] | None = None, *, built: bool = True) -> dict[str, dict[str, Any]]:
    """Write /lib/modules/<release>/{modules.dep, *.ko} for what is installed. `built`: whether DKMS
    packages have been built (false for a tree whose profile has an nvidia-dkms package but no headers)."""
    pkgs = read_status(host) if pkgs is None else pkgs
    cat = catalog.module_catalog(pkgs, ofed_of(pkgs), headers=built)
    base = host.p(f"/usr/lib/modules/{host.release}")
    for sub in ("kernel", "updates"):
        if (base / sub).exists():
            remove(base / sub)
    lines = []
    for name, m in sorted(cat.items()):
        ver = f" version={m['version']}" if m["version"] else ""
        write(base / m["path"], f"simulated kernel module {name}{ver}\n")
        deps = " ".join(cat[d]["path"] for d in reversed(catalog.transitive_deps(cat, name)))
        lines.append(f"{m['path']}:{' ' + deps if deps else ''}")
    write(base / "modules.dep", "\n".join(lines) + "\n")
    write(host.t(f"{META_DIR}/modules.json"), json.dumps(cat, indent=1, sort_keys=True) + "\n")
    return cat


UNIT_TEXT = {
    "nvidia-fabricmanager.service": (
        "[Unit]\nDescription=NVIDIA fabric manager service\nAfter=network-online.target\n\n"
        "[Service]\nUser=root\nType=forking\nTimeoutStartSec=240\n"
        "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg\n"
        "LimitCORE=infinity\n\n[Install]\nWantedBy=multi-user.target\n"
    ),
    "nvidia-persistenced.service": (
        "[Unit]\nDescription=NVIDIA Persistence Daemon\nWants=syslog.target\n\n"
        "[Service]\nType=forking\nExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced\n"
        "ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced\n\n[Install]\nWantedBy=multi-user.target\n"
    ),
}


def _headers_files(host: Host, install: bool) -> None:
    rel = host.release
    src = host.p(f"/usr/src/linux-headers-{rel}")
    build = host.p(f"/usr/lib/modules/{rel}/build")
    if install:
        write(src / "Makefile", f"# kernel headers of {rel} (simulated)\nVERSION = {rel.split('.')[0]}\n")
        write(src / ".config", "CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\n")
        write(src / "include/generated/utsrelease.h", f'#define UTS_RELEASE "{rel}"\n')
        build.parent.mkdir(parents=True, exist_ok=True)
        if build.is_symlink():
            build.unlink()
        build.symlink_to(f"../../../src/linux-headers-{rel}")
    else:
        remove(build)
        remove(src)


def materialize(host: Host, name: str, install: bool = True) -> None:
    """The files a package brings (or takes away), without the database entry."""
    if name == f"linux-headers-{host.release}":
        _headers_files(host, install)
    for unit in catalog.units_of(name):
        f = host.p(f"{UNIT_DIR}/{unit}")
        if install:
            write(f, UNIT_TEXT.get(unit, f"[Unit]\nDescription={unit}\n\n[Install]\nWantedBy=multi-user.target\n"))
        else:
            remove(f)


def install(host: Host, name: str, version: str) -> list[str]:
    """Install (or upgrade to) `version`; returns the lines apt/dpkg would print. Raises PackageError."""
    pkgs = read_status(host)
    out = [f"Setting up {name} ({version}) ..."]
    if catalog.NVIDIA_DKMS_RE.match(name) and not headers_present(host) and name != f"linux-headers-{host.release}":
        raise PackageError(
            f"Setting up {name} ({version}) ...\n"
            f"Error! Your kernel headers for kernel {host.release} cannot be found at "
            f"/lib/modules/{host.release}/build or /lib/modules/{host.release}/source.\n"
            f"dpkg: error processing package {name} (--configure):\n"
            f" installed {name} package post-installation script subprocess returned error exit status 1\n"
            f"Errors were encountered while processing:\n {name}\n"
            "E: Sub-process /usr/bin/dpkg returned an error code (1)"
        )
    materialize(host, name, True)
    pkgs[name] = version
    write_status(host, pkgs)
    if catalog.NVIDIA_DKMS_RE.match(name) or name in ("mlnx-ofed-kernel-dkms", "doca-ofed"):
        out.append(f"Building initial module for {host.release}\nDone.")
        depmod(host, pkgs)
        ofed_info_tool(host, pkgs)
    return out


def uninstall(host: Host, name: str) -> list[str]:
    pkgs = read_status(host)
    if name not in pkgs:
        return [f"Package '{name}' is not installed, so not removed"]
    materialize(host, name, False)
    version = pkgs.pop(name)
    write_status(host, pkgs)
    if catalog.NVIDIA_DKMS_RE.match(name) or name in ("mlnx-ofed-kernel-dkms", "doca-ofed"):
        depmod(host, pkgs)
        ofed_info_tool(host, pkgs)
    return [f"Removing {name} ({version}) ..."]
