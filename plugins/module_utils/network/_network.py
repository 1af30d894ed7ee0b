# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The network_operator role's rules and builders, once: pure functions (no I/O) of the role's variables and the
hosts' ``gpuops_host`` facts. Builders return the objects the role applies (the NicClusterPolicy, IPPools,
MacvlanNetwork / HostDeviceNetwork / IPoIBNetwork) and the chart values it owns; rules return findings
``{id, severity, object, evidence, cause, fix}``. The readiness predicates of the objects it builds are in
``status/_network_ready`` (the builders import from there, never the other way).

Upstream: Mellanox/network-operator v26.4.1 (chart ``deployment/network-operator``, CRDs, ``hack/release.yaml``,
the NicClusterPolicy webhook ``api/v1alpha1/validator/nicpolicy_webhook.go``), Mellanox/k8s-rdma-shared-dev-plugin
(config format, selector semantics, resource-name rule) and Mellanox/nvidia-k8s-ipam network-operator-v26.4.1
(IPPool validation). See docs/network.md.

The role's variables reach these functions as one mapping ``cfg`` keyed by the variable name without the
``network_operator_`` prefix (``mode`` is ``network_operator_mode``); missing keys take :data:`DEFAULTS`:

``mode`` (str)
    ``rdma_shared`` (default): the RDMA shared device plugin advertises ``rdma/<name>`` per resource, shared by
    every pod on the node (RoCE or InfiniBand, no VFs). ``host_device``: the SR-IOV network device plugin of the
    NicClusterPolicy advertises whole NICs or pre-created VFs as ``nvidia.com/<name>``, one pod per device,
    consumed through HostDeviceNetworks. ``sriov``: neither device plugin in the NicClusterPolicy; the SR-IOV
    Network Operator (bundled chart value ``sriovNetworkOperator.enabled``, or the standalone chart) creates and
    advertises VFs.
``repository``, ``version`` (str), ``image_pull_secrets`` (list of str)
    ``spec.global`` of the policy: every component image is ``<repository>/<image>:<version>`` unless
    ``images`` overrides it. Empty: the release's (``nvcr.io/nvidia/mellanox``, ``network-operator-v26.4.1``).
``images`` (dict)
    Per-section overrides ``{<section>: {image, repository, version}}``; sections as in :data:`IMAGES`.
``ofed_driver_enabled`` (bool), ``ofed_driver_version`` (str), ``ofed_driver_env`` (dict or list),
``ofed_driver_upgrade_policy`` (dict), ``ofed_driver_force_precompiled`` (bool)
    The DOCA driver container (``spec.ofedDriver``). The version defaults to the release's DOCA driver; env is
    ``{NAME: value}`` (or upstream's ``[{name, value}]``), values rendered as strings; the upgrade policy uses
    upstream's keys (``autoUpgrade``, ``maxParallelUpgrades``, ``safeLoad``, ``drain{enable, force,
    deleteEmptyDir, podSelector, timeoutSeconds}``, ``waitForCompletion{podSelector, timeoutSeconds}``).
``allow_host_mofed`` (bool)
    Accept the driver container on hosts that already run MLNX_OFED/DOCA-OFED (a warning instead of an error).
``rdma_shared_resources`` (list of dict)
    ``{name, rdmaHcaMax, vendors, deviceIDs, drivers, ifNames, linkTypes}``: one ``rdma/<name>`` resource each,
    with ``rdmaHcaMax`` pods sharing it per node; selectors are lists, ANDed across keys and ORed within one
    (vendor and device IDs as in sysfs: 4 lower-case hex digits; linkTypes ``ether`` or ``infiniband``).
``host_device_resources`` (list of dict)
    ``{name, vendors, deviceIDs, drivers, pfNames, rootDevices, linkTypes, isRdma}``: one ``nvidia.com/<name>``
    resource each (the SR-IOV device plugin's ``devices`` selector is our ``deviceIDs``).
``use_cdi`` (bool)
    ``useCdi`` of the device plugin (rendered only when true).
``multus_enabled``, ``cni_plugins_enabled``, ``ipoib_enabled``, ``nv_ipam_enabled``, ``nv_ipam_webhook`` (bool)
    ``spec.secondaryNetwork.{multus, cniPlugins, ipoib}`` and ``spec.nvIpam``.
``doca_telemetry_enabled`` (bool), ``doca_telemetry_config_map`` (str)
    ``spec.docaTelemetryService``: the DOCA Telemetry Service DaemonSet ``doca-telemetry-service`` (pods labelled
    ``app.kubernetes.io/name: doca-telemetry``, host network) on the nodes with NVIDIA NICs once their driver is
    ready, its Prometheus endpoint on port 9189 (the operator's default ConfigMap ``doca-telemetry-service`` says
    ``prometheus=http://0.0.0.0:9189``). Its image is the release's own (``nvcr.io/nvidia/doca/doca_telemetry``,
    not spec.global's repository), overridable in ``images``. ``doca_telemetry_config_map``: the user's ConfigMap
    in the operator's namespace (``config.fromConfigMap``, key ``dts_config_map.ini``), which replaces the default
    one; it must keep the Prometheus line for the monitoring role's scrape.
``tolerations`` (list), ``node_affinity`` (dict)
    ``spec.tolerations`` / ``spec.nodeAffinity`` of the operands (the DaemonSets still only run on nodes labelled
    ``feature.node.kubernetes.io/pci-15b3.present=true``).
``ip_pools`` (list of dict)
    nv-ipam ``IPPool`` objects: ``{name, subnet, perNodeBlockSize, gateway, exclusions[{startIP, endIP}],
    routes[{dst}], defaultGateway, nodeSelector}``, created in ``namespace`` (the operator's; nv-ipam reads no
    other).
``macvlan_networks``, ``host_device_networks``, ``ipoib_networks`` (list of dict)
    ``{name, namespace, master, mode, mtu, ip_pool | ipam}`` (macvlan), ``{name, namespace, resource, ip_pool |
    ipam}`` (host device; ``resource`` names a ``host_device_resources`` entry), ``{name, namespace, master,
    ip_pool | ipam}`` (IPoIB). ``namespace`` is where the NetworkAttachmentDefinition is written (default
    ``default``); ``ip_pool`` is shorthand for the ipam ``{"type": "nv-ipam", "poolName": <pool>}``.
``namespace`` (str), ``nfd_managed`` (bool), ``sriov_bundled`` (bool)
    The operator's namespace; ``gpuops_nfd_managed`` (bundled NFD off); whether SR-IOV mode uses the operator
    bundled in this chart (else the standalone chart of the sriov_network_operator role).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Union

from ansible_collections.gpuops.platform.plugins.module_utils.common._plain import plain
from ansible_collections.gpuops.platform.plugins.module_utils.host import _host_rules
from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs import (
    a,
    dns1123_label,
    kind_of,
    show,
    variable_finding,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._network_ready import (
    POLICY_NAME,
    _dict,
    _list,
)

Finding = dict[str, Any]
Obj = dict[str, Any]
Unmet = Optional[str]  # noqa: UP045 - a runtime alias: module_utils still import on Python 3.9
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # noqa: UP007 - runtime alias, as above

PREFIX = "network_operator_"
MODES = ("rdma_shared", "sriov", "host_device")
API_VERSION = "mellanox.com/v1alpha1"
IPAM_API_VERSION = "nv-ipam.nvidia.com/v1alpha1"
# The operands (OFED, RDMA shared and SR-IOV device plugins) run only on nodes with this label (the chart's
# NodeFeatureRule sets it for NICs of vendor 15b3, class 0200/0207).
NIC_LABEL = "feature.node.kubernetes.io/pci-15b3.present"
MOFED_WAIT_LABEL = "network.nvidia.com/operator.mofed.wait"
MELLANOX = "15b3"

# hack/release.yaml @ v26.4.1
RELEASE = {
    "repository": "nvcr.io/nvidia/mellanox",
    "version": "network-operator-v26.4.1",
    "ofed_version": "doca3.4.1-26.04-1.1.0.0-1",
}
# NicClusterPolicy section -> upstream image name (hack/release.yaml @ v26.4.1)
IMAGES = {
    "ofedDriver": "doca-driver",
    "rdmaSharedDevicePlugin": "k8s-rdma-shared-dev-plugin",
    "sriovDevicePlugin": "sriov-network-device-plugin",
    "multus": "multus-cni",
    "cniPlugins": "plugins",
    "ipoib": "ipoib-cni",
    "nvIpam": "nvidia-k8s-ipam",
    "docaTelemetryService": "doca_telemetry",
}
# hack/release.yaml @ v26.4.1: the DOCA Telemetry Service image lives outside spec.global's repository
DOCA_TELEMETRY_RELEASE = {"repository": "nvcr.io/nvidia/doca", "version": "1.25.5-doca3.4.0-host"}
# manifests/state-doca-telemetry-service @ v26.4.1: the DaemonSet's pod label and the default ConfigMap's Prometheus
# endpoint (prometheus=http://0.0.0.0:9189)
DOCA_TELEMETRY_POD_LABELS = {"app.kubernetes.io/name": "doca-telemetry"}
DOCA_TELEMETRY_PORT = 9189
# docs/mofed-container-env-vars.md @ v26.4.1: the driver container's documented variables
OFED_ENV = (
    "CREATE_IFNAMES_UDEV",
    "UNLOAD_STORAGE_MODULES",
    "ENABLE_NFSRDMA",
    "RESTORE_DRIVER_ON_POD_TERMINATION",
    "NVIDIA_NIC_DRIVERS_INVENTORY_PATH",
    "UNLOAD_THIRD_PARTY_RDMA_MODULES",
    "STORAGE_MODULES",
    "THIRD_PARTY_RDMA_MODULES",
    "SKIP_PREFLIGHT_CHECKS",
)
# isValidOFEDVersion (nicpolicy_webhook.go @ v26.4.1)
OFED_VERSION_RE = re.compile(
    r"^(sha256:[a-fA-F0-9]{64}|doca\d+\.\d+(\.\d+)?-\d+\.\d+-\d+\.\d+\.\d+\.\d+-\d+(-[\w\.\-]+)*"
    r"|\d+\.\d+-\d+(\.\d+)*(-\d+)?(-[\w\.\-]+)*)\Z"
)
# k8s-rdma-shared-dev-plugin validResourceName: stricter than the operator webhook (which allows '-' and '.'),
# and the plugin is the one that refuses to start.
RDMA_RESOURCE_RE = re.compile(r"^[a-zA-Z0-9_]+\Z")
# sriovResourceNameRegex (nicpolicy_webhook.go @ v26.4.1) for the SR-IOV device plugin's resources
SRIOV_RESOURCE_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
PCI_ID_RE = re.compile(r"^[0-9a-f]{4}\Z")
IFNAME_RE = re.compile(r"^[^\s/:]{1,15}\Z")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
SECRET_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
OBJECT_NAME_RE = SECRET_RE  # DNS-1123 subdomain: cluster-scoped network objects, IPPools
REPOSITORY_RE = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*\Z")
IMAGE_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")  # the OCI tag grammar
# netlink EncapType, what the RDMA shared device plugin compares linkTypes with; from gpu_host_facts' link_layer
LINK_TYPES = {"Ethernet": "ether", "InfiniBand": "infiniband"}
MACVLAN_MODES = ("bridge", "private", "vepa", "passthru")
MTU_RANGE = (68, 65535)  # IPv4 minimum (RFC 791) to the IP maximum

RDMA_SELECTORS = ("vendors", "deviceIDs", "drivers", "ifNames", "linkTypes")
HOST_DEVICE_SELECTORS = ("vendors", "deviceIDs", "drivers", "pfNames", "rootDevices", "linkTypes")
UPGRADE_POLICY_KEYS: dict[str, Any] = {
    "autoUpgrade": bool,
    "maxParallelUpgrades": int,
    "safeLoad": bool,
    "drain": {"enable": bool, "force": bool, "deleteEmptyDir": bool, "podSelector": str, "timeoutSeconds": int},
    "waitForCompletion": {"podSelector": str, "timeoutSeconds": int},
}

DEFAULTS: dict[str, Any] = {
    "mode": "rdma_shared",
    "repository": "",
    "version": "",
    "image_pull_secrets": [],
    "images": {},
    "ofed_driver_enabled": True,
    "ofed_driver_version": "",
    "ofed_driver_env": {},
    "ofed_driver_upgrade_policy": {
        "autoUpgrade": True,
        "maxParallelUpgrades": 1,
        "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300},
    },
    "ofed_driver_force_precompiled": False,
    "allow_host_mofed": False,
    "rdma_shared_resources": [{"name": "rdma_shared_device_a", "rdmaHcaMax": 63, "vendors": [MELLANOX]}],
    "host_device_resources": [{"name": "hostdev", "vendors": [MELLANOX], "isRdma": True}],
    "use_cdi": False,
    "multus_enabled": True,
    "cni_plugins_enabled": True,
    "ipoib_enabled": False,
    "nv_ipam_enabled": True,
    "nv_ipam_webhook": False,
    "doca_telemetry_enabled": False,
    "doca_telemetry_config_map": "",
    "tolerations": [],
    "node_affinity": {},
    "ip_pools": [],
    "macvlan_networks": [],
    "host_device_networks": [],
    "ipoib_networks": [],
    "namespace": "nvidia-network-operator",
    "nfd_managed": True,
    "sriov_bundled": True,
}
# The YAML kind every variable must have ("dict|list" where upstream's list form is accepted too)
KINDS: dict[str, str] = {k: kind_of(v) for k, v in DEFAULTS.items()}
KINDS["ofed_driver_env"] = "dict|list"


# -- small helpers ------------------------------------------------------------------------------------------
def config(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """The role's variables over :data:`DEFAULTS` (keys without the ``network_operator_`` prefix)."""
    out = copy.deepcopy(DEFAULTS)
    out.update({k: v for k, v in (cfg or {}).items() if v is not None})
    return out


def from_variables(variables: Mapping[str, Any] | None) -> dict[str, Any]:
    """The role's ``network_operator_*`` variables as ``cfg``: the prefix stripped, only the keys of
    :data:`DEFAULTS` (the role's other variables - release, chart, kubeconfig - are not this module's)."""
    out: dict[str, Any] = {}
    for name, value in (variables or {}).items():
        key = str(name)[len(PREFIX) :] if str(name).startswith(PREFIX) else None
        if key in DEFAULTS:
            out[key] = plain(value)  # rendered once: cfg is deep-copied below
    return out


def _var(key: str, *path: str | int) -> str:
    """``network_operator_rdma_shared_resources[0].name``."""
    out = PREFIX + key
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _strings(value: Any) -> list[str]:
    return [str(v) for v in _list(value)]


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def env_list(env: Any) -> list[dict[str, str]]:
    """``{NAME: value}`` or ``[{name, value}]`` -> upstream's ``[{name, value}]`` (values as strings; booleans
    as ``true``/``false``, as the driver container reads them)."""
    if isinstance(env, Mapping):
        return [{"name": str(k), "value": _env_text(v)} for k, v in env.items()]
    return [
        {"name": str(e.get("name")), "value": _env_text(e.get("value"))} for e in _list(env) if isinstance(e, Mapping)
    ]


def _image(cfg: Mapping[str, Any], section: str, **defaults: str) -> dict[str, Any]:
    """``{image}`` plus the section's own repository/version (else spec.global applies, as upstream's
    ApplyGlobalConfig does)."""
    override = _dict(_dict(cfg.get("images")).get(section))
    out: dict[str, Any] = {"image": override.get("image") or IMAGES[section]}
    for key in ("repository", "version"):
        value = override.get(key) or defaults.get(key)
        if value:
            out[key] = str(value)
    return out


def _selectors(item: Mapping[str, Any], keys: Sequence[str]) -> dict[str, list[str]]:
    return {k: _strings(item.get(k)) for k in keys if _list(item.get(k))}


# -- builders ----------------------------------------------------------------------------------------------
def rdma_shared_config(resources: Iterable[Mapping[str, Any]]) -> str:
    """The RDMA shared device plugin's config string: ``{"configList": [{"resourceName", "rdmaHcaMax",
    "selectors": {...}}]}`` (webhook-schemas/rdma_shared_device_plugin.json)."""
    items = [
        {
            "resourceName": str(r.get("name")),
            "rdmaHcaMax": r.get("rdmaHcaMax"),
            "selectors": _selectors(r, RDMA_SELECTORS),
        }
        for r in resources
    ]
    return json.dumps({"configList": items}, indent=2)


def sriov_device_plugin_config(resources: Iterable[Mapping[str, Any]]) -> str:
    """The SR-IOV network device plugin's config string: ``{"resourceList": [{"resourcePrefix": "nvidia.com",
    "resourceName", "selectors": {...}}]}``; our ``deviceIDs`` is its ``devices``."""
    items = []
    for r in resources:
        sel: dict[str, Any] = {
            ("devices" if k == "deviceIDs" else k): v for k, v in _selectors(r, HOST_DEVICE_SELECTORS).items()
        }
        if isinstance(r.get("isRdma"), bool):
            sel["isRdma"] = r["isRdma"]
        items.append({"resourcePrefix": "nvidia.com", "resourceName": str(r.get("name")), "selectors": sel})
    return json.dumps({"resourceList": items}, indent=2)


def nic_cluster_policy(cfg: Mapping[str, Any]) -> Obj:
    """The NicClusterPolicy ``nic-cluster-policy`` (the only name the operator reconciles) from the role's
    variables (see the module docstring). Call :func:`network_input_findings` first: this builds, it does not
    judge."""
    c = config(cfg)
    spec: dict[str, Any] = {
        "global": {
            "repository": c["repository"] or RELEASE["repository"],
            "version": c["version"] or RELEASE["version"],
        }
    }
    if c["image_pull_secrets"]:
        spec["global"]["imagePullSecrets"] = _strings(c["image_pull_secrets"])
    if c["ofed_driver_enabled"]:
        ofed = _image(c, "ofedDriver", version=c["ofed_driver_version"] or RELEASE["ofed_version"])
        env = env_list(c["ofed_driver_env"])
        if env:
            ofed["env"] = env
        if c["ofed_driver_upgrade_policy"]:
            ofed["upgradePolicy"] = copy.deepcopy(_dict(c["ofed_driver_upgrade_policy"]))
        if c["ofed_driver_force_precompiled"]:
            ofed["forcePrecompiled"] = True
        spec["ofedDriver"] = ofed
    if c["mode"] == "rdma_shared":
        plugin = _image(c, "rdmaSharedDevicePlugin")
        plugin["config"] = rdma_shared_config(_list(c["rdma_shared_resources"]))
        if c["use_cdi"]:
            plugin["useCdi"] = True
        spec["rdmaSharedDevicePlugin"] = plugin
    elif c["mode"] == "host_device":
        plugin = _image(c, "sriovDevicePlugin")
        plugin["config"] = sriov_device_plugin_config(_list(c["host_device_resources"]))
        if c["use_cdi"]:
            plugin["useCdi"] = True
        spec["sriovDevicePlugin"] = plugin
    secondary = {
        section: _image(c, section)
        for section, key in (
            ("cniPlugins", "cni_plugins_enabled"),
            ("multus", "multus_enabled"),
            ("ipoib", "ipoib_enabled"),
        )
        if c[key]
    }
    if secondary:
        spec["secondaryNetwork"] = secondary
    if c["nv_ipam_enabled"]:
        spec["nvIpam"] = {**_image(c, "nvIpam"), "enableWebhook": bool(c["nv_ipam_webhook"])}
    if c["doca_telemetry_enabled"]:
        dts = _image(c, "docaTelemetryService", **DOCA_TELEMETRY_RELEASE)
        if c["doca_telemetry_config_map"]:
            dts["config"] = {"fromConfigMap": str(c["doca_telemetry_config_map"])}
        spec["docaTelemetryService"] = dts
    if c["tolerations"]:
        spec["tolerations"] = copy.deepcopy(_list(c["tolerations"]))
    if c["node_affinity"]:
        spec["nodeAffinity"] = copy.deepcopy(_dict(c["node_affinity"]))
    return {"apiVersion": API_VERSION, "kind": "NicClusterPolicy", "metadata": {"name": POLICY_NAME}, "spec": spec}


def chart_values(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The chart values the role owns: the bundled NFD off while the nfd role manages NFD, the bundled SR-IOV
    Network Operator on only in ``sriov`` mode with the bundled source (never two SR-IOV operators), and then its
    chart-rendered SriovOperatorConfig off (the sriov_network_operator role owns that object)."""
    c = config(cfg)
    bundled = c["mode"] == "sriov" and bool(c["sriov_bundled"])
    out: dict[str, Any] = {"nfd": {"enabled": not c["nfd_managed"]}, "sriovNetworkOperator": {"enabled": bundled}}
    if bundled:
        # The chart renders its own SriovOperatorConfig "default" (network-operator 26.4.1's values set
        # sriov-network-operator.sriovOperatorConfig.deploy: true) while the sriov_network_operator role applies
        # the same object: two owners, the config daemon's node selector the union of both, and the next helm
        # upgrade fails with a field conflict on .spec.logLevel. The role's copy is the one: the chart's is off.
        out["sriov-network-operator"] = {"sriovOperatorConfig": {"deploy": False}}
    return out


def _ipam(item: Mapping[str, Any]) -> str | None:
    if item.get("ip_pool"):
        return json.dumps({"type": "nv-ipam", "poolName": str(item["ip_pool"])})
    if isinstance(item.get("ipam"), Mapping):
        return json.dumps(item["ipam"], sort_keys=True)
    if isinstance(item.get("ipam"), str) and item["ipam"]:
        return str(item["ipam"])
    return None


def ip_pool(item: Mapping[str, Any], namespace: str) -> Obj:
    """An nv-ipam IPPool in the operator's namespace."""
    spec: dict[str, Any] = {"subnet": str(item.get("subnet")), "perNodeBlockSize": item.get("perNodeBlockSize")}
    for key in ("gateway", "exclusions", "routes", "defaultGateway", "nodeSelector"):
        if item.get(key) not in (None, "", [], {}):
            spec[key] = copy.deepcopy(item[key])
    meta = {"name": str(item.get("name")), "namespace": namespace}
    return {"apiVersion": IPAM_API_VERSION, "kind": "IPPool", "metadata": meta, "spec": spec}


def network(kind: str, item: Mapping[str, Any]) -> Obj:
    """A MacvlanNetwork, HostDeviceNetwork or IPoIBNetwork (cluster-scoped; the operator writes the
    NetworkAttachmentDefinition of the same name into ``spec.networkNamespace``)."""
    spec: dict[str, Any] = {"networkNamespace": str(item.get("namespace") or "default")}
    if kind == "MacvlanNetwork":
        spec.update({"master": str(item.get("master")), "mode": str(item.get("mode") or "bridge")})
        if item.get("mtu") is not None:
            spec["mtu"] = item["mtu"]
    elif kind == "HostDeviceNetwork":
        spec["resourceName"] = str(item.get("resource"))
    else:
        spec["master"] = str(item.get("master"))
    ipam = _ipam(item)
    if ipam:
        spec["ipam"] = ipam
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": str(item.get("name"))}, "spec": spec}


NETWORK_KINDS = {
    "macvlan_networks": "MacvlanNetwork",
    "host_device_networks": "HostDeviceNetwork",
    "ipoib_networks": "IPoIBNetwork",
}


def network_objects(cfg: Mapping[str, Any]) -> list[Obj]:
    """The IPPools, then the networks, in apply order (the IPPool CRD exists only once the policy's nvIpam
    state is ready)."""
    c = config(cfg)
    out = [ip_pool(p, str(c["namespace"])) for p in _list(c["ip_pools"]) if isinstance(p, Mapping)]
    for key, kind in NETWORK_KINDS.items():
        out += [network(kind, n) for n in _list(c[key]) if isinstance(n, Mapping)]
    return out


# -- input rules --------------------------------------------------------------------------------------------
def _bad(fid: str, var: str, value: Any, cause: str, fix: str, *evidence: str) -> Finding:
    return variable_finding(fid, var, value, cause, fix, *evidence)


def _warn(f: Finding) -> Finding:
    f["severity"] = "warning"
    return f


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

    - The driver container on a host that has MLNX_OFED/DOCA-OFED: ``_host_rules.mofed`` (finding
      ``host-ofed-with-doca-driver``), an error unless ``allow_host_mofed`` (then a warning). Only hosts with an
      NVIDIA NIC count: the driver DaemonSet runs nowhere else.
    - With the driver container, the GPU Operator's nvidia-peermem must build against it: useHostMofed must be
      false (``network-gpu-mofed-disagree``, once, not per host); the host-presence comparison of
      ``_host_rules.mofed`` (``rdma-host-mofed-mismatch``) does not apply then.
    - Without the driver container, ``_host_rules.mofed`` compares useHostMofed with each host's MOFED as is.
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
