"""Simulated systemd: unit files are real files (/usr/lib/systemd/system, /etc/systemd/system), enabling
is the real `<target>.wants/` symlink, the runtime state (active / inactive / failed) is a JSON file in
the host's /run (so a reboot clears it). Starting a unit succeeds unless a rule below says otherwise:

- nvidia-fabricmanager.service needs the nvidia module loaded at the fabric manager's own version
  (the real daemon exits with an error on a driver/fabric-manager version mismatch)."""

from __future__ import annotations

import json
from pathlib import Path

from . import catalog, packages
from .hostfs import SIM_RUN, Host, read, remove, write

ETC = "/etc/systemd/system"
LIB = packages.UNIT_DIR
STATE = f"{SIM_RUN}/units.json"


def unit_name(name: str) -> str:
    return name if "." in name else f"{name}.service"


def _states(host: Host) -> dict[str, str]:
    f = host.p(STATE)
    return json.loads(f.read_text()) if f.exists() else {}


def _save(host: Host, st: dict[str, str]) -> None:
    write(host.p(STATE), json.dumps(st, indent=1, sort_keys=True) + "\n")


def masked(host: Host, unit: str) -> bool:
    f = host.p(f"{ETC}/{unit}")
    return f.is_symlink() and str(f.readlink()) == "/dev/null"


def unit_file(host: Host, unit: str) -> Path | None:
    for d in (ETC, LIB):
        f = host.p(f"{d}/{unit}")
        if f.is_file() and not masked(host, unit):
            return f
    return None


def exists(host: Host, unit: str) -> bool:
    return masked(host, unit) or unit_file(host, unit) is not None


def wanted_by(host: Host, unit: str) -> list[str]:
    f = unit_file(host, unit)
    out, section = [], ""
    for line in read(f).splitlines() if f else []:
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Install]" and line.startswith("WantedBy="):
            out += line.split("=", 1)[1].split()
    return out


def enabled_state(host: Host, unit: str) -> str | None:
    if masked(host, unit):
        return "masked"
    if unit_file(host, unit) is None:
        return None
    targets = wanted_by(host, unit)
    if not targets:
        return "static"
    if any(host.p(f"{ETC}/{t}.wants/{unit}").is_symlink() for t in targets):
        return "enabled"
    return "disabled"


def enable(host: Host, unit: str) -> list[str]:
    msgs = []
    src = unit_file(host, unit)
    for t in wanted_by(host, unit):
        link = host.p(f"{ETC}/{t}.wants/{unit}")
        if not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            target = f"{LIB}/{unit}" if src and str(src).endswith(f"{LIB}/{unit}") else f"{ETC}/{unit}"
            link.symlink_to(target)
            msgs.append(f"Created symlink {ETC}/{t}.wants/{unit} \u2192 {target}.")
    return msgs


def disable(host: Host, unit: str) -> list[str]:
    msgs = []
    base = host.p(ETC)
    for link in sorted(base.glob(f"*.wants/{unit}")) if base.is_dir() else []:
        remove(link)
        msgs.append(f"Removed {ETC}/{link.parent.name}/{unit}.")
    return msgs


def mask(host: Host, unit: str) -> None:
    f = host.p(f"{ETC}/{unit}")
    f.parent.mkdir(parents=True, exist_ok=True)
    remove(f)
    f.symlink_to("/dev/null")


def unmask(host: Host, unit: str) -> None:
    if masked(host, unit):
        remove(host.p(f"{ETC}/{unit}"))


def active_state(host: Host, unit: str) -> str:
    return _states(host).get(unit, "inactive")


def _start_refusal(host: Host, unit: str) -> str | None:
    if unit == "nvidia-fabricmanager.service":
        pkgs = packages.read_status(host)
        fm = next((catalog.upstream_version(v) for p, v in pkgs.items() if catalog.FABRICMANAGER_RE.match(p)), None)
        from .kernel import loaded  # noqa: PLC0415 - a shim's systemctl call loads the simulated kernel only here

        if "nvidia" not in loaded(host):
            return "fabric manager: the NVIDIA driver is not loaded"
        drv = read(host.p("/sys/module/nvidia/version")).strip()
        if fm and drv != fm:
            return f"fabric manager version {fm} does not match the NVIDIA driver version {drv}"
    return None


def start(host: Host, unit: str) -> str | None:
    """Start; returns None or the reason it failed (the unit is then 'failed')."""
    st = _states(host)
    why = _start_refusal(host, unit)
    st[unit] = "failed" if why else "active"
    _save(host, st)
    if why:
        host.kernel_log(f"systemd[1]: {unit}: Control process exited, code=exited, status=1/FAILURE ({why})")
    return why


def stop(host: Host, unit: str) -> None:
    st = _states(host)
    st[unit] = "inactive"
    _save(host, st)


def reset_failed(host: Host, unit: str | None = None) -> None:
    st = {u: s for u, s in _states(host).items() if not (s == "failed" and unit in (None, u))}
    _save(host, st)


def all_units(host: Host) -> list[str]:
    names = set()
    for d in (LIB, ETC):
        base = host.p(d)
        if base.is_dir():
            names |= {
                f.name
                for f in base.iterdir()
                if f.suffix in (".service", ".timer", ".socket") and (f.is_file() or f.is_symlink())
            }
    return sorted(names)


def boot(host: Host) -> None:
    """Start every enabled unit (the host just booted; /run and with it the runtime state is empty)."""
    _save(host, {})
    for unit in all_units(host):
        if enabled_state(host, unit) == "enabled":
            start(host, unit)
