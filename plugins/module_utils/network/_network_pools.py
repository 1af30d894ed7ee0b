# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The network_operator role's IP pools and networks: the IPPool rules (ranges, gateways, exclusions, overlaps) and
the rules of the MacvlanNetwork / HostDeviceNetwork / IPoIBNetwork variables that name them, as findings. Pure
functions (no I/O).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs import dns1123_label
from ansible_collections.gpuops.platform.plugins.module_utils.network._network import (
    IFNAME_RE,
    MACVLAN_MODES,
    MTU_RANGE,
    NETWORK_KINDS,
    OBJECT_NAME_RE,
    Finding,
    Network,
    _bad,
    _var,
    _warn,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._network_ready import (
    _dict,
    _list,
)


def _parse_ip(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(str(value))
    except ValueError:
        return None


def possible_ips(net: Network) -> int:
    """nv-ipam's GetPossibleIPCount: /32 (/128) 1, /31 (/127) 2, else IPv4 minus network and broadcast,
    IPv6 minus one."""
    host_bits = net.max_prefixlen - net.prefixlen
    if host_bits == 0:
        return 1
    if host_bits == 1:
        return 2
    return 2**host_bits - (2 if net.version == 4 else 1)


def ip_pool_findings(i: int, pool: Any) -> list[Finding]:
    """nv-ipam's IPPool.Validate (api/v1alpha1/ippool_validate.go @ network-operator-v26.4.1), as findings."""
    if not isinstance(pool, Mapping):
        return [_bad("network-variable-type", _var("ip_pools", i), pool, "each IP pool must be a dict.", "see docs.")]
    out: list[Finding] = []
    name = pool.get("name")
    if not isinstance(name, str) or not OBJECT_NAME_RE.match(name) or len(name) > 253:
        out.append(
            _bad(
                "network-ip-pool-name-invalid",
                _var("ip_pools", i, "name"),
                name,
                "an IPPool name must be a DNS-1123 subdomain (it is also the CNI network name).",
                "use a name such as rdma-pool.",
            )
        )
    net: Network | None = None
    try:
        net = ipaddress.ip_network(str(pool.get("subnet")), strict=False)  # Go's net.ParseCIDR keeps host bits
        if "/" not in str(pool.get("subnet")):
            raise ValueError("no prefix length")
    except ValueError:
        net = None
        out.append(
            _bad(
                "network-ip-pool-subnet-invalid",
                _var("ip_pools", i, "subnet"),
                pool.get("subnet"),
                "the subnet does not parse as an address/prefix.",
                "write it like 192.168.0.0/24.",
            )
        )
    block = pool.get("perNodeBlockSize")
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        out.append(
            _bad(
                "network-ip-pool-block-invalid",
                _var("ip_pools", i, "perNodeBlockSize"),
                block,
                "perNodeBlockSize (addresses each node gets) must be an integer of at least 1.",
                "set it to at least the pods per node that join this network.",
            )
        )
    elif net is not None and possible_ips(net) < block:
        out.append(
            _bad(
                "network-ip-pool-block-too-large",
                _var("ip_pools", i, "perNodeBlockSize"),
                block,
                f"the subnet {net} has {possible_ips(net)} usable addresses, fewer than one node's block.",
                "use a larger subnet or a smaller perNodeBlockSize.",
            )
        )
    gateway = pool.get("gateway")
    gw = _parse_ip(gateway) if gateway not in (None, "") else None
    if gateway not in (None, "") and gw is None:
        out.append(
            _bad(
                "network-ip-pool-gateway-invalid",
                _var("ip_pools", i, "gateway"),
                gateway,
                "the gateway is not an IP address.",
                "write it like 192.168.0.1.",
            )
        )
    elif gw is not None and net is not None and gw not in net:
        out.append(
            _bad(
                "network-ip-pool-gateway-outside",
                _var("ip_pools", i, "gateway"),
                gateway,
                f"the gateway is not part of the subnet {net}.",
                f"use an address of {net} as gateway, or drop the gateway.",
            )
        )
    if gateway in (None, "") and (pool.get("defaultGateway") or pool.get("routes")):
        out.append(
            _bad(
                "network-ip-pool-gateway-missing",
                _var("ip_pools", i, "gateway"),
                gateway,
                "defaultGateway and routes need a gateway.",
                "set gateway, or drop defaultGateway and routes.",
            )
        )
    for j, ex in enumerate(_list(pool.get("exclusions"))):
        ex = _dict(ex)
        start, end = _parse_ip(ex.get("startIP")), _parse_ip(ex.get("endIP"))
        where = _var("ip_pools", i, "exclusions", j)
        if start is None or end is None:
            out.append(
                _bad(
                    "network-ip-pool-range-invalid",
                    where,
                    ex,
                    "startIP and endIP must be IP addresses.",
                    "write the range like {startIP: 192.168.0.10, endIP: 192.168.0.20}.",
                )
            )
        elif net is not None and (start not in net or end not in net):
            out.append(
                _bad(
                    "network-ip-pool-range-outside",
                    where,
                    ex,
                    f"the excluded range is not part of the subnet {net}.",
                    f"exclude addresses of {net} only.",
                )
            )
        elif start.version == end.version and int(end) < int(start):
            out.append(_bad("network-ip-pool-range-invalid", where, ex, "endIP is below startIP.", "swap them."))
    return out


def _network_findings(c: Mapping[str, Any], pools: set[str]) -> list[Finding]:
    out: list[Finding] = []
    host_device_names = {str(r.get("name")) for r in _list(c["host_device_resources"]) if isinstance(r, Mapping)}
    any_network = False
    for key, kind in NETWORK_KINDS.items():
        seen: set[str] = set()
        for i, item in enumerate(_list(c[key])):
            if not isinstance(item, Mapping):
                out.append(
                    _bad("network-variable-type", _var(key, i), item, "each network must be a dict.", "see docs.")
                )
                continue
            any_network = True
            name = item.get("name")
            if not isinstance(name, str) or not OBJECT_NAME_RE.match(name) or len(name) > 253:
                out.append(
                    _bad(
                        "network-name-invalid",
                        _var(key, i, "name"),
                        name,
                        f"a {kind} name must be a DNS-1123 subdomain (it is the NetworkAttachmentDefinition's name).",
                        "use a name such as rdma-net.",
                    )
                )
            elif name in seen:
                out.append(
                    _bad("network-name-duplicate", _var(key, i, "name"), name, "two networks share it.", "rename one.")
                )
            seen.add(str(name))
            if item.get("namespace") is not None:
                out += dns1123_label(_var(key, i, "namespace"), item.get("namespace"))
            if kind != "HostDeviceNetwork":
                master = item.get("master")
                if not isinstance(master, str) or not IFNAME_RE.match(master):
                    out.append(
                        _bad(
                            "network-master-invalid",
                            _var(key, i, "master"),
                            master,
                            "master must name the host interface (1-15 characters, no whitespace, '/' or ':').",
                            "use the netdev name gpu_host_facts reports, e.g. ibp26s0.",
                        )
                    )
            if kind == "MacvlanNetwork":
                mode = item.get("mode", "bridge")
                if mode not in MACVLAN_MODES:
                    out.append(
                        _bad(
                            "network-macvlan-mode-invalid",
                            _var(key, i, "mode"),
                            mode,
                            f"mode must be one of {', '.join(MACVLAN_MODES)}.",
                            "use bridge unless the switch needs another.",
                        )
                    )
                out += _mtu_findings(_var(key, i, "mtu"), item.get("mtu"))
            if kind == "HostDeviceNetwork":
                resource = item.get("resource")
                if c["mode"] != "host_device":
                    out.append(
                        _bad(
                            "network-host-device-mode",
                            _var(key, i),
                            dict(item),
                            f"HostDeviceNetworks consume a host_device_resources resource, advertised only in mode "
                            f"host_device (mode is {c['mode']}).",
                            f"set {_var('mode')}: host_device, or drop {_var(key)}.",
                        )
                    )
                elif resource not in host_device_names:
                    out.append(
                        _bad(
                            "network-resource-unknown",
                            _var(key, i, "resource"),
                            resource,
                            f"no {_var('host_device_resources')} entry has this name "
                            f"(known: {', '.join(sorted(host_device_names)) or 'none'}).",
                            "name one of the host_device_resources.",
                        )
                    )
            if kind == "IPoIBNetwork" and not c["ipoib_enabled"]:
                out.append(
                    _bad(
                        "network-ipoib-disabled",
                        _var(key, i),
                        dict(item),
                        "an IPoIBNetwork needs the ipoib CNI (secondaryNetwork.ipoib), which is off.",
                        f"set {_var('ipoib_enabled')}: true.",
                    )
                )
            pool = item.get("ip_pool")
            if pool and item.get("ipam"):
                out.append(
                    _bad("network-ipam-both", _var(key, i), dict(item), "ip_pool and ipam both set.", "keep one.")
                )
            elif pool and pool not in pools:
                out.append(
                    _bad(
                        "network-ip-pool-unknown",
                        _var(key, i, "ip_pool"),
                        pool,
                        f"no {_var('ip_pools')} entry has this name (known: {', '.join(sorted(pools)) or 'none'}).",
                        "name one of the ip_pools, or give an ipam dict.",
                    )
                )
            if pool and not c["nv_ipam_enabled"]:
                out.append(
                    _bad(
                        "network-nv-ipam-disabled",
                        _var(key, i, "ip_pool"),
                        pool,
                        "ip_pool uses nv-ipam, which is off.",
                        f"set {_var('nv_ipam_enabled')}: true.",
                    )
                )
    if any_network and not c["multus_enabled"]:
        out.append(
            _warn(
                _bad(
                    "network-multus-disabled",
                    _var("multus_enabled"),
                    False,
                    "networks are defined but the policy deploys no Multus: pods can attach them only if another "
                    "Multus runs in the cluster.",
                    f"set {_var('multus_enabled')}: true unless the cluster has its own Multus.",
                )
            )
        )
    if _list(c["ip_pools"]) and not c["nv_ipam_enabled"]:
        out.append(
            _bad(
                "network-nv-ipam-disabled",
                _var("ip_pools"),
                c["ip_pools"],
                "IP pools are defined but nv-ipam is off: the IPPool CRD is never installed.",
                f"set {_var('nv_ipam_enabled')}: true, or drop {_var('ip_pools')}.",
            )
        )
    return out


def _mtu_findings(var: str, mtu: Any) -> list[Finding]:
    if mtu is None:
        return []
    low, high = MTU_RANGE
    if isinstance(mtu, int) and not isinstance(mtu, bool) and low <= mtu <= high:
        return []
    zero = " (upstream reads 0 as the master's MTU: omit mtu for that)" if mtu == 0 else ""
    return [
        _bad(
            "network-mtu-invalid",
            var,
            mtu,
            f"mtu must be an integer from {low} to {high}{zero}.",
            "omit mtu to inherit the master's, or set e.g. 9000.",
        )
    ]
