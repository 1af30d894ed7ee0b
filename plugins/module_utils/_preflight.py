# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""gpu_host_preflight: a pure decision table, gpuops_host facts + what is planned → findings."""

from __future__ import annotations

from ansible_collections.gpuops.platform.plugins.module_utils import _hostfacts

SEVERITIES = ("error", "warning", "info")


def _finding(fid, severity, message, remedy):
    return {"id": fid, "severity": severity, "message": message, "remedy": remedy}


def _headers(facts, plan):
    kernel = facts.get("kernel") or {}
    if plan["driver_build"] and not kernel.get("headers_installed"):
        rel = kernel.get("release")
        yield _finding(
            "kernel-headers-missing",
            "error",
            f"a driver build is planned but headers for the running kernel {rel} are not installed "
            f"(/lib/modules/{rel}/build has no Makefile)",
            f"install linux-headers-{rel} (Debian/Ubuntu) or kernel-devel-{rel} (RHEL), or boot a kernel that has them",
        )


def _nouveau(facts, plan):
    nv = facts.get("nouveau") or {}
    if plan["nvidia_driver"] == "none":
        return
    if nv.get("loaded"):
        how = (
            "in use (refcount {}), a reboot is needed".format(nv.get("refcount")) if nv.get("in_use") else "not in use"
        )
        yield _finding(
            "nouveau-loaded",
            "error",
            "nouveau is loaded ({}) while the NVIDIA driver ({}) is planned".format(how, plan["nvidia_driver"]),
            "run gpuops.platform.nouveau_blacklist (state=present), then reboot if reboot_required",
        )
    elif not nv.get("blacklisted"):
        yield _finding(
            "nouveau-not-blacklisted",
            "warning",
            "nouveau is not loaded but not blacklisted: it can bind the GPUs at the next boot",
            "run gpuops.platform.nouveau_blacklist (state=present)",
        )


def _driver_conflict(facts, plan):
    drv = facts.get("nvidia_driver") or {}
    if plan["nvidia_driver"] == "container" and drv.get("installed_version"):
        yield _finding(
            "host-driver-with-driver-container",
            "error",
            "a host NVIDIA driver {} is installed (modinfo nvidia) while the GPU Operator driver container is "
            "planned: never both".format(drv["installed_version"]),
            "remove the host driver packages (and reboot), or plan the host driver and set the GPU Operator's "
            "driver.enabled=false",
        )


def _ofed_conflict(facts, plan):
    ofed = facts.get("ofed") or {}
    if plan["ofed"] == "operator" and ofed.get("flavor") in ("mlnx_ofed", "doca_ofed"):
        yield _finding(
            "host-ofed-with-doca-driver",
            "error",
            "host {} {} is installed (ofed_info -s: {}) while the Network Operator's DOCA driver container is "
            "planned: never both".format(ofed["flavor"], ofed.get("version"), ofed.get("raw")),
            "uninstall the host stack (ofed_uninstall.sh, or remove the doca-ofed/mlnx-ofed packages) and reboot, "
            "or plan host OFED and disable ofedDriver in the Network Operator",
        )


def _fabricmanager(facts, plan):
    switches = facts.get("nvswitches") or []
    if not switches:
        return
    fm, drv = facts.get("fabricmanager") or {}, facts.get("nvidia_driver") or {}
    n = len(switches)
    if plan["nvidia_driver"] == "container":
        if fm.get("active"):
            yield _finding(
                "fabricmanager-host-and-container",
                "warning",
                f"{n} NVSwitch(es): the driver container runs its own fabricmanager, but the host's is active",
                "systemctl disable --now nvidia-fabricmanager on the host",
            )
        return
    version = drv.get("version") or drv.get("installed_version")
    if not version:
        yield _finding(
            "fabricmanager-needs-driver",
            "info",
            f"{n} NVSwitch(es) and no NVIDIA driver yet: fabricmanager is installed after the driver",
            "run gpuops.platform.fabricmanager after the driver is installed",
        )
        return
    fix = f"run gpuops.platform.fabricmanager (installs nvidia-fabricmanager {version}, enables and starts it)"
    if not fm.get("installed"):
        yield _finding(
            "fabricmanager-missing", "error", f"{n} NVSwitch(es) but nvidia-fabricmanager is not installed", fix
        )
    elif fm.get("version") != version:
        yield _finding(
            "fabricmanager-version-mismatch",
            "error",
            "nvidia-fabricmanager {} ({}) does not match NVIDIA driver {}".format(
                fm.get("version"), fm.get("package"), version
            ),
            fix,
        )
    elif not fm.get("active"):
        yield _finding(
            "fabricmanager-inactive", "error", f"nvidia-fabricmanager {version} is installed but not running", fix
        )


def _gpudirect(facts, plan):
    if not plan["gpudirect"]:
        return
    bridges = facts.get("pcie_bridges") or []
    acs_on = [b["address"] for b in bridges if b.get("acs") and b["acs"].get("enabled")]
    unreadable = [b["address"] for b in bridges if not b.get("config_readable", True)]
    if acs_on:
        yield _finding(
            "acs-enabled",
            "error",
            f"GPUDirect is requested but ACS is enabled on {len(acs_on)} bridge(s)/switch port(s) above GPUs/NICs: "
            f"{', '.join(acs_on)} (P2P traffic is redirected through the root complex)",
            "run gpuops.platform.pcie_acs with state=disabled and persist=true",
        )
    if unreadable:
        yield _finding(
            "acs-unknown",
            "warning",
            "ACS state unknown on {}: extended config space not readable".format(", ".join(unreadable)),
            "gather facts as root (become: true)",
        )
    iommu = facts.get("iommu") or {}
    if iommu.get("enabled") and iommu.get("passthrough") is not True:
        yield _finding(
            "iommu-not-passthrough",
            "error",
            "GPUDirect is requested but the IOMMU translates DMA (default domain {}, cmdline {})".format(
                iommu.get("default_domain"), iommu.get("cmdline")
            ),
            "add iommu=pt to the kernel command line (with intel_iommu=on or amd_iommu=on) and reboot, "
            "or disable the IOMMU",
        )
    drv = facts.get("nvidia_driver") or {}
    if drv.get("loaded") and not (facts.get("nvidia_peermem") or {}).get("loaded"):
        yield _finding(
            "nvidia-peermem-not-loaded",
            "info",
            "GPUDirect RDMA is requested and the NVIDIA driver is loaded, but nvidia_peermem is not",
            "modprobe nvidia_peermem (or let the GPU Operator load it: driver.rdma.enabled=true)",
        )


def _sriov(facts, plan):
    nics = facts.get("nics") or []
    for req in plan["sriov"]:
        pf, want = req.get("pf"), int(req.get("num_vfs", 0))
        nic = next(
            (n for n in nics if pf in (n.get("address"), n.get("netdev")) or pf in (n.get("netdevs") or [])), None
        )
        if nic is None:
            yield _finding(
                "sriov-pf-unknown",
                "error",
                f"SR-IOV requested on unknown PF {pf!r}",
                "check the PF name with ip -br link",
            )
        elif nic.get("sriov_totalvfs") is None:
            yield _finding(
                "sriov-not-capable",
                "error",
                "PF {} ({}) has no sriov_totalvfs: SR-IOV is off in firmware/BIOS".format(pf, nic["address"]),
                f"enable SR-IOV in the BIOS and NIC firmware (mlxconfig -d {nic['address']} set SRIOV_EN=1 "
                f"NUM_OF_VFS={want})",
            )
        elif want > nic["sriov_totalvfs"]:
            yield _finding(
                "sriov-vfs-above-limit",
                "error",
                f"{want} VFs requested on PF {pf} ({nic['address']}) but the firmware limit sriov_totalvfs is "
                f"{nic['sriov_totalvfs']}",
                f"raise it in firmware: mlxconfig -d {nic['address']} set SRIOV_EN=1 NUM_OF_VFS={want}, then reboot",
            )


def _secure_boot(facts, plan):
    if not plan["unsigned_modules"]:
        return
    state = (facts.get("secure_boot") or {}).get("state")
    if state == "enabled":
        yield _finding(
            "secure-boot-unsigned-modules",
            "error",
            "Secure Boot is enabled and unsigned kernel modules are planned: the kernel will refuse to load them",
            "sign the modules with a key enrolled in MOK (mokutil --import), use signed precompiled drivers, or "
            "disable Secure Boot",
        )
    elif state == "unknown":
        yield _finding(
            "secure-boot-unknown",
            "warning",
            "unsigned kernel modules are planned and the Secure Boot state could not be read",
            "check with mokutil --sb-state",
        )


CHECKS = (_headers, _nouveau, _driver_conflict, _ofed_conflict, _fabricmanager, _gpudirect, _sriov, _secure_boot)


def evaluate(facts, plan):
    findings = []
    for check in CHECKS:
        findings.extend(check(facts, plan))
    return findings


def summarize(findings):
    return {s: sum(1 for f in findings if f["severity"] == s) for s in SEVERITIES}


def failing(findings, fail_on):
    if fail_on == "never":
        return []
    levels = ("error",) if fail_on == "error" else ("error", "warning")
    return [f for f in findings if f["severity"] in levels]


def run(ctx):
    p = ctx.params
    facts = p["facts"] or _hostfacts.gather(ctx.fs, ctx.runner)
    plan = {k: p[k] for k in ("nvidia_driver", "driver_build", "ofed", "gpudirect", "unsigned_modules")}
    plan["sriov"] = p["sriov"] or []
    findings = evaluate(facts, plan)
    result = {"changed": False, "findings": findings, "summary": summarize(findings), "plan": plan}
    bad = failing(findings, p["fail_on"])
    result["passed"] = not bad
    if bad:
        result["failed"] = True  # run_module turns this into fail_json, findings included
        details = "; ".join(f"{f['id']}: {f['message']}" for f in bad)
        result["msg"] = f"host preflight: {len(bad)} finding(s) at or above {p['fail_on']}: {details}"
    return result
