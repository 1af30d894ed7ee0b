# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Whether work can be scheduled on a GPU node: its cordon (and who set it) and the taints the GPU stack does not
tolerate. ``node_scheduling`` reads one Node object (the SCHEDULING column of ``playbooks/diagnose.yml``);
``rule_node_scheduling`` turns it into findings.

A cordon is ours and expected when the step that set it says so on the node:

- onboarding (``playbooks/onboard_node.yml``) annotates the node ``gpuops.platform/onboarding-cordoned`` before it
  drains it for the host's reboot, and removes the annotation when it uncordons it;
- the GPU Operator's driver upgrade controller (``playbooks/upgrade.yml`` follows it) cordons a node between its
  states cordon-required and uncordon-required of ``nvidia.com/gpu-driver-upgrade-state``, unless the node was
  cordoned before (``nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable=true``: the controller leaves
  such a node cordoned); ``upgrade-failed`` keeps the node cordoned, which is not expected;
- the SR-IOV config daemon drains a node to change its VFs (``sriovnetwork.openshift.io/current-state=Draining``
  or ``desired-state`` Drain_Required/Draining).

Those are info. The remediation quarantine (``playbooks/remediate.yml``: label ``gpuops.platform/remediation``
quarantined or break-fix, annotations ``gpuops.platform/remediation.*``) is ours too and named as such - the alert,
the fault class, the GPU, since when, how the node returns - but stays a warning: unlike the steps above it does not
end on its own once a step finishes; the node is out of service for a GPU fault until the fault clears and its
re-validation passes, or, handed to break-fix, until a person repairs it. The taint the quarantine added (its
annotation names it) is part of that finding, not a node-tainted one.

Any other cordon is a warning: no new pod lands on the node and its GPUs sit idle."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.release import _upgrade
from ansible_collections.gpuops.platform.plugins.module_utils.status import _network_status
from ansible_collections.gpuops.platform.plugins.module_utils.status import _remediation_marks as _marks
from ansible_collections.gpuops.platform.plugins.module_utils.status._diag_common import node_finding
from ansible_collections.gpuops.platform.plugins.module_utils.status._gpu_labels import DEVICE_PLUGIN

ONBOARDING_CORDON = "gpuops.platform/onboarding-cordoned"  # playbooks/onboard_node.yml sets and removes it
UPGRADE_INITIAL_STATE = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
# the driver upgrade states in which the controller holds the node cordoned (it cordons in cordon-required)
UPGRADE_CORDONED = tuple(s for s in _upgrade.STATES if s not in (_upgrade.REQUIRED, _upgrade.DONE, _upgrade.FAILED))
SRIOV_DRAINING = {
    _network_status.CURRENT_STATE: ("Draining",),
    _network_status.DESIRED_STATE: ("Drain_Required", "Draining"),
}

# The taints the GPU stack tolerates on GPU nodes (key, effect): the operands' defaults (gpu_operator_tolerations,
# amd_gpu_operator_tolerations), NFD's worker (nfd role's defaults) and the smoke tests tolerate them, and the
# ExtendedResourceToleration admission plugin gives them to every pod that requests the resource. On NVIDIA nodes,
# the taints the device-plugin DaemonSet tolerates count too (operand_tolerations: the site's own).
GPU_TAINTS = (("nvidia.com/gpu", "NoSchedule"), ("amd.com/gpu", "NoSchedule"))
# Taints the node lifecycle controller sets from the node's conditions and its cordon: node-not-ready,
# node-condition and node-cordoned name their cause.
CONDITION_TAINTS = tuple(
    f"node.kubernetes.io/{t}"
    for t in (
        "not-ready",
        "unreachable",
        "unschedulable",
        "memory-pressure",
        "disk-pressure",
        "pid-pressure",
        "network-unavailable",
    )
)
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")

CORDONED_BY = {
    "onboarding": "onboarding",
    "driver-upgrade": "driver upgrade",
    "sriov-drain": "SR-IOV drain",
    "remediation": "gpuops remediation",
}
QUARANTINE_STATES = ("quarantined", "break-fix")  # the remediation label's values that keep a node cordoned


def taint_text(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), as kubectl taint writes it."""
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + str(value) if value else ''}:{taint.get('effect')}"


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' ToleratesTaint: the effect (empty: any), the key (empty with Exists: any) and, with Equal (the
    default operator), the value."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    if (toleration.get("operator") or "Equal") == "Exists":
        return True
    return bool(toleration.get("key")) and (toleration.get("value") or "") == (taint.get("value") or "")


def operand_tolerations(daemonsets: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tolerations of the GPU Operator's device-plugin DaemonSet (the operand a GPU node needs; the operator
    gives every operand the same ``daemonsets.tolerations``): the site's own tolerations count as the stack's."""
    for ds in daemonsets or ():
        if (ds.get("metadata") or {}).get("name") == DEVICE_PLUGIN:
            spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
            return [dict(t) for t in spec.get("tolerations") or ()]
    return []


def _blocking(taint: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    key, effect = taint.get("key"), taint.get("effect")
    if effect not in BLOCKING_EFFECTS or (key, effect) in GPU_TAINTS or key in CONDITION_TAINTS:
        return False
    return not any(tolerates(t, taint) for t in tolerations)


def _cordoned_by(labels: Mapping[str, str], annotations: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(who, the marker that says so) for a cordoned node; (None, None) when no gpuops step says it."""
    if labels.get(_marks.LABEL) in QUARANTINE_STATES:
        return "remediation", f"label {_marks.LABEL}={labels[_marks.LABEL]}"
    if ONBOARDING_CORDON in annotations:
        return "onboarding", f"annotation {ONBOARDING_CORDON}={annotations[ONBOARDING_CORDON]}"
    state = labels.get(_upgrade.STATE_LABEL)
    if state in UPGRADE_CORDONED and str(annotations.get(UPGRADE_INITIAL_STATE, "")).lower() != "true":
        return "driver-upgrade", f"label {_upgrade.STATE_LABEL}={state}"
    for key, values in SRIOV_DRAINING.items():
        if annotations.get(key) in values:
            return "sriov-drain", f"annotation {key}={annotations[key]}"
    return None, None


def node_scheduling(node: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Of a Node object: ``schedulable`` (not cordoned and no blocking taint), ``cordoned``, ``cordoned_by``
    (onboarding, driver-upgrade, sriov-drain or None), ``marker`` (the label or annotation that says who),
    ``upgrade_state`` (the driver upgrade state label, or None), ``cordoned_before_upgrade`` (the upgrade
    controller found it cordoned), ``taints`` (the NoSchedule/NoExecute taints the GPU stack does not tolerate, as
    text; ``tolerations``: the operands' own, ``operand_tolerations``) and ``summary`` (the table's cell)."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    cordoned = bool(spec.get("unschedulable"))
    by, marker = _cordoned_by(labels, annotations) if cordoned else (None, None)
    ours = [dict(t) for t in _marks.quarantine_taints(node)] if by == "remediation" else []
    taints = [taint_text(t) for t in spec.get("taints") or () if t not in ours and _blocking(t, tolerations)]
    parts = []
    if cordoned:
        parts.append(f"cordoned ({CORDONED_BY[by]})" if by else "cordoned")
    if taints:
        parts.append("tainted " + ",".join(taints))
    return {
        "schedulable": not parts,
        "cordoned": cordoned,
        "cordoned_by": by,
        "marker": marker,
        "upgrade_state": labels.get(_upgrade.STATE_LABEL),
        "cordoned_before_upgrade": str(annotations.get(UPGRADE_INITIAL_STATE, "")).lower() == "true",
        "taints": taints,
        "quarantine": _quarantine(labels, annotations, ours) if by == "remediation" else None,
        "summary": ", ".join(parts) or "schedulable",
    }


def _quarantine(labels: Mapping[str, str], annotations: Mapping[str, str], taints: Sequence[Mapping]) -> dict[str, Any]:
    """What the remediation's marks say of a quarantined node (the QUARANTINED table reads the same annotations)."""
    a = _marks.ANNOTATIONS
    return {
        "state": labels.get(_marks.LABEL),
        "alert": annotations.get(a["alert"]),
        "fault_class": annotations.get(a["fault_class"]),
        "gpu": _marks.gpu_words(
            {
                "index": annotations.get(a["gpu_index"]),
                "uuid": annotations.get(a["gpu_uuid"]),
                "pci_bus_id": annotations.get(a["gpu_pci_bus_id"]),
            }
        ),
        "since": annotations.get(a["fault_since"]),
        "at": annotations.get(a["at"]),
        "ours": str(annotations.get(a["cordoned"], "")).lower() == "true",
        "break_fix": annotations.get(a["break_fix"]),
        "taints": [taint_text(t) for t in taints],
    }


def _expected_cordon(name: str, by: str, state: str | None) -> tuple[str, str]:
    if by == "onboarding":
        return (
            "onboarding (playbooks/onboard_node.yml) cordoned and drained the node for its host's reboot; the "
            "onboarding's next run validates the node and uncordons it",
            "finish the onboarding: rerun playbooks/onboard_node.yml with -e gpuops_onboard_host=<the node's host> "
            "-e gpuops_allow_reboot=true (or reboot the host yourself, then rerun it)",
        )
    if by == "driver-upgrade":
        return (
            f"the GPU Operator's driver upgrade controller cordoned the node to replace its driver (state {state}); "
            "it uncordons the node at uncordon-required",
            "let the driver upgrade finish (playbooks/upgrade.yml follows it node by node); if the state does not "
            f"move, read the driver pod's log on {name}",
        )
    return (
        "the SR-IOV config daemon cordoned and drains the node to change its VFs; it uncordons the node once the "
        "change is applied",
        f"wait for the SriovNetworkNodeState of {name} to sync (run the diagnosis with network: true for its findings)",
    )


def _quarantine_cordon(name: str, q: Mapping[str, Any]) -> tuple[list[str], str, str]:
    """(evidence, cause, fix) of a node the remediation quarantined: the alert, the fault class, the GPU, how it
    returns (docs/remediation.md, Return)."""
    evidence = [
        f"annotation {_marks.ANNOTATIONS['alert']}={q['alert']}",
        f"annotation {_marks.ANNOTATIONS['fault_class']}={q['fault_class']}",
        f"quarantined at {q['at']} (fault since {q['since']})",
        *(f"taint {t} (the quarantine's)" for t in q["taints"]),
        *([f"handed to break-fix at {q['break_fix']}"] if q["break_fix"] else []),
    ]
    fault = f"{q['alert'] or 'a GPU alert'} (fault class {q['fault_class'] or 'unknown'}) on {q['gpu']}"
    cordon = (
        "cordoned it" if q["ours"] else "found it cordoned already (a person's cordon, which stays after its return)"
    )
    returns = (
        "when the alert resolves, the gpu_health rulebook runs playbooks/remediate.yml with the resolved event, which "
        "re-validates the node (host checks, GPU operands, its own smoke tests) and returns it; a node that fails "
        "stays quarantined"
    )
    if q["state"] == "break-fix":
        cause = (
            f"gpuops remediation quarantined the node after {fault}, {cordon}, and handed it to break-fix: its "
            "repair ladder ended there (no reset or reboot it could or was allowed to do), so it waits for a person; "
            "no new pod is scheduled there"
        )
        fix = (
            f"repair the GPU of {name}; then {returns} - or return it by hand with the resolved event "
            "(ansible-playbook playbooks/remediate.yml -e @event.json -e gpuops_remediation_mode=act, "
            "docs/remediation.md, Return)"
        )
    else:
        cause = (
            f"gpuops remediation quarantined the node after {fault} and {cordon}: it is drained and out of service "
            "while the fault is handled; no new pod is scheduled there"
        )
        fix = (
            f"{returns}; by hand, with the resolved event: ansible-playbook playbooks/remediate.yml "
            "-e @event.json -e gpuops_remediation_mode=act (docs/remediation.md, Return); the diagnosis' QUARANTINED "
            "table lists every quarantined node"
        )
    return evidence, cause, fix


def rule_node_scheduling(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Cordoned GPU node -> info when a gpuops step cordoned it (its marker in the evidence), a warning that names
    the alert and the way back when the remediation quarantined it, warning otherwise;
    NoSchedule/NoExecute taints the GPU stack does not tolerate -> warning naming them."""
    out = []
    for node in view["nodes"]:
        name, sched = node["name"], node.get("scheduling") or {}
        state = sched.get("upgrade_state")
        if sched.get("cordoned"):
            evidence = [f"node {name}: spec.unschedulable=true (SchedulingDisabled)"]
            if sched.get("cordoned_by") == "remediation":
                more, cause, fix = _quarantine_cordon(name, sched["quarantine"])
                evidence += [sched["marker"], *more]
                severity = "warning"  # intended, but a GPU fault keeps the node out of service (module docstring)
            elif sched.get("cordoned_by"):
                cause, fix = _expected_cordon(name, sched["cordoned_by"], state)
                evidence.append(sched["marker"])
                severity = "info"
            else:
                severity = "warning"
                evidence += [
                    f"label {_upgrade.STATE_LABEL}={state}" if state else "",
                    f"annotation {UPGRADE_INITIAL_STATE}=true (cordoned before the driver upgrade)"
                    if sched.get("cordoned_before_upgrade")
                    else "",
                ]
                if state == _upgrade.FAILED:
                    cause = (
                        "the GPU Operator's driver upgrade failed on the node: its new driver pod keeps failing, and "
                        "the upgrade controller keeps the node cordoned until that pod is ready"
                    )
                    fix = (
                        f"read the driver pod's log on {name} (kubectl logs -n {view['operator_namespace']} "
                        f"-l app=nvidia-driver-daemonset --field-selector spec.nodeName={name}); the controller "
                        "uncordons the node once its driver pod is ready (docs/operations.md, Upgrade)"
                    )
                else:
                    cause = (
                        "the node is cordoned and no gpuops step says it cordoned it (onboarding's annotation, the "
                        "driver upgrade's state label, the SR-IOV drain): no new pod is scheduled there, so its "
                        "GPUs sit idle"
                    )
                    fix = (
                        f"kubectl uncordon {name} once the maintenance is over (kubectl get node {name} "
                        "--show-managed-fields names the client that cordoned it)"
                    )
            out.append(
                node_finding(name, fid="node-cordoned", severity=severity, evidence=evidence, cause=cause, fix=fix)
            )
        if sched.get("taints"):
            tolerated = ", ".join(f"{k}:{e}" for k, e in GPU_TAINTS)
            out.append(
                node_finding(
                    name,
                    fid="node-tainted",
                    severity="warning",
                    evidence=[f"node {name}: taint {t}" for t in sched["taints"]],
                    cause="the node carries NoSchedule/NoExecute taints the GPU stack does not tolerate (it tolerates "
                    f"{tolerated}): GPU workloads without a matching toleration are not scheduled there (NoExecute "
                    "evicts the running ones), nor are operands and NFD workers whose tolerations lack them",
                    fix=f"remove the taint when it is not wanted (kubectl taint node {name} {sched['taints'][0]}-), "
                    "or keep it and add a matching toleration to the workloads and to the operands "
                    "(gpu_operator_tolerations / amd_gpu_operator_tolerations, nfd_values.worker.tolerations)",
                )
            )
    return out
