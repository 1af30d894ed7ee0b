# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The GPUs and NVSwitches the collection supports, by PCI vendor/device ID. Data only: no I/O, no imports
beyond typing, so host modules, cluster-side rules and the sharing roles (MIG profile validation) share it.

GPU identity must not depend on the host's pci.ids: an old hwdata package does not know an H200 or a B200,
so gpu_host_facts looks here before it falls back to pci.ids.

Sources (checked 2026-11-23):
- Device IDs and chip names: the PCI ID database, https://github.com/pciutils/pciids ``pci.ids``
  (version 2026.08.22, commit c1c12547d626ebf05fd0223144ad87fab5e95d06), vendor 10de.
- NVSwitch device IDs per generation: NVIDIA open-gpu-kernel-modules
  ``src/common/nvswitch/kernel/nvswitch.c`` (``nvswitch_lr10_device_ids``: second generation, HGX A100;
  ``nvswitch_ls10_device_ids``: third generation, HGX H100/H200; IDs 0x22A8-0x22AF there are the PCI-PCI
  bridge and non-transparent-bridge functions of the same chip, not the managed endpoint, and are left out).
- Fourth-generation NVSwitch (HGX B200/B300): NVIDIA Fabric Manager User Guide release 2.3, section 1.3.2
  "Systems Using Fourth Generation NVSwitches": these switches are not PCI endpoints of the NVIDIA driver on
  the host (the nvswitch driver knows only LR10 and LS10); Fabric Manager reaches them with the NVLink
  Subnet Manager (NVLSM) through the NVLink management NIC. Neither pci.ids nor the driver lists a host PCI
  device ID for them, so the table records the generation with no ``device_ids`` and names the GPUs whose
  8-GPU baseboards use it (``nvswitch_generation`` of those GPUs).
- Memory: NVIDIA product datasheets (A100 40/80 GB, A30 24 GB, H100 SXM/PCIe 80 GB, H100 NVL 94 GB, H200
  and H200 NVL 141 GB, B200 180 GB as in DGX B200's 1,440 GB for 8 GPUs, B300 288 GB, L40/L40S 48 GB,
  L4 24 GB).
- MIG: NVIDIA Multi-Instance GPU User Guide, "Supported GPUs" (A100, A30, H100, H200, B200, B300; at most 7
  GPU instances, 4 on A30). Ada GPUs (L4, L40, L40S) have no MIG.
- Grace-Blackwell (checked 2026-11-24): GB200 is device 0x2941 and GB300 0x31c2, named ``NVIDIA GB200`` and
  ``NVIDIA GB300`` in the supported-GPU table of NVIDIA open-gpu-kernel-modules ``README.md`` (595.45.04, commit
  df1c9a3de2be4b130f4fc7680f7198193d8ac6ad) and ``GB100 [HGX GB200]`` / ``GB110 [GB300]`` in the pci.ids above.
  pci.ids also lists 0x31c3 ``GB110 [GB300]`` and 0x31a1 ``GB110 [GB300 MaxQ]``, which the driver's table does not
  name: left out (their product names and memory could not be verified). MIG profiles: the GPU Operator v26.7.0
  default-mig-parted-config names 0x294110DE (all-balanced 1g.23gb x2, 2g.47gb, 3g.93gb) and 0x31C210DE (all-1g.35gb
  7 per GPU; the "GB300" block 1g.35gb+me, 1g.70gb 4, 2g.70gb 3, 3g.139gb 2, 4g.139gb 1, 7g.278gb 1). For GB200 it
  names only the balanced layout and, with B200, all-1g.23gb and all-1g.23gb.me; 1g.47gb (4), 4g.93gb (1) and
  7g.186gb (1) are its unfiltered entries of those names and follow the 7-slice layout every Blackwell GPU has
  (B200: 1g.45gb 4, 4g.90gb 1, 7g.180gb 1); the MIG user guide's GB200 table itself was not reachable when this was
  written, so those three counts are inferred, not read. Memory: GB200 186 GB (NVIDIA: up to 372 GB HBM3e per GB200
  superchip of two GPUs, and the 7g.186gb full-GPU profile); GB300 288 GB (NVIDIA's Blackwell Ultra figure, as for
  B300; 7g.278gb is what MIG leaves usable), taken from NVIDIA's product pages as quoted by secondary sources, not
  from a GB300 datasheet read here. Neither has an NVSwitch on its baseboard: a GB200/GB300 compute tray (4 GPUs, 2
  superchips) reaches the NVLink Switch ASICs of separate NVLink switch trays, whose fabric the NVLink domain's Global
  Fabric Manager (NMX) manages, not a fabricmanager on the host (NVIDIA multi-node NVLink tuning guide, "Understanding
  Your Grace-Blackwell Systems"), so ``nvswitch_generation`` is None.

``model`` is the product name nvidia-smi and /proc/driver/nvidia print, so facts read from a host with the
driver loaded and facts from this table agree.
"""

from __future__ import annotations

from typing import Any

NVIDIA = "10de"

# (vendor_id, device_id) -> description; device IDs lower-case hex without 0x, as sysfs prints them.
GPUS: dict[tuple[str, str], dict[str, Any]] = {
    (NVIDIA, "20b0"): {
        "model": "NVIDIA A100-SXM4-40GB",
        "chip": "GA100",
        "architecture": "Ampere",
        "form_factor": "SXM4",
        "memory_gb": 40,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": 2,
    },
    (NVIDIA, "20b1"): {
        "model": "NVIDIA A100-PCIE-40GB",
        "chip": "GA100",
        "architecture": "Ampere",
        "form_factor": "PCIe",
        "memory_gb": 40,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": None,
    },
    (NVIDIA, "20b2"): {
        "model": "NVIDIA A100-SXM4-80GB",
        "chip": "GA100",
        "architecture": "Ampere",
        "form_factor": "SXM4",
        "memory_gb": 80,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": 2,
    },
    (NVIDIA, "20b5"): {
        "model": "NVIDIA A100 80GB PCIe",
        "chip": "GA100",
        "architecture": "Ampere",
        "form_factor": "PCIe",
        "memory_gb": 80,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": None,
    },
    (NVIDIA, "20b7"): {
        "model": "NVIDIA A30",
        "chip": "GA100",
        "architecture": "Ampere",
        "form_factor": "PCIe",
        "memory_gb": 24,
        "mig_capable": True,
        "mig_max_instances": 4,
        "nvswitch_generation": None,
    },
    (NVIDIA, "2330"): {
        "model": "NVIDIA H100 80GB HBM3",
        "chip": "GH100",
        "architecture": "Hopper",
        "form_factor": "SXM5",
        "memory_gb": 80,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": 3,
    },
    (NVIDIA, "2331"): {
        "model": "NVIDIA H100 PCIe",
        "chip": "GH100",
        "architecture": "Hopper",
        "form_factor": "PCIe",
        "memory_gb": 80,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": None,
    },
    (NVIDIA, "2321"): {
        "model": "NVIDIA H100 NVL",
        "chip": "GH100",
        "architecture": "Hopper",
        "form_factor": "PCIe (NVL)",
        "memory_gb": 94,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": None,
    },
    (NVIDIA, "2335"): {
        "model": "NVIDIA H200",
        "chip": "GH100",
        "architecture": "Hopper",
        "form_factor": "SXM5",
        "memory_gb": 141,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": 3,
    },
    (NVIDIA, "233b"): {
        "model": "NVIDIA H200 NVL",
        "chip": "GH100",
        "architecture": "Hopper",
        "form_factor": "PCIe (NVL)",
        "memory_gb": 141,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": None,
    },
    (NVIDIA, "2901"): {
        "model": "NVIDIA B200",
        "chip": "GB100",
        "architecture": "Blackwell",
        "form_factor": "SXM6",
        "memory_gb": 180,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": 4,
    },
    (NVIDIA, "3182"): {
        "model": "NVIDIA B300 SXM6 AC",
        "chip": "GB110",
        "architecture": "Blackwell",
        "form_factor": "SXM6",
        "memory_gb": 288,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": 4,
    },
    (NVIDIA, "2941"): {
        "model": "NVIDIA GB200",
        "chip": "GB100",
        "architecture": "Blackwell",
        "form_factor": "Grace Blackwell Superchip",
        "memory_gb": 186,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": None,  # NVLink switch trays of the rack, not on the host (see the docstring)
    },
    (NVIDIA, "31c2"): {
        "model": "NVIDIA GB300",
        "chip": "GB110",
        "architecture": "Blackwell",
        "form_factor": "Grace Blackwell Superchip",
        "memory_gb": 288,
        "mig_capable": True,
        "mig_max_instances": 7,
        "nvswitch_generation": None,
    },
    (NVIDIA, "26b9"): {
        "model": "NVIDIA L40S",
        "chip": "AD102",
        "architecture": "Ada Lovelace",
        "form_factor": "PCIe",
        "memory_gb": 48,
        "mig_capable": False,
        "mig_max_instances": 0,
        "nvswitch_generation": None,
    },
    (NVIDIA, "26b5"): {
        "model": "NVIDIA L40",
        "chip": "AD102",
        "architecture": "Ada Lovelace",
        "form_factor": "PCIe",
        "memory_gb": 48,
        "mig_capable": False,
        "mig_max_instances": 0,
        "nvswitch_generation": None,
    },
    (NVIDIA, "27b8"): {
        "model": "NVIDIA L4",
        "chip": "AD104",
        "architecture": "Ada Lovelace",
        "form_factor": "PCIe",
        "memory_gb": 24,
        "mig_capable": False,
        "mig_max_instances": 0,
        "nvswitch_generation": None,
    },
}
# A100 PCIe 40 GB ships with two device IDs (pci.ids: 20b1 and 20f1); one description serves both.
GPUS[(NVIDIA, "20f1")] = GPUS[(NVIDIA, "20b1")]

# NVSwitch generations: the PCI device IDs of the managed endpoint (class 0x0680) and the GPUs they serve.
NVSWITCH_GENERATIONS: dict[int, dict[str, Any]] = {
    2: {
        "codename": "LR10",
        "nvlink": 3,
        "baseboard": "HGX A100",
        "device_ids": ("1ae8",) + tuple(f"1af{d}" for d in "0123456789abcdef"),
        "model": "NVIDIA A100 NVSwitch",
    },
    3: {
        "codename": "LS10",
        "nvlink": 4,
        "baseboard": "HGX H100/H200",
        "device_ids": tuple(f"22a{d}" for d in "01234567"),
        "model": "NVIDIA H100 NVSwitch",
    },
    4: {
        "codename": None,
        "nvlink": 5,
        "baseboard": "HGX B200/B300",
        "device_ids": (),  # not a host PCI function: managed through NVLSM (see the module docstring)
        "model": "NVIDIA NVLink 5 Switch",
    },
}


# MIG profiles per GPU: profile name -> the most instances of it one GPU holds. Sources (checked 2026-11-23):
# NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles" (per product), cross-checked with the GPU
# Operator v26.7.0 asset assets/state-mig-manager/0400_configmap.yaml (default-mig-parted-config), whose
# device-filters name the PCI device IDs of each count (e.g. all-1g.10gb: 7 on 0x2330/0x2331/0x20b2/0x20b5,
# 4 on 0x20b0/0x20b1/0x20f1). mig-manager v0.15.0 (the GPU Operator v26.7.0 default) generates the config names
# from these profiles (NVIDIA/mig-parted pkg/mig/builder/builder.go, balanced.go): see mig_config_names().
_MIG_A100_40GB = {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1}
_MIG_80GB = {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}
_MIG_A30 = {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1}
_MIG_H100_NVL = {"1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1}
_MIG_H200 = {"1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1}
_MIG_B200 = {"1g.23gb": 7, "1g.23gb+me": 1, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1, "7g.180gb": 1}
_MIG_B300 = {
    "1g.34gb": 7,
    "1g.34gb+me": 1,
    "1g.67gb": 4,
    "2g.67gb": 3,
    "3g.135gb": 2,
    "4g.135gb": 1,
    "7g.269gb": 1,
}
# GB200, GB300: the GPU Operator v26.7.0 default-mig-parted-config (see the module docstring for what is inferred).
_MIG_GB200 = {"1g.23gb": 7, "1g.23gb+me": 1, "1g.47gb": 4, "2g.47gb": 3, "3g.93gb": 2, "4g.93gb": 1, "7g.186gb": 1}
_MIG_GB300 = {
    "1g.35gb": 7,
    "1g.35gb+me": 1,
    "1g.70gb": 4,
    "2g.70gb": 3,
    "3g.139gb": 2,
    "4g.139gb": 1,
    "7g.278gb": 1,
}
MIG_PROFILES: dict[tuple[str, str], dict[str, int]] = {
    (NVIDIA, "20b0"): _MIG_A100_40GB,
    (NVIDIA, "20b1"): _MIG_A100_40GB,
    (NVIDIA, "20f1"): _MIG_A100_40GB,
    (NVIDIA, "20b2"): _MIG_80GB,
    (NVIDIA, "20b5"): _MIG_80GB,
    (NVIDIA, "2330"): _MIG_80GB,
    (NVIDIA, "2331"): _MIG_80GB,
    (NVIDIA, "20b7"): _MIG_A30,
    (NVIDIA, "2321"): _MIG_H100_NVL,
    (NVIDIA, "2335"): _MIG_H200,
    (NVIDIA, "233b"): _MIG_H200,
    (NVIDIA, "2901"): _MIG_B200,
    (NVIDIA, "3182"): _MIG_B300,
    (NVIDIA, "2941"): _MIG_GB200,
    (NVIDIA, "31c2"): _MIG_GB300,
}


# Slices per MIG profile: profile -> (compute slices, memory slices), and the slices of one GPU. Source (checked
# 2026-11-23): NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles", the columns "Fraction of SMs" (n/7;
# n/4 on A30) and "Fraction of Memory" (n/8; n/4 on A30) of each product's table: e.g. H100 80GB 1g.10gb 1/7 SMs
# 1/8 memory, 1g.20gb 1/7 and 2/8, 3g.40gb 3/7 and 4/8, 7g.80gb 7/7 and 8/8. +me profiles take the slices of
# their base profile. The sums are a necessary condition for a layout (GPU instance placement can refuse some
# mixes that fit them, which mig-manager then reports as failed).
def _slices(small: str, large: str, two: str, three: str, four: str, seven: str) -> dict[str, tuple[int, int]]:
    return {
        small: (1, 1),
        small + "+me": (1, 1),
        large: (1, 2),
        two: (2, 2),
        three: (3, 4),
        four: (4, 4),
        seven: (7, 8),
    }


_SLICES_A100_40GB = _slices("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
_SLICES_80GB = _slices("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
_SLICES_H100_NVL = _slices("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")
_SLICES_H200 = _slices("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")
_SLICES_B200 = _slices("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb")
_SLICES_B300 = _slices("1g.34gb", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb")
_SLICES_GB200 = _slices("1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb")
_SLICES_GB300 = _slices("1g.35gb", "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb")
_SLICES_A30 = {"1g.6gb": (1, 1), "1g.6gb+me": (1, 1), "2g.12gb": (2, 2), "2g.12gb+me": (2, 2), "4g.24gb": (4, 4)}
_SLICES_BY_PROFILES = [
    (_MIG_A100_40GB, _SLICES_A100_40GB),
    (_MIG_80GB, _SLICES_80GB),
    (_MIG_H100_NVL, _SLICES_H100_NVL),
    (_MIG_H200, _SLICES_H200),
    (_MIG_B200, _SLICES_B200),
    (_MIG_B300, _SLICES_B300),
    (_MIG_GB200, _SLICES_GB200),
    (_MIG_GB300, _SLICES_GB300),
    (_MIG_A30, _SLICES_A30),
]


def mig_slices(vendor_id: str | None, device_id: str | None) -> tuple[dict[str, tuple[int, int]], tuple[int, int]]:
    """(profile -> (compute slices, memory slices), the GPU's (compute, memory) slices); ({}, (0, 0)) without MIG."""
    profiles = MIG_PROFILES.get(((vendor_id or "").lower(), (device_id or "").lower()))
    for table, slices in _SLICES_BY_PROFILES:
        if profiles is table:
            total = (4, 4) if table is _MIG_A30 else (7, 8)
            return dict(slices), total
    return {}, (0, 0)


# mig-parted balanced.go balancedFormula: slices of the GPU -> compute slices (the "Ng" of a profile) -> count
_BALANCED_FORMULA = {7: {1: 2, 2: 1, 3: 1}, 4: {1: 2, 2: 1}}


def mig_profiles(vendor_id: str | None, device_id: str | None) -> dict[str, int]:
    """The MIG profiles of a GPU (profile -> most instances per GPU); empty without MIG or for an unknown GPU."""
    return dict(MIG_PROFILES.get(((vendor_id or "").lower(), (device_id or "").lower()), {}))


def mig_config_names(vendor_id: str | None, device_id: str | None) -> list[str]:
    """The mig.config names mig-manager v0.15.0 generates on a node with this GPU (sorted): all-disabled,
    all-enabled, all-balanced (when the GPU's base profiles fit the balanced formula) and all-<profile> with '+'
    replaced by '.'. Empty for a GPU without MIG."""
    profiles = mig_profiles(vendor_id, device_id)
    if not profiles:
        return []
    names = {"all-disabled", "all-enabled"} | {"all-" + p.replace("+", ".") for p in profiles}
    if mig_balanced(vendor_id, device_id):
        names.add("all-balanced")
    return sorted(names)


def mig_balanced(vendor_id: str | None, device_id: str | None) -> dict[str, int]:
    """The MIG devices per GPU of mig-manager's generated ``all-balanced`` (profile -> count), empty when the GPU
    has none: mig-parted balanced.go takes, for each compute size of the formula, the base profile (no +me/-me
    attribute) with the highest instance count."""
    profiles = mig_profiles(vendor_id, device_id)
    if not profiles:
        return {}
    slots = max(int(p.split("g.", 1)[0]) for p in profiles)
    formula = _BALANCED_FORMULA.get(slots)
    if not formula:
        return {}
    out: dict[str, int] = {}
    for g, count in formula.items():
        base = [p for p in profiles if p.startswith(f"{g}g.") and "+" not in p and "-" not in p]
        if not base:
            return {}
        out[max(base, key=lambda p: profiles[p])] = count
    return out


def gpu(vendor_id: str | None, device_id: str | None) -> dict[str, Any] | None:
    """The table entry of a GPU (a copy), or None when the collection does not know the device."""
    entry = GPUS.get(((vendor_id or "").lower(), (device_id or "").lower()))
    return dict(entry) if entry else None


def nvswitch_generation(vendor_id: str | None, device_id: str | None) -> int | None:
    """The NVSwitch generation of a PCI device ID, or None."""
    if (vendor_id or "").lower() != NVIDIA:
        return None
    dev = (device_id or "").lower()
    for gen, entry in NVSWITCH_GENERATIONS.items():
        if dev in entry["device_ids"]:
            return gen
    return None


def nvswitch(vendor_id: str | None, device_id: str | None) -> dict[str, Any] | None:
    """The table entry of an NVSwitch (a copy, with its ``generation``), or None."""
    gen = nvswitch_generation(vendor_id, device_id)
    if gen is None:
        return None
    return {"generation": gen, **NVSWITCH_GENERATIONS[gen]}
