# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""SR-IOV Network Operator (k8snetworkplumbingwg v1.6.0): the rules and builders of the sriov_network_operator
role, as pure functions (no I/O).

- Builders turn the role's structured variables (snake_case) into the custom resources (camelCase):
  :func:`node_policy` (SriovNetworkNodePolicy), :func:`sriov_network`, :func:`sriov_ib_network` and
  :func:`operator_config` (the SriovOperatorConfig ``default``, the only one the operator reconciles). They raise
  ``InvalidInput`` on what the findings below report; the role runs the findings first.
- :func:`policy_input_findings`: bad input before any change, each finding naming the variable and field.
- :func:`policy_host_findings`: the policies against the hosts' ``gpu_host_facts`` (NICs, PF names, firmware VF
  limits) and host_prep's own VF creation: one owner per PF (see :func:`pf_ownership_findings`).
- :func:`resource_prefix` for the resource names. The readiness predicates (the SriovNetworkNodeState, the
  allocatable VFs, a wait for a policy change) and upstream's selectors are in ``status/_sriov_ready``.

The one-owner-per-PF rule: a PF whose VFs host_prep creates (it is listed in the host's ``host_prep_sriov_vfs``,
with any count, 0 included) is owned by host_prep; a policy that selects it must say ``externally_managed: true``
(the operator then only hands the existing VFs to its device plugin and never writes ``sriov_numvfs``) and may ask
for at most the VFs host_prep creates. A PF not listed there is owned by the operator's config daemon; a policy
that marks it externally managed has nobody creating its VFs. Anything else is a finding, never a silent fight.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput
from ansible_collections.gpuops.platform.plugins.module_utils.host import _host_rules, _pci
from ansible_collections.gpuops.platform.plugins.module_utils.inputs import _inputs
from ansible_collections.gpuops.platform.plugins.module_utils.sriov import _sriov
from ansible_collections.gpuops.platform.plugins.module_utils.status._sriov_ready import (
    _netdevs,
    _pf_range,
    nic_selected,
    selects_node,
)

Finding = dict[str, Any]
Obj = dict[str, Any]
Unmet = Optional[str]  # noqa: UP045 - a runtime alias: module_utils still import on Python 3.9

GROUP = "sriovnetwork.openshift.io"
API_VERSION = GROUP + "/v1"
CONFIG_NAME = "default"  # pkg/consts.DefaultConfigName: the operator watches only this SriovOperatorConfig
RESERVED_POLICY_NAME = "default"  # pkg/consts.DefaultPolicyName: the operator's own policy name

VAR_SOURCE = "sriov_network_operator_source"
VAR_POLICIES = "sriov_network_operator_policies"
VAR_NETWORKS = "sriov_network_operator_networks"
VAR_IB_NETWORKS = "sriov_network_operator_ib_networks"
VAR_CONFIG = "sriov_network_operator_config"
VAR_HOST_PREP = "host_prep_sriov_vfs"

# standalone: the upstream chart (operator.resourcePrefix "openshift.io"); network_operator: the copy bundled in
# the NVIDIA Network Operator chart (sriov-network-operator.operator.resourcePrefix "nvidia.com").
SOURCES = ("standalone", "network_operator")
DEFAULT_PREFIX = {"standalone": "openshift.io", "network_operator": "nvidia.com"}

RESOURCE_NAME_RE = re.compile(r"^[a-zA-Z0-9_]+\Z")  # pkg/webhook/validate.go staticValidateSriovNetworkNodePolicy
DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
DNS1123_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
HEX_ID_RE = re.compile(r"^(0x)?([0-9a-fA-F]{4})\Z")
DEVICE_TYPES = ("netdevice", "vfio-pci")
LINK_TYPES = ("eth", "ib")  # the CRD enum is eth|ETH|ib|IB: the builders write the lower-case form
LINK_STATES = ("auto", "enable", "disable")
VLAN_PROTOS = ("802.1q", "802.1Q", "802.1ad", "802.1AD")
CNI_LOG_LEVELS = ("panic", "error", "warning", "info", "debug", "")
CONFIGURATION_MODES = ("daemon", "systemd")
DISABLE_PLUGINS = ("mellanox",)
MELLANOX = "15b3"
MLX_MAX_VFS = 128  # pkg/webhook/validate.go MlxMaxVFs: the webhook refuses more VFs on an NVIDIA/Mellanox PF


POLICY_KEYS = {
    "name": "metadata.name",
    "resource_name": "resourceName",
    "node_selector": "nodeSelector",
    "num_vfs": "numVfs",
    "nic_selector": "nicSelector",
    "device_type": "deviceType",
    "is_rdma": "isRdma",
    "link_type": "linkType",
    "mtu": "mtu",
    "priority": "priority",
    "externally_managed": "externallyManaged",
}
NIC_SELECTOR_KEYS = {"vendor": "vendor", "device_id": "deviceID", "pf_names": "pfNames", "root_devices": "rootDevices"}
NETWORK_KEYS = {
    "name": "metadata.name",
    "resource_name": "resourceName",
    "network_namespace": "networkNamespace",
    "ipam": "ipam",
    "capabilities": "capabilities",
    "meta_plugins": "metaPlugins",
    "link_state": "linkState",
    "vlan": "vlan",
    "vlan_qos": "vlanQoS",
    "vlan_proto": "vlanProto",
    "spoof_chk": "spoofChk",
    "trust": "trust",
    "min_tx_rate": "minTxRate",
    "max_tx_rate": "maxTxRate",
    "log_level": "logLevel",
    "log_file": "logFile",
}
IB_NETWORK_KEYS = ("name", "resource_name", "network_namespace", "ipam", "capabilities", "meta_plugins", "link_state")
CONFIG_KEYS = {
    "config_daemon_node_selector": "configDaemonNodeSelector",
    "log_level": "logLevel",
    "disable_drain": "disableDrain",
    "configuration_mode": "configurationMode",
    "enable_injector": "enableInjector",
    "enable_operator_webhook": "enableOperatorWebhook",
    "use_cdi": "useCDI",
    "disable_plugins": "disablePlugins",
    "enable_ovs_offload": "enableOvsOffload",
    "feature_gates": "featureGates",
}


# -- small helpers ---------------------------------------------------------------------------------------------
def _bad(fid: str, var: str, value: Any, cause: str, fix: str, *evidence: str) -> Finding:
    return _inputs.variable_finding(fid, var, value, cause, fix, *evidence)


def _finding(fid: str, severity: str, kind: str, name: str, evidence: Iterable[str], cause: str, fix: str) -> Finding:
    return {
        "id": fid,
        "severity": severity,
        "object": {"kind": kind, "name": name},
        "evidence": [e for e in evidence if e],
        "cause": cause,
        "fix": fix,
    }


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _unknown_keys(item: Mapping[str, Any], known: Iterable[str], var: str) -> list[Finding]:
    """Keys the role does not know, with the snake_case key meant when the upstream camelCase one was written."""
    known = list(known)
    camel = {v: k for k, v in {**POLICY_KEYS, **NIC_SELECTOR_KEYS, **NETWORK_KEYS, **CONFIG_KEYS}.items()}
    out = []
    for key in item:
        if key in known:
            continue
        meant = camel.get(str(key))
        hint = f"write {meant} (the role's keys are snake_case)" if meant in known else "remove it"
        out.append(
            _bad(
                "sriov-unknown-key",
                f"{var}.{key}",
                item[key],
                f"{key} is not a key of {var}; known keys: {', '.join(known)}.",
                f"{hint}.",
            )
        )
    return out


def _hex_id(value: Any) -> str | None:
    """A PCI vendor/device ID as sysfs and the operator write it (4 lower-case hex digits, no 0x), or None.
    An unquoted YAML 1021 arrives as the int 1021: accepted from 1000 to 9999 only (0100 would have been read as
    the octal 64)."""
    if _is_int(value) and 1000 <= value <= 9999:
        return str(value)
    m = HEX_ID_RE.match(value) if isinstance(value, str) else None
    return m.group(2).lower() if m else None


def _label_map(value: Any) -> dict[str, str] | None:
    """A label map with string values (YAML true/false/numbers written as strings), or None when not a map."""
    if not isinstance(value, Mapping):
        return None
    out = {}
    for k, v in value.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif v is None:
            v = ""
        out[str(k)] = str(v)
    return out


def _json_text(value: Any) -> tuple[str | None, str | None]:
    """(JSON text, problem): a mapping becomes canonical JSON (sorted keys, so re-runs are no-ops); a string must
    already be a JSON object."""
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True, separators=(",", ":")), None
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            return None, f"is not valid JSON ({exc})"
        if not isinstance(parsed, dict):
            return None, "is JSON but not an object"
        return value, None
    return None, f"is {_inputs.a(_inputs.kind_of(value))}, not a mapping or a JSON object string"


def _on_off(value: Any) -> str | None:
    """spoofChk/trust: YAML 1.1 reads an unquoted on/off as a bool, so both spellings are taken."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return value if value in ("on", "off") else None


def _errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f["severity"] == "error"]


def _raise_on(findings: list[Finding]) -> None:
    errors = _errors(findings)
    if errors:
        raise InvalidInput("; ".join(_inputs.message(f) for f in errors))


# -- SriovNetworkNodePolicy ------------------------------------------------------------------------------------
def _nic_selector(sel: Any, num_vfs: int | None, var: str) -> tuple[dict[str, Any], list[Finding]]:
    if not isinstance(sel, Mapping):
        return {}, [
            _bad(
                "sriov-nic-selector-invalid",
                var,
                sel,
                "nic_selector must be a mapping of vendor, device_id, pf_names and/or root_devices.",
                f"set {var} to, for example, {{vendor: '15b3', device_id: '1021', pf_names: [ibp24s0]}}.",
            )
        ]
    out: list[Finding] = _unknown_keys(sel, NIC_SELECTOR_KEYS, var)
    spec: dict[str, Any] = {}
    for key in ("vendor", "device_id"):
        if sel.get(key) in (None, ""):
            continue
        hexid = _hex_id(sel[key])
        if hexid is None:
            out.append(
                _bad(
                    "sriov-pci-id-invalid",
                    f"{var}.{key}",
                    sel[key],
                    f"{key} must be a PCI ID of 4 hex digits as lspci -n shows it (15b3, 1021, 0d58).",
                    f"quote it in YAML: {key}: '{sel[key]}' if that is what you meant.",
                )
            )
        else:
            spec[NIC_SELECTOR_KEYS[key]] = hexid
    pf_names = sel.get("pf_names") or []
    if not isinstance(pf_names, list) or not all(isinstance(p, str) for p in pf_names):
        out.append(
            _bad(
                "sriov-pf-names-invalid", f"{var}.pf_names", pf_names, "pf_names must be a list of strings.", "fix it."
            )
        )
        pf_names = []
    for pf in pf_names:
        name, first, last, problem = _pf_range(pf)
        if problem is None and not _sriov.NETDEV_RE.match(name):
            problem = "the PF name is not a network interface name (1-15 characters, no '/', ':' or spaces)"
        if problem is None and first is not None and last is not None:
            if last < first:
                problem = f"the VF range ends ({last}) before it starts ({first})"
            elif num_vfs is not None and last >= num_vfs:
                problem = f"the VF range ends at VF {last}, but num_vfs {num_vfs} gives VFs 0 to {num_vfs - 1}"
        if problem:
            out.append(
                _bad(
                    "sriov-pf-name-invalid",
                    f"{var}.pf_names",
                    pf,
                    f"{pf}: {problem}.",
                    "name the PF by its netdev (ip -br link), optionally with a VF range: ens1f0#0-3.",
                )
            )
    if pf_names:
        spec["pfNames"] = list(pf_names)
    roots = sel.get("root_devices") or []
    if not isinstance(roots, list):
        roots = [roots]
    addresses = []
    for root in roots:
        try:
            addresses.append(_pci.normalize_address(root))
        except InvalidInput:
            out.append(
                _bad(
                    "sriov-root-device-invalid",
                    f"{var}.root_devices",
                    root,
                    f"{_inputs.show(root)} is not a PCI address.",
                    "write the PF's PCI address as lspci -D shows it: 0000:18:00.0.",
                )
            )
    if addresses:
        spec["rootDevices"] = addresses  # the operator compares the full DDDD:BB:DD.F form, lower case
    if not spec and not out:
        out.append(
            _bad(
                "sriov-nic-selector-empty",
                var,
                sel,
                "nic_selector selects no NIC: the operator ignores a policy whose selector is empty.",
                "set at least one of vendor, device_id, pf_names, root_devices.",
            )
        )
    return spec, out


def _policy(rail: Any, var: str) -> tuple[Obj, list[Finding]]:
    """(the policy object, findings) - the object is partial when there are errors."""
    if not isinstance(rail, Mapping):
        return {}, [
            _bad(
                "sriov-policy-invalid",
                var,
                rail,
                "each policy must be a mapping.",
                "see docs/sriov_network_operator.md.",
            )
        ]
    out = _unknown_keys(rail, POLICY_KEYS, var)
    spec: dict[str, Any] = {}

    resource = rail.get("resource_name")
    if not isinstance(resource, str) or not RESOURCE_NAME_RE.match(resource):
        fixed = re.sub(r"[^a-zA-Z0-9_]", "_", resource) if isinstance(resource, str) and resource else "rail0"
        out.append(
            _bad(
                "sriov-resource-name-invalid",
                f"{var}.resource_name",
                resource,
                "resource_name must match ^[a-zA-Z0-9_]+$ (letters, digits, underscores: no dash, no slash; the "
                "operator adds the <prefix>/ itself), or the operator's webhook and device plugin refuse it.",
                f"set {var}.resource_name to, for example, {fixed}.",
            )
        )
    else:
        spec["resourceName"] = resource

    name = rail.get("name")
    if name is None and isinstance(resource, str) and RESOURCE_NAME_RE.match(resource):
        name = resource.lower().replace("_", "-")
    if not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN_RE.match(name):
        out.append(
            _bad(
                "sriov-policy-name-invalid",
                f"{var}.name",
                name,
                "the policy name must be a DNS-1123 subdomain (lower-case letters, digits, '-' and '.').",
                f"set {var}.name, for example to rail0.",
            )
        )
    elif name == RESERVED_POLICY_NAME:
        out.append(
            _bad(
                "sriov-policy-name-reserved",
                f"{var}.name",
                name,
                "the name default is the operator's own policy name (it alone may ask for 0 VFs).",
                f"give {var} another name.",
            )
        )

    selector = _label_map(rail.get("node_selector"))
    if selector is None:
        out.append(
            _bad(
                "sriov-node-selector-invalid",
                f"{var}.node_selector",
                rail.get("node_selector"),
                "node_selector is required and must be a mapping of node labels ({} selects every node).",
                f"set {var}.node_selector, for example {{feature.node.kubernetes.io/pci-15b3.sriov.capable: 'true'}}.",
            )
        )
    else:
        spec["nodeSelector"] = selector

    num = rail.get("num_vfs")
    num_ok: int | None = None
    if isinstance(num, bool) or not isinstance(num, int) or num < 0:
        out.append(
            _bad(
                "sriov-num-vfs-invalid",
                f"{var}.num_vfs",
                num,
                "num_vfs must be an integer of 1 or more (VFs per selected PF).",
                f"set {var}.num_vfs to the VFs each PF gets, at most its sriov_totalvfs.",
            )
        )
    elif num == 0:
        out.append(
            _bad(
                "sriov-num-vfs-zero",
                f"{var}.num_vfs",
                num,
                "num_vfs 0 is refused by the operator's webhook for any policy but its own (default).",
                f"remove the policy from {VAR_POLICIES} to remove its VFs (the operator resets the PF).",
            )
        )
    else:
        num_ok = num
        spec["numVfs"] = num

    sel_spec, sel_findings = _nic_selector(rail.get("nic_selector"), num_ok, f"{var}.nic_selector")
    out += sel_findings
    spec["nicSelector"] = sel_spec

    device_type = rail.get("device_type", "netdevice")
    if device_type not in DEVICE_TYPES:
        out.append(
            _bad(
                "sriov-device-type-invalid",
                f"{var}.device_type",
                device_type,
                "device_type must be netdevice (kernel VF netdevs, RDMA) or vfio-pci (VFs for VMs/DPDK).",
                f"set {var}.device_type to netdevice or vfio-pci.",
            )
        )
    else:
        spec["deviceType"] = device_type

    is_rdma = rail.get("is_rdma", False)
    if not isinstance(is_rdma, bool):
        out.append(
            _bad("sriov-is-rdma-invalid", f"{var}.is_rdma", is_rdma, "is_rdma must be true or false.", "fix it.")
        )
    else:
        spec["isRdma"] = is_rdma
        if is_rdma and device_type == "vfio-pci":
            out.append(
                _bad(
                    "sriov-rdma-vfio",
                    f"{var}.is_rdma",
                    is_rdma,
                    "is_rdma: true conflicts with device_type: vfio-pci (the operator's webhook refuses it: RDMA needs "
                    "netdevice VFs; a VM gets RDMA through vfio-pci without it).",
                    f"set {var}.device_type: netdevice, or is_rdma: false.",
                )
            )

    link = rail.get("link_type")
    if link is not None:
        if isinstance(link, str) and link.lower() in LINK_TYPES:
            spec["linkType"] = link.lower()
        else:
            meant = {"ethernet": "eth", "ether": "eth", "roce": "eth", "infiniband": "ib"}.get(str(link).lower())
            out.append(
                _bad(
                    "sriov-link-type-invalid",
                    f"{var}.link_type",
                    link,
                    "link_type must be eth or ib (the CRD enum is eth, ETH, ib, IB).",
                    f"set {var}.link_type to {meant or 'eth or ib'}.",
                )
            )

    for key, low, high, why in (
        ("mtu", 1, None, "mtu must be an integer of 1 or more (the CRD minimum); leave it out to keep the PF's"),
        ("priority", 0, 99, "priority must be an integer from 0 (highest) to 99 (lowest)"),
    ):
        value = rail.get(key)
        if value is None:
            continue
        if not _is_int(value) or value < low or (high is not None and value > high):
            out.append(_bad(f"sriov-{key}-invalid", f"{var}.{key}", value, f"{why}.", f"fix {var}.{key}."))
        else:
            spec[key] = value

    external = rail.get("externally_managed", False)
    if not isinstance(external, bool):
        out.append(
            _bad(
                "sriov-externally-managed-invalid",
                f"{var}.externally_managed",
                external,
                "externally_managed must be true or false.",
                "fix it.",
            )
        )
    elif external:
        spec["externallyManaged"] = True

    obj = {"apiVersion": API_VERSION, "kind": "SriovNetworkNodePolicy", "metadata": {"name": name}, "spec": spec}
    return obj, out


def node_policy(rail: Mapping[str, Any], namespace: str | None = None, var: str = VAR_POLICIES) -> Obj:
    """The SriovNetworkNodePolicy of one rail (the role's snake_case variables -> upstream's spec). Policies
    belong in the operator's namespace: the operator reconciles no other."""
    obj, findings = _policy(rail, var)
    _raise_on(findings)
    if namespace:
        obj["metadata"]["namespace"] = namespace
    return obj


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


# -- SriovOperatorConfig "default" -----------------------------------------------------------------------------
def _operator_config(cfg: Any, var: str) -> tuple[Obj, list[Finding]]:
    cfg = {} if cfg is None else cfg
    if not isinstance(cfg, Mapping):
        return {}, [_bad("sriov-config-invalid", var, cfg, f"{var} must be a mapping.", "fix it.")]
    out = _unknown_keys(cfg, CONFIG_KEYS, var)
    # defaults as the upstream chart renders them (sriovOperatorConfig.* and admissionControllers.enabled false)
    spec: dict[str, Any] = {
        "enableInjector": False,
        "enableOperatorWebhook": False,
        "logLevel": 2,
        "disableDrain": False,
        "configurationMode": "daemon",
    }
    for key in ("enable_injector", "enable_operator_webhook", "disable_drain", "use_cdi", "enable_ovs_offload"):
        if key not in cfg:
            continue
        if isinstance(cfg[key], bool):
            spec[CONFIG_KEYS[key]] = cfg[key]
        else:
            out.append(
                _bad("sriov-config-invalid", f"{var}.{key}", cfg[key], f"{key} must be true or false.", "fix it.")
            )
    if "log_level" in cfg:
        if _is_int(cfg["log_level"]) and 0 <= cfg["log_level"] <= 2:
            spec["logLevel"] = cfg["log_level"]
        else:
            out.append(
                _bad(
                    "sriov-config-invalid",
                    f"{var}.log_level",
                    cfg["log_level"],
                    "log_level must be 0, 1 or 2.",
                    "fix it.",
                )
            )
    if "configuration_mode" in cfg:
        if cfg["configuration_mode"] in CONFIGURATION_MODES:
            spec["configurationMode"] = cfg["configuration_mode"]
        else:
            out.append(
                _bad(
                    "sriov-config-invalid",
                    f"{var}.configuration_mode",
                    cfg["configuration_mode"],
                    "configuration_mode must be daemon or systemd.",
                    "fix it.",
                )
            )
    if cfg.get("config_daemon_node_selector"):
        selector = _label_map(cfg["config_daemon_node_selector"])
        if selector is None:
            out.append(
                _bad(
                    "sriov-config-invalid",
                    f"{var}.config_daemon_node_selector",
                    cfg["config_daemon_node_selector"],
                    "config_daemon_node_selector must be a mapping of node labels.",
                    "fix it.",
                )
            )
        else:
            spec["configDaemonNodeSelector"] = selector
    plugins = cfg.get("disable_plugins")
    if plugins:
        if isinstance(plugins, list) and all(p in DISABLE_PLUGINS for p in plugins):
            spec["disablePlugins"] = list(plugins)
        else:
            out.append(
                _bad(
                    "sriov-config-invalid",
                    f"{var}.disable_plugins",
                    plugins,
                    "disable_plugins is a list whose only allowed entry is mellanox.",
                    "fix it.",
                )
            )
    gates = cfg.get("feature_gates")
    if gates:
        if isinstance(gates, Mapping) and all(isinstance(v, bool) for v in gates.values()):
            spec["featureGates"] = {str(k): v for k, v in gates.items()}
        else:
            out.append(
                _bad(
                    "sriov-config-invalid",
                    f"{var}.feature_gates",
                    gates,
                    "feature_gates maps gate names to true or false.",
                    "fix it.",
                )
            )
    obj = {"apiVersion": API_VERSION, "kind": "SriovOperatorConfig", "metadata": {"name": CONFIG_NAME}, "spec": spec}
    return obj, out


def operator_config(cfg: Mapping[str, Any] | None, namespace: str | None = None, var: str = VAR_CONFIG) -> Obj:
    """The SriovOperatorConfig, always named default: the operator reconciles no other name (its webhook refuses
    them) and reconciles no policy before it exists. Without config_daemon_node_selector the operator configures
    the nodes labelled node-role.kubernetes.io/worker="" and kubernetes.io/os=linux."""
    obj, findings = _operator_config(cfg, var)
    _raise_on(findings)
    if namespace:
        obj["metadata"]["namespace"] = namespace
    return obj


# -- input findings --------------------------------------------------------------------------------------------
def source_findings(source: Any, bundled_enabled: bool, bundled_var: str = "network_operator_mode") -> list[Finding]:
    """One SR-IOV operator, from one source: sriov_network_operator_source chooses the standalone chart or the copy
    bundled in the NVIDIA Network Operator (its sriovNetworkOperator.enabled, which network_operator_mode sriov
    turns on). Both would run two operators fighting over the same CRDs, policies and VFs."""
    if source not in SOURCES:
        return [
            _bad(
                "sriov-source-invalid",
                VAR_SOURCE,
                source,
                f"The value is not one of: {', '.join(SOURCES)}.",
                f"set {VAR_SOURCE} to standalone (the upstream chart, non-NVIDIA NICs) or network_operator (the "
                "copy bundled in the NVIDIA Network Operator).",
            )
        ]
    if source == "standalone" and bundled_enabled:
        return [
            _bad(
                "sriov-operator-two-sources",
                VAR_SOURCE,
                source,
                "Both SR-IOV operator sources are enabled: the standalone chart and the copy bundled in the NVIDIA "
                "Network Operator (sriovNetworkOperator.enabled true). Two operators would fight over the same "
                "policies and VFs.",
                f"choose one: set {VAR_SOURCE}: network_operator, or keep standalone and set {bundled_var} to "
                "rdma_shared or host_device.",
                f"{bundled_var}: sriovNetworkOperator.enabled is true",
            )
        ]
    if source == "network_operator" and not bundled_enabled:
        return [
            _bad(
                "sriov-operator-source-off",
                VAR_SOURCE,
                source,
                "The bundled SR-IOV operator is chosen but the NVIDIA Network Operator does not enable it "
                "(sriovNetworkOperator.enabled false).",
                f"set {bundled_var}: sriov, or {VAR_SOURCE}: standalone.",
                f"{bundled_var}: sriovNetworkOperator.enabled is false",
            )
        ]
    return []


def _resource_names(policies: Sequence[Obj]) -> dict[str, set[str]]:
    """resourceName -> the link types of the policies that provide it ('eth' when not set)."""
    out: dict[str, set[str]] = {}
    for p in policies:
        spec = p.get("spec") or {}
        if spec.get("resourceName"):
            out.setdefault(spec["resourceName"], set()).add(spec.get("linkType") or "eth")
    return out


def _duplicates(items: Sequence[tuple[str, Obj]], what: str) -> list[Finding]:
    """Names used twice among ``items`` ((variable path, object)); networks share one name space across both
    lists, because each renders a NetworkAttachmentDefinition of its name."""
    seen: dict[str, str] = {}
    out = []
    for var, obj in items:
        name = (obj.get("metadata") or {}).get("name")
        if not isinstance(name, str):
            continue
        if name in seen:
            out.append(
                _bad(
                    "sriov-duplicate-name",
                    f"{var}.name",
                    name,
                    f"{what} {name} is defined twice ({seen[name]} and {var}): the second would replace the first.",
                    "give each its own name.",
                )
            )
        else:
            seen[name] = var
    return out


def _as_list(value: Any, var: str) -> tuple[list[Any], list[Finding]]:
    if value is None:
        return [], []
    if isinstance(value, list):
        return value, []
    return [], [_bad("sriov-variable-type", var, value, f"{var} must be a list.", "fix it.")]


def webhook_findings(config: Any, values: Any, source: Any = "standalone") -> list[Finding]:
    """The operator's webhooks need the certificates the standalone chart hands it (upstream v1.6.0): with
    enable_operator_webhook / enable_injector the operator registers webhook configurations whose caBundle is its
    env ADMISSION_CONTROLLERS_CERTIFICATES_*_CA_CRT (bindata/manifests/operator-webhook/003-webhook.yaml,
    webhook/003-webhook.yaml) and servers that mount the Secrets ADMISSION_CONTROLLERS_CERTIFICATES_*_SECRET_NAME
    names; the chart sets those only with operator.admissionControllers.enabled (templates/operator.yaml). Without
    it the operator webhook (failurePolicy Fail) refuses every policy. The bundled copy's values are the Network
    Operator role's: not judged here."""
    if source != "standalone" or not isinstance(config, Mapping):
        return []
    operator = values.get("operator") if isinstance(values, Mapping) else None
    admission = operator.get("admissionControllers") if isinstance(operator, Mapping) else None
    if isinstance(admission, Mapping) and admission.get("enabled") is True:
        return []
    what = {
        "enable_operator_webhook": ("policy webhook (failurePolicy Fail)", " and refuses every SriovNetworkNodePolicy"),
        "enable_injector": ("network-resources-injector webhook", ""),
    }
    return [
        _bad(
            "sriov-webhook-without-certificates",
            f"{VAR_CONFIG}.{key}",
            True,
            f"{key} makes the operator register its {webhook}, but the chart gives it no certificates "
            "(operator.admissionControllers.enabled is not true in sriov_network_operator_values): the webhook "
            "configuration gets an empty caBundle and its server no certificate Secret, so the API server cannot "
            f"call it{refused}.",
            "set sriov_network_operator_values.operator.admissionControllers.enabled: true with certificates "
            "(certificates.certManager.enabled, or certificates.custom with the PEMs, or Secrets of the "
            "certificates.secretNames names), or leave the webhook off.",
        )
        for key, (webhook, refused) in what.items()
        if config.get(key) is True
    ]


def policy_input_findings(
    policies: Any,
    networks: Any = None,
    ib_networks: Any = None,
    config: Any = None,
    source: Any = "standalone",
    bundled_enabled: bool = False,
    values: Any = None,
) -> list[Finding]:
    """Every input rule of the role, before any change: each policy, network and the operator config field by
    field, the source choice, duplicate names, networks whose resource no policy provides (or of the wrong
    link type: a SriovIBNetwork needs a link_type ib policy, a SriovNetwork an Ethernet one) and webhooks turned on
    without the chart's certificates (`values`: sriov_network_operator_values)."""
    out = source_findings(source, bundled_enabled)
    built: dict[str, list[tuple[str, Obj]]] = {VAR_POLICIES: [], VAR_NETWORKS: [], VAR_IB_NETWORKS: []}
    for var, value in ((VAR_POLICIES, policies), (VAR_NETWORKS, networks), (VAR_IB_NETWORKS, ib_networks)):
        items, problems = _as_list(value, var)
        out += problems
        for i, item in enumerate(items):
            path = f"{var}[{i}]"
            obj, found = _policy(item, path) if var == VAR_POLICIES else _network(item, path, var == VAR_IB_NETWORKS)
            out += found
            built[var].append((path, obj))
    out += _duplicates(built[VAR_POLICIES], "SriovNetworkNodePolicy")
    out += _duplicates(built[VAR_NETWORKS] + built[VAR_IB_NETWORKS], "network")
    out += _operator_config(config, VAR_CONFIG)[1]
    out += webhook_findings(config, values, source)

    provided = _resource_names([obj for _where, obj in built[VAR_POLICIES]])
    for var, want in ((VAR_NETWORKS, "eth"), (VAR_IB_NETWORKS, "ib")):
        for path, obj in built[var]:
            resource = (obj.get("spec") or {}).get("resourceName")
            if not resource:
                continue
            if resource not in provided:
                out.append(
                    _bad(
                        "sriov-network-resource-unknown",
                        f"{path}.resource_name",
                        resource,
                        f"No policy in {VAR_POLICIES} provides resource {resource}: the network's pods would wait "
                        "for VFs that nothing advertises.",
                        "use the resource_name of one of the policies, or add the policy.",
                        "policies' resource names: " + (", ".join(sorted(provided)) or "none"),
                    )
                )
            elif want not in provided[resource]:
                kind = "SriovIBNetwork" if want == "ib" else "SriovNetwork"
                other = f"{VAR_NETWORKS} (SriovNetwork)" if want == "ib" else f"{VAR_IB_NETWORKS} (SriovIBNetwork)"
                out.append(
                    _bad(
                        "sriov-network-link-type-mismatch",
                        f"{path}.resource_name",
                        resource,
                        f"A {kind} needs {'InfiniBand' if want == 'ib' else 'Ethernet'} VFs, but the policies that "
                        f"provide {resource} have link_type {', '.join(sorted(provided[resource]))}.",
                        f"move the network to {other}, or set the policy's link_type: {want}.",
                    )
                )
    return out


# -- host findings ---------------------------------------------------------------------------------------------
def _nic_name(nic: Mapping[str, Any]) -> str:
    netdev = nic.get("netdev") or "-"
    return f"{netdev} ({nic.get('address')})"


def _nic_line(nic: Mapping[str, Any]) -> str:
    total = nic.get("sriov_totalvfs")
    return "{} {}:{} {}, sriov_totalvfs {}".format(
        _nic_name(nic),
        nic.get("vendor_id"),
        nic.get("device_id"),
        nic.get("link_layer") or "",
        "none (no SR-IOV)" if total is None else total,
    ).replace("  ", " ")


_HOSTS = "\x00hosts\x00"  # stands for the hosts a finding holds on, until findings that differ only there merge
_SHOWN_HOSTS = 3


def _hosts_text(hosts: Sequence[str]) -> str:
    """``host dgx-01``, ``hosts dgx-01, dgx-02``, ``hosts dgx-01, dgx-02, dgx-03 and 997 more``."""
    shown = ", ".join(hosts[:_SHOWN_HOSTS])
    more = f" and {len(hosts) - _SHOWN_HOSTS} more" if len(hosts) > _SHOWN_HOSTS else ""
    return f"host{'s' if len(hosts) > 1 else ''} {shown}{more}"


def _fill(value: Any, text: str) -> Any:
    if isinstance(value, str):
        return value.replace(_HOSTS, text)
    if isinstance(value, list):
        return [_fill(v, text) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, text) for k, v in value.items()}
    return value


def _merge_hosts(per_host: Iterable[tuple[str, Finding]]) -> list[Finding]:
    """Findings written with the hosts placeholder, one per host: those equal but for the host become one finding
    that names its hosts (a uniform fleet of 1000 nodes gives one finding, not 1000), in first-seen order."""
    groups: dict[str, tuple[Finding, list[str]]] = {}
    for host, f in per_host:
        groups.setdefault(json.dumps(f, sort_keys=True), (f, []))[1].append(host)
    return [_fill(f, _hosts_text(hosts)) for f, hosts in groups.values()]


def _vf_range(spec: Mapping[str, Any], nic: Mapping[str, Any]) -> tuple[int, int]:
    names = set(_netdevs(nic))
    for entry in (spec.get("nicSelector") or {}).get("pfNames") or []:
        name, first, last, _ranged = _pf_range(entry)
        if name in names and first is not None and last is not None:
            return first, last
    return 0, int(spec.get("numVfs") or 0) - 1


def _limit_findings(policy: str, on: str, nic: Mapping[str, Any], num: int) -> list[Finding]:
    addr = nic.get("address") or "?"
    total = nic.get("sriov_totalvfs")
    where = f"PF {_nic_name(nic)} on {on}"
    if total is None:
        return [
            _finding(
                "sriov-policy-pf-not-capable",
                "error",
                "SriovNetworkNodePolicy",
                policy,
                [f"{addr} on {on}: no sriov_totalvfs in sysfs"],
                f"policy {policy} selects {where}, which has no SR-IOV capability (off in firmware or BIOS)",
                "enable SR-IOV in the BIOS and the NIC firmware "
                f"(mlxconfig -d {addr} set SRIOV_EN=1 NUM_OF_VFS={num}), or narrow the policy's nic_selector",
            )
        ]
    out = []
    if num > total:
        out.append(
            _finding(
                "sriov-policy-vfs-above-limit",
                "error",
                "SriovNetworkNodePolicy",
                policy,
                [f"sriov_totalvfs: {total}", f"num_vfs: {num}"],
                f"policy {policy} asks for {num} VFs on {where}, above the firmware limit sriov_totalvfs {total}: "
                "the kernel refuses the write and the node never syncs",
                f"lower num_vfs to {total} or less, or raise the limit in firmware: mlxconfig -d {addr} set "
                f"SRIOV_EN=1 NUM_OF_VFS={num}, then reboot",
            )
        )
    if nic.get("vendor_id") == MELLANOX and num > MLX_MAX_VFS:
        out.append(
            _finding(
                "sriov-policy-vfs-above-operator-limit",
                "error",
                "SriovNetworkNodePolicy",
                policy,
                [f"num_vfs: {num}", f"operator limit for vendor {MELLANOX}: {MLX_MAX_VFS}"],
                f"policy {policy} asks for {num} VFs on {where}: the operator's webhook refuses more than "
                f"{MLX_MAX_VFS} VFs on an NVIDIA/Mellanox PF",
                f"lower num_vfs to {MLX_MAX_VFS} or less",
            )
        )
    return out


def _claims_findings(on: str, nic: Mapping[str, Any], claims: list[tuple[str, Mapping[str, Any]]]) -> list[Finding]:
    """Two or more policies on one PF: same VF count, disjoint VF ranges, same externally_managed (the operator
    merges them per PF: different counts make the result depend on priority and names)."""
    where = f"PF {_nic_name(nic)} on {on}"
    out = []
    counts = {name: int(spec.get("numVfs") or 0) for name, spec in claims}
    if len(set(counts.values())) > 1:
        out.append(
            _finding(
                "sriov-policy-pf-conflict",
                "error",
                "PCIDevice",
                str(nic.get("address")),
                [f"policy {n}: num_vfs {c}" for n, c in counts.items()],
                f"{len(claims)} policies claim {where} with different VF counts: the PF gets one sriov_numvfs",
                "give every policy on this PF the same num_vfs and split the VFs with pf_names ranges "
                "(ens1f0#0-3, ens1f0#4-7), or select the PF from one policy only",
            )
        )
    for i, (a_name, a_spec) in enumerate(claims):
        for b_name, b_spec in claims[i + 1 :]:
            a_rng, b_rng = _vf_range(a_spec, nic), _vf_range(b_spec, nic)
            if a_rng[0] <= b_rng[1] and b_rng[0] <= a_rng[1]:
                out.append(
                    _finding(
                        "sriov-policy-vf-range-overlap",
                        "error",
                        "PCIDevice",
                        str(nic.get("address")),
                        [f"policy {a_name}: VFs {a_rng[0]}-{a_rng[1]}", f"policy {b_name}: VFs {b_rng[0]}-{b_rng[1]}"],
                        f"policies {a_name} and {b_name} both claim VFs of {where}: the operator gives overlapping "
                        "VFs to one policy only (its webhook refuses the second)",
                        "give each policy its own VF range with pf_names: [<pf>#<first>-<last>]",
                    )
                )
            if bool(a_spec.get("externallyManaged")) != bool(b_spec.get("externallyManaged")):
                out.append(
                    _finding(
                        "sriov-policy-external-mixed",
                        "error",
                        "PCIDevice",
                        str(nic.get("address")),
                        [
                            f"policy {a_name}: externally_managed {str(bool(a_spec.get('externallyManaged'))).lower()}",
                            f"policy {b_name}: externally_managed {str(bool(b_spec.get('externallyManaged'))).lower()}",
                        ],
                        f"policies {a_name} and {b_name} disagree on who creates the VFs of {where}",
                        "set the same externally_managed on every policy of the PF (see the one-owner rule in "
                        "docs/sriov_network_operator.md)",
                    )
                )
    return out


def pf_ownership_findings(
    host: str, nic: Mapping[str, Any], claims: list[tuple[str, Mapping[str, Any]]], host_prep_vfs: int | None
) -> list[Finding]:
    """One owner per PF. host_prep owns a PF it lists (``host_prep_vfs`` is its count, None when not listed): the
    policies on it (``claims``: (policy name, spec)) must be externally managed and ask for at most that many VFs.
    Otherwise the operator's config daemon owns it: an externally managed policy there has nobody creating its
    VFs."""
    return _ownership(f"host {host}", nic, claims, host_prep_vfs)


def _ownership(
    on: str, nic: Mapping[str, Any], claims: list[tuple[str, Mapping[str, Any]]], host_prep_vfs: int | None
) -> list[Finding]:
    addr = str(nic.get("address"))
    where = f"PF {_nic_name(nic)} on {on}"
    out = []
    for name, spec in claims:
        num = int(spec.get("numVfs") or 0)
        external = bool(spec.get("externallyManaged"))
        if host_prep_vfs is not None and not external:
            out.append(
                _finding(
                    "sriov-pf-two-owners",
                    "error",
                    "PCIDevice",
                    addr,
                    [
                        f"{VAR_HOST_PREP} on {on} sets {host_prep_vfs} VFs",
                        f"policy {name}: num_vfs {num}, externally_managed false",
                    ],
                    f"{where} has two owners: host_prep's sriov_vfs (and its boot-time udev rule) and the operator's "
                    f"config daemon (policy {name}) would both write sriov_numvfs",
                    f"either set externally_managed: true on policy {name} (host_prep keeps creating the VFs, the "
                    f"operator only hands them out), or remove the PF from {VAR_HOST_PREP} on {on} (the operator "
                    "creates them)",
                )
            )
        elif host_prep_vfs is not None and num > host_prep_vfs:
            out.append(
                _finding(
                    "sriov-policy-above-host-prep",
                    "error",
                    "PCIDevice",
                    addr,
                    [f"{VAR_HOST_PREP} on {on} sets {host_prep_vfs} VFs", f"policy {name}: num_vfs {num}"],
                    f"policy {name} (externally managed) asks for {num} VFs of {where}, but host_prep creates "
                    f"{host_prep_vfs}: the operator refuses more VFs than exist",
                    f"raise num_vfs for the PF in {VAR_HOST_PREP} on {on} to {num}, or lower the policy's num_vfs",
                )
            )
        elif host_prep_vfs is None and external:
            current = nic.get("sriov_numvfs") or 0
            missing = current < num
            out.append(
                _finding(
                    "sriov-policy-external-no-owner",
                    "error" if missing else "warning",
                    "PCIDevice",
                    addr,
                    [
                        f"{VAR_HOST_PREP} on {on} has no entry for this PF",
                        f"sriov_numvfs now: {current}",
                        f"policy {name}: num_vfs {num}",
                    ],
                    f"policy {name} is externally managed but nothing creates the VFs of {where}"
                    + ("" if missing else f" at boot (the {current} there now would be lost at the next reboot)"),
                    f"add {{pf: {nic.get('netdev') or addr}, num_vfs: {num}}} to {VAR_HOST_PREP} on {on}, or set "
                    f"externally_managed: false on policy {name} so the operator creates them",
                )
            )
    return out


def _host_prep_counts(facts: Mapping[str, Any], requests: Any) -> dict[str, int]:
    """PCI address -> the VF count host_prep_sriov_vfs sets there (entries that do not resolve are host_prep's own
    findings)."""
    if not isinstance(requests, list):
        return {}
    resolved, _problems = _host_rules.resolve_sriov(dict(facts), [dict(r) for r in requests if isinstance(r, Mapping)])
    return {r["address"]: r["num_vfs"] for r in resolved}


def policy_host_findings(policies: Any, hosts: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """The policies against the inventory hosts, before any change. ``hosts`` maps an inventory host (= node name)
    to ``{facts: <gpu_host_facts gpuops_host>, labels: <node labels or None>, host_prep_sriov_vfs: [...]}``.

    Findings: a pf_names entry or root device no (selected) host has, a policy that matches no NIC at all (each
    listing the NICs the hosts have), num_vfs above a PF's sriov_totalvfs (or the operator's limit of 128 on
    NVIDIA/Mellanox PFs) or on a PF without SR-IOV, policies on one PF with different counts, overlapping VF
    ranges or mixed externally_managed, and the one-owner-per-PF rule with host_prep. Invalid policies are left
    to :func:`policy_input_findings`."""
    items = policies if isinstance(policies, list) else []
    valid = []
    for i, rail in enumerate(items):
        obj, found = _policy(rail, f"{VAR_POLICIES}[{i}]")
        if not _errors(found):
            valid.append((obj["metadata"]["name"], obj["spec"]))
    out: list[Finding] = []
    names = sorted(hosts)
    for host in names:
        if not (hosts[host] or {}).get("facts"):
            out.append(
                _finding(
                    "sriov-host-facts-missing",
                    "warning",
                    "Host",
                    host,
                    ["no gpu_host_facts for this host"],
                    f"host {host} has no gathered facts: its NICs cannot be checked against the policies",
                    "run gpuops.platform.gpu_host_facts on the host (host_prep does) before the operator roles",
                )
            )
    claims: dict[tuple[str, str], tuple[Mapping[str, Any], list[tuple[str, Mapping[str, Any]]]]] = {}
    per_host: list[tuple[str, Finding]] = []
    for name, spec in valid:
        selector = spec.get("nicSelector") or {}
        selected: list[str] = []
        matched = False
        nics_seen: dict[str, list[str]] = {}  # NIC line -> hosts, for the evidence
        pf_present: set[str] = set()
        addr_present: set[str] = set()
        for host in names:
            entry = hosts[host] or {}
            facts = entry.get("facts")
            if not facts or not selects_node(spec.get("nodeSelector") or {}, entry.get("labels")):
                continue
            selected.append(host)
            for nic in facts.get("nics") or []:
                nics_seen.setdefault(_nic_line(nic), []).append(host)
                pf_present.update(_netdevs(nic))
                addr_present.add(str(nic.get("address")))
                if not nic_selected(selector, nic):
                    continue
                matched = True
                per_host += [(host, f) for f in _limit_findings(name, _HOSTS, nic, int(spec["numVfs"]))]
                claims.setdefault((host, str(nic.get("address"))), (nic, []))[1].append((name, spec))
        have = [f"{line} on {_hosts_text(on)}" for line, on in nics_seen.items()] or [
            "the selected hosts have no network PF"
        ]
        with_facts = [h for h in names if (hosts[h] or {}).get("facts")]
        if not selected and with_facts:
            out.append(
                _finding(
                    "sriov-policy-selects-no-host",
                    "error",
                    "SriovNetworkNodePolicy",
                    name,
                    [
                        f"node_selector: {_inputs.show(spec.get('nodeSelector'))}",
                        f"inventory: {_hosts_text(with_facts)}",
                    ],
                    f"policy {name} selects no inventory host: its node_selector matches none of their node labels",
                    "fix the policy's node_selector, or label the nodes",
                )
            )
            continue
        unknown_pfs = [p for p in selector.get("pfNames") or [] if _pf_range(p)[0] not in pf_present]
        unknown_roots = [r for r in selector.get("rootDevices") or [] if r not in addr_present]
        for fid, missing, what in (
            ("sriov-policy-pf-unknown", unknown_pfs, "PF name"),
            ("sriov-policy-root-device-unknown", unknown_roots, "root device"),
        ):
            if missing:
                out.append(
                    _finding(
                        fid,
                        "error",
                        "SriovNetworkNodePolicy",
                        name,
                        have,
                        f"policy {name} names {what} {', '.join(missing)}, which no selected host has",
                        "name PFs the hosts have (evidence: the network PFs of the selected hosts)",
                    )
                )
        if not matched and not unknown_pfs and not unknown_roots:
            out.append(
                _finding(
                    "sriov-policy-matches-no-nic",
                    "error",
                    "SriovNetworkNodePolicy",
                    name,
                    [f"nic_selector: {_inputs.show(selector)}", *have],
                    f"policy {name}'s nic_selector matches no NIC of the selected hosts: no VF would be created and "
                    "its resource never appears",
                    "fix vendor/device_id/pf_names/root_devices to a NIC of the evidence",
                )
            )
    for (host, _addr), (nic, pf_claims) in sorted(claims.items()):
        entry = hosts[host] or {}
        counts = _host_prep_counts(entry.get("facts") or {}, entry.get(VAR_HOST_PREP))
        found = _claims_findings(_HOSTS, nic, pf_claims) if len(pf_claims) > 1 else []
        found += _ownership(_HOSTS, nic, pf_claims, counts.get(str(nic.get("address"))))
        per_host += [(host, f) for f in found]
    return out + _merge_hosts(per_host)


def second_operator(deployments: Sequence[Mapping[str, Any]], namespace: str) -> list[Finding]:
    """Never two SR-IOV operators: a Deployment with the operator's pod label (name=sriov-network-operator, both
    the standalone chart and the Network Operator's copy use it) outside ``namespace``."""
    out = []
    for dep in deployments:
        meta = dep.get("metadata") or {}
        labels = (((dep.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get("name") != "sriov-network-operator" or meta.get("namespace") == namespace:
            continue
        release = (meta.get("labels") or {}).get("app.kubernetes.io/instance") or "unknown"
        out.append(
            {
                "id": "sriov-operator-second-instance",
                "severity": "error",
                "object": {
                    "kind": "Deployment",
                    "namespace": meta.get("namespace") or "",
                    "name": meta.get("name") or "",
                },
                "evidence": [
                    f"SR-IOV operator Deployment {meta.get('namespace')}/{meta.get('name')} of release {release}"
                ],
                "cause": "an SR-IOV Network Operator already runs in another namespace (standalone, or bundled in the "
                "NVIDIA Network Operator): two would fight over the same policies and VFs",
                "fix": f"keep one: {VAR_SOURCE} chooses; uninstall the other (or turn the Network Operator's "
                "sriovNetworkOperator off)",
            }
        )
    return out


# -- resource names, readiness ---------------------------------------------------------------------------------
def resource_prefix(source: str, values: Mapping[str, Any] | None = None) -> str:
    """The prefix of the node resources (the operator's env RESOURCE_PREFIX, from the chart value
    operator.resourcePrefix): openshift.io for the standalone chart, nvidia.com for the copy in the NVIDIA Network
    Operator (its values sriov-network-operator.operator.resourcePrefix), unless the chart values override it."""
    if source not in SOURCES:
        raise InvalidInput(f"{VAR_SOURCE} must be one of {', '.join(SOURCES)}, got {_inputs.show(source)}")
    values = values or {}
    if source == "network_operator":
        values = values.get("sriov-network-operator") or {}
    prefix = (values.get("operator") or {}).get("resourcePrefix") or DEFAULT_PREFIX[source]
    if not isinstance(prefix, str) or "/" in prefix or not DNS1123_SUBDOMAIN_RE.match(prefix):
        raise InvalidInput(
            f"operator.resourcePrefix {_inputs.show(prefix)} is not a DNS subdomain such as openshift.io or nvidia.com"
        )
    return prefix
