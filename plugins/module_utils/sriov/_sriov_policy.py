# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""SR-IOV Network Operator (k8snetworkplumbingwg v1.6.0): the sriov_network_operator role's variables (names,
keys, patterns) and its SriovNetworkNodePolicy builder, as pure functions (no I/O).

- :func:`node_policy` turns a policy variable (snake_case) into the custom resource (camelCase); it raises
  ``InvalidInput`` on what the input findings report; the role runs the findings first.
- :func:`resource_prefix` for the resource names.

The role's other parts: the SriovNetwork / SriovIBNetwork builders (``_sriov_networks``), the SriovOperatorConfig
``default`` (``_sriov_config``), the input findings (``_sriov_inputs``), the policies against the hosts
(``_sriov_hosts``: one owner per PF). The readiness predicates (the SriovNetworkNodeState, the allocatable VFs, a
wait for a policy change) and upstream's selectors are in ``status/_sriov_ready``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput
from ansible_collections.gpuops.platform.plugins.module_utils.host import _pci, _sriov
from ansible_collections.gpuops.platform.plugins.module_utils.inputs import _inputs
from ansible_collections.gpuops.platform.plugins.module_utils.status._sriov_ready import (
    _pf_range,
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
