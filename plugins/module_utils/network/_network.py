# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The network_operator role's variables and builders, once: pure functions (no I/O) of the role's variables.
Builders return the objects the role applies (the NicClusterPolicy, IPPools, MacvlanNetwork / HostDeviceNetwork /
IPoIBNetwork) and the chart values it owns. The role's rules return findings ``{id, severity, object, evidence,
cause, fix}``: on its variables in ``_network_inputs`` and ``_network_pools``, against the hosts' ``gpuops_host``
facts in ``_network_hosts``. The readiness predicates of the objects it builds are in ``status/_network_ready``
(the builders import from there, never the other way).

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
from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs import kind_of, variable_finding
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
