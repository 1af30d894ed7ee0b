"""A hardware profile's host state with defaults filled in, and the PCI topology derived from it.

Topology rules (deterministic; same profile -> same addresses):

- Endpoints come from `host.pci[]` in file order; each device is one PCI function (function 0).
- Units: GPU i forms a unit with NIC i (when there is one); NICs beyond the GPU count, storage and any
  other role are units of their own; the NVSwitches of one socket form one unit. A unit with a GPU or
  NVSwitches sits behind a PCIe switch (upstream port type 5, one downstream port type 6 per member) when
  `host.topology.switches` is true (the default), otherwise each member gets its own root port.
- Every unit hangs off its own host bridge `pci0000:RR` with a root port (type 4) at RR:01.0 (RR:0k.0 for
  more root ports). Units of a kind are split over the sockets in contiguous halves (GPU i goes to socket
  i * sockets // count); socket s owns buses s*256/sockets .. and gives each unit 16 buses starting at
  +0x10. Buses inside a unit: RR root bus, RR+1 switch upstream port, RR+2 downstream ports, RR+3+k the
  k-th member (no switch: RR+1+k behind root port RR:0(k+1).0). numa_node = socket.
- ACS: root ports and switch downstream ports carry an ACS capability. Its control register holds
  `host.topology.acs_ctrl.{root_port,downstream}` when given, else what Linux sets: SV|RR|CR|UF (0x001d)
  when an IOMMU is enabled, 0 otherwise.
- IOMMU: enabled when the command line has intel_iommu=on (Intel CPUs) or unless it has amd_iommu=off /
  iommu=off (AMD CPUs, on by default). Groups follow Linux's pci_device_group(): a function gets its own
  group when every port above it (root and downstream ports; upstream ports count as isolated) has
  SV|RR|CR|UF enabled in ACS Control, else it joins the group of its parent bridge.
- SR-IOV: NICs with `sriov_totalvfs` get the SR-IOV capability, first VF offset 1, stride 1, VF device id
  from the catalog (or `sriov_vf_device`).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from . import catalog
from .pciconfig import LINUX_ACS_FLAGS


class ProfileError(ValueError):
    pass


def _major(version: str) -> str:
    return version.split(".", 1)[0]


def host_state(profile: dict[str, Any]) -> dict[str, Any]:
    """The profile's `host:` with every optional host-state key filled in (see the README's schema)."""
    try:
        h = copy.deepcopy(profile["host"])
        rel = h["kernel_release"]
        h["os"]["id"], h["os"]["version_id"], h["cpu"]["vendor"], h["cpu"]["sockets"], h["pci"]  # noqa: B018
    except (KeyError, TypeError) as exc:
        raise ProfileError(f"hardware profile lacks host key {exc}") from exc
    name = profile.get("name", "custom")
    h["cpus"] = int(profile.get("node", {}).get("cpu", 8))
    uuid = hashlib.sha256(name.encode()).hexdigest()
    root_uuid = f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:32]}"
    h.setdefault("cmdline", f"BOOT_IMAGE=/boot/vmlinuz-{rel} root=UUID={root_uuid} ro quiet splash")
    h.setdefault("headers_installed", True)
    h.setdefault("nvidia_driver", None)
    h.setdefault("ofed", None)
    h.setdefault("secure_boot", None)
    h.setdefault("initramfs_tool", "update-initramfs" if h["os"]["id"] in ("ubuntu", "debian") else "dracut")
    h.setdefault("packages", {})
    h.setdefault("apt_available", {})
    h.setdefault("topology", {})
    fm = h.get("fabricmanager") or {}
    h["fabricmanager"] = {"installed": fm.get("installed"), "active": bool(fm.get("active"))}
    if h["initramfs_tool"] not in ("update-initramfs", "dracut"):
        raise ProfileError(f"host.initramfs_tool must be update-initramfs or dracut, not {h['initramfs_tool']!r}")
    if h["ofed"] is not None and (h["ofed"].get("kind") not in ("mlnx_ofed", "doca") or not h["ofed"].get("version")):
        raise ProfileError("host.ofed must be null or {kind: mlnx_ofed|doca, version: ...}")
    mods: list[dict[str, Any]] = []
    for m in h.get("modules_loaded") or []:
        entry = {"name": m, "users": 0} if isinstance(m, str) else {"name": m["name"], "users": int(m.get("users", 0))}
        entry["name"] = catalog.normalize_module(entry["name"])
        mods.append(entry)
    names = [m["name"] for m in mods]
    if h["nvidia_driver"] and "nvidia" not in names:
        mods.insert(0, {"name": "nvidia", "users": 0})
    if not h["nvidia_driver"] and any(n in catalog.NVIDIA for n in names):
        raise ProfileError("host.modules_loaded lists an NVIDIA module but host.nvidia_driver is null")
    if h["fabricmanager"]["active"] and not h["fabricmanager"]["installed"]:
        raise ProfileError("host.fabricmanager.active needs host.fabricmanager.installed")
    h["modules_loaded"] = mods
    # packages derived from the state (explicit host.packages entries win)
    pk: dict[str, str] = {}
    if h["headers_installed"]:
        base, _sep, abi = rel.partition("-")
        abi = abi.split("-", 1)[0]
        pk[f"linux-headers-{rel}"] = f"{base}-{abi}.{abi}"
    if h["nvidia_driver"] and not any(catalog.NVIDIA_DKMS_RE.match(p) for p in h["packages"]):
        br = _major(h["nvidia_driver"])
        for p in (f"nvidia-dkms-{br}", f"nvidia-kernel-common-{br}", f"nvidia-utils-{br}"):
            pk[p] = f"{h['nvidia_driver']}-0ubuntu1"
    if h["fabricmanager"]["installed"]:
        pk[f"nvidia-fabricmanager-{_major(h['fabricmanager']['installed'])}"] = f"{h['fabricmanager']['installed']}-1"
    if h["ofed"]:
        pk["mlnx-ofed-kernel-dkms"] = f"{h['ofed']['version']}-1"
        if h["ofed"]["kind"] == "doca":
            pk["doca-ofed"] = f"{h['ofed']['version']}-1"
    pk[h["initramfs_tool"].replace("update-initramfs", "initramfs-tools")] = pk.get("initramfs-tools", "0.140")
    pk.update({str(k): str(v) for k, v in h["packages"].items()})
    h["packages"] = dict(sorted(pk.items()))
    h["apt_available"] = {str(k): str(v) for k, v in h["apt_available"].items()}
    return h


def iommu_enabled(h: dict[str, Any]) -> bool:
    args = h["cmdline"].split()
    if h["cpu"]["vendor"] == "Intel":
        return "intel_iommu=on" in args
    return not ({"amd_iommu=off", "iommu=off"} & set(args))


def _addr(bus: int, dev: int = 0, fn: int = 0) -> str:
    return f"0000:{bus:02x}:{dev:02x}.{fn}"


def _acs_defaults(h: dict[str, Any]) -> dict[str, int]:
    on = LINUX_ACS_FLAGS if iommu_enabled(h) else 0
    given = (h.get("topology") or {}).get("acs_ctrl") or {}
    return {
        "root_port": int(str(given.get("root_port", f"{on:04x}")), 16),
        "downstream": int(str(given.get("downstream", f"{on:04x}")), 16),
    }


def topology(h: dict[str, Any]) -> list[dict[str, Any]]:
    """Every PCI function of the host (bridges and endpoints), parents before children."""
    sockets = max(1, int(h["cpu"]["sockets"]))
    topo = h.get("topology") or {}
    use_switch = bool(topo.get("switches", True))
    acs = _acs_defaults(h)
    by_role: dict[str, list[dict[str, Any]]] = {}
    for grp in h["pci"]:
        for _i in range(int(grp["count"])):
            dev = {k: v for k, v in grp.items() if k != "count"}
            dev["index"] = len(by_role.setdefault(grp["role"], []))
            by_role[grp["role"]].append(dev)
    gpus, nics, nvs = by_role.pop("gpu", []), by_role.pop("nic", []), by_role.pop("nvswitch", [])
    units: list[tuple[int, list[dict[str, Any]], bool]] = []
    for i, g in enumerate(gpus):
        units.append((i * sockets // len(gpus), [g] + ([nics[i]] if i < len(nics) else []), use_switch))
    rest = nics[len(gpus) :]
    for j, n in enumerate(rest):
        units.append((j * sockets // len(rest), [n], False))
    for s in range(sockets):
        members = [nv for k, nv in enumerate(nvs) if k * sockets // len(nvs) == s]
        if members:
            units.append((s, members, use_switch))
    for role in sorted(by_role):
        others = by_role[role]
        for j, o in enumerate(others):
            units.append((j * sockets // len(others), [o], False))
    units.sort(key=lambda u: u[0])

    span = 256 // sockets
    next_bus = {s: s * span + 0x10 for s in range(sockets)}
    rp_vendor, rp_device = catalog.ROOT_PORT.get(h["cpu"]["vendor"], catalog.ROOT_PORT["Intel"])
    out: list[dict[str, Any]] = []
    slot = 0

    def bridge(addr, kind, parent, root_bus, socket, vendor, device, sec, sub, link, port_no, acs_ctrl, slot_no):
        out.append(
            {
                "addr": addr,
                "kind": kind,
                "parent": parent,
                "root_bus": root_bus,
                "numa_node": socket,
                "vendor": vendor,
                "device": device,
                "class": "0604",
                "prog_if": 0,
                "subsystem_vendor": vendor,
                "subsystem_device": "0000",
                "link": list(link),
                "port_number": port_no,
                "secondary_bus": sec,
                "subordinate_bus": sub,
                "acs_ctrl": acs_ctrl,
                "slot": slot_no,
                "role": None,
            }
        )

    def endpoint(addr, parent, root_bus, socket, dev):
        info = catalog.DEVICES.get((str(dev["vendor"]).lower(), str(dev["device"]).lower()), {})
        sriov = None
        if dev.get("sriov_totalvfs"):
            vf_dev = str(dev.get("sriov_vf_device") or info.get("vf_device") or dev["device"])
            sriov = {"total": int(dev["sriov_totalvfs"]), "offset": 1, "stride": 1, "vf_device": vf_dev}
        out.append(
            {
                "addr": addr,
                "kind": "endpoint",
                "parent": parent,
                "root_bus": root_bus,
                "numa_node": socket,
                "vendor": str(dev["vendor"]).lower(),
                "device": str(dev["device"]).lower(),
                "class": str(dev["class"]).lower(),
                "prog_if": 0,
                "subsystem_vendor": str(dev.get("subsystem_vendor", dev["vendor"])).lower(),
                "subsystem_device": str(dev.get("subsystem_device", info.get("subsystem_device", dev["device"]))),
                "link": list(info.get("link", (4, 16))),
                "port_number": 0,
                "acs_ctrl": None,
                "slot": None,
                "role": dev["role"],
                "index": dev["index"],
                "model": dev.get("model", ""),
                "memory_mib": dev.get("memory_mib"),
                "link_layer": dev.get("link_layer"),
                "sriov": sriov,
                "hca": info.get("hca"),
            }
        )

    for socket, members, switched in units:
        rb = next_bus[socket]
        next_bus[socket] += 0x10
        if rb + 0x0F >= (socket + 1) * span or len(members) > 12:
            raise ProfileError(f"too many PCI devices for socket {socket}: simplify host.pci or add sockets")
        gen = max(
            catalog.DEVICES.get((str(m["vendor"]).lower(), str(m["device"]).lower()), {}).get("link", (4, 16))[0]
            for m in members
        )
        if switched:
            n = len(members)
            slot += 1
            rp = _addr(rb, 1)
            bridge(
                rp,
                "root_port",
                None,
                rb,
                socket,
                rp_vendor,
                rp_device,
                rb + 1,
                rb + 2 + n,
                (gen, 16),
                1,
                acs["root_port"],
                slot,
            )
            sw_v, sw_d = catalog.SWITCH.get(gen, catalog.SWITCH[4])
            up = _addr(rb + 1)
            bridge(up, "upstream", rp, rb, socket, sw_v, sw_d, rb + 2, rb + 2 + n, (gen, 16), 0, None, None)
            for k, m in enumerate(members):
                ds = _addr(rb + 2, k)
                slot += 1
                bridge(
                    ds,
                    "downstream",
                    up,
                    rb,
                    socket,
                    sw_v,
                    sw_d,
                    rb + 3 + k,
                    rb + 3 + k,
                    (gen, 16),
                    k + 1,
                    acs["downstream"],
                    slot,
                )
                endpoint(_addr(rb + 3 + k), ds, rb, socket, m)
        else:
            for k, m in enumerate(members):
                slot += 1
                rp = _addr(rb, k + 1)
                bridge(
                    rp,
                    "root_port",
                    None,
                    rb,
                    socket,
                    rp_vendor,
                    rp_device,
                    rb + 1 + k,
                    rb + 1 + k,
                    (gen, 16),
                    k + 1,
                    acs["root_port"],
                    slot,
                )
                endpoint(_addr(rb + 1 + k), rp, rb, socket, m)
    assign_iommu_groups(out, iommu_enabled(h))
    return out


def acs_isolated(dev: dict[str, Any]) -> bool:
    if dev["kind"] == "upstream":
        return True
    if dev["kind"] in ("root_port", "downstream"):
        return (dev.get("acs_ctrl") or 0) & LINUX_ACS_FLAGS == LINUX_ACS_FLAGS
    return True


def assign_iommu_groups(funcs: list[dict[str, Any]], enabled: bool, first: int = 0) -> None:
    """pci_device_group(), simplified: own group when the ACS path to the root is isolated."""
    by_addr = {f["addr"]: f for f in funcs}
    n = first
    for f in funcs:
        if not enabled:
            f["iommu_group"] = None
            continue
        parent = by_addr.get(f["parent"]) if f["parent"] else None
        path_ok, p = True, parent
        while p is not None:
            path_ok = path_ok and acs_isolated(p)
            p = by_addr.get(p["parent"]) if p["parent"] else None
        if parent is None or path_ok:
            f["iommu_group"] = n
            n += 1
        else:
            f["iommu_group"] = parent["iommu_group"]


def cpu_lists(cpus: int, sockets: int) -> dict[int, list[int]]:
    """Logical CPUs per NUMA node, numbered like Linux with SMT: node s has cores s*c..(s+1)*c-1 and
    their siblings offset by cpus/2."""
    sockets = max(1, sockets)
    if cpus % (2 * sockets):
        per = cpus // sockets
        return {s: list(range(s * per, (s + 1) * per)) for s in range(sockets)}
    cores = cpus // (2 * sockets)
    return {
        s: list(range(s * cores, (s + 1) * cores)) + list(range(cpus // 2 + s * cores, cpus // 2 + (s + 1) * cores))
        for s in range(sockets)
    }
