# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""NVIDIA Network Operator (v26.4.1) readiness, as pure predicates (no I/O, ``_readiness`` style: None when
ready, else the unmet condition): :func:`nic_cluster_policy_ready` (the NicClusterPolicy and its sections'
appliedStates) and :func:`network_ready` (MacvlanNetwork, HostDeviceNetwork, IPoIBNetwork). The builders
(``network/_network``) take the policy's name and its sections' states from here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

Obj = dict[str, Any]
Unmet = Optional[str]  # noqa: UP045 - a runtime alias: module_utils still import on Python 3.9

# pkg/consts.NicClusterPolicyResourceName: any other name gets status.state ignore.
POLICY_NAME = "nic-cluster-policy"
# NicClusterPolicy section -> status.appliedStates[].name (pkg/state/state_*.go @ v26.4.1)
STATES = {
    "ofedDriver": "state-OFED",
    "rdmaSharedDevicePlugin": "state-RDMA-device-plugin",
    "sriovDevicePlugin": "state-SRIOV-device-plugin",
    "multus": "state-multus-cni",
    "cniPlugins": "state-container-networking-plugins",
    "ipoib": "state-ipoib-cni",
    "nvIpam": "state-nv-ipam-cni",
    "docaTelemetryService": "state-doca-telemetry-service",
}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


# -- readiness ---------------------------------------------------------------------------------------------
def _sections(spec: Mapping[str, Any]) -> list[str]:
    """The sections of a NicClusterPolicy spec that have an appliedStates entry."""
    out = [s for s in STATES if s in spec]
    out += [s for s in STATES if s in _dict(spec.get("secondaryNetwork"))]
    return out


def nic_cluster_policy_ready(obj: Obj) -> Unmet:
    """NicClusterPolicy: status.state == ready and every section of the spec has its appliedStates entry ready
    (the status has no observedGeneration: a section added to the spec shows as missing until the operator has
    seen it). A policy not named nic-cluster-policy is ignored by the operator, forever."""
    meta = _dict(obj.get("metadata"))
    status = _dict(obj.get("status"))
    state = status.get("state")
    if meta.get("name") != POLICY_NAME:
        return (
            f"the operator ignores NicClusterPolicies not named {POLICY_NAME} (this one is {meta.get('name')}"
            + (f"; status.reason: {status.get('reason')}" if status.get("reason") else "")
            + ")"
        )
    applied = {str(s.get("name")): s for s in _list(status.get("appliedStates")) if isinstance(s, Mapping)}
    bad = [
        f"{name} {s.get('state')}" + (f" ({s.get('message')})" if s.get("message") else "")
        for name, s in applied.items()
        if s.get("state") in ("notReady", "error")
    ]
    missing = [STATES[s] for s in _sections(_dict(obj.get("spec"))) if STATES[s] not in applied]
    if state == "ready" and not missing:
        return None
    if not state:
        return "status.state is empty, want ready (not reconciled yet: is the network-operator pod running?)"
    text = f"status.state is {state}, want ready"
    if status.get("reason"):
        text += f" (reason: {status.get('reason')})"
    if bad:
        text += "; not ready: " + ", ".join(bad)
    if missing:
        text += "; no status yet for " + ", ".join(missing)
    return text


def network_ready(obj: Obj) -> Unmet:
    """MacvlanNetwork / HostDeviceNetwork / IPoIBNetwork: status.state == ready (the NetworkAttachmentDefinition
    is written)."""
    status = _dict(obj.get("status"))
    state = status.get("state")
    if state == "ready":
        return None
    if not state:
        return "status.state is empty, want ready (not reconciled yet)"
    reason = f" (reason: {status.get('reason')})" if status.get("reason") else ""
    return f"status.state is {state}, want ready{reason}"
