# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Diagnosis rules about the network fabric (``view['network']``, built by ``_network_status`` when the module's
``network`` option is set): the NicClusterPolicy (wrong name, not ready), the DOCA/MOFED driver pods, RDMA and
SR-IOV device plugin resources, the SR-IOV config daemon's node state, and nvidia-peermem for GPUDirect RDMA
(which needs only the ClusterPolicy and the driver pods, so it runs without ``network`` too)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.status._diag_common import (
    describe,
    dig,
    finding,
    node_finding,
    pod_finding,
    pods_by_role,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._network_status import (
    MOFED_WAIT,
    PLUGINS,
    POLICY_NAME,
    plugin_entries,
)

PEERMEM_CONTAINER = "nvidia-peermem-ctr"


def _policy_ref(name: str) -> dict[str, Any]:
    return {"kind": "NicClusterPolicy", "namespace": None, "name": name}


def _fmt(mapping: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(mapping.items())) or "none"


def _ofed_not_ready(node: Mapping[str, Any]) -> str | None:
    """Evidence when the OFED driver is not ready on the network node, else None."""
    ofed = node["ofed"]
    if ofed is not None and not ofed["ready"]:
        return describe(ofed)
    if node["mofed_wait"] == "true":
        return f"node label {MOFED_WAIT}=true (the OFED driver is not ready on the node)"
    return None


# -- NicClusterPolicy ---------------------------------------------------------------------------------------
def rule_nic_cluster_policy(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A NicClusterPolicy with another name than nic-cluster-policy -> ignored by the operator; the one it
    reconciles notReady -> the appliedStates not ready; empty status -> not reconciled yet."""
    net = view.get("network")
    if net is None:
        return []
    policies = net["nic_cluster_policies"]
    if not policies["installed"]:
        return [
            finding(
                fid="network-operator-not-installed",
                severity="info",
                obj={"kind": "CustomResourceDefinition", "namespace": None, "name": "nicclusterpolicies.mellanox.com"},
                node=None,
                evidence=["the NicClusterPolicy CRD is not served"],
                cause="the NVIDIA Network Operator is not installed",
                fix="install it with the gpuops.platform.network_operator role, or leave the network option unset",
            )
        ]
    out = []
    for policy in policies["objects"]:
        if policy["active"]:
            continue
        alone = policies["active"] is None
        out.append(
            finding(
                fid="nicclusterpolicy-ignored",
                severity="error" if alone else "warning",
                obj=_policy_ref(policy["name"]),
                node=None,
                evidence=[
                    f"NicClusterPolicy {policy['name']} status.state {policy['state'] or 'empty'}"
                    + (f" ({policy['reason']})" if policy["reason"] else ""),
                    "no NicClusterPolicy named nic-cluster-policy" if alone else "nic-cluster-policy exists",
                ],
                cause=f"the Network Operator reconciles only the NicClusterPolicy named {POLICY_NAME}; "
                f"{policy['name']} is ignored, so none of its components is deployed",
                fix=f"create the policy as {POLICY_NAME} (the network_operator role does) and kubectl delete "
                f"nicclusterpolicy {policy['name']}",
            )
        )
    active = next((p for p in policies["objects"] if p["active"]), None)
    if active is None:
        return out
    if active["state"] == "notReady":
        pending = [a for a in active["applied_states"] if a["state"] != "ready"]
        out.append(
            finding(
                fid="nicclusterpolicy-not-ready",
                severity="error",
                obj=_policy_ref(POLICY_NAME),
                node=None,
                evidence=["status.state notReady"]
                + [
                    f"appliedStates {a['name']} {a['state']}" + (f": {a['message']}" if a["message"] else "")
                    for a in pending
                ],
                cause="components of the NicClusterPolicy are not ready: "
                + (", ".join(a["name"] for a in pending) or "no appliedStates reported"),
                fix="see the node findings of this diagnosis (OFED driver, device plugins); "
                f"kubectl -n {net['namespace']} get pods -o wide",
            )
        )
    elif not active["state"]:
        out.append(
            finding(
                fid="nicclusterpolicy-not-reconciled",
                severity="warning",
                obj=_policy_ref(POLICY_NAME),
                node=None,
                evidence=["status.state is empty"],
                cause="the NicClusterPolicy has not been reconciled (Network Operator not running or just started)",
                fix=f"kubectl -n {net['namespace']} get deployment -l app.kubernetes.io/name=network-operator",
            )
        )
    return out


# -- OFED driver ----------------------------------------------------------------------------------------------
_HEADERS = re.compile(r"kernel[- ]headers|linux-headers|headers? (are |is )?(not installed|missing|not found)", re.I)
_SECURE_BOOT = re.compile(
    r"key was rejected|required key not available|secure ?boot|lockdown|module verification", re.I
)


def ofed_cause(
    node: str, pod: Mapping[str, Any], facts: Mapping[str, Any] | None, kernel: str | None
) -> tuple[str, str]:
    """(cause, fix) of a failing DOCA/MOFED driver container, from its message, narrowed by host facts."""
    text = str(pod.get("message") or "")
    headers = _HEADERS.search(text) or dig(facts, "kernel", "headers_installed") is False
    secure = _SECURE_BOOT.search(text) or str(dig(facts, "secure_boot", "state") or "").lower() == "enabled"
    if secure and not _HEADERS.search(text):
        return (
            "Secure Boot is enabled and the kernel refuses the DOCA-OFED modules the driver container built "
            "(they are not signed with an enrolled key)",
            f"on {node}: enroll the module signing key (mokutil --import) or use signed precompiled DOCA driver "
            "images, or disable Secure Boot in the firmware; alternatively install DOCA-OFED on the host and "
            "turn ofedDriver off",
        )
    if headers:
        return (
            f"kernel headers for the node's kernel ({kernel or 'unknown'}) are missing, so the driver container "
            "cannot build the DOCA-OFED modules",
            f"on {node}: install linux-headers-{kernel or '$(uname -r)'} (host_prep checks them), or give the driver "
            "container a package mirror that has them, or use a precompiled DOCA driver image for this kernel",
        )
    return (
        "the DOCA-OFED driver container exits repeatedly",
        f"kubectl -n {pod['namespace']} logs {pod['name']} --previous; run gpuops.platform.gpu_host_facts on {node} "
        "and pass host_facts to narrow the cause",
    )


def rule_ofed_driver(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The mofed-* driver pod of a node crash-looping -> headers missing / Secure Boot; not ready -> the device
    plugins wait (mofed.wait=true)."""
    net = view.get("network")
    if net is None:
        return []
    out = []
    for node in net["nodes"]:
        pod, name = node["ofed"], node["name"]
        if pod is None or pod["ready"]:
            continue
        facts = net["host_facts"].get(name)
        evidence = [describe(pod), f"node label {MOFED_WAIT}={node['mofed_wait']}" if node["mofed_wait"] else ""]
        if pod["state"] == "CrashLoopBackOff":
            kernel = dig(facts, "kernel", "release") or (view["node_labels"].get(name) or {}).get(
                "feature.node.kubernetes.io/kernel-version.full"
            )
            if facts:
                evidence.append(
                    f"host facts: kernel headers installed {dig(facts, 'kernel', 'headers_installed')}, "
                    f"secure boot {dig(facts, 'secure_boot', 'state')}"
                )
            cause, fix = ofed_cause(name, pod, facts, kernel)
            out.append(
                pod_finding(pod, fid="ofed-driver-crashloop", severity="error", evidence=evidence, cause=cause, fix=fix)
            )
        else:
            out.append(
                pod_finding(
                    pod,
                    fid="ofed-driver-not-ready",
                    severity="warning",
                    evidence=evidence,
                    cause="the DOCA-OFED driver is not ready on the node, so the RDMA/SR-IOV device plugins and "
                    "nvidia-peermem wait for it",
                    fix=f"kubectl -n {pod['namespace']} describe pod {pod['name']}; kubectl -n {pod['namespace']} "
                    f"logs {pod['name']}",
                )
            )
    return out


# -- device plugin resources ------------------------------------------------------------------------------------
def _host_nics(facts: Mapping[str, Any]) -> list[str]:
    nics = dig(facts, "nics") or ()
    return [
        f"{n.get('address')} {n.get('vendor_id')}:{n.get('device_id')} "
        f"{','.join(n.get('netdevs') or ()) or '-'} {n.get('link_layer') or ''}".strip()
        for n in nics
        if isinstance(n, dict)
    ]


def rule_network_resource_missing(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A resource of the RDMA shared / SR-IOV device plugin config missing on a NIC node: plugin pod ready ->
    its selectors match no NIC of the node (one finding per resource); the OFED driver not ready or the plugin pod
    not running -> that (one finding per node and plugin, listing the missing resources)."""
    net = view.get("network")
    if net is None:
        return []
    policy = next((p for p in net["nic_cluster_policies"]["objects"] if p["active"]), None)
    if policy is None:
        return []
    entries = plugin_entries(policy["spec"])
    advertised = {r for n in net["nodes"] for r in (*n["rdma"], *n["sriov"])}
    out = []
    for node in net["nodes"]:
        if not node["nic"]:
            continue
        have = {**node["rdma"], **node["sriov"]}
        missing: dict[str, list[Any]] = {}
        for entry in entries:
            if not (isinstance(have.get(entry["resource"]), int) and have[entry["resource"]] > 0):
                missing.setdefault(entry["section"], []).append(entry)
        for section, group in missing.items():
            out += _missing_on_node(net, node, section, group, advertised)
    return out


def _missing_on_node(
    net: Mapping[str, Any],
    node: Mapping[str, Any],
    section: str,
    entries: Sequence[Mapping[str, Any]],
    advertised: Collection[str],
) -> list[dict[str, Any]]:
    name, have = node["name"], {**node["rdma"], **node["sriov"]}
    ds, _key, _prefix, fid = PLUGINS[section]
    plugin = next((p for p in node["pods"] if p["component"] == ds), None)
    severity = "warning" if all(e["resource"] in advertised for e in entries) else "error"
    resources = ", ".join(e["resource"] for e in entries)
    head = f"node {name}: allocatable {resources} absent; network resources {_fmt(have)}"
    waiting = _ofed_not_ready(node)
    if waiting or plugin is None or not plugin["ready"]:
        if waiting:
            cause = f"the OFED driver is not ready on the node, so the {section} pod does not run yet"
            fix = f"fix the OFED driver on {name} first (see the ofed-driver-* findings)"
        else:
            waiting = describe(plugin) if plugin else f"no {ds} pod on the node"
            cause = f"the {ds} pod is not running and ready on the node"
            fix = f"kubectl -n {net['namespace']} describe daemonset {ds}; check its pod on {name}"
        return [node_finding(name, fid=fid, severity=severity, evidence=[head, waiting], cause=cause, fix=fix)]
    out = []
    nics = _host_nics(net["host_facts"].get(name))
    for entry in entries:
        evidence = [
            f"node {name}: allocatable {entry['resource']} absent; network resources {_fmt(have)}",
            f"NicClusterPolicy {POLICY_NAME} {section} {entry['resource']} selectors "
            f"{_fmt({k: v for k, v in entry['selectors'].items() if v})}",
            describe(plugin),
            f"host NICs: {'; '.join(nics)}" if nics else "",
        ]
        fix = (
            f"fix the selectors (vendors, deviceIDs, ifNames, linkTypes) of {entry['resource']} in {POLICY_NAME} "
            f"to match a NIC of {name} (network_operator role variables); "
            + (
                "the host's NICs are listed in the evidence"
                if nics
                else "run gpuops.platform.gpu_host_facts on the node and pass host_facts to list its NICs"
            )
        )
        out.append(
            node_finding(
                name,
                fid=fid,
                severity="warning" if entry["resource"] in advertised else "error",
                evidence=evidence,
                cause=f"the {section} selectors of {entry['resource']} match no NIC of the node, so the plugin "
                "advertises nothing for it",
                fix=fix,
            )
        )
    return out


# -- SR-IOV node state ------------------------------------------------------------------------------------------
_LIMIT = re.compile(r"totalvfs|total ?vfs|out of range|exceeds|above the limit|numerical result", re.I)


def _state_ref(net: Mapping[str, Any], state: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": "SriovNetworkNodeState",
        "namespace": state["namespace"] or net["sriov_namespace"],
        "name": state["name"],
    }


def rule_sriov_node_state(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """SriovNetworkNodeState asking more VFs than a PF's totalvfs -> VFs above the firmware limit: upstream's
    config daemon (v1.6.0, daemon mode) refuses the count before writing it and retries, so the state stays
    InProgress with an empty lastSyncError; a Failed state (systemd mode) whose lastSyncError says so is the same
    row, another Failed one is a failed sync. InProgress with a drain -> a PodDisruptionBudget blocks it."""
    net = view.get("network")
    if net is None:
        return []
    out = []
    for node in net["nodes"]:
        state = node["sriov_state"]
        if state is None:
            continue
        name, sync, error = node["name"], state["sync_status"], state["last_sync_error"]
        obj = _state_ref(net, state)
        over = [
            i
            for i in state["interfaces"]
            if isinstance(i["totalvfs"], int)
            and isinstance(i["num_vfs_wanted"], int)
            and i["num_vfs_wanted"] > i["totalvfs"]
        ]
        if sync == "Failed" or (sync == "InProgress" and over):
            evidence = [f"syncStatus {sync}, lastSyncError: {error or 'empty'}"] + [
                f"PF {i['name'] or '-'} ({i['pci_address']}): numVfs {i['num_vfs_wanted']} requested, "
                f"totalvfs {i['totalvfs']}"
                for i in over
            ]
            if over or (error and _LIMIT.search(error)):
                limits = (
                    ", ".join(f"{i['name'] or i['pci_address']} {i['totalvfs']}" for i in over) or "see lastSyncError"
                )
                out.append(
                    finding(
                        fid="sriov-vfs-above-limit",
                        severity="error",
                        obj=obj,
                        node=name,
                        evidence=evidence,
                        cause=f"the SR-IOV policy asks more VFs on {name} than the PF firmware allows ({limits}); "
                        "the config daemon refuses the count (NumVfs is larger than TotalVfs) and never syncs",
                        fix="lower numVfs of the SriovNetworkNodePolicy to at most totalvfs (sriov_network_operator "
                        "num_vfs), or raise NUM_OF_VFS in the NIC firmware (mlxconfig -d <pci> set SRIOV_EN=1 "
                        "NUM_OF_VFS=<n>) and reboot the node",
                    )
                )
            else:
                out.append(
                    finding(
                        fid="sriov-sync-failed",
                        severity="error",
                        obj=obj,
                        node=name,
                        evidence=evidence,
                        cause=f"the SR-IOV config daemon on {name} failed to apply the policies",
                        fix="fix what lastSyncError names; kubectl -n "
                        f"{net['sriov_namespace']} logs -l app=sriov-network-config-daemon --field-selector "
                        f"spec.nodeName={name}",
                    )
                )
        elif sync == "InProgress":
            draining = state["desired_state"] in ("Drain_Required", "Draining") or state["current_state"] == "Draining"
            evidence = [
                f"syncStatus InProgress, drain desired-state {state['desired_state'] or 'unset'}, current-state "
                f"{state['current_state'] or 'unset'}",
                f"node {name} is cordoned" if node["unschedulable"] else "",
            ]
            pdbs = net["blocking_pdbs"] if draining else []
            evidence += [
                f"PodDisruptionBudget {p['namespace']}/{p['name']} allows 0 disruptions "
                f"(healthy {p['current_healthy']}/{p['desired_healthy']} wanted, {p['expected_pods']} pods)"
                for p in pdbs[:5]
            ]
            if pdbs:
                names = ", ".join(f"{p['namespace']}/{p['name']}" for p in pdbs[:5])
                out.append(
                    finding(
                        fid="sriov-drain-blocked",
                        severity="error",
                        obj=obj,
                        node=name,
                        evidence=evidence,
                        cause=f"the drain of {name} before the VF change cannot evict pods: PodDisruptionBudget "
                        f"{names} allows no disruption, so the node state stays InProgress",
                        fix=f"let the budget allow one disruption (scale the workload up or relax minAvailable / "
                        f"maxUnavailable of {names}) or move those pods off {name}; on a single-node cluster set "
                        "disableDrain in the SriovOperatorConfig",
                    )
                )
            elif draining:
                out.append(
                    finding(
                        fid="sriov-sync-in-progress",
                        severity="warning",
                        obj=obj,
                        node=name,
                        evidence=evidence,
                        cause=f"{name} is being drained before the VF change",
                        fix=f"kubectl get pods -A --field-selector spec.nodeName={name}; wait, or find the pod that "
                        "does not leave",
                    )
                )
    return out


# -- GPUDirect RDMA -------------------------------------------------------------------------------------------------
def rule_peermem(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """ClusterPolicy driver.rdma.enabled and the driver pod's nvidia-peermem-ctr not ready -> nvidia-peermem is not
    loaded: the OFED driver is not ready on the node (it waits for it), or the module does not load."""
    active: Any = next((c for c in view["cluster_policies"]["objects"] if c["active"]), None)
    rdma = dig((active or {}).get("spec"), "driver", "rdma") or {}
    if not rdma.get("enabled"):
        return []
    host_mofed = bool(rdma.get("useHostMofed"))
    net = view.get("network") or {"nodes": []}
    net_nodes = {n["name"]: n for n in net["nodes"]}
    out = []
    for node in view["nodes"]:
        driver = pods_by_role(view, node["name"], "nvidia").get("driver")
        if driver is None or driver["ready"] or driver["container"] != PEERMEM_CONTAINER:
            continue
        name = node["name"]
        evidence = [
            describe(driver),
            f"ClusterPolicy {active['name']} driver.rdma.enabled=true, useHostMofed={host_mofed}",
        ]
        waiting = _ofed_not_ready(net_nodes[name]) if name in net_nodes else None
        if waiting and not host_mofed:
            evidence.append(waiting)
            cause = (
                "nvidia-peermem is not loaded: the driver container waits for the DOCA-OFED driver of the Network "
                "Operator, which is not ready on the node"
            )
            fix = "fix the OFED driver pod first (see ofed-driver-* findings); nvidia-peermem loads once it is ready"
        else:
            cause = "nvidia-peermem is not loaded while GPUDirect RDMA is asked for: " + (
                "useHostMofed is set but the host's MOFED (mlx5_core) is not loaded"
                if host_mofed
                else "the driver container found no ready MOFED driver, or modprobe nvidia-peermem failed"
            )
            fix = (
                f"kubectl -n {driver['namespace']} logs {driver['name']} -c {PEERMEM_CONTAINER}; make "
                "driver.rdma.useHostMofed match where MOFED comes from (host packages: true; Network Operator "
                "ofedDriver: false) and check that the OFED driver is ready on the node"
            )
        out.append(
            pod_finding(driver, fid="peermem-not-loaded", severity="error", evidence=evidence, cause=cause, fix=fix)
        )
    return out
