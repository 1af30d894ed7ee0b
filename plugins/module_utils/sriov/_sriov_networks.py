# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""SR-IOV Network Operator (k8snetworkplumbingwg v1.6.0): the sriov_network_operator role's SriovNetwork and
SriovIBNetwork builders, from its structured variables (snake_case) to the custom resources (camelCase), as pure
functions (no I/O). They raise ``InvalidInput`` on what the input findings (``_sriov_inputs``) report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.sriov._sriov_policy import (
    API_VERSION,
    CNI_LOG_LEVELS,
    DNS1123_LABEL_RE,
    DNS1123_SUBDOMAIN_RE,
    IB_NETWORK_KEYS,
    LINK_STATES,
    NETWORK_KEYS,
    RESOURCE_NAME_RE,
    VAR_IB_NETWORKS,
    VAR_NETWORKS,
    VLAN_PROTOS,
    Finding,
    Obj,
    _bad,
    _is_int,
    _json_text,
    _on_off,
    _raise_on,
    _unknown_keys,
)


# -- SriovNetwork / SriovIBNetwork -----------------------------------------------------------------------------
def _network(net: Any, var: str, ib: bool) -> tuple[Obj, list[Finding]]:
    kind = "SriovIBNetwork" if ib else "SriovNetwork"
    if not isinstance(net, Mapping):
        return {}, [_bad("sriov-network-invalid", var, net, f"each {kind} must be a mapping.", "fix it.")]
    keys = IB_NETWORK_KEYS if ib else tuple(NETWORK_KEYS)
    out = _unknown_keys(net, keys, var)
    spec: dict[str, Any] = {}
    name = net.get("name")
    if not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN_RE.match(name):
        out.append(
            _bad(
                "sriov-network-name-invalid",
                f"{var}.name",
                name,
                "the network name (also the NetworkAttachmentDefinition's) must be a DNS-1123 subdomain.",
                f"set {var}.name, for example to rail0-net.",
            )
        )
    resource = net.get("resource_name")
    if not isinstance(resource, str) or not RESOURCE_NAME_RE.match(resource):
        out.append(
            _bad(
                "sriov-resource-name-invalid",
                f"{var}.resource_name",
                resource,
                "resource_name must be the resource_name of a policy: ^[a-zA-Z0-9_]+$, without the prefix.",
                f"set {var}.resource_name to one of the policies' resource_name.",
            )
        )
    else:
        spec["resourceName"] = resource
    namespace = net.get("network_namespace")
    if namespace is not None:
        if isinstance(namespace, str) and len(namespace) <= 63 and DNS1123_LABEL_RE.match(namespace):
            spec["networkNamespace"] = namespace
        else:
            out.append(
                _bad(
                    "sriov-network-namespace-invalid",
                    f"{var}.network_namespace",
                    namespace,
                    "network_namespace (where the NetworkAttachmentDefinition goes) must be a namespace name.",
                    f"set {var}.network_namespace to the namespace of the pods that attach to the network.",
                )
            )
    for key in ("ipam", "capabilities"):
        if net.get(key) is None:
            continue
        text, problem = _json_text(net[key])
        if problem:
            out.append(
                _bad(
                    f"sriov-{key}-invalid",
                    f"{var}.{key}",
                    net[key],
                    f"{key} {problem}.",
                    f"write {var}.{key} as a YAML mapping, for example {{type: host-local, subnet: 10.56.0.0/16}}.",
                )
            )
        else:
            spec[key] = text
    meta = net.get("meta_plugins")
    if meta is not None:
        if isinstance(meta, list) and all(isinstance(m, Mapping) for m in meta):
            spec["metaPlugins"] = ",".join(json.dumps(m, sort_keys=True, separators=(",", ":")) for m in meta)
        elif isinstance(meta, str):
            spec["metaPlugins"] = meta
        else:
            out.append(
                _bad(
                    "sriov-meta-plugins-invalid",
                    f"{var}.meta_plugins",
                    meta,
                    "meta_plugins must be a list of CNI plugin configurations (mappings) or their JSON text.",
                    "fix it.",
                )
            )
    link_state = net.get("link_state")
    if link_state is not None:
        if link_state in LINK_STATES:
            spec["linkState"] = link_state
        else:
            out.append(
                _bad(
                    "sriov-link-state-invalid",
                    f"{var}.link_state",
                    link_state,
                    "link_state must be auto, enable or disable.",
                    "fix it.",
                )
            )
    if not ib:
        out += _ethernet_fields(net, var, spec)
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}, out


def _ethernet_fields(net: Mapping[str, Any], var: str, spec: dict[str, Any]) -> list[Finding]:
    out = []
    # vlan: the v1.6.0 CRD allows 0-4096, the copy bundled in the Network Operator v26.4.1 0-4094 (802.1Q's range)
    for key, low, high in (("vlan", 0, 4094), ("vlan_qos", 0, 7), ("min_tx_rate", 0, None), ("max_tx_rate", 0, None)):
        value = net.get(key)
        if value is None:
            continue
        if not _is_int(value) or value < low or (high is not None and value > high):
            span = f"from {low} to {high}" if high is not None else f"of {low} or more"
            out.append(
                _bad(
                    f"sriov-{key.replace('_', '-')}-invalid",
                    f"{var}.{key}",
                    value,
                    f"{key} must be an integer {span}.",
                    "fix it.",
                )
            )
        else:
            spec[NETWORK_KEYS[key]] = value
    if _is_int(spec.get("minTxRate")) and _is_int(spec.get("maxTxRate")) and spec["minTxRate"] > spec["maxTxRate"]:
        out.append(
            _bad(
                "sriov-tx-rate-invalid",
                f"{var}.min_tx_rate",
                spec["minTxRate"],
                f"min_tx_rate is above max_tx_rate {spec['maxTxRate']}.",
                "lower min_tx_rate or raise max_tx_rate (0: no limit).",
            )
        )
    for key in ("spoof_chk", "trust"):
        if net.get(key) is None:
            continue
        value = _on_off(net[key])
        if value is None:
            out.append(
                _bad(
                    f"sriov-{key.replace('_', '-')}-invalid",
                    f"{var}.{key}",
                    net[key],
                    f"{key} must be on or off.",
                    "fix it.",
                )
            )
        else:
            spec[NETWORK_KEYS[key]] = value
    for key, allowed in (("vlan_proto", VLAN_PROTOS), ("log_level", CNI_LOG_LEVELS)):
        if net.get(key) is None:
            continue
        if net[key] in allowed:
            spec[NETWORK_KEYS[key]] = net[key]
        else:
            shown = ", ".join(a or '""' for a in allowed)
            out.append(
                _bad(
                    f"sriov-{key.replace('_', '-')}-invalid",
                    f"{var}.{key}",
                    net[key],
                    f"{key} must be one of {shown}.",
                    "fix it.",
                )
            )
    if net.get("log_file") is not None:
        if isinstance(net["log_file"], str):
            spec["logFile"] = net["log_file"]
        else:
            out.append(
                _bad(
                    "sriov-log-file-invalid", f"{var}.log_file", net["log_file"], "log_file must be a path.", "fix it."
                )
            )
    return out


def sriov_network(net: Mapping[str, Any], namespace: str | None = None, var: str = VAR_NETWORKS) -> Obj:
    """A SriovNetwork (Ethernet VFs through sriov-cni). The operator reconciles it only in its own namespace and
    renders the NetworkAttachmentDefinition of the same name into network_namespace."""
    obj, findings = _network(net, var, ib=False)
    _raise_on(findings)
    if namespace:
        obj["metadata"]["namespace"] = namespace
    return obj


def sriov_ib_network(net: Mapping[str, Any], namespace: str | None = None, var: str = VAR_IB_NETWORKS) -> Obj:
    """A SriovIBNetwork (InfiniBand VFs through ib-sriov-cni), for the resources of link_type ib policies."""
    obj, findings = _network(net, var, ib=True)
    _raise_on(findings)
    if namespace:
        obj["metadata"]["namespace"] = namespace
    return obj
