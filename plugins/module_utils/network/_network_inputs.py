# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The network_operator role's input rules: findings ``{id, severity, object, evidence, cause, fix}`` on the
role's variables (types, selectors, resources, the OFED driver, the shape of the networks, MTUs) before any change,
one per variable and field. Pure functions (no I/O); the variables and their defaults are described in
``network/_network``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs import a, kind_of, show
from ansible_collections.gpuops.platform.plugins.module_utils.network._network import (
    DEFAULTS,
    ENV_NAME_RE,
    HOST_DEVICE_SELECTORS,
    IFNAME_RE,
    IMAGE_TAG_RE,
    IMAGES,
    KINDS,
    LINK_TYPES,
    MELLANOX,
    MODES,
    OBJECT_NAME_RE,
    OFED_ENV,
    OFED_VERSION_RE,
    PCI_ID_RE,
    RDMA_RESOURCE_RE,
    RDMA_SELECTORS,
    RELEASE,
    REPOSITORY_RE,
    SECRET_RE,
    SRIOV_RESOURCE_RE,
    UPGRADE_POLICY_KEYS,
    Finding,
    _bad,
    _var,
    _warn,
    config,
    env_list,
)
from ansible_collections.gpuops.platform.plugins.module_utils.network._network_pools import (
    _network_findings,
    ip_pool_findings,
)


def _type_findings(cfg: Mapping[str, Any]) -> list[Finding]:
    out = []
    for key, value in cfg.items():
        want = KINDS.get(key)
        if want is None or value is None or kind_of(value) in want.split("|"):
            continue
        out.append(
            _bad(
                "network-variable-type",
                _var(key),
                value,
                f"{_var(key)} must be {' or '.join(a(k) for k in want.split('|'))}, got {a(kind_of(value))}.",
                f"set {_var(key)} as in the role defaults ({show(DEFAULTS[key])}).",
            )
        )
    return out


def _pci_ids(key: str, path: tuple[Any, ...], values: list[Any]) -> list[Finding]:
    bad = [v for v in values if not isinstance(v, str) or not PCI_ID_RE.match(v)]
    if not bad:
        return []
    return [
        _bad(
            "network-pci-id-invalid",
            _var(key, *path),
            values,
            f"{', '.join(show(v) for v in bad)}: PCI vendor and device IDs are compared as sysfs writes them, "
            "4 lower-case hex digits without 0x.",
            f"write them like {show(MELLANOX)} (vendor) or {show('1021')} (device).",
        )
    ]


def _selector_findings(key: str, i: int, item: Mapping[str, Any], keys: Sequence[str]) -> list[Finding]:
    out: list[Finding] = []
    for sel in keys:
        value = item.get(sel)
        if value is None:
            continue
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            out.append(
                _bad(
                    "network-selector-invalid",
                    _var(key, i, sel),
                    value,
                    f"{sel} must be a non-empty list of strings.",
                    f"write {sel} as a list, e.g. {sel}: [{show(MELLANOX if sel == 'vendors' else 'x')}].",
                )
            )
            continue
        if sel in ("vendors", "deviceIDs"):
            out += _pci_ids(key, (i, sel), value)
        if sel == "linkTypes":
            bad = [v for v in value if v not in LINK_TYPES.values()]
            if bad:
                out.append(
                    _bad(
                        "network-link-type-invalid",
                        _var(key, i, sel),
                        value,
                        f"{', '.join(show(v) for v in bad)}: the device plugins compare the netlink link type, "
                        "ether or infiniband.",
                        "use ether (Ethernet/RoCE) or infiniband.",
                    )
                )
        if sel in ("ifNames", "pfNames"):
            bad = [v for v in value if not IFNAME_RE.match(v.split("#")[0])]
            if bad:
                out.append(
                    _bad(
                        "network-ifname-invalid",
                        _var(key, i, sel),
                        value,
                        f"{', '.join(show(v) for v in bad)}: not a Linux interface name (1-15 characters, "
                        "no whitespace, '/' or ':').",
                        "use the netdev names gpu_host_facts reports under nics[].netdevs.",
                    )
                )
    if not any(item.get(sel) for sel in keys) and not ("pfNames" in keys and item.get("isRdma") is True):
        out.append(
            _bad(
                "network-selector-missing",
                _var(key, i),
                dict(item),
                "the resource has no selector: the device plugin refuses a resource that selects nothing.",
                f"add at least one of {', '.join(keys)}.",
            )
        )
    return out


def _resource_findings(key: str, resources: list[Any], rdma: bool) -> list[Finding]:
    out: list[Finding] = []
    seen: dict[str, int] = {}
    name_re = RDMA_RESOURCE_RE if rdma else SRIOV_RESOURCE_RE
    rule = (
        "letters, digits and '_' only (k8s-rdma-shared-dev-plugin refuses to start otherwise; the prefix rdma/ "
        "is added by the plugin)"
        if rdma
        else "letters, digits, '_' and '.', starting and ending with a letter or digit (the prefix nvidia.com/ "
        "is added by the plugin)"
    )
    for i, item in enumerate(resources):
        if not isinstance(item, Mapping):
            out.append(
                _bad(
                    "network-variable-type", _var(key, i), item, "each resource must be a dict.", "see docs/network.md."
                )
            )
            continue
        name = item.get("name")
        if not isinstance(name, str) or not name_re.match(name):
            why = "has a '/': write the name without a prefix" if isinstance(name, str) and "/" in name else rule
            out.append(
                _bad(
                    "network-resource-name-invalid",
                    _var(key, i, "name"),
                    name,
                    f"the resource name {why}.",
                    f"use a name such as {'rdma_shared_device_a' if rdma else 'hostdev'}.",
                )
            )
        elif name in seen:
            out.append(
                _bad(
                    "network-resource-name-duplicate",
                    _var(key, i, "name"),
                    name,
                    f"{_var(key, seen[name], 'name')} has the same name: the device plugin refuses duplicates.",
                    "give every resource its own name.",
                )
            )
        else:
            seen[name] = i
        if rdma:
            hca = item.get("rdmaHcaMax")
            if not isinstance(hca, int) or isinstance(hca, bool) or hca < 1:
                out.append(
                    _bad(
                        "network-rdma-hca-max-invalid",
                        _var(key, i, "rdmaHcaMax"),
                        hca,
                        "rdmaHcaMax is how many pods may share the resource on a node: an integer of at least 1 "
                        "(0 advertises nothing, negative values stop the plugin).",
                        "set rdmaHcaMax, e.g. 63 (upstream's example).",
                    )
                )
        out += _selector_findings(key, i, item, RDMA_SELECTORS if rdma else HOST_DEVICE_SELECTORS)
    return out


def _ofed_findings(c: Mapping[str, Any]) -> list[Finding]:
    if not c["ofed_driver_enabled"]:
        return []
    out: list[Finding] = []
    version = c["ofed_driver_version"]
    if isinstance(version, str) and version and not OFED_VERSION_RE.match(version):
        out.append(
            _bad(
                "network-ofed-version-invalid",
                _var("ofed_driver_version"),
                version,
                "not a DOCA/MOFED driver version the operator accepts (its webhook's format).",
                f"use a DOCA driver tag such as {RELEASE['ofed_version']}, or leave it empty for that default.",
            )
        )
    env = c["ofed_driver_env"]
    for e in env_list(env) if isinstance(env, (Mapping, list)) else []:
        if not ENV_NAME_RE.match(e["name"]):
            out.append(
                _bad(
                    "network-ofed-env-invalid",
                    _var("ofed_driver_env"),
                    env,
                    f"{show(e['name'])} is not an environment variable name.",
                    "use names such as RESTORE_DRIVER_ON_POD_TERMINATION.",
                )
            )
        elif e["name"] not in OFED_ENV:
            out.append(
                _warn(
                    _bad(
                        "network-ofed-env-unknown",
                        _var("ofed_driver_env"),
                        env,
                        f"{e['name']} is not one of the driver container's documented variables "
                        "(docs/mofed-container-env-vars.md): a typo is silently ignored.",
                        f"check the name; documented: {', '.join(OFED_ENV)}.",
                    )
                )
            )
    policy = c["ofed_driver_upgrade_policy"]
    if isinstance(policy, Mapping):
        out += _shape_findings(_var("ofed_driver_upgrade_policy"), policy, UPGRADE_POLICY_KEYS)
        if policy.get("safeLoad") and not policy.get("autoUpgrade"):
            out.append(
                _bad(
                    "network-ofed-safe-load",
                    _var("ofed_driver_upgrade_policy", "safeLoad"),
                    policy.get("safeLoad"),
                    "safeLoad requires autoUpgrade: true (the operator's webhook rule).",
                    "set autoUpgrade: true, or drop safeLoad.",
                )
            )
    return out


def _shape_findings(var: str, value: Mapping[str, Any], shape: Mapping[str, Any]) -> list[Finding]:
    """Unknown keys and wrong scalar kinds against a nested ``{key: type | {sub-shape}}``: an unknown key would
    be pruned by the API server without a word."""
    out: list[Finding] = []
    for key, sub in value.items():
        want = shape.get(key)
        path = f"{var}.{key}"
        if want is None:
            out.append(
                _bad(
                    "network-unknown-key",
                    path,
                    sub,
                    f"{key} is not a field upstream knows here: the API server would drop it silently.",
                    f"use one of {', '.join(shape)}.",
                )
            )
        elif isinstance(want, Mapping):
            if isinstance(sub, Mapping):
                out += _shape_findings(path, sub, want)
            else:
                out.append(_bad("network-variable-type", path, sub, f"{key} must be a dict.", "see docs/network.md."))
        elif not isinstance(sub, want) or (want is int and isinstance(sub, bool)) or (want is int and sub < 0):
            wanted = {bool: "a bool", int: "a non-negative int", str: "a str"}[want]
            out.append(_bad("network-variable-type", path, sub, f"{key} must be {wanted}.", "see docs/network.md."))
    return out


def network_input_findings(cfg: Mapping[str, Any]) -> list[Finding]:
    """Every bad input of the role, as findings naming the variable (object kind ``variable``): wrong types,
    unknown mode, resource names the device plugins refuse, selectors that cannot match, the DOCA driver's
    version, env and upgrade policy, IP pools that do not parse (nv-ipam's own rules), networks that point at
    nothing. Empty when the role may go on."""
    out = _type_findings(cfg)
    if out:
        return out  # the rules below assume the documented kinds
    c = config(cfg)
    mode = c["mode"]
    if mode not in MODES:
        out.append(
            _bad(
                "network-mode-unknown",
                _var("mode"),
                mode,
                f"the mode must be one of {', '.join(MODES)}.",
                "rdma_shared (default) shares RDMA devices, host_device hands whole devices to pods, sriov lets the "
                "SR-IOV Network Operator create VFs; see docs/network.md.",
            )
        )
    if mode == "rdma_shared":
        if not c["rdma_shared_resources"]:
            out.append(
                _bad(
                    "network-resources-missing",
                    _var("rdma_shared_resources"),
                    [],
                    "mode rdma_shared needs at least one resource.",
                    "list at least one {name, rdmaHcaMax, vendors/deviceIDs/ifNames}.",
                )
            )
        out += _resource_findings("rdma_shared_resources", c["rdma_shared_resources"], rdma=True)
    elif mode == "host_device":
        if not c["host_device_resources"]:
            out.append(
                _bad(
                    "network-resources-missing",
                    _var("host_device_resources"),
                    [],
                    "mode host_device needs at least one resource.",
                    "list at least one {name, vendors/deviceIDs/pfNames, isRdma}.",
                )
            )
        out += _resource_findings("host_device_resources", c["host_device_resources"], rdma=False)
    for key, pattern in (("repository", REPOSITORY_RE), ("version", IMAGE_TAG_RE)):
        if c[key] and not pattern.match(c[key]):
            out.append(
                _bad(
                    f"network-{key}-invalid",
                    _var(key),
                    c[key],
                    f"not a container image {key}.",
                    f"use e.g. {RELEASE[key]}, or leave it empty for that default.",
                )
            )
    bad_secrets = [s for s in c["image_pull_secrets"] if not isinstance(s, str) or not SECRET_RE.match(s)]
    if bad_secrets:
        out.append(
            _bad(
                "network-pull-secret-invalid",
                _var("image_pull_secrets"),
                c["image_pull_secrets"],
                f"{', '.join(show(s) for s in bad_secrets)}: a pull secret is named by a Secret name (DNS-1123).",
                "list Secret names of the operator's namespace.",
            )
        )
    unknown = [k for k in c["images"] if k not in IMAGES]
    if unknown:
        out.append(
            _bad(
                "network-images-unknown",
                _var("images"),
                c["images"],
                f"{', '.join(unknown)}: not a NicClusterPolicy section with an image.",
                f"use {', '.join(IMAGES)}.",
            )
        )
    cm = c["doca_telemetry_config_map"]
    if cm and (not isinstance(cm, str) or not OBJECT_NAME_RE.match(cm)):
        out.append(
            _bad(
                "network-doca-telemetry-config-map-invalid",
                _var("doca_telemetry_config_map"),
                cm,
                "not a ConfigMap name (DNS-1123 subdomain).",
                "name a ConfigMap of the operator's namespace with the key dts_config_map.ini, or leave it empty for "
                "the operator's default one.",
            )
        )
    out += _ofed_findings(c)
    pools: set[str] = set()
    for i, pool in enumerate(c["ip_pools"]):
        out += ip_pool_findings(i, pool)
        if isinstance(pool, Mapping) and isinstance(pool.get("name"), str):
            if pool["name"] in pools:
                out.append(
                    _bad(
                        "network-ip-pool-duplicate",
                        _var("ip_pools", i, "name"),
                        pool["name"],
                        "two pools share it.",
                        "rename one.",
                    )
                )
            pools.add(pool["name"])
    out += _network_findings(c, pools)
    return out
