# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Kernel modules: /proc/modules, /sys/module holders, modprobe.d blacklists, modinfo, modprobe -r."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

PROC_MODULES = "/proc/modules"
PROC_CMDLINE = "/proc/cmdline"
# modprobe.d(5) search order: a file name found in an earlier directory hides the same name later.
MODPROBE_DIRS = (
    "/etc/modprobe.d",
    "/run/modprobe.d",
    "/usr/local/lib/modprobe.d",
    "/usr/lib/modprobe.d",
    "/lib/modprobe.d",
)


def _canon(name: str) -> str:
    return name.replace("-", "_")


def parse_proc_modules(text: str | None) -> dict[str, dict[str, Any]]:
    """``name size refcnt deps state offset`` lines → {name: {size, refcnt, deps, state}}.

    A kernel built without module unloading (``CONFIG_MODULE_UNLOAD=n``) prints ``-`` for the count and the users
    (``nvidia 14299136 - - Live 0x... (O)``, seen on an H100 VM): the module is loaded, its count unknown (None)."""
    mods = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        name, size, refcnt, deps, state = fields[:5]
        try:
            size_i = int(size)
            ref_i = None if refcnt == "-" else int(refcnt)
        except ValueError:
            continue
        mods[name] = {
            "size": size_i,
            "refcnt": ref_i,
            "deps": [d for d in deps.split(",") if d and d != "-"],
            "state": state,
        }
    return mods


def loaded_modules(fs: Any) -> dict[str, dict[str, Any]]:
    return parse_proc_modules(fs.read_text(PROC_MODULES))


def holders(fs: Any, name: str) -> list[str]:
    return fs.listdir(f"/sys/module/{_canon(name)}/holders")


def module_usage(fs: Any, modules: Mapping[str, Mapping[str, Any]], name: str) -> dict[str, Any]:
    """{loaded, refcount, holders, in_use} for one module. In use = a non-zero reference count or holders, or a
    count the kernel does not keep (None: it cannot unload modules, so only a reboot removes this one)."""
    mod = modules.get(_canon(name))
    if mod is None:
        return {"loaded": False, "refcount": 0, "holders": [], "in_use": False}
    hold = holders(fs, name)
    ref = mod["refcnt"]
    return {"loaded": True, "refcount": ref, "holders": hold, "in_use": ref is None or ref > 0 or bool(hold)}


def parse_cmdline(text: str | None) -> dict[str, str | None]:
    """Kernel command line → {key: value} (value None for bare flags; later keys win)."""
    params = {}
    for token in (text or "").split():
        key, sep, value = token.partition("=")
        params[key] = value if sep else None
    return params


def modprobe_conf_files(fs: Any) -> dict[str, str]:
    """Effective modprobe.d files in the order modprobe reads them: {basename: host path}."""
    chosen = {}
    for directory in MODPROBE_DIRS:
        for name in fs.listdir(directory):
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = f"{directory}/{name}"
    return dict(sorted(chosen.items()))


def _conf_lines(text: str) -> Iterator[list[str]]:
    """modprobe.d lines with comments removed and backslash continuations joined."""
    joined = re.sub(r"\\\n", " ", text or "")
    for raw in joined.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            yield line.split()


def blacklist_sources(fs: Any, name: str, cmdline_params: Mapping[str, str | None] | None = None) -> list[str]:
    """Where ``name`` is blacklisted: effective modprobe.d files with ``blacklist <name>`` and the kernel
    command line (``modprobe.blacklist=``)."""
    target = _canon(name)
    sources = []
    for path in modprobe_conf_files(fs).values():
        for words in _conf_lines(fs.read_text(path)):
            if len(words) >= 2 and words[0] == "blacklist" and _canon(words[1]) == target:
                sources.append(path)
                break
    listed = (cmdline_params or {}).get("modprobe.blacklist") or ""
    if target in {_canon(n) for n in listed.split(",")}:
        sources.append(f"kernel command line (modprobe.blacklist={listed})")
    return sources


def installed_version(runner: Any, name: str) -> str | None:
    """``modinfo -F version <name>`` for the running kernel; None when not installed or no modinfo."""
    if not runner.which("modinfo"):
        return None
    res = runner.run("modinfo", ["-F", "version", name], check=False)
    version = res.out.strip().splitlines()[0].strip() if res.ok and res.out.strip() else None
    return version


def unload(runner: Any, name: str) -> Any:
    """``modprobe -r <name>`` (mutating: skipped in check mode)."""
    return runner.run("modprobe", ["-r", name], mutating=True)


def module_file_exists(fs: Any, release: str, name: str) -> bool:
    """Whether a module for ``release`` named ``name`` is in /lib/modules (any compression)."""
    base = f"/lib/modules/{release}"
    text = fs.read_text(base + "/modules.dep")
    if text:
        pat = re.compile(r"(^|/){}\.ko(\.[a-z]+)?:".format(re.escape(name).replace("_", "[-_]")), re.M)
        return bool(pat.search(text))
    return False
