"""Writers of the simulated sysfs objects: PCI functions, IOMMU groups, network and RDMA devices, PCI
drivers and modules. Each takes a `Host` (tree or in-namespace view) and host-absolute paths."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from . import catalog, pciconfig
from .hostfs import Host, link, read, remove, write

PCI_DEVICES = "/sys/bus/pci/devices"
PCI_DRIVERS = "/sys/bus/pci/drivers"
IOMMU_GROUPS = "/sys/kernel/iommu_groups"
CLASS_NET = "/sys/class/net"
CLASS_IB = "/sys/class/infiniband"
RESOURCE_LINES = 13  # 6 BARs, expansion ROM, 6 IOV BARs


def parse_addr(addr: str) -> tuple[int, int, int]:
    _dom, bus, devfn = addr.split(":")
    dev, fn = devfn.split(".")
    return int(bus, 16), int(dev, 16), int(fn, 16)


def rid(addr: str) -> int:
    bus, dev, fn = parse_addr(addr)
    return (bus << 8) | (dev << 3) | fn


def addr_of_rid(r: int) -> str:
    return f"0000:{(r >> 8) & 0xFF:02x}:{(r >> 3) & 0x1F:02x}.{r & 0x7}"


def cpumask(cpus: list[int], total: int) -> str:
    mask = sum(1 << c for c in cpus)
    groups = max(1, (total + 31) // 32)
    return ",".join(f"{(mask >> (32 * i)) & 0xFFFFFFFF:08x}" for i in reversed(range(groups)))


def cpulist(cpus: list[int]) -> str:
    out, start, prev = [], None, None
    for c in sorted(cpus) + [None]:
        if start is None:
            start = prev = c
        elif c is not None and c == prev + 1:
            prev = c
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = c
    return ",".join(out)


def _bars(f: dict[str, Any]) -> list[tuple[int, int, bool]]:
    if f["kind"] != "endpoint":
        return []
    r = rid(f["addr"])
    bar0 = (0x3000 << 32) + r * 0x0200_0000
    if f.get("role") == "gpu":
        return [(bar0, 16 << 20, False), ((1 << 45) + r * (1 << 36), 1 << 36, True)]
    return [(bar0, 32 << 20, True)]


def config_spec(f: dict[str, Any]) -> pciconfig.Spec:
    bus, _dev, _fn = parse_addr(f["addr"])
    sriov = dict(f["sriov"], vf_device=int(f["sriov"]["vf_device"], 16), num=0) if f.get("sriov") else None
    return pciconfig.Spec(
        vendor=int(f["vendor"], 16),
        device=int(f["device"], 16),
        class_code=(int(f["class"], 16) << 8) | int(f.get("prog_if", 0)),
        port_type="endpoint" if f["kind"] in ("endpoint", "vf") else f["kind"],
        subsystem_vendor=int(f["subsystem_vendor"], 16),
        subsystem_device=int(f["subsystem_device"], 16),
        link_speed=f["link"][0],
        link_width=f["link"][1],
        port_number=f.get("port_number", 0),
        slot=f.get("slot"),
        primary_bus=bus,
        secondary_bus=f.get("secondary_bus", 0),
        subordinate_bus=f.get("subordinate_bus", 0),
        acs_ctrl=f.get("acs_ctrl"),
        sriov=sriov,
        is_vf=f["kind"] == "vf",
        bars=_bars(f),
    )


def write_function(host: Host, f: dict[str, Any], cpus: dict[int, list[int]], total_cpus: int) -> Path:
    """The PCI function's directory under /sys/devices, its /sys/bus/pci/devices link, its IOMMU group."""
    d = host.p("/sys/" + f["sysfs"])
    d.mkdir(parents=True, exist_ok=True)
    pci_class = f["class"]
    full_class = (int(pci_class, 16) << 8) | int(f.get("prog_if", 0))
    v, dv, sv, sd = (f[k].upper() for k in ("vendor", "device", "subsystem_vendor", "subsystem_device"))
    bc, sc, pi = pci_class[:2].upper(), pci_class[2:].upper(), f"{int(f.get('prog_if', 0)):02X}"
    modalias = f"pci:v0000{v}d0000{dv}sv0000{sv}sd0000{sd}bc{bc}sc{sc}i{pi}"
    node = f["numa_node"]
    speed, width = f["link"]
    files = {
        "vendor": f"0x{f['vendor']}",
        "device": f"0x{f['device']}",
        "class": f"0x{full_class:06x}",
        "subsystem_vendor": f"0x{f['subsystem_vendor']}",
        "subsystem_device": f"0x{f['subsystem_device']}",
        "revision": "0xa1",
        "numa_node": str(node),
        "local_cpus": cpumask(cpus.get(node, []), total_cpus),
        "local_cpulist": cpulist(cpus.get(node, [])),
        "irq": str(0 if f["kind"] == "vf" else 24 + rid(f["addr"]) % 200),
        "enable": "1",
        "current_link_speed": catalog.LINK_SPEED_TEXT[speed],
        "current_link_width": str(width),
        "max_link_speed": catalog.LINK_SPEED_TEXT[speed],
        "max_link_width": str(width),
        "modalias": modalias,
        "uevent": (
            f"PCI_CLASS={full_class:X}\nPCI_ID={v}:{dv}\nPCI_SUBSYS_ID={sv}:{sd}\n"
            f"PCI_SLOT_NAME={f['addr']}\nMODALIAS={modalias}"
        ),
        "driver_override": "(null)",
        "d3cold_allowed": "1",
        "broken_parity_status": "0",
        "msi_bus": "1",
        "ari_enabled": "0",
    }
    if f["kind"] in ("root_port", "upstream", "downstream"):
        files["secondary_bus_number"] = str(f["secondary_bus"])
        files["subordinate_bus_number"] = str(f["subordinate_bus"])
    if f.get("sriov"):
        s = f["sriov"]
        files.update(
            sriov_totalvfs=str(s["total"]),
            sriov_numvfs="0",
            sriov_offset=str(s["offset"]),
            sriov_stride=str(s["stride"]),
            sriov_vf_device=s["vf_device"],
            sriov_drivers_autoprobe="1",
        )
    for name, text in files.items():
        write(d / name, text + "\n")
    for name in ("remove", "rescan") + (("reset",) if f["kind"] in ("endpoint", "vf") else ()):
        write(d / name, "", 0o200)
    res = ["0x0000000000000000 0x0000000000000000 0x0000000000000000"] * RESOURCE_LINES
    for i, (addr, size, pref) in enumerate(_bars(f)):
        flags = 0x0014220C if pref else 0x00140204
        res[2 * i] = f"0x{addr:016x} 0x{addr + size - 1:016x} 0x{flags:016x}"
    write(d / "resource", "\n".join(res) + "\n")
    write(d / "config", pciconfig.build(config_spec(f)), 0o644)
    link(d / "subsystem", host.p("/sys/bus/pci"))
    link(host.p(f"{PCI_DEVICES}/{f['addr']}"), d)
    if f.get("iommu_group") is not None:
        join_iommu_group(host, f["addr"], d, f["iommu_group"])
    return d


def join_iommu_group(host: Host, addr: str, dev_dir: Path, group: int) -> None:
    g = host.p(f"{IOMMU_GROUPS}/{group}")
    if not g.exists():
        pt = "iommu=pt" in read(host.p("/proc/cmdline")).split()
        write(g / "type", ("identity" if pt else "DMA-FQ") + "\n")
        write(g / "reserved_regions", "0x00000000fee00000 0x00000000feefffff msi\n")
    link(g / "devices" / addr, dev_dir)
    link(dev_dir / "iommu_group", g)


def leave_iommu_group(host: Host, addr: str, dev_dir: Path) -> None:
    g = dev_dir / "iommu_group"
    if g.is_symlink():
        gdir = host.p(IOMMU_GROUPS) / Path(g.readlink()).name
        remove(gdir / "devices" / addr)
        if gdir.is_dir() and not any((gdir / "devices").iterdir()):
            remove(gdir)
        remove(g)


def mac(seed: str, oui: str) -> str:
    h = hashlib.sha256(seed.encode()).digest()
    return oui + ":" + ":".join(f"{b:02x}" for b in h[:3])


def guid(seed: str) -> str:
    h = hashlib.sha256(("guid" + seed).encode()).hexdigest()
    return ":".join(h[i : i + 4] for i in range(0, 16, 4))


def ifname(addr: str, kind: str, port_name: bool) -> str:
    """systemd's predictable name by PCI path: en/ib p<bus>s<slot>[f<fn>][np0] (bus and slot decimal)."""
    bus, dev, fn = parse_addr(addr)
    name = f"{'ib' if kind == 'ib' else 'en'}p{bus}s{dev}" + (f"f{fn}" if fn else "")
    return name + ("np0" if port_name else "")


def add_netdev(
    host: Host,
    dev_dir: Path,
    name: str,
    *,
    infiniband: bool,
    ifindex: int,
    seed: str,
    oui: str,
    port_name: str | None,
    speed: int,
) -> None:
    d = dev_dir / "net" / name
    if infiniband:
        gb = guid(seed).replace(":", "")
        address = "00:00:10:87:fe:80:00:00:00:00:00:00:" + ":".join(gb[i : i + 2] for i in range(0, 16, 2))
    else:
        address = mac(seed, oui)
    files = {
        "address": address,
        "addr_len": "20" if infiniband else "6",
        "broadcast": "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"
        if infiniband
        else "ff:ff:ff:ff:ff:ff",
        "mtu": "4092" if infiniband else "1500",
        "type": "32" if infiniband else "1",
        "operstate": "up",
        "carrier": "1",
        "ifindex": str(ifindex),
        "iflink": str(ifindex),
        "dev_id": "0x0",
        "dev_port": "0",
        "speed": str(speed),
        "duplex": "full",
        "flags": "0x1003",
        "tx_queue_len": "256" if infiniband else "1000",
        "uevent": f"INTERFACE={name}\nIFINDEX={ifindex}",
    }
    if port_name:
        files["phys_port_name"] = port_name
    for k, v in files.items():
        write(d / k, v + "\n")
    link(d / "device", dev_dir)
    link(d / "subsystem", host.p("/sys/class/net"))
    link(host.p(f"{CLASS_NET}/{name}"), d)


def remove_netdevs(host: Host, dev_dir: Path) -> list[str]:
    gone = []
    net = dev_dir / "net"
    if net.is_dir():
        for n in net.iterdir():
            remove(host.p(f"{CLASS_NET}/{n.name}"))
            gone.append(n.name)
        remove(net)
    return gone


def add_ibdev(host: Host, dev_dir: Path, name: str, *, link_layer: str, hca: str, seed: str) -> None:
    d = dev_dir / "infiniband" / name
    ib = link_layer == "InfiniBand"
    g = guid(seed)
    files = {
        "node_type": "1: CA",
        "hca_type": hca,
        "fw_ver": "28.43.1014",
        "board_id": "MT_0000000838",
        "node_guid": g,
        "sys_image_guid": g,
        "node_desc": f"{name} HCA-1",
        "ports/1/link_layer": link_layer,
        "ports/1/state": "4: ACTIVE",
        "ports/1/phys_state": "5: LinkUp",
        "ports/1/rate": "400 Gb/sec (4X NDR)" if ib else "100 Gb/sec (4X EDR)",
        "ports/1/lid": "0x1" if ib else "0x0",
        "ports/1/sm_lid": "0x1" if ib else "0x0",
        "ports/1/cap_mask": "0xa751e848" if ib else "0x00010000",
        "ports/1/gids/0": "fe80:0000:0000:0000:" + g,
    }
    for k, v in files.items():
        write(d / k, v + "\n")
    link(d / "device", dev_dir)
    link(host.p(f"{CLASS_IB}/{name}"), d)


def remove_ibdevs(host: Host, dev_dir: Path) -> list[str]:
    gone = []
    ib = dev_dir / "infiniband"
    if ib.is_dir():
        for n in ib.iterdir():
            remove(host.p(f"{CLASS_IB}/{n.name}"))
            gone.append(n.name)
        remove(ib)
    return gone


def ensure_driver_dir(host: Host, driver: str, module: str) -> Path:
    d = host.p(f"{PCI_DRIVERS}/{driver}")
    if not d.is_dir():
        for name in ("bind", "unbind", "new_id", "remove_id"):
            write(d / name, "", 0o200)
        write(d / "uevent", "", 0o200)
        link(d / "module", host.p(f"/sys/module/{module}"))
    return d


def bind(host: Host, addr: str, dev_dir: Path, driver: str, module: str) -> None:
    d = ensure_driver_dir(host, driver, module)
    link(d / addr, dev_dir)
    link(dev_dir / "driver", d)


def unbind(host: Host, addr: str, dev_dir: Path) -> str | None:
    drv = dev_dir / "driver"
    if not drv.is_symlink():
        return None
    name = Path(drv.readlink()).name
    remove(host.p(f"{PCI_DRIVERS}/{name}/{addr}"))
    remove(drv)
    return name
