# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The network_operator role's host rules: its device selectors against the NICs of the hosts' ``gpuops_host`` facts
(a selector that matches no NIC, a NIC no selector matches) and the MOFED / DOCA driver against the hosts' kernels.
Pure functions (no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.host import _host_rules
from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs import show
from ansible_collections.gpuops.platform.plugins.module_utils.network._network import (
    LINK_TYPES,
    MELLANOX,
    RDMA_SELECTORS,
    Finding,
    _strings,
    _var,
    config,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._network_ready import (
    _list,
)


# -- host rules: selectors against the hosts' NICs, MOFED ------------------------------------------------
def _nics(facts: Any) -> list[dict[str, Any]]:
    """A host's NICs from its ``gpuops_host`` facts (or the ``nics`` list itself)."""
    nics = facts.get("nics") if isinstance(facts, Mapping) else facts
    return [dict(n) for n in _list(nics) if isinstance(n, Mapping)]


def _has_nvidia_nic(nics: Sequence[Mapping[str, Any]]) -> bool:
    """What the operands' node selector (feature.node.kubernetes.io/pci-15b3.present) sees: a 15b3 NIC of class
    0200 or 0207."""
    return any(n.get("vendor_id") == MELLANOX and str(n.get("class") or "")[:4] in ("0200", "0207") for n in nics)


def nic_matches(selector: Mapping[str, Any], nic: Mapping[str, Any]) -> bool:
    """The device plugins' filter: every selector key given must match (AND); one value of a key suffices (OR).
    ``ifNames`` matches the NIC's first netdev (what the RDMA shared plugin reads), ``pfNames`` any netdev."""
    netdevs = [str(d) for d in _list(nic.get("netdevs"))] or ([str(nic["netdev"])] if nic.get("netdev") else [])
    tests = {
        "vendors": lambda v: nic.get("vendor_id") in v,
        "deviceIDs": lambda v: nic.get("device_id") in v,
        "drivers": lambda v: nic.get("driver") in v,
        "ifNames": lambda v: bool(netdevs) and netdevs[0] in v,
        "pfNames": lambda v: any(d in [x.split("#")[0] for x in v] for d in netdevs),
        "rootDevices": lambda v: nic.get("address") in v,
        "linkTypes": lambda v: LINK_TYPES.get(str(nic.get("link_layer"))) in v,
    }
    for key, test in tests.items():
        values = _strings(selector.get(key))
        if values and not test(values):
            return False
    if selector.get("isRdma") is True and not nic.get("rdma_device"):
        return False
    return True


def describe_nic(nic: Mapping[str, Any]) -> str:
    """``0000:1a:00.0 15b3:1021 ConnectX-7 ibp26s0 mlx5_core infiniband rdma mlx5_0``."""
    parts = [
        str(nic.get("address")),
        f"{nic.get('vendor_id')}:{nic.get('device_id')}",
        str(nic.get("model") or ""),
        ",".join(_strings(nic.get("netdevs"))) or str(nic.get("netdev") or "no netdev"),
        str(nic.get("driver") or "no driver"),
        LINK_TYPES.get(str(nic.get("link_layer")), str(nic.get("link_layer") or "link type unknown")),
        f"rdma {nic['rdma_device']}" if nic.get("rdma_device") else "no rdma device",
    ]
    return " ".join(p for p in parts if p)


def nic_selector_findings(
    selectors: Sequence[Mapping[str, Any]], hosts_nics: Mapping[str, Any], variable: str = "rdma_shared_resources"
) -> list[Finding]:
    """A resource whose selector matches no NIC of any inventory host is an error listing the NICs the hosts
    have. ``selectors`` are the resource items (``rdma_shared_resources`` or ``host_device_resources``);
    ``hosts_nics`` maps each inventory host to its ``gpuops_host`` facts (or its ``nics`` list). Only hosts with
    an NVIDIA NIC count: the device plugins run only on nodes labelled feature.node.kubernetes.io/pci-15b3.present.
    A resource that matches only NICs without an RDMA device (mlx5_ib not loaded) is a warning: the RDMA shared
    plugin skips such devices until the driver stack is up."""
    hosts = {h: _nics(f) for h, f in sorted(hosts_nics.items())}
    eligible = {h: n for h, n in hosts.items() if _has_nvidia_nic(n)}
    have = [f"{h}: {describe_nic(n)}" for h, nics in hosts.items() for n in nics] or ["no host reports a NIC"]
    out: list[Finding] = []
    for i, sel in enumerate(selectors):
        if not isinstance(sel, Mapping):
            continue
        name = str(sel.get("name"))
        matched = {h: [n for n in nics if nic_matches(sel, n)] for h, nics in eligible.items()}
        matched = {h: m for h, m in matched.items() if m}
        shown = {k: sel[k] for k in (*RDMA_SELECTORS, "pfNames", "rootDevices", "isRdma") if k in sel}
        obj = {"kind": "variable", "name": _var(variable, i)}
        if not matched:
            out.append(
                {
                    "id": "network-selector-matches-no-nic",
                    "severity": "error",
                    "object": obj,
                    "evidence": [f"selector of {name}: {show(shown)}", *have],
                    "cause": f"the resource {name} selects no NIC of any inventory host"
                    + ("" if eligible else " (no host has an NVIDIA NIC, where the device plugin runs)")
                    + ": it would be advertised on no node",
                    "fix": "match the vendor/device IDs, netdev names and link types listed in the evidence "
                    "(from gpu_host_facts)",
                }
            )
            continue
        if variable == "rdma_shared_resources" and not any(n.get("rdma_device") for m in matched.values() for n in m):
            out.append(
                {
                    "id": "network-selector-matches-no-rdma-device",
                    "severity": "warning",
                    "object": obj,
                    "evidence": [f"selector of {name}: {show(shown)}"]
                    + [f"{h}: {describe_nic(n)}" for h, m in matched.items() for n in m],
                    "cause": f"the resource {name} selects only NICs without an RDMA device: the RDMA shared "
                    "device plugin advertises nothing until the RDMA stack (mlx5_ib) is loaded",
                    "fix": "load the RDMA stack (the DOCA driver container does, with ofed_driver_enabled) or select "
                    "RDMA-capable NICs",
                }
            )
    return out


def mofed_findings(
    hosts: Mapping[str, Mapping[str, Any]], cfg: Mapping[str, Any], gpu_operator: Mapping[str, Any] | None = None
) -> list[Finding]:
    """MOFED agreement between the hosts, the Network Operator's DOCA driver container and the GPU Operator.

    ``hosts`` maps inventory hosts to their ``gpuops_host`` facts; ``cfg`` the role's variables
    (``ofed_driver_enabled``, ``allow_host_mofed``); ``gpu_operator`` the GPU Operator's intent or None when it
    is not installed: ``{rdma: driver.rdma.enabled, use_host_mofed: driver.rdma.useHostMofed, driver:
    container|host|none}``.

    - The driver container on a host that has MLNX_OFED/DOCA-OFED: ``_driver_rules.mofed`` (finding
      ``host-ofed-with-doca-driver``), an error unless ``allow_host_mofed`` (then a warning). Only hosts with an
      NVIDIA NIC count: the driver DaemonSet runs nowhere else.
    - With the driver container, the GPU Operator's nvidia-peermem must build against it: useHostMofed must be
      false (``network-gpu-mofed-disagree``, once, not per host); the host-presence comparison of
      ``_driver_rules.mofed`` (``rdma-host-mofed-mismatch``) does not apply then.
    - Without the driver container, ``_driver_rules.mofed`` compares useHostMofed with each host's MOFED as is.
    """
    c = config(cfg)
    gpu = dict(gpu_operator or {})
    container = bool(c["ofed_driver_enabled"])
    rdma = bool(gpu.get("rdma"))
    use_host = bool(gpu.get("use_host_mofed"))
    out: list[Finding] = []
    if container and rdma and use_host:
        out.append(
            {
                "id": "network-gpu-mofed-disagree",
                "severity": "error",
                "object": {"kind": "variable", "name": "gpu_operator_driver_rdma_use_host_mofed"},
                "evidence": [
                    "gpu_operator_driver_rdma_use_host_mofed: true",
                    f"{_var('ofed_driver_enabled')}: true (the Network Operator's DOCA driver container)",
                ],
                "cause": "the GPU Operator is told to use a host MOFED while the Network Operator runs the DOCA "
                "driver container: nvidia-peermem would build against the wrong RDMA stack",
                "fix": "set gpu_operator_driver_rdma_use_host_mofed: false (the driver container provides MOFED), or "
                f"set {_var('ofed_driver_enabled')}: false and keep MOFED on the hosts",
                "fixed_by": None,
            }
        )
    intent = {
        "ofed": "operator" if container else "host",
        "rdma": rdma,
        "use_host_mofed": use_host,
        "nvidia_driver": gpu.get("driver") or ("container" if gpu else "none"),
    }
    for host, facts in sorted(hosts.items()):
        if container and not _has_nvidia_nic(_nics(facts)):
            continue
        found = _host_rules.evaluate(dict(facts), {**intent, "node": host}, checks=("mofed",))
        for f in found:
            if container and f["id"] == "rdma-host-mofed-mismatch":
                continue
            if f["id"] == "host-ofed-with-doca-driver" and c["allow_host_mofed"]:
                f["severity"] = "warning"
                f["cause"] += f" (accepted: {_var('allow_host_mofed')} is true; the container unloads the host's "
                f["cause"] += "modules while it runs)"
            elif f["id"] == "host-ofed-with-doca-driver":
                f["fix"] += f"; or accept it with {_var('allow_host_mofed')}: true"
            out.append(f)
    return out


def unreachable_findings(unreachable: Sequence[str], group: str) -> list[Finding]:
    """A host of the role's group that could not be read: its NICs and MOFED cannot be judged, so the cluster-plane
    change stops (an error per host)."""
    return [
        {
            "id": "network-host-unreachable",
            "severity": "error",
            "object": {"kind": "host", "name": str(host)},
            "evidence": [f"gpu_host_facts could not reach {host} (group {group})"],
            "cause": "the host is unreachable, so its NICs and MOFED cannot be judged and the cluster-plane change "
            "stops",
            "fix": f"make it reachable, or remove it from the {group} group",
        }
        for host in unreachable
    ]
