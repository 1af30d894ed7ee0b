# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Host rules of the GPU driver, once: kernel headers, nouveau, the driver (host or GPU Operator container), the node
labels that steer the operator's driver, MOFED / DOCA, Secure Boot and module signing. Pure functions of the
``gpuops_host`` facts and the intent that return findings (see ``_host_findings``).
"""

from __future__ import annotations

from ansible_collections.gpuops.platform.plugins.module_utils.host._host_findings import (
    DEPLOY_DRIVER_LABEL,
    HOST_MOFED,
    Facts,
    Finding,
    Intent,
    _get,
    _gpu_name,
    effective_driver,
    finding,
    host_driver,
    ref,
)


# -- rules -------------------------------------------------------------------------------------------
def headers(facts: Facts, intent: Intent) -> list[Finding]:
    rel = _get(facts, "kernel", "release")
    if not intent["driver_build"] or _get(facts, "kernel", "headers_installed"):
        return []
    return [
        finding(
            "kernel-headers-missing",
            "error",
            ref("Kernel", rel),
            [f"/lib/modules/{rel}/build/Makefile is missing"],
            f"a driver build is planned but the headers of the running kernel {rel} are not installed",
            f"install linux-headers-{rel} (Debian/Ubuntu) or kernel-devel-{rel} (RHEL), or boot a kernel that has them",
        )
    ]


def nouveau(facts: Facts, intent: Intent) -> list[Finding]:
    nv = facts.get("nouveau") or {}
    want = intent["nouveau"]
    validate = intent["stage"] == "validate"
    bound = [_gpu_name(d) for d in facts.get("accelerators") or [] if d.get("driver") == "nouveau"]
    on = "bound to " + ", ".join(bound) if bound else "bound to no GPU"
    sources = ", ".join(nv.get("blacklist_sources") or []) or "none"
    obj = ref("KernelModule", "nouveau")
    if want == "absent":
        if nv.get("blacklisted"):
            return [
                finding(
                    "nouveau-blacklisted",
                    "error" if validate else "warning",
                    obj,
                    [f"blacklist sources: {sources}"],
                    "nouveau is blacklisted while host_prep_nouveau=remove asks for it to be allowed",
                    "run host_prep (nouveau_blacklist state=absent), then reboot",
                    "nouveau",
                )
            ]
        return []
    if intent["nvidia_driver"] == "none" and want is None:
        return []
    if not nv.get("loaded"):
        state = "nouveau not loaded"
    elif nv.get("refcount") is None:  # a kernel without module unloading keeps no count (_kmod.parse_proc_modules)
        state = "nouveau loaded, refcount unknown (a kernel without module unloading: only a reboot removes it)"
    else:
        state = f"nouveau loaded, refcount {nv.get('refcount')}"
    evidence = [state, f"blacklist sources: {sources}"]
    if nv.get("loaded") and nv.get("blacklisted"):
        pending = validate and intent["reboot_pending"]
        return [
            finding(
                "nouveau-loaded",
                "warning" if pending else "error",
                obj,
                evidence,
                f"nouveau is blacklisted but still loaded (in use) and {on}: the NVIDIA driver cannot bind those "
                "GPUs until the host reboots",
                "reboot the host (host_prep_reboot=true lets the role do it)",
                "nouveau",
            )
        ]
    if nv.get("loaded"):
        how = "in use, a reboot is needed after blacklisting" if nv.get("in_use") else "not in use"
        return [
            finding(
                "nouveau-loaded",
                "error",
                obj,
                evidence,
                f"nouveau is loaded ({how}) and {on} while the NVIDIA driver ({intent['nvidia_driver']}) is planned",
                "run host_prep (gpuops.platform.nouveau_blacklist state=present), then reboot if reboot_required",
                "nouveau",
            )
        ]
    if not nv.get("blacklisted"):
        return [
            finding(
                "nouveau-not-blacklisted",
                "error" if validate else "warning",
                obj,
                evidence,
                "nouveau is not loaded but not blacklisted: it can bind the GPUs at the next boot",
                "run host_prep (gpuops.platform.nouveau_blacklist state=present)",
                "nouveau",
            )
        ]
    return []


def driver(facts: Facts, intent: Intent) -> list[Finding]:
    """Host NVIDIA driver against the GPU Operator's driver container: never both on one node."""
    version = host_driver(facts)
    if intent["nvidia_driver"] != "container" or not version:
        return []
    drv = facts.get("nvidia_driver") or {}
    evidence = [
        f"nvidia module loaded: {drv.get('version')}" if drv.get("loaded") else "nvidia module not loaded",
        f"modinfo nvidia: {drv.get('installed_version')}" if drv.get("installed_version") else None,
    ]
    node = ref("Host", intent["node"])
    if intent["exclude_host_driver_nodes"]:
        return [
            finding(
                "host-driver-node-excluded",
                "info",
                node,
                evidence,
                f"the host runs NVIDIA driver {version}: the node is labelled {DEPLOY_DRIVER_LABEL}=false so the "
                "driver container skips it",
                "none needed; to use the driver container here, remove the host driver packages and reboot",
            )
        ]
    return [
        finding(
            "host-driver-with-driver-container",
            "error",
            node,
            evidence,
            f"the GPU Operator's driver container is planned but the host already has NVIDIA driver {version}: "
            "never both - the container cannot load its module and the node goes NotReady",
            "remove the host driver packages (and reboot); or exclude such nodes "
            "(gpu_operator_exclude_host_driver_nodes: true); or plan the host driver (gpu_operator_driver_enabled: "
            "false, host_prep_nvidia_driver: host)",
        )
    ]


def node_labels(facts: Facts, intent: Intent) -> dict[str, str]:
    """Node labels the cluster plane must set for this host (the driver container skips host-driver nodes)."""
    if intent["nvidia_driver"] == "container" and intent["exclude_host_driver_nodes"] and host_driver(facts):
        return {DEPLOY_DRIVER_LABEL: "false"}
    return {}


def mofed(facts: Facts, intent: Intent) -> list[Finding]:
    """Host MLNX_OFED/DOCA-OFED against the Network Operator's DOCA driver and the GPU Operator's
    driver.rdma.useHostMofed."""
    ofed = facts.get("ofed") or {}
    flavor = ofed.get("flavor")
    has = flavor in HOST_MOFED
    evidence = [f"ofed_info -s: {ofed.get('raw')}" if ofed.get("raw") else f"OFED flavor: {flavor}"]
    obj = ref("Host", intent["node"])
    out = []
    if intent["ofed"] == "operator" and has:
        out.append(
            finding(
                "host-ofed-with-doca-driver",
                "error",
                obj,
                evidence,
                f"host {flavor} {ofed.get('version')} is installed while the Network Operator's DOCA driver "
                "container is planned: never both",
                "uninstall the host stack (ofed_uninstall.sh, or remove the doca-ofed/mlnx-ofed packages) and reboot, "
                "or plan host OFED and disable ofedDriver in the Network Operator",
            )
        )
    rdma_here = intent["rdma"] and effective_driver(facts, intent) == "container"
    if rdma_here and flavor == "unknown":
        out.append(
            finding(
                "rdma-host-ofed-unknown",
                "error",
                obj,
                evidence,
                "GPUDirect RDMA is requested in the driver container but the host's OFED stack could not be "
                "identified, so driver.rdma.useHostMofed cannot be checked",
                "check ofed_info -s on the host (MLNX_OFED_LINUX-<version> or OFED-internal-<version> expected)",
            )
        )
    elif rdma_here and bool(intent["use_host_mofed"]) != has:
        have = f"has {flavor} {ofed.get('version') or ''}".strip() if has else "has no MOFED"
        out.append(
            finding(
                "rdma-host-mofed-mismatch",
                "error",
                obj,
                evidence,
                f"driver.rdma.useHostMofed is {str(bool(intent['use_host_mofed'])).lower()} but the host {have}: "
                "the driver container would load nvidia-peermem against the wrong RDMA stack",
                f"set gpu_operator_driver_rdma_use_host_mofed: {str(has).lower()}",
            )
        )
    return out


def secure_boot(facts: Facts, intent: Intent) -> list[Finding]:
    if not intent["unsigned_modules"]:
        return []
    state = _get(facts, "secure_boot", "state")
    obj = ref("Host", intent["node"])
    if state == "enabled":
        return [
            finding(
                "secure-boot-unsigned-modules",
                "error",
                obj,
                ["Secure Boot: enabled"],
                "Secure Boot is enabled and unsigned kernel modules are planned: the kernel will refuse to load them",
                "sign the modules with a key enrolled in MOK (mokutil --import), use signed precompiled drivers, "
                "or disable Secure Boot",
            )
        ]
    if state == "unknown":
        return [
            finding(
                "secure-boot-unknown",
                "warning",
                obj,
                ["Secure Boot: EFI variable not readable"],
                "unsigned kernel modules are planned and the Secure Boot state could not be read",
                "check with mokutil --sb-state",
            )
        ]
    return []
