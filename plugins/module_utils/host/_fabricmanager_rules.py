# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Host rules of NVIDIA Fabric Manager, once: on an NVSwitch system its version must match the driver's (lockstep),
and it needs a driver to run. Pure functions of the ``gpuops_host`` facts and the intent that return findings
(see ``_host_findings``); the cluster diagnosis calls :func:`fabricmanager_lockstep` too.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.host._host_findings import (
    Facts,
    Finding,
    Intent,
    _get,
    effective_driver,
    finding,
    host_driver,
    ref,
)

# fabricmanager "active" as reported by _service: True, False, or None when systemctl could not answer
_SERVICE_STATE: dict[bool | None, str] = {True: ", active", False: ", inactive"}


def fabricmanager_lockstep(facts: Facts) -> Finding | None:
    """THE fabricmanager rule: on an NVSwitch host whose GPUs use the host's NVIDIA driver,
    nvidia-fabricmanager must be installed at exactly the driver's version and running, or the fabric is not
    trained and CUDA sees no usable GPU. None when it holds or cannot apply (no NVSwitch, no host driver yet).
    Used by host_prep (preflight, validate), the GPU Operator guards and the cluster diagnosis."""
    switches = facts.get("nvswitches") or []
    version = host_driver(facts)
    if not switches or not version:
        return None
    fm = facts.get("fabricmanager") or {}
    installed = fm.get("installed", fm.get("version") is not None)  # partial facts (diagnosis input) lack it
    evidence = [
        f"{len(switches)} NVSwitch(es): " + ", ".join(s.get("address") or "?" for s in switches),
        f"NVIDIA driver {version}",
        "nvidia-fabricmanager: "
        + (
            f"{fm.get('package') or 'installed'} {fm.get('package_version') or fm.get('version')}"
            if installed
            else "not installed"
        )
        + _SERVICE_STATE.get(fm.get("active"), ", state unknown (systemctl did not answer)"),
    ]
    fix = (
        f"run host_prep with host_prep_fabricmanager: present (installs nvidia-fabricmanager {version}, "
        "enables and starts it)"
    )
    obj = ref("Service", "nvidia-fabricmanager")
    why = "the NVSwitch fabric is not trained and CUDA sees no usable GPU"
    if not installed:
        cause = f"NVSwitch host using the host driver {version} without nvidia-fabricmanager: {why}"
        return finding("fabricmanager-missing", "error", obj, evidence, cause, fix, "fabricmanager")
    if fm.get("version") != version:
        cause = f"nvidia-fabricmanager {fm.get('version')} does not match NVIDIA driver {version}: {why}"
        return finding("fabricmanager-version-mismatch", "error", obj, evidence, cause, fix, "fabricmanager")
    if fm.get("active") is None and "active" in fm:
        cause = (
            f"nvidia-fabricmanager {version} is installed but whether it runs is unknown (systemctl could not "
            f"answer), so the fabric may not be trained: {why} when it is not"
        )
        fix_unknown = "check systemd on the host (systemctl status nvidia-fabricmanager), then rerun"
        return finding("fabricmanager-state-unknown", "error", obj, evidence, cause, fix_unknown)
    if not fm.get("active"):
        cause = f"nvidia-fabricmanager {version} is installed but not running: {why}"
        return finding("fabricmanager-inactive", "error", obj, evidence, cause, fix, "fabricmanager")
    return None


def _fabricmanager_without_driver(facts: Facts, intent: Intent, switches: list[dict[str, Any]]) -> Finding | None:
    """An NVSwitch host with no NVIDIA driver whose plan needs one now: its GPUs are to use the host driver
    (host_prep_nvidia_driver: host) or host_prep installs nvidia-fabricmanager. The fabricmanager fix cannot run
    without the driver (the package must match its version), so host_prep would change nouveau, ACS and SR-IOV and
    then fail, and every rerun the same way: refused before any change. None when it does not apply."""
    if host_driver(facts):
        return None
    why = []
    if effective_driver(facts, intent) == "host":
        why.append("the GPUs are to use the host's NVIDIA driver (host_prep_nvidia_driver: host)")
    if intent["fabricmanager"]:
        why.append("host_prep's plan installs nvidia-fabricmanager, which must match the driver's version")
    if not why:
        return None
    release = _get(facts, "kernel", "release")
    return finding(
        "fabricmanager-needs-driver",
        "error",
        ref("Service", "nvidia-fabricmanager"),
        [
            f"{len(switches)} NVSwitch(es): " + ", ".join(s.get("address") or "?" for s in switches),
            "no NVIDIA driver loaded or installed"
            + (f" for kernel {release}" if release else "")
            + " (/proc/driver/nvidia/version absent, modinfo nvidia finds no module)",
        ],
        "NVSwitch host without an NVIDIA driver while "
        + " and ".join(why)
        + ": nvidia-fabricmanager cannot be installed before the driver, so host_prep would fail after its other "
        "fixes changed the host, and every rerun the same way",
        "install the NVIDIA driver on the host first (the driver packages for the running kernel, then load it or "
        "reboot), then run host_prep; or use the GPU Operator's driver container, which brings its own "
        "fabricmanager (host_prep_nvidia_driver: container, host_prep_fabricmanager: auto or skip)",
    )


def fabricmanager(facts: Facts, intent: Intent) -> list[Finding]:
    switches = facts.get("nvswitches") or []
    if not switches:
        return []
    fm = facts.get("fabricmanager") or {}
    obj = ref("Service", "nvidia-fabricmanager")
    needs_driver = _fabricmanager_without_driver(facts, intent, switches)
    if needs_driver:
        return [needs_driver]
    if effective_driver(facts, intent) == "container":
        if fm.get("active"):
            return [
                finding(
                    "fabricmanager-host-and-container",
                    "warning",
                    obj,
                    [f"{len(switches)} NVSwitch(es)", "nvidia-fabricmanager active on the host"],
                    "the driver container runs its own fabricmanager, but the host's is active",
                    "systemctl disable --now nvidia-fabricmanager on the host",
                )
            ]
        return []
    if not host_driver(facts):  # no driver planned on the host (nvidia_driver none): nothing to do yet
        return [
            finding(
                "fabricmanager-needs-driver",
                "info",
                obj,
                [f"{len(switches)} NVSwitch(es)", "no NVIDIA driver loaded or installed"],
                "NVSwitch host without an NVIDIA driver yet: fabricmanager is installed after the driver",
                "install the NVIDIA driver, then run host_prep (host_prep_fabricmanager: present)",
            )
        ]
    problem = fabricmanager_lockstep(facts)
    return [problem] if problem else []
