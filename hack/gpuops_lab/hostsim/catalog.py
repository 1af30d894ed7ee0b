"""Static knowledge of the simulated hosts: kernel modules, which driver binds which PCI device, device
details that the hardware profiles leave out (link speeds, subsystem and VF device ids), packages and
the systemd units they ship. Pure data and small pure functions; nothing here touches a file."""

from __future__ import annotations

import re

# Kernel modules a simulated kernel can load: name -> (path under /lib/modules/<release>/, size, direct deps).
# In-tree modules live under kernel/; DKMS-built ones (NVIDIA, MLNX_OFED/DOCA) under updates/dkms/.
IN_TREE: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "drm": ("kernel/drivers/gpu/drm/drm.ko", 622592, ()),
    "drm_kms_helper": ("kernel/drivers/gpu/drm/drm_kms_helper.ko", 311296, ("drm",)),
    "ttm": ("kernel/drivers/gpu/drm/ttm/ttm.ko", 86016, ("drm",)),
    "gpu_sched": ("kernel/drivers/gpu/drm/scheduler/gpu-sched.ko", 53248, ("drm",)),
    "drm_buddy": ("kernel/drivers/gpu/drm/drm_buddy.ko", 20480, ()),
    "i2c_algo_bit": ("kernel/drivers/i2c/algos/i2c-algo-bit.ko", 16384, ()),
    "wmi": ("kernel/drivers/platform/x86/wmi.ko", 32768, ()),
    "mxm_wmi": ("kernel/drivers/platform/x86/mxm-wmi.ko", 16384, ("wmi",)),
    "video": ("kernel/drivers/acpi/video.ko", 65536, ("wmi",)),
    "nouveau": (
        "kernel/drivers/gpu/drm/nouveau/nouveau.ko",
        2424832,
        ("drm", "drm_kms_helper", "ttm", "i2c_algo_bit", "mxm_wmi", "video", "wmi"),
    ),
    "amdgpu": (
        "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko",
        12185600,
        ("drm", "drm_kms_helper", "ttm", "gpu_sched", "drm_buddy", "i2c_algo_bit", "video"),
    ),
    "ib_core": ("kernel/drivers/infiniband/core/ib_core.ko", 434176, ()),
    "ib_uverbs": ("kernel/drivers/infiniband/core/ib_uverbs.ko", 163840, ("ib_core",)),
    "ib_umad": ("kernel/drivers/infiniband/core/ib_umad.ko", 40960, ("ib_core",)),
    "ib_cm": ("kernel/drivers/infiniband/core/ib_cm.ko", 131072, ("ib_core",)),
    "iw_cm": ("kernel/drivers/infiniband/core/iw_cm.ko", 49152, ("ib_core",)),
    "rdma_cm": ("kernel/drivers/infiniband/core/rdma_cm.ko", 122880, ("iw_cm", "ib_cm", "ib_core")),
    "rdma_ucm": ("kernel/drivers/infiniband/core/rdma_ucm.ko", 28672, ("rdma_cm", "ib_uverbs", "ib_core")),
    "ib_ipoib": ("kernel/drivers/infiniband/ulp/ipoib/ib_ipoib.ko", 135168, ("ib_cm", "ib_core")),
    "mlxfw": ("kernel/drivers/net/ethernet/mellanox/mlxfw/mlxfw.ko", 36864, ()),
    "psample": ("kernel/net/psample/psample.ko", 20480, ()),
    "tls": ("kernel/net/tls/tls.ko", 106496, ()),
    "pci_hyperv_intf": ("kernel/drivers/pci/controller/pci-hyperv-intf.ko", 16384, ()),
    "mlx5_core": (
        "kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko",
        1630208,
        ("mlxfw", "psample", "tls", "pci_hyperv_intf"),
    ),
    "mlx5_ib": ("kernel/drivers/infiniband/hw/mlx5/mlx5_ib.ko", 397312, ("ib_uverbs", "ib_core", "mlx5_core")),
    "ice": ("kernel/drivers/net/ethernet/intel/ice/ice.ko", 917504, ()),
    "iavf": ("kernel/drivers/net/ethernet/intel/iavf/iavf.ko", 184320, ()),
    "vfio": ("kernel/drivers/vfio/vfio.ko", 45056, ()),
    "irqbypass": ("kernel/virt/lib/irqbypass.ko", 16384, ()),
    "vfio_iommu_type1": ("kernel/drivers/vfio/vfio_iommu_type1.ko", 45056, ("vfio",)),
    "vfio_pci_core": ("kernel/drivers/vfio/pci/vfio-pci-core.ko", 94208, ("vfio", "irqbypass")),
    "vfio_pci": ("kernel/drivers/vfio/pci/vfio-pci.ko", 16384, ("vfio_pci_core", "vfio")),
}

# DKMS modules of the NVIDIA data-center driver (available once an nvidia-dkms-<branch> package is installed
# while the kernel headers are present). Taint "POE": proprietary, out-of-tree, unsigned.
NVIDIA: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "nvidia": ("updates/dkms/nvidia.ko", 56315904, ()),
    "nvidia_modeset": ("updates/dkms/nvidia-modeset.ko", 1548288, ("nvidia",)),
    "nvidia_uvm": ("updates/dkms/nvidia-uvm.ko", 1531904, ("nvidia",)),
    "nvidia_drm": ("updates/dkms/nvidia-drm.ko", 73728, ("nvidia_modeset", "drm_kms_helper", "drm")),
    "nvidia_peermem": ("updates/dkms/nvidia-peermem.ko", 16384, ("ib_core", "nvidia")),
}
# The RDMA stack MLNX_OFED / DOCA-OFED replace (built by DKMS, taint "OE", plus the mlx_compat shim).
OFED_PROVIDES = ("ib_core", "ib_uverbs", "ib_umad", "ib_cm", "iw_cm", "rdma_cm", "rdma_ucm", "ib_ipoib")
OFED_PROVIDES += ("mlxfw", "mlx5_core", "mlx5_ib")
OFED_EXTRA = {"mlx_compat": ("updates/dkms/mlx_compat.ko", 20480, ())}

# Users a module has besides other modules when the kernel loads it at boot (the framebuffer console
# holds a DRM driver), so `modprobe -r nouveau` fails with "in use" on a booted host.
BOOT_USERS = {"nouveau": 1, "amdgpu": 1}
# Modules the initramfs loads (their blacklisting needs a regenerated initramfs to take effect).
INITRAMFS_STAGE = ("nouveau", "amdgpu")

# module -> PCI driver name where they differ (the name under /sys/bus/pci/drivers/).
PCI_DRIVER_NAME = {"vfio_pci": "vfio-pci"}
NVSWITCH_DRIVER = "nvidia-nvswitch"  # nvidia.ko registers this second PCI driver for NVSwitch devices


def driver_candidates(vendor: str, pci_class: str, is_vf: bool = False) -> list[str]:
    """Modules whose PCI driver matches the device, in preference order (first loaded one binds)."""
    vendor, pci_class = vendor.lower(), pci_class.lower()
    if vendor == "10de" and pci_class.startswith("03"):
        return ["nvidia", "nouveau"]
    if vendor == "10de" and pci_class == "0680":
        return ["nvidia"]
    if vendor == "1002" and pci_class[:2] in ("03", "12"):
        return ["amdgpu"]
    if vendor == "15b3" and pci_class[:2] == "02":
        return ["mlx5_core"]
    if vendor == "8086" and pci_class[:2] == "02":
        return ["iavf"] if is_vf else ["ice"]
    return []


def pci_driver_name(module: str, vendor: str, pci_class: str) -> str:
    if module == "nvidia" and vendor.lower() == "10de" and pci_class == "0680":
        return NVSWITCH_DRIVER
    return PCI_DRIVER_NAME.get(module, module)


def module_of_driver(driver: str) -> str:
    if driver == NVSWITCH_DRIVER:
        return "nvidia"
    return {v: k for k, v in PCI_DRIVER_NAME.items()}.get(driver, driver)


# (vendor, device) -> details the profiles do not carry: link (gen, width), subsystem device, VF device id,
# InfiniBand HCA type.
DEVICES: dict[tuple[str, str], dict] = {
    ("10de", "2330"): {"link": (5, 16), "subsystem_device": "16c1"},  # H100 SXM5 80GB
    ("10de", "22a3"): {"link": (5, 2), "subsystem_device": "1796"},  # H100 NVSwitch
    ("10de", "26b9"): {"link": (4, 16), "subsystem_device": "1851"},  # L40S
    ("15b3", "1021"): {"link": (5, 16), "subsystem_device": "0041", "vf_device": "101e", "hca": "MT4129"},  # CX-7
    ("15b3", "101d"): {"link": (4, 16), "subsystem_device": "0016", "vf_device": "101e", "hca": "MT4125"},  # CX-6 Dx
    ("1002", "74a1"): {"link": (5, 16), "subsystem_device": "74a1"},  # MI300X
    ("8086", "1593"): {"link": (4, 16), "subsystem_device": "0002", "vf_device": "1889"},  # E810-C
}
# PCIe bridges: root ports by CPU vendor, switch ports by generation.
ROOT_PORT = {"Intel": ("8086", "352a"), "AMD": ("1022", "14ab")}
SWITCH = {5: ("1000", "c030"), 4: ("1000", "c010")}  # Broadcom PEX890xx (Gen5) / PEX880xx (Gen4)

LINK_SPEED_TEXT = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe"}

# Packages whose installation ships a systemd unit.
PACKAGE_UNITS = {
    re.compile(r"^nvidia-fabricmanager(-\d+)?$"): "nvidia-fabricmanager.service",
    re.compile(r"^nvidia-persistenced$|^nvidia-compute-utils-\d+$"): "nvidia-persistenced.service",
}
NVIDIA_DKMS_RE = re.compile(r"^nvidia-dkms-(\d+)(-open|-server|-server-open)?$")
FABRICMANAGER_RE = re.compile(r"^nvidia-fabricmanager(-\d+)?$")


def upstream_version(deb_version: str) -> str:
    """570.124.06-0ubuntu1 -> 570.124.06; 1:3.7.0-6 -> 3.7.0."""
    v = deb_version.split(":", 1)[-1]
    return v.rsplit("-", 1)[0] if "-" in v else v


def units_of(package: str) -> list[str]:
    return [unit for rx, unit in PACKAGE_UNITS.items() if rx.match(package)]


def nvidia_dkms_version(packages: dict[str, str]) -> str | None:
    for name, version in sorted(packages.items()):
        if NVIDIA_DKMS_RE.match(name):
            return upstream_version(version)
    return None


def module_catalog(packages: dict[str, str], ofed: dict | None, headers: bool) -> dict[str, dict]:
    """Every module this host's /lib/modules/<release> holds: name -> {path, size, deps, taint, version}.

    In-tree modules always; the NVIDIA DKMS modules when an nvidia-dkms package is installed and the
    headers are there to build them; OFED's DKMS modules replace the in-tree RDMA stack when OFED is."""
    cat = {n: {"path": p, "size": s, "deps": list(d), "taint": "", "version": None} for n, (p, s, d) in IN_TREE.items()}
    if ofed:
        for n, (p, s, d) in OFED_EXTRA.items():
            cat[n] = {"path": p, "size": s, "deps": list(d), "taint": "OE", "version": ofed["version"]}
        for n in OFED_PROVIDES:
            m = cat[n]
            m.update(path="updates/dkms/" + m["path"].rsplit("/", 1)[1], taint="OE", version=ofed["version"])
            m["deps"] = [*m["deps"], "mlx_compat"]
    nv = nvidia_dkms_version(packages)
    if nv and headers:
        for n, (p, s, d) in NVIDIA.items():
            cat[n] = {"path": p, "size": s, "deps": list(d), "taint": "POE", "version": nv}
    return cat


def transitive_deps(catalog: dict[str, dict], name: str) -> list[str]:
    """Dependencies of `name` in load order (deepest first), without `name`."""
    out: list[str] = []

    def visit(n: str) -> None:
        for d in catalog[n]["deps"]:
            if d not in out:
                visit(d)
                if d not in out:
                    out.append(d)

    visit(name)
    return out


def normalize_module(name: str) -> str:
    return name.strip().replace("-", "_")
