# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Host rules: every decision about a GPU host, once. Pure functions of the ``gpuops_host`` facts and the
intent (what the roles plan for the host) that return findings ``{id, severity, object, evidence, cause, fix}``.

gpu_host_preflight runs them for host_prep (preflight and validate) and for the GPU Operator's guards;
the cluster diagnosis calls :func:`fabricmanager_lockstep`. Roles assert on the findings and never recompute
a rule in Jinja.

Each finding also says which ``concern`` (rule) produced it and which host_prep fix addresses it
(``fixed_by``: ``nouveau``, ``acs``, ``sriov``, ``fabricmanager`` or None), so a caller can tell a finding that
an earlier step of the run will fix (the plan) from one that must stop the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput, for_option
from ansible_collections.gpuops.platform.plugins.module_utils.host import _pci

Facts = dict[str, Any]
Intent = dict[str, Any]
Finding = dict[str, Any]

SEVERITIES = ("error", "warning", "info")
CONCERNS = ("headers", "nouveau", "driver", "mofed", "fabricmanager", "acs", "gpudirect", "sriov", "secure_boot")
FIXES = ("nouveau", "acs", "sriov", "fabricmanager")
HOST_MOFED = ("mlnx_ofed", "doca_ofed")
DEPLOY_DRIVER_LABEL = "nvidia.com/gpu.deploy.driver"

DEFAULT_INTENT: Intent = {
    "node": None,
    "stage": "preflight",  # or "validate": the state the role asked for must hold now
    "nvidia_driver": "none",  # none | host | container
    "exclude_host_driver_nodes": False,
    "driver_build": False,
    "ofed": "none",  # none | host | operator
    "rdma": False,
    "use_host_mofed": False,
    "gpudirect": False,
    "unsigned_modules": False,
    "nouveau": None,  # None (not managed) | present | absent
    "acs": None,  # None (not managed) | {"state": "disabled"|"enabled", "devices": [addresses]}
    "sriov": [],  # [{pf, num_vfs}]
    "fabricmanager": False,  # host_prep's plan installs nvidia-fabricmanager (its fabricmanager fix runs)
    "reboot_pending": False,
}


def finding(
    fid: str,
    severity: str,
    obj: dict[str, str],
    evidence: Iterable[str | None],
    cause: str,
    fix: str,
    fixed_by: str | None = None,
) -> Finding:
    return {
        "id": fid,
        "severity": severity,
        "object": obj,
        "evidence": [e for e in evidence if e],
        "cause": cause,
        "fix": fix,
        "fixed_by": fixed_by,
    }


def ref(kind: str, name: str | None) -> dict[str, str]:
    return {"kind": kind, "name": name or "host"}


def _get(facts: Facts, *keys: str) -> Any:
    node: Any = facts
    for k in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(k)
    return node


def _words(mapping: dict[str, Any] | None) -> str:
    """``{'intel_iommu': 'on', 'iommu': 'pt'}`` -> ``intel_iommu=on iommu=pt``; empty -> ``(none)``."""
    return " ".join(f"{k}={v}" for k, v in (mapping or {}).items()) or "(none)"


def _gpu_name(dev: dict[str, Any]) -> str:
    return "{} ({})".format(
        dev.get("address"), dev.get("model") or "PCI {}:{}".format(dev.get("vendor_id"), dev.get("device_id"))
    )


def nvidia_gpus(facts: Facts) -> list[dict[str, Any]]:
    return [d for d in facts.get("accelerators") or [] if d.get("vendor_id") == "10de"]


def host_driver(facts: Facts) -> str | None:
    """The host's NVIDIA driver version (loaded, else installed for the running kernel), or None."""
    drv = facts.get("nvidia_driver") or {}
    if drv.get("loaded"):
        return drv.get("version") or drv.get("installed_version") or "unknown"
    return drv.get("installed_version")


def effective_driver(facts: Facts, intent: Intent) -> str:
    """Which driver the node's GPUs use: a node with a host driver that the driver container skips (labelled
    nvidia.com/gpu.deploy.driver=false) uses the host's."""
    planned = intent["nvidia_driver"]
    if planned == "container" and intent["exclude_host_driver_nodes"] and host_driver(facts):
        return "host"
    return planned


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


def _acs_targets(facts: Facts, intent: Intent) -> list[dict[str, Any]]:
    bridges = [b for b in facts.get("pcie_bridges") or [] if b.get("acs")]
    devices = (intent["acs"] or {}).get("devices") or []
    if devices:
        wanted = set(devices)
        bridges = [b for b in bridges if b.get("address") in wanted]
    return bridges


def acs(facts: Facts, intent: Intent) -> list[Finding]:
    managed = intent["acs"]
    want = (managed or {}).get("state") or ("disabled" if intent["gpudirect"] else None)
    if want is None:
        return []
    validate = intent["stage"] == "validate"
    targets = _acs_targets(facts, intent)
    out = []
    if want == "disabled":
        on = [b for b in targets if b["acs"].get("enabled")]
        if on:
            why = "GPUDirect is requested" if intent["gpudirect"] else "host_prep_acs=disable"
            out.append(
                finding(
                    "acs-enabled",
                    "error",
                    ref("PCIDevice", on[0]["address"]),
                    [f"{b['address']} ACS control {b['acs'].get('control')}" for b in on],
                    f"{why} but ACS is still enabled on {len(on)} bridge(s)/switch port(s) above GPUs/NICs: "
                    f"{', '.join(b['address'] for b in on)} (peer-to-peer traffic goes through the root complex, "
                    "so GPUDirect RDMA fails or slows down)",
                    "run host_prep with host_prep_acs=disable (gpuops.platform.pcie_acs state=disabled, persist=true)",
                    "acs",
                )
            )
    else:
        if intent["gpudirect"]:
            out.append(
                finding(
                    "acs-enabled-with-gpudirect",
                    "error",
                    ref("Host", intent["node"]),
                    ["host_prep_acs: enable", "GPUDirect: requested"],
                    "GPUDirect is requested but host_prep_acs=enable keeps ACS on above the GPUs/NICs",
                    "set host_prep_acs to auto or disable, or turn GPUDirect off (host_prep_gpudirect: false)",
                )
            )
        off = [b for b in targets if not b["acs"].get("enabled")]
        if off:
            out.append(
                finding(
                    "acs-disabled",
                    "error" if validate else "warning",
                    ref("PCIDevice", off[0]["address"]),
                    [f"{b['address']} ACS control {b['acs'].get('control')}" for b in off],
                    f"host_prep_acs=enable but ACS is disabled on {', '.join(b['address'] for b in off)}",
                    "run host_prep with host_prep_acs=enable",
                    "acs",
                )
            )
    unreadable = [b["address"] for b in facts.get("pcie_bridges") or [] if not b.get("config_readable", True)]
    if unreadable:
        out.append(
            finding(
                "acs-unknown",
                "warning",
                ref("PCIDevice", unreadable[0]),
                [f"{a}: extended config space not readable" for a in unreadable],
                "ACS state unknown on " + ", ".join(unreadable),
                "gather facts as root (become: true)",
            )
        )
    return out


def gpudirect(facts: Facts, intent: Intent) -> list[Finding]:
    if not intent["gpudirect"]:
        return []
    out = []
    iommu = facts.get("iommu") or {}
    if iommu.get("enabled") and iommu.get("passthrough") is not True:
        out.append(
            finding(
                "iommu-not-passthrough",
                "error",
                ref("Host", intent["node"]),
                [
                    f"default IOMMU domain: {iommu.get('default_domain') or 'unknown'}",
                    f"kernel command line: {_words(iommu.get('cmdline'))}",
                ],
                "GPUDirect is requested but the IOMMU translates DMA",
                "add iommu=pt to the kernel command line (with intel_iommu=on or amd_iommu=on) and reboot, "
                "or disable the IOMMU",
            )
        )
    drv = facts.get("nvidia_driver") or {}
    if drv.get("loaded") and not _get(facts, "nvidia_peermem", "loaded"):
        out.append(
            finding(
                "nvidia-peermem-not-loaded",
                "info",
                ref("KernelModule", "nvidia_peermem"),
                [f"nvidia {drv.get('version')} loaded", "nvidia_peermem not loaded"],
                "GPUDirect RDMA is requested and the NVIDIA driver is loaded, but nvidia_peermem is not",
                "modprobe nvidia_peermem (or let the GPU Operator load it: driver.rdma.enabled=true)",
            )
        )
    return out


def _find_nic(nics: list[dict[str, Any]], pf: str) -> dict[str, Any] | None:
    for nic in nics:
        if pf in (nic.get("address"), nic.get("netdev")) or pf in (nic.get("netdevs") or []):
            return nic
    return None


def resolve_sriov(facts: Facts, requests: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Finding]]:
    """PF resolution and VF limits: each request ``{pf, num_vfs}`` (netdev or PCI address, short forms such as
    ``14:00.0`` accepted) -> ``{pf, address, num_vfs, current}`` for the valid ones, findings for the others. A
    finding about a request names its item (``sriov[1].pf``; host_prep passes host_prep_sriov_vfs as it is)."""
    nics = facts.get("nics") or []
    resolved, out = [], []
    for i, req in enumerate(requests or []):
        pf, want = req.get("pf"), req.get("num_vfs")
        item = f"sriov[{i}]"
        where = f"set {item}.pf (host_prep: host_prep_sriov_vfs[{i}].pf)"
        key = pf
        if isinstance(pf, str) and ":" in pf:
            try:
                key = _pci.normalize_address(pf)
            except InvalidInput as exc:
                out.append(
                    finding(
                        "sriov-pf-invalid",
                        "error",
                        ref("PCIDevice", str(pf)),
                        [str(for_option(f"{item}.pf", exc))],
                        f"{item}.pf {pf} is not a PCI address (SR-IOV requested on it)",
                        f"{where} to the PF's netdev (ip -br link) or PCI address DDDD:BB:DD.F (lspci -D)",
                    )
                )
                continue
        if not isinstance(want, int) or isinstance(want, bool) or want < 0:
            out.append(
                finding(
                    "sriov-vfs-invalid",
                    "error",
                    ref("PCIDevice", str(key)),
                    [f"{item}.num_vfs: {want}"],
                    f"{item}.num_vfs {want} requested on PF {pf}: num_vfs must be an integer >= 0",
                    f"set {item}.num_vfs (host_prep: host_prep_sriov_vfs[{i}].num_vfs) to 0 or more",
                )
            )
            continue
        nic = _find_nic(nics, key) if isinstance(key, str) else None
        if nic is None:
            known = ", ".join(f"{n.get('netdev') or '-'} ({n.get('address')})" for n in nics) or "none"
            out.append(
                finding(
                    "sriov-pf-unknown",
                    "error",
                    ref("PCIDevice", str(key)),
                    [f"network PFs on the host: {known}"],
                    f"{item}.pf {pf}: no such PF on the host (SR-IOV requested on it)",
                    f"{where} to an existing PF, by netdev (ip -br link) or PCI address (lspci -D)",
                )
            )
            continue
        addr = nic["address"]
        name = f"PF {pf}" if pf == addr else f"PF {pf} ({addr})"
        total = nic.get("sriov_totalvfs")
        if total is None:
            out.append(
                finding(
                    "sriov-not-capable",
                    "error",
                    ref("PCIDevice", addr),
                    [f"{addr}: no sriov_totalvfs in sysfs"],
                    f"{item}.pf: {name} has no SR-IOV capability: SR-IOV is off in firmware/BIOS",
                    f"enable SR-IOV in the BIOS and NIC firmware "
                    f"(mlxconfig -d {addr} set SRIOV_EN=1 NUM_OF_VFS={want})",
                )
            )
            continue
        if want > total:
            out.append(
                finding(
                    "sriov-vfs-above-limit",
                    "error",
                    ref("PCIDevice", addr),
                    [f"sriov_totalvfs: {total}", f"requested: {want}"],
                    f"{item}.num_vfs: {want} VFs requested on {name} but the firmware limit sriov_totalvfs is {total}",
                    f"raise it in firmware: mlxconfig -d {addr} set SRIOV_EN=1 NUM_OF_VFS={want}, then reboot",
                )
            )
            continue
        resolved.append({"pf": pf, "address": addr, "num_vfs": want, "current": nic.get("sriov_numvfs")})
    return resolved, out


def sriov(facts: Facts, intent: Intent) -> list[Finding]:
    resolved, out = resolve_sriov(facts, intent["sriov"])
    validate = intent["stage"] == "validate"
    for r in resolved:
        if r["current"] != r["num_vfs"]:
            name = f"PF {r['pf']}" if r["pf"] == r["address"] else f"PF {r['pf']} ({r['address']})"
            out.append(
                finding(
                    "sriov-vfs-mismatch",
                    "error" if validate else "info",
                    ref("PCIDevice", r["address"]),
                    [f"sriov_numvfs: {r['current']}", f"requested: {r['num_vfs']}"],
                    f"{name} has {r['current']} VFs, {r['num_vfs']} requested",
                    "run host_prep (sriov_vfs goes through 0 as the kernel requires); check dmesg if it does not hold",
                    "sriov",
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


RULES: dict[str, Callable[[Facts, Intent], list[Finding]]] = {
    "headers": headers,
    "nouveau": nouveau,
    "driver": driver,
    "mofed": mofed,
    "fabricmanager": fabricmanager,
    "acs": acs,
    "gpudirect": gpudirect,
    "sriov": sriov,
    "secure_boot": secure_boot,
}


# -- the plan: what host_prep's fixes will do on this host ---------------------------------------------
def resolve_gpudirect(facts: Facts, setting: Any) -> bool:
    """``auto`` -> on when the host has NVIDIA GPUs and RDMA NICs; booleans (and their strings) as given."""
    if isinstance(setting, bool):
        return setting
    text = str(setting).strip().lower()
    if text == "auto":
        rdma = [n for n in facts.get("nics") or [] if n.get("rdma_device")]
        return bool(nvidia_gpus(facts) and rdma)
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise InvalidInput(f"gpudirect must be auto, true or false, got {setting}")


def plan(facts: Facts, policy: dict[str, Any], intent: Intent) -> dict[str, Any]:
    """What host_prep will fix on this host, from its policies (``auto`` follows the hardware facts):
    ``{nouveau, acs, fabricmanager, sriov, gpudirect, fixes}``."""
    gpus = nvidia_gpus(facts)
    nv_policy = policy.get("nouveau") or "skip"
    nouveau_state = {"blacklist": "present", "remove": "absent"}.get(nv_policy)
    if nv_policy == "auto" and gpus:
        nouveau_state = "present"
    acs_policy = policy.get("acs") or "skip"
    devices = []
    for i, text in enumerate(policy.get("acs_devices") or []):
        try:
            devices.append(_pci.normalize_address(text))
        except InvalidInput as exc:
            raise for_option(f"fix.acs_devices[{i}] (host_prep: host_prep_acs_devices[{i}])", exc) from None
    acs_state = {"disable": "disabled", "enable": "enabled"}.get(acs_policy)
    if acs_policy == "auto" and intent["gpudirect"] and any(b.get("acs") for b in facts.get("pcie_bridges") or []):
        acs_state = "disabled"
    fm_policy = policy.get("fabricmanager") or "skip"
    fm = fm_policy == "present" or (
        fm_policy == "auto" and bool(facts.get("nvswitches")) and intent["nvidia_driver"] == "host"
    )
    resolved = resolve_sriov(facts, intent["sriov"])[0]
    out = {
        "nouveau": nouveau_state,
        "acs": {"state": acs_state, "devices": devices} if acs_state else None,
        "fabricmanager": fm,
        "sriov": [{k: r[k] for k in ("pf", "address", "num_vfs")} for r in resolved],
        "gpudirect": intent["gpudirect"],
    }
    out["fixes"] = [f for f in FIXES if out[f]]
    return out


# -- evaluation ------------------------------------------------------------------------------------------
def evaluate(
    facts: Facts,
    intent: Intent,
    checks: Iterable[str] = CONCERNS,
    planned_fixes: Iterable[str] = (),
    managed: Iterable[str] | None = None,
) -> list[Finding]:
    """Run the rules named in ``checks``. A finding that a planned fix addresses becomes part of the plan:
    ``planned: true`` and at most a warning, never a failure. With ``managed`` (validate), only the findings of
    the concerns a role manages are kept."""
    full = {**DEFAULT_INTENT, **intent}
    planned, keep = set(planned_fixes), None if managed is None else set(managed)
    out = []
    for name in checks:
        if keep is not None and name not in keep:
            continue
        for f in RULES[name](facts, full):
            f["concern"] = name
            f["host"] = full["node"]
            f["planned"] = bool(f["fixed_by"] and f["fixed_by"] in planned)
            if f["planned"] and f["severity"] == "error":
                f["severity"] = "warning"
            out.append(f)
    return out


def summarize(findings: list[Finding]) -> dict[str, int]:
    return {s: sum(1 for f in findings if f["severity"] == s) for s in SEVERITIES}


def failing(findings: list[Finding], fail_on: str) -> list[Finding]:
    if fail_on == "never":
        return []
    levels = ("error",) if fail_on == "error" else ("error", "warning")
    return [f for f in findings if f["severity"] in levels and not f.get("planned")]


def describe(f: Finding) -> str:
    """One line: ``id (Kind name): cause. Evidence: a; b. Fix: fix`` - values, never Python reprs."""
    obj = f.get("object") or {}
    plan = " [planned: a fix in this run addresses it]" if f.get("planned") else ""
    evidence = "; ".join(f.get("evidence") or []) or "none"
    return f"{f['id']} ({obj.get('kind')} {obj.get('name')}): {f['cause']}{plan}. Evidence: {evidence}. Fix: {f['fix']}"
