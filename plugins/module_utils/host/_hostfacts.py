# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Gathering of ``gpuops_host`` facts from /sys, /proc, /lib/modules and a few read-only commands."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.host import _gpu_catalog, _kmod, _pci, _pkg
from ansible_collections.gpuops.platform.plugins.module_utils.host._service import Systemd

ACCELERATOR_CLASSES = {
    "10de": ("0300", "0302"),  # NVIDIA VGA / 3D controller
    "1002": ("0300", "0380", "1200"),  # AMD display / processing accelerator (Instinct)
    "1da3": ("1200",),  # Intel Gaudi (Habana)
}
NVSWITCH = ("10de", "0680")  # NVIDIA, class "bridge: other"
RDMA_VENDORS = ("15b3",)  # NVIDIA/Mellanox ConnectX, BlueField
FM_SERVICE = "nvidia-fabricmanager.service"
FM_PACKAGE_RE = re.compile(r"^nvidia-fabric-?manager(-[0-9]+)?\Z")
SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
NV_VERSION_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)")
IOMMU_KEYS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough", "iommu.strict")


# -- PCI inventory (no commands; also used by pcie_acs) -------------------------------------------
def role_of(dev: Mapping[str, Any]) -> str | None:
    vendor, klass = dev["vendor_id"] or "", (dev["class"] or "")[:4]
    if dev["is_virtfn"]:
        return None
    if klass in ACCELERATOR_CLASSES.get(vendor, ()):
        return "accelerator"
    if (vendor, klass) == NVSWITCH:
        return "nvswitch"
    if klass.startswith("02"):
        return "nic"
    return None


def _nic_details(fs: Any, dev: Mapping[str, Any]) -> dict[str, Any]:
    base = _pci.device_path(dev["address"])
    netdevs = fs.listdir(base + "/net")
    for child in fs.listdir(base):  # virtio-net puts the netdev under the virtio device: <pci>/virtio0/net/eth0
        if child.startswith("virtio") and child[6:].isdigit():
            netdevs += fs.listdir(f"{base}/{child}/net")
    rdma = fs.listdir(base + "/infiniband")
    link_layer = None
    if rdma:
        link_layer = fs.read_attr(f"{base}/infiniband/{rdma[0]}/ports/1/link_layer")
    if not link_layer:
        link_layer = {"0207": "InfiniBand", "0200": "Ethernet"}.get((dev["class"] or "")[:4])
    total = fs.read_attr(base + "/sriov_totalvfs")
    num = fs.read_attr(base + "/sriov_numvfs")
    return {
        "netdevs": netdevs,
        "netdev": netdevs[0] if netdevs else None,
        "rdma_device": rdma[0] if rdma else None,
        "link_layer": link_layer,
        "sriov_totalvfs": int(total) if total and total.isdigit() else None,
        "sriov_numvfs": int(num) if num and num.isdigit() else None,
    }


def is_rdma_nic(nic: Mapping[str, Any]) -> bool:
    return (
        bool(nic.get("rdma_device")) or nic.get("vendor_id") in RDMA_VENDORS or (nic.get("class") or "")[:4] == "0207"
    )


def pci_inventory(fs: Any, ids: _pci.PciIds | None = None) -> dict[str, list[dict[str, Any]]]:
    """{accelerators, nvswitches, nics}: lists of device dicts, sorted by address."""
    out: dict[str, list[dict[str, Any]]] = {"accelerators": [], "nvswitches": [], "nics": []}
    for address in _pci.list_addresses(fs):
        dev = _pci.read_device(fs, address)
        role = role_of(dev)
        if role is None:
            continue
        dev.pop("is_virtfn")
        dev["model"] = _model_name(fs, dev, ids)
        if role == "accelerator":
            dev.update(_gpu_details(dev))
        elif role == "nvswitch":
            entry = _gpu_catalog.nvswitch(dev["vendor_id"], dev["device_id"])
            dev["generation"] = entry["generation"] if entry else None
        if role == "nic":
            dev.update(_nic_details(fs, dev))
        out[role + ("es" if role == "nvswitch" else "s")].append(dev)
    return out


def _gpu_details(dev: Mapping[str, Any]) -> dict[str, Any]:
    """Architecture, memory and MIG capability from the collection's GPU table (null when not listed)."""
    entry = _gpu_catalog.gpu(dev["vendor_id"], dev["device_id"]) or {}
    return {k: entry.get(k) for k in ("architecture", "memory_gb", "mig_capable")}


def _model_name(fs: Any, dev: Mapping[str, Any], ids: _pci.PciIds | None) -> str | None:
    """The driver's name for the device, else the collection's GPU/NVSwitch table, else the host's pci.ids
    (which may predate the device)."""
    info = fs.read_text("/proc/driver/nvidia/gpus/{}/information".format(dev["address"]))
    for line in (info or "").splitlines():
        if line.startswith("Model:"):
            return line.split(":", 1)[1].strip()
    product = fs.read_attr(_pci.device_path(dev["address"]) + "/product_name")
    if product:
        return product
    entry = _gpu_catalog.gpu(dev["vendor_id"], dev["device_id"]) or _gpu_catalog.nvswitch(
        dev["vendor_id"], dev["device_id"]
    )
    if entry:
        return entry["model"]
    return ids.device_name(dev["vendor_id"], dev["device_id"]) if ids else None


def bridge_paths(fs: Any, endpoints: Iterable[str]) -> list[dict[str, Any]]:
    """The bridges/switch ports upstream of ``endpoints`` (addresses), each once, with ACS state."""
    bridges = {}
    for endpoint in endpoints:
        for address in _pci.upstream_chain(fs, endpoint):
            if address not in bridges:
                bridges[address] = _bridge(fs, address)
            bridges[address]["downstream"].append(endpoint)
    return [bridges[a] for a in sorted(bridges)]


def _bridge(fs: Any, address: str) -> dict[str, Any]:
    dev = _pci.read_device(fs, address)
    cfg = _pci.read_config(fs, address)
    acs = _pci.acs_registers(cfg)
    return {
        "address": address,
        "vendor_id": dev["vendor_id"],
        "device_id": dev["device_id"],
        "port_type": _pci.port_type(cfg),
        "config_readable": len(cfg) >= _pci.CONFIG_EXTENDED_SIZE,
        "acs": None
        if acs is None
        else {
            "offset": f"0x{acs[0]:03x}",
            "capability": f"0x{acs[1]:04x}",
            "control": f"0x{acs[2]:04x}",
            "enabled": acs[2] != 0,
        },
        "downstream": [],
    }


# -- kernel, modules, software --------------------------------------------------------------------
def kernel_facts(fs: Any) -> dict[str, Any]:
    release = fs.read_attr("/proc/sys/kernel/osrelease")
    build = f"/lib/modules/{release}/build"
    real = fs.realpath(build) if release else None
    return {
        "release": release,
        "headers_path": real if real and fs.exists(real + "/Makefile") else None,
        "headers_installed": bool(real and fs.exists(real + "/Makefile")),
    }


def nvidia_driver_facts(fs: Any, runner: Any, modules: Any) -> dict[str, Any]:
    loaded = "nvidia" in modules
    text = fs.read_text("/proc/driver/nvidia/version") or ""
    m = NV_VERSION_RE.search(text)
    version = m.group(1) if m else (fs.read_attr("/sys/module/nvidia/version") if loaded else None)
    flavor = None
    if text:
        flavor = "open" if "Open Kernel Module" in text else "proprietary"
    return {
        "loaded": loaded,
        "version": version if loaded else None,
        "kernel_module_flavor": flavor,
        "installed_version": _kmod.installed_version(runner, "nvidia"),
    }


def ofed_facts(runner: Any, modules: Any) -> dict[str, Any]:
    """MLNX_OFED (``MLNX_OFED_LINUX-24.10-1.1.4.0:``), DOCA-OFED (``OFED-internal-25.01-0.6.0:``) from
    ``ofed_info -s``; without ofed_info, ``inbox`` when the kernel's own mlx5/ib_core drivers are loaded."""
    if runner.which("ofed_info"):
        res = runner.run("ofed_info", ["-s"], check=False)
        raw = res.out.strip().splitlines()[0].strip() if res.ok and res.out.strip() else ""
        m = re.match(r"MLNX_OFED_LINUX-(\S+?):?\Z", raw)
        if m:
            return {"flavor": "mlnx_ofed", "version": m.group(1), "raw": raw}
        m = re.match(r"OFED-internal-(\S+?):?\Z", raw)
        if m:
            return {"flavor": "doca_ofed", "version": m.group(1), "raw": raw}
        if raw:
            return {"flavor": "unknown", "version": None, "raw": raw}
    if "mlx5_core" in modules or "ib_core" in modules:
        return {"flavor": "inbox", "version": None, "raw": None}
    return {"flavor": "none", "version": None, "raw": None}


def fabricmanager_facts(runner: Any) -> dict[str, Any]:
    pkgs = {}
    if runner.which("dpkg-query"):
        pkgs = _pkg.installed(runner, "nvidia-fabricmanager*")
    elif runner.which("rpm"):
        pkgs = _pkg.installed(runner, "nvidia-fabric-manager")
        pkgs.update(_pkg.installed(runner, "nvidia-fabricmanager"))
    pkgs = {k: v for k, v in pkgs.items() if FM_PACKAGE_RE.match(k)}  # not -dev/-devel packages
    name: Any = sorted(pkgs)[-1] if pkgs else None
    svc = Systemd(runner).status(FM_SERVICE)
    return {
        "installed": bool(name),
        "package": name,
        "package_version": pkgs.get(name),
        "version": _pkg.upstream_version(pkgs.get(name)),
        "active": svc["active"],
        "enabled": svc["enabled"],
    }


def iommu_facts(fs: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    groups = [g for g in fs.listdir("/sys/kernel/iommu_groups") if g.isdigit()]
    domain = fs.read_attr(f"/sys/kernel/iommu_groups/{sorted(groups, key=int)[0]}/type") if groups else None
    cmd = {k: params[k] for k in IOMMU_KEYS if k in params}
    passthrough = None
    if groups:
        if domain:
            passthrough = domain == "identity"
        else:
            passthrough = cmd.get("iommu") == "pt" or cmd.get("iommu.passthrough") == "1"
    return {
        "cmdline": cmd,
        "enabled": bool(groups),
        "groups": len(groups),
        "default_domain": domain,
        "passthrough": passthrough,
    }


def secure_boot_facts(fs: Any) -> dict[str, Any]:
    if not fs.isdir("/sys/firmware/efi"):
        return {"efi": False, "state": "disabled"}
    data = fs.read_bytes(SECURE_BOOT_VAR)
    if data is None or len(data) < 5:
        return {"efi": True, "state": "unknown"}
    return {"efi": True, "state": "enabled" if data[4] == 1 else "disabled"}


def gather(fs: Any, runner: Any) -> dict[str, Any]:
    """All gpuops_host facts (reads only; commands are read-only queries)."""
    ids = _pci.PciIds(fs)
    inv = pci_inventory(fs, ids)
    modules = _kmod.loaded_modules(fs)
    params = _kmod.parse_cmdline(fs.read_text(_kmod.PROC_CMDLINE))
    endpoints = [d["address"] for d in inv["accelerators"]] + [n["address"] for n in inv["nics"] if is_rdma_nic(n)]
    nouveau = _kmod.module_usage(fs, modules, "nouveau")
    sources = _kmod.blacklist_sources(fs, "nouveau", params)
    nouveau.update({"blacklisted": bool(sources), "blacklist_sources": sources})
    facts = {
        "kernel": kernel_facts(fs),
        "accelerators": inv["accelerators"],
        "nvswitches": inv["nvswitches"],
        "nics": inv["nics"],
        "pcie_bridges": bridge_paths(fs, endpoints),
        "nouveau": nouveau,
        "nvidia_driver": nvidia_driver_facts(fs, runner, modules),
        "nvidia_peermem": {"loaded": "nvidia_peermem" in modules},
        "ofed": ofed_facts(runner, modules),
        "fabricmanager": fabricmanager_facts(runner),
        "iommu": iommu_facts(fs, params),
        "secure_boot": secure_boot_facts(fs),
    }
    return facts
