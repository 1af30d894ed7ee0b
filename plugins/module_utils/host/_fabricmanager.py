# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""fabricmanager: the nvidia-fabricmanager package at exactly the driver's version, service enabled and running.

Package names (NVIDIA CUDA repositories): Debian/Ubuntu ``nvidia-fabricmanager-<branch>`` up to branch 580 and
``nvidia-fabricmanager`` from branch 590 (NVIDIA dropped the branch from Ubuntu package names with 590), version
``<driver version>-1``; RHEL ``nvidia-fabric-manager``, version ``<driver version>-1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._diff import DifferenceTracker
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import HostStateError, Unsupported
from ansible_collections.gpuops.platform.plugins.module_utils.host import _hostfacts, _kmod, _pending, _pkg
from ansible_collections.gpuops.platform.plugins.module_utils.host._service import Systemd

SERVICE = _hostfacts.FM_SERVICE
# Recorded before a package upgrade under a running service, cleared after the restart succeeded: a run
# that fails in between leaves it, and the next run restarts the service still running the old binary.
PENDING = "fabricmanager-restart"


def package_name(mgr: str, version: str) -> str:
    branch = int(version.split(".", 1)[0])
    if mgr == "dnf":
        return "nvidia-fabric-manager"
    return "nvidia-fabricmanager" if branch >= 590 else f"nvidia-fabricmanager-{branch}"


def driver_version(fs: Any, runner: Any) -> str:
    """The NVIDIA driver version fabricmanager must match: the loaded module's, which must also be the
    installed one when both are known."""
    modules = _kmod.loaded_modules(fs)
    drv = _hostfacts.nvidia_driver_facts(fs, runner, modules)
    loaded, installed = drv["version"], drv["installed_version"]
    if loaded and installed and loaded != installed:
        raise HostStateError(
            f"NVIDIA driver {loaded} is loaded but {installed} is installed for this kernel (modinfo nvidia): "
            "reboot into the installed driver first, so that fabricmanager matches the driver that will run"
        )
    version = loaded or installed
    if not version:
        release = fs.read_attr("/proc/sys/kernel/osrelease")
        if not runner.which("modinfo"):
            raise Unsupported(
                "cannot find the NVIDIA driver version: /proc/driver/nvidia/version is absent (nvidia not loaded) "
                f"and modinfo is not installed, so the nvidia module installed for kernel {release} cannot be "
                "read; install kmod (modinfo), or load the NVIDIA driver, before nvidia-fabricmanager"
            )
        raise Unsupported(
            "no NVIDIA driver on this host: /proc/driver/nvidia/version is absent and modinfo finds no nvidia "
            f"module for kernel {release}; install the NVIDIA driver before nvidia-fabricmanager"
        )
    return version


def service_state(systemd: Any) -> dict[str, Any]:
    """{enabled, active} of the service; HostStateError when systemctl cannot tell (never guessed)."""
    svc = {"enabled": systemd.is_enabled(SERVICE), "active": systemd.is_active(SERVICE)}
    if None in svc.values():
        raise HostStateError(
            f"cannot read the state of {SERVICE}: {systemd.last_error.get(SERVICE)}; nvidia-fabricmanager needs "
            "a running systemd (check systemctl status)"
        )
    return svc


def check_params(params: Mapping[str, Any], mgr: str | None = None) -> None:
    """package_name and package_revision must be what the package manager takes as a name and a revision: checked
    before anything is read or run (either manager's form), and again for the host's manager before a package
    command runs."""
    if params.get("package_name") is not None:
        _pkg.check_name("package_name", params["package_name"], mgr)
    _pkg.check_revision("package_revision", params["package_revision"], mgr)


def run(ctx: Any) -> dict[str, Any]:
    fs, runner, params = ctx.fs, ctx.runner, ctx.params
    check_params(params)
    nvswitches = [d["address"] for d in _hostfacts.pci_inventory(fs)["nvswitches"]]
    if not nvswitches:
        return {
            "changed": False,
            "nvswitches": [],
            "msg": "no NVSwitch on this host (no PCI device with vendor 0x10de, class 0x0680): "
            "fabricmanager not needed",
        }
    version = driver_version(fs, runner)
    mgr = _pkg.manager(runner)
    check_params(params, mgr)
    name = params["package_name"] or package_name(mgr, version)
    target = "{}-{}".format(version, params["package_revision"])
    current = _pkg.installed(runner, name).get(name)
    systemd = Systemd(runner)
    if not systemd.available():
        raise Unsupported("nvidia-fabricmanager runs as a systemd service: systemctl not found on this host")
    svc = service_state(systemd)

    install = _pkg.upstream_version(current) != version
    pending = _pending.detail(fs, PENDING)
    restart = svc["active"] and (install or pending is not None)
    tracker = DifferenceTracker()
    tracker.add("package", f"{name}={current}" if current else None, f"{name}={current if not install else target}")
    tracker.add("service_enabled", svc["enabled"], True)
    tracker.add("service_active", svc["active"], True)

    actions = []
    if pending is not None and not install and svc["active"]:
        ctx.warn(f"{SERVICE} was not restarted after an earlier run changed it ({pending}): restarting it now")
    if install:
        actions.append(f"install {name} {target}")
        if not ctx.check_mode and svc["active"]:
            _pending.mark(fs, PENDING, f"{name} {current} -> {target} under the running service")
        _pkg.install(runner, mgr, name, target)
        ctx.did(actions[-1])
    if not svc["enabled"]:
        actions.append(f"enable {SERVICE}")
        systemd.enable(SERVICE)
        ctx.did(actions[-1])
    if not svc["active"] or restart:
        actions.append(f"{'restart' if restart else 'start'} {SERVICE}")
        if restart:
            systemd.restart(SERVICE)
        else:
            systemd.start(SERVICE)
        if not ctx.check_mode:
            _pending.clear(fs, PENDING)
        ctx.did(actions[-1])

    result = {
        "changed": bool(actions),
        "nvswitches": nvswitches,
        "driver_version": version,
        "package": name,
        "version_before": current,
        "version": current if not install else target,
        "service": {"name": SERVICE, "enabled": True, "active": True},
        "actions": actions,
    }
    if ctx.diff_mode:
        result["diff"] = tracker.diff("nvidia-fabricmanager")
    return result
