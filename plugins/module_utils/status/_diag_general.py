# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Diagnosis rules that hold for every vendor: GPU resources missing (dispatching to the vendor's
rule), node conditions, operand pods pending or crash-looping, operator pods crash-looping and operators not
installed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.status._diag_amd import amd_resource_missing
from ansible_collections.gpuops.platform.plugins.module_utils.status._diag_common import (
    describe,
    finding,
    fmt_labels,
    host_driver_loaded,
    labels_fix,
    node_finding,
    node_problems,
    pod_finding,
    pods_by_role,
    role,
    why_labels_missing,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._diag_nvidia import nvidia_resource_missing


def rule_gpu_resource_missing(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """GPU node without allocatable GPUs -> device-plugin pod missing/not ready on it, or driver not loaded."""
    out = []
    for node in view["nodes"]:
        name, vendor = node["name"], node["vendor"]
        if vendor not in ("nvidia", "amd") or not node["ready"]:
            continue  # a NotReady node is reported by node-not-ready
        alloc = node["allocatable"]
        if node["gpus"] > 0 or (isinstance(alloc.get("nvidia.com/gpu.shared"), int) and alloc["nvidia.com/gpu.shared"]):
            continue
        resource = "nvidia.com/gpu" if vendor == "nvidia" else "amd.com/gpu"
        labels = view["node_labels"].get(name, {})
        evidence = [f"node {name}: allocatable {resource} is {alloc.get(resource, 'absent')}"]
        if vendor == "nvidia":
            out.append(nvidia_resource_missing(view, node, labels, evidence))
        else:
            out.append(amd_resource_missing(view, node, evidence))
    return out


def rule_operand_pending(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Operand DaemonSet pod Pending on a node -> the node lacks the labels the DaemonSet wants (NFD labels)."""
    out = []
    for pod in view["operand_pods"]:
        if pod["phase"] != "Pending" or pod["scheduled"] or not pod["node"]:
            continue
        name = pod["node"]
        labels = view["node_labels"].get(name)
        evidence = [describe(pod)]
        if labels is None:
            cause = f"the pod is bound to node {name}, which does not exist any more"
            fix = f"kubectl delete pod -n {pod['namespace']} {pod['name']} (the DaemonSet controller cleans up)"
            out.append(
                pod_finding(pod, fid="operand-pending", severity="warning", evidence=evidence, cause=cause, fix=fix)
            )
            continue
        ds = view["daemonsets"].get(pod["component"]) or {}
        selector = pod["node_selector"] or ds.get("node_selector") or {}
        missing = {k: v for k, v in selector.items() if labels.get(k) != v}
        if missing:
            cause = f"NFD labels missing on node {name}: it lacks the labels the DaemonSet selects on"
            cause += why_labels_missing(labels, missing)
            evidence.append(f"node {name} lacks {fmt_labels(missing)}")
            fid = "operand-pending-labels"
            fix = labels_fix(name, labels, missing)
            out.append(pod_finding(pod, fid=fid, severity="error", evidence=evidence, cause=cause, fix=fix))
        else:
            cause = "the scheduler cannot place the pod on its node (taints, resources or host ports)"
            fix = "read the pod's PodScheduled message; add the missing toleration or free the resources"
            out.append(
                pod_finding(pod, fid="operand-pending", severity="warning", evidence=evidence, cause=cause, fix=fix)
            )
    return out


def rule_operator_crashloop(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Operator pod in CrashLoopBackOff -> invalid values/ClusterPolicy or unsupported Kubernetes version."""
    out = []
    versions = ", ".join(view.get("kubelet_versions") or ()) or "unknown"
    for pod in view["operator_pods"]:
        if pod["state"] != "CrashLoopBackOff":
            continue
        out.append(
            pod_finding(
                pod,
                fid="operator-crashloop",
                severity="error",
                evidence=[describe(pod), f"kubelet versions in the cluster: {versions}"],
                cause="the operator exits at startup: invalid Helm values / ClusterPolicy spec, or a Kubernetes "
                "version the operator release does not support",
                fix=f"kubectl logs -n {pod['namespace']} {pod['name']} --previous; check the values against the "
                "chart (helm get values) and the operator's supported Kubernetes versions",
            )
        )
    return out


def rule_operator_installed(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """GPU nodes but no operator CRD -> informational."""
    out = []
    vendors = {n["vendor"] for n in view["nodes"]}
    if "nvidia" in vendors and not view["cluster_policies"]["installed"]:
        out.append(
            finding(
                fid="nvidia-operator-not-installed",
                severity="info",
                obj={"kind": "CustomResourceDefinition", "namespace": None, "name": "clusterpolicies.nvidia.com"},
                node=None,
                evidence=["CRD clusterpolicies.nvidia.com not installed"],
                cause="the NVIDIA GPU Operator is not installed",
                fix="install it (gpuops.platform gpu_operator role) unless the nodes are managed otherwise",
            )
        )
    if "amd" in vendors and not view["device_configs"]["installed"]:
        out.append(
            finding(
                fid="amd-operator-not-installed",
                severity="info",
                obj={"kind": "CustomResourceDefinition", "namespace": None, "name": "deviceconfigs.amd.com"},
                node=None,
                evidence=["CRD deviceconfigs.amd.com not installed"],
                cause="the AMD GPU Operator is not installed",
                fix="install it (chart rocm/gpu-operator-charts) unless the nodes are managed otherwise",
            )
        )
    return out


def rule_node_not_ready(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """GPU node NotReady (or with another failing condition) without a known GPU cause."""
    out = []
    for node in view["nodes"]:
        name = node["name"]
        problems = node_problems(node)
        if not problems:
            continue
        if pods_by_role(view, name, "nvidia").get("driver") is not None and host_driver_loaded(view, name):
            continue  # rule_host_driver_conflict names the cause
        if not node["ready"]:
            out.append(
                node_finding(
                    name,
                    fid="node-not-ready",
                    severity="error",
                    evidence=problems,
                    cause="the kubelet on the node is not ready (not posting status, or its container runtime is down)",
                    fix=f"on {name}: systemctl status kubelet containerd; journalctl -u kubelet",
                )
            )
        else:
            out.append(
                node_finding(
                    name,
                    fid="node-condition",
                    severity="warning",
                    evidence=problems,
                    cause="the node reports a failing condition (resource pressure or a node-problem-detector check)",
                    fix=f"kubectl describe node {name}; fix what the condition names",
                )
            )
    return out


OPERAND_CAUSES = {
    "toolkit": (
        "the container toolkit cannot configure the container runtime (config path or socket wrong for this runtime)",
        "set the toolkit env CONTAINERD_CONFIG/CONTAINERD_SOCKET (or RUNTIME) to the node's runtime paths",
    ),
    "device-plugin": (
        "the device plugin cannot start: NVML not available (driver) or its config (devicePlugin.config) is invalid",
        "check the driver on the node and the device plugin ConfigMap; read the log",
    ),
    "gfd": ("GPU Feature Discovery cannot initialise NVML (driver not ready)", "check the driver on the node"),
    "dcgm-exporter": (
        "DCGM exporter cannot start: driver not ready or the metrics ConfigMap is invalid",
        "check the driver and the dcgm-exporter metrics ConfigMap",
    ),
    "mig-manager": (
        "mig-manager cannot apply the MIG configuration (config invalid for this GPU model)",
        "set nvidia.com/mig.config to a configuration valid for the GPU; read the log",
    ),
}


def rule_operand_crashloop(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Other operands in CrashLoopBackOff -> driver not ready on that node, else the component's usual cause."""
    out = []
    for pod in view["operand_pods"]:
        r = role(pod)
        if pod["state"] != "CrashLoopBackOff" or r in ("driver", "validator"):
            continue
        name = pod["node"]
        driver = pods_by_role(view, name, "nvidia").get("driver") if pod["vendor"] == "nvidia" else None
        evidence = [describe(pod)]
        logs = f"kubectl logs -n {pod['namespace']} {pod['name']} --previous"
        if driver is not None and not driver["ready"]:
            evidence.append(describe(driver))
            cause, fix = "the driver is not ready on the node", f"fix the driver pod {driver['name']} first"
        else:
            cause, fix = OPERAND_CAUSES.get(r, (f"{pod['component']} exits repeatedly", "read its log"))
        out.append(
            pod_finding(
                pod, fid="operand-crashloop", severity="error", evidence=evidence, cause=cause, fix=f"{logs}; {fix}"
            )
        )
    return out
