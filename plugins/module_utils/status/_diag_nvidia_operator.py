# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Diagnosis rules about the NVIDIA GPU Operator itself: which ClusterPolicy it reconciles and its state,
the namespace it runs in, and whether it runs at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.status._diag_common import describe, finding


def operator_namespace_elsewhere(view: Mapping[str, Any]) -> str | None:
    """The namespace the operator reports in the active ClusterPolicy's status.namespace when it is not the
    operator_namespace looked at, else None."""
    active = next((c for c in view["cluster_policies"]["objects"] if c["active"]), None)
    reported = (active or {}).get("namespace")
    return reported if reported and reported != view["operator_namespace"] else None


def rule_operator_namespace(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The operator reports another namespace than operator_namespace -> operands were looked up in vain."""
    reported = operator_namespace_elsewhere(view)
    if reported is None:
        return []
    active = next(c for c in view["cluster_policies"]["objects"] if c["active"])
    return [
        finding(
            fid="operator-namespace-mismatch",
            severity="warning",
            obj={"kind": "ClusterPolicy", "namespace": None, "name": active["name"]},
            node=None,
            evidence=[
                f"ClusterPolicy {active['name']} status.namespace {reported}",
                f"operator_namespace {view['operator_namespace']}",
            ],
            cause=f"the operator runs in namespace {reported}, so its pods and operands were looked for in the "
            "wrong one",
            fix=f"set operator_namespace: {reported}",
        )
    ]


def rule_operator_missing(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """ClusterPolicy present but no operator pod running -> nothing reconciles it."""
    cps = view["cluster_policies"]
    if not cps["objects"] or any(p["ready"] for p in view["operator_pods"]):
        return []
    if operator_namespace_elsewhere(view):
        return []  # operator-namespace-mismatch names the cause
    if any(p["state"] == "CrashLoopBackOff" for p in view["operator_pods"]):
        return []  # operator-crashloop names the cause
    ns = view["operator_namespace"]
    evidence = [describe(p) for p in view["operator_pods"]] or [f"no gpu-operator pod in namespace {ns}"]
    return [
        finding(
            fid="operator-not-running",
            severity="error",
            obj={"kind": "Deployment", "namespace": ns, "name": "gpu-operator"},
            node=None,
            evidence=evidence,
            cause="the GPU Operator is not running, so no ClusterPolicy is reconciled",
            fix=f"kubectl -n {ns} describe deployment gpu-operator; "
            "check that operator_namespace is where the chart is installed",
        )
    ]


CP_REASONS = {
    "NFDLabelsMissing": (
        "no node carries NFD labels: Node Feature Discovery is not running or its PCI whitelist misses "
        "classes 0300/0302",
        "enable NFD (Helm nfd.enabled=true) or deploy it, and check the nfd-worker pods",
    ),
    "NoGPUNodes": (
        "no node has an NVIDIA PCI NFD label (feature.node.kubernetes.io/pci-10de.present=true)",
        "check that the GPU nodes run nfd-worker and that their GPUs are on the PCI bus",
    ),
    "OperandNotReady": ("an operand is not ready on some node", "see the node findings of this diagnosis"),
    "DriverNotReady": ("the driver is not ready on some node", "see the driver findings of this diagnosis"),
    "ReconcileFailed": ("the operator failed to reconcile the ClusterPolicy", "fix the error in the condition message"),
    "PrerequisiteNotMet": ("a prerequisite of the ClusterPolicy is not met", "fix what the condition message names"),
}


def rule_cluster_policy(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """More than one ClusterPolicy -> which is ignored; the active one notReady -> its condition's reason."""
    cps = view["cluster_policies"]
    out = []
    active: Any = next((c for c in cps["objects"] if c["active"]), None)
    for cp in cps["objects"]:
        if cp["active"]:
            continue
        out.append(
            finding(
                fid="clusterpolicy-ignored",
                severity="warning",
                obj={"kind": "ClusterPolicy", "namespace": None, "name": cp["name"]},
                node=None,
                evidence=[
                    f"{len(cps['objects'])} ClusterPolicies",
                    f"{cp['name']} created {cp['created']}, state {cp['state']}",
                    f"{active['name']} created {active['created']}, state {active['state']}",
                ],
                cause=f"the operator reconciles only the oldest ClusterPolicy ({active['name']}); {cp['name']} is "
                "ignored",
                fix=f"kubectl delete clusterpolicy {cp['name']} after moving its settings into {active['name']}",
            )
        )
    if active is None:
        return out
    obj = {"kind": "ClusterPolicy", "namespace": None, "name": active["name"]}
    if active["state"] == "notReady":
        err: Any = next((c for c in active["conditions"] if c["type"] == "Error" and c["status"] == "True"), None)
        err = err or next((c for c in active["conditions"] if c["type"] == "Ready"), None) or {}
        cause, fix = CP_REASONS.get(err.get("reason"), ("the ClusterPolicy is not ready", "see the node findings"))
        out.append(
            finding(
                fid="clusterpolicy-not-ready",
                severity="error",
                obj=obj,
                node=None,
                evidence=[
                    f"state notReady, condition {err.get('type')} reason {err.get('reason')}: {err.get('message')}"
                ],
                cause=cause,
                fix=fix,
            )
        )
    elif not active["state"]:
        out.append(
            finding(
                fid="clusterpolicy-not-reconciled",
                severity="warning",
                obj=obj,
                node=None,
                evidence=["status.state is empty"],
                cause="the ClusterPolicy has not been reconciled yet (operator not running or just started)",
                fix="check the gpu-operator pod",
            )
        )
    return out
