# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The network side of the GPU cluster status (``gpu_cluster_status`` option ``network``): four more list
requests whatever the number of nodes (pods of the network operator namespace, NicClusterPolicies,
SriovNetworkNodeStates of the SR-IOV operator namespace, PodDisruptionBudgets), then pure functions that build
the per-node network view the ``_diag_network`` rules read.

Upstream facts (Mellanox/network-operator v26.4.1, k8snetworkplumbingwg/sriov-network-operator v1.6.0; see
docs/network.md and docs/sriov_network_operator.md): the operator reconciles only the NicClusterPolicy named
``nic-cluster-policy`` (any other gets ``status.state: ignore``); its status holds ``state`` and
``appliedStates[] {name, state}``; the DOCA/MOFED driver DaemonSet is ``mofed-<os><version>-ds``; nodes with an
NVIDIA NIC carry ``network.nvidia.com/operator.mofed.wait`` (``true`` until the driver is ready there); the RDMA
shared device plugin advertises ``<resourcePrefix or rdma>/<resourceName>`` per ``configList`` entry that selects
a device of the node; the SR-IOV device plugin ``<resourcePrefix or nvidia.com>/<resourceName>``; the SR-IOV
config daemon reports ``status.syncStatus``/``lastSyncError`` and the drain annotations on the node's
SriovNetworkNodeState."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

NIC_CLUSTER_POLICY = ("mellanox.com", "v1alpha1", "nicclusterpolicies")
SRIOV_NODE_STATE = ("sriovnetwork.openshift.io", "v1", "sriovnetworknodestates")
PDB = ("policy", "v1", "poddisruptionbudgets")
POLICY_NAME = "nic-cluster-policy"
MOFED_WAIT = "network.nvidia.com/operator.mofed.wait"
NIC_LABEL = "feature.node.kubernetes.io/pci-15b3.present"
OFED_PREFIX = "mofed-"
DESIRED_STATE = "sriovnetwork.openshift.io/desired-state"
CURRENT_STATE = "sriovnetwork.openshift.io/current-state"
DEFAULTS = {"namespace": "nvidia-network-operator", "sriov_namespace": "sriov-network-operator"}

# device plugin section -> (DaemonSet name, config list key, default resource prefix, finding id)
PLUGINS = {
    "rdmaSharedDevicePlugin": ("rdma-shared-dp-ds", "configList", "rdma", "rdma-resource-missing"),
    "sriovDevicePlugin": (
        "network-operator-sriov-device-plugin",
        "resourceList",
        "nvidia.com",
        "sriov-resource-missing",
    ),
}
_GPU = re.compile(r"^nvidia\.com/(gpu(\.shared)?|mig-.+)\Z")


def settings(params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``network`` option with its defaults, or None when the network side is not asked for."""
    net = params.get("network")
    if net is None:
        return None
    return {k: net.get(k) or v for k, v in DEFAULTS.items()}


def collect(
    reader: Any, net: Mapping[str, Any], operator_namespace: str, operator_pods: list[dict[str, Any]]
) -> dict[str, Any]:
    """Four list requests (three when the network operator shares the GPU Operator's namespace)."""
    ns = net["namespace"]
    return {
        "network_pods": operator_pods if ns == operator_namespace else reader.pods(ns),
        "nic_cluster_policies": reader.cluster_custom(*NIC_CLUSTER_POLICY),
        "sriov_node_states": reader.namespaced_custom(
            SRIOV_NODE_STATE[0], SRIOV_NODE_STATE[1], net["sriov_namespace"], SRIOV_NODE_STATE[2]
        ),
        "pdbs": reader.cluster_custom(*PDB),
    }


def _quantity(value: Any) -> int | str:
    try:
        return int(str(value))
    except ValueError:
        return str(value)


def network_resources(alloc: Mapping[str, Any] | None) -> tuple[dict[str, int | str], dict[str, int | str]]:
    """(rdma, sriov): ``rdma/*`` and the SR-IOV resources (``openshift.io/*``, ``nvidia.com/*`` but the GPU ones)."""
    rdma, sriov = {}, {}
    for key, value in sorted((alloc or {}).items()):
        if key.startswith("rdma/"):
            rdma[key] = _quantity(value)
        elif key.startswith("openshift.io/") or (key.startswith("nvidia.com/") and not _GPU.match(key)):
            sriov[key] = _quantity(value)
    return rdma, sriov


def _config(text: Any) -> dict[str, Any]:
    try:
        doc = json.loads(text) if isinstance(text, str) else dict(text or {})
    except (TypeError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def plugin_entries(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The resources the policy's device plugins are configured for: section, resource name, selectors."""
    out = []
    for section, (_ds, key, prefix, _fid) in PLUGINS.items():
        sec = (spec or {}).get(section) or {}
        for entry in _config(sec.get("config")).get(key) or ():
            if not isinstance(entry, dict) or not entry.get("resourceName"):
                continue
            out.append(
                {
                    "section": section,
                    "resource": f"{entry.get('resourcePrefix') or prefix}/{entry['resourceName']}",
                    "selectors": dict(entry.get("selectors") or {}),
                }
            )
    return out


def policies_view(items: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """Installed flag, the policies (name, state, reason, applied_states, active, spec) and the active name."""
    if items is None:
        return {"installed": False, "active": None, "objects": []}
    out = []
    for obj in sorted(items, key=lambda o: o["metadata"]["name"]):
        status = obj.get("status") or {}
        out.append(
            {
                "name": obj["metadata"]["name"],
                "state": status.get("state"),
                "reason": status.get("reason"),
                "applied_states": [
                    {"name": a.get("name"), "state": a.get("state"), "message": a.get("message")}
                    for a in status.get("appliedStates") or ()
                ],
                "active": obj["metadata"]["name"] == POLICY_NAME,
                "spec": obj.get("spec") or {},
            }
        )
    active = POLICY_NAME if any(o["active"] for o in out) else None
    return {"installed": True, "active": active, "objects": out}


def node_state_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    annotations = meta.get("annotations") or {}
    reported = {i.get("pciAddress"): i for i in status.get("interfaces") or ()}
    interfaces = []
    for iface in spec.get("interfaces") or ():
        got = reported.get(iface.get("pciAddress")) or {}
        interfaces.append(
            {
                "name": iface.get("name") or got.get("name"),
                "pci_address": iface.get("pciAddress"),
                "num_vfs_wanted": _quantity(iface.get("numVfs") or 0),
                "num_vfs": _quantity(got.get("numVfs") or 0),
                "totalvfs": _quantity(got["totalvfs"]) if got.get("totalvfs") is not None else None,
            }
        )
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "sync_status": status.get("syncStatus"),
        "last_sync_error": status.get("lastSyncError") or None,
        "desired_state": annotations.get(DESIRED_STATE),
        "current_state": annotations.get(CURRENT_STATE),
        "interfaces": interfaces,
    }


def blocking_pdbs(items: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """PodDisruptionBudgets that allow no disruption now (a drain cannot evict their pods)."""
    out = []
    for obj in items or ():
        status = obj.get("status") or {}
        if int(status.get("disruptionsAllowed") or 0) == 0 and int(status.get("expectedPods") or 0) > 0:
            meta = obj.get("metadata") or {}
            out.append(
                {
                    "namespace": meta.get("namespace"),
                    "name": meta.get("name"),
                    "current_healthy": status.get("currentHealthy"),
                    "desired_healthy": status.get("desiredHealthy"),
                    "expected_pods": status.get("expectedPods"),
                }
            )
    return sorted(out, key=lambda p: (p["namespace"] or "", p["name"] or ""))


def build(
    raw: Mapping[str, Any],
    net: Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    selected: Callable[[Any, Mapping[str, Any]], bool],
    pod_view: Callable[[Mapping[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """The network view: ``nodes`` (API objects), ``selected(name, labels)`` whether the node is looked at,
    ``pod_view`` the pod -> view function of the cluster status."""
    policies = policies_view(raw.get("nic_cluster_policies"))
    states = raw.get("sriov_node_states")
    states_by_node = {s["metadata"]["name"]: node_state_view(s) for s in states or ()}
    pods_by_node: dict[Any, list[dict[str, Any]]] = {}
    for pod in raw.get("network_pods") or ():
        view = pod_view(pod)
        if view["owner_kind"] == "DaemonSet" and view["node"]:
            pods_by_node.setdefault(view["node"], []).append(view)
    out = []
    for node in nodes:
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        name, labels = meta.get("name"), meta.get("labels") or {}
        rdma, sriov = network_resources(status.get("allocatable"))
        nic = labels.get(NIC_LABEL) == "true"
        if not (nic or MOFED_WAIT in labels or rdma or sriov or name in states_by_node):
            continue
        if not selected(name, labels):
            continue
        pods = sorted(pods_by_node.get(name, ()), key=lambda p: (p["component"] or "", p["name"]))
        out.append(
            {
                "name": name,
                "nic": nic,
                "mofed_wait": labels.get(MOFED_WAIT),
                "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
                "rdma": rdma,
                "sriov": sriov,
                "ofed": next((p for p in pods if (p["component"] or "").startswith(OFED_PREFIX)), None),
                "pods": pods,
                "sriov_state": states_by_node.get(name),
            }
        )
    return {
        "namespace": net["namespace"],
        "sriov_namespace": net["sriov_namespace"],
        "nic_cluster_policies": policies,
        "sriov_states_installed": states is not None,
        "nodes": out,
        "blocking_pdbs": blocking_pdbs(raw.get("pdbs")),
    }


_PUBLIC_POD = ("name", "component", "phase", "state", "ready", "restarts", "container", "reason", "message")


def result(view: Mapping[str, Any]) -> dict[str, Any]:
    """The ``network`` key of the module result."""
    nodes = []
    for node in view["nodes"]:
        node = {k: v for k, v in node.items() if k != "pods"}
        node["ofed"] = {k: node["ofed"][k] for k in _PUBLIC_POD} if node["ofed"] else None
        nodes.append(node)
    policies = view["nic_cluster_policies"]
    active = next((p for p in policies["objects"] if p["active"]), None)
    states = [n["sriov_state"] for n in view["nodes"] if n["sriov_state"]]
    return {
        "namespace": view["namespace"],
        "sriov_namespace": view["sriov_namespace"],
        "nic_cluster_policies": policies,
        "nodes": nodes,
        "summary": {
            "nic_nodes": sum(1 for n in nodes if n["nic"]),
            "rdma_nodes": sum(1 for n in nodes if n["rdma"]),
            "nic_cluster_policy": ((active or {}).get("state") or "none") if policies["installed"] else "not installed",
            "sriov_states": len(states),
            "sriov_states_succeeded": sum(1 for s in states if s["sync_status"] == "Succeeded"),
            "ofed_pods_ready": sum(1 for n in nodes if n["ofed"] and n["ofed"]["ready"]),
        },
    }
