# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Readiness: one predicate per kind (a pure function of one object, as the API server returns it, that
answers None when the object is ready or the unmet condition as text), the table of kinds the wait option
knows (``KINDS``: add a row for a new kind), and a waiter with an injectable clock and sleep (``Waiter``;
``NullWaiter`` looks once and never sleeps, for check mode)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional, TypeVar

from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue
from ansible_collections.gpuops.platform.plugins.module_utils.status import _network_ready, _sriov_ready

Obj = dict[str, Any]
Unmet = Optional[str]  # noqa: UP045 - a runtime alias: module_utils still import on Python 3.9
T = TypeVar("T")


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def _generation_unmet(obj: Obj) -> Unmet:
    """The controller has not seen the latest spec yet (checked only when both numbers are reported)."""
    gen = (obj.get("metadata") or {}).get("generation")
    seen = _status(obj).get("observedGeneration")
    if gen is not None and seen is not None and int(seen) < int(gen):
        return f"status.observedGeneration {seen} < metadata.generation {gen} (the controller has not seen the spec)"
    return None


def _condition(obj: Obj, ctype: str) -> Obj | None:
    return next((c for c in _status(obj).get("conditions") or () if c.get("type") == ctype), None)


# -- predicates: object -> None (ready) or the unmet condition -----------------------------------------------
def cluster_policy(obj: Obj) -> Unmet:
    """NVIDIA ClusterPolicy: the operator's own verdict, status.state == ready."""
    state = _status(obj).get("state")
    if state == "ready":
        return None
    if not state:
        return "status.state is empty, want ready (not reconciled yet: is the gpu-operator pod running?)"
    text = f"status.state is {state}, want ready"
    cond = _condition(obj, "Error")
    if not cond or cond.get("status") != "True":
        cond = _condition(obj, "Ready")
    if cond and (cond.get("reason") or cond.get("message")):
        text += f" (condition {cond.get('type')} reason {cond.get('reason')}: {cond.get('message')})"
    return text


def device_config(obj: Obj) -> Unmet:
    """AMD DeviceConfig: the device plugin is available on every node matching spec.selector
    (status.devicePlugin.availableNumber == nodesMatchingSelectorNumber, both reported)."""
    dp = _status(obj).get("devicePlugin") or {}
    matching, available = dp.get("nodesMatchingSelectorNumber"), dp.get("availableNumber")
    if matching is None or available is None:
        return "status.devicePlugin is not reported yet (the AMD operator has not reconciled the DeviceConfig)"
    if available != matching:
        return f"device plugin available on {available} of {matching} node(s) matching spec.selector"
    return None


def daemonset(obj: Obj) -> Unmet:
    """DaemonSet: scheduled on at least one node, every scheduled pod updated and ready, spec observed."""
    st = _status(obj)
    desired = int(st.get("desiredNumberScheduled") or 0)
    if desired == 0:
        return "status.desiredNumberScheduled is 0 (its pods schedule on no node: nodeSelector or taints)"
    gen = _generation_unmet(obj)
    if gen:
        return gen
    ready = int(st.get("numberReady") or 0)
    if ready < desired:
        return f"{ready}/{desired} pods ready"
    updated = st.get("updatedNumberScheduled")
    if updated is not None and int(updated) < desired:
        return f"{updated}/{desired} pods updated to the current template"
    return None


def deployment(obj: Obj) -> Unmet:
    """Deployment: spec.replicas (default 1) available and updated, spec observed."""
    want = int((obj.get("spec") or {}).get("replicas", 1) or 0)
    gen = _generation_unmet(obj)
    if gen:
        return gen
    st = _status(obj)
    available = int(st.get("availableReplicas") or 0)
    if available < want:
        return f"{available}/{want} replicas available"
    updated = st.get("updatedReplicas")
    if want and updated is not None and int(updated) < want:
        return f"{updated}/{want} replicas updated to the current template"
    return None


def gpu_node(node: Obj) -> Unmet:
    """A GPU node as ``_cluster_views.node_view`` builds it: condition Ready True and at least one GPU
    allocatable (a node whose operands are disabled by nvidia.com/gpu.deploy.operands=false, or a DRA pool's node
    with nvidia.com/gpu.deploy.device-plugin=false and gpuops.platform/sharing-dra=true, is ready as is)."""
    if not node.get("ready"):
        return f"condition Ready is not True ({node.get('ready_reason')}: {node.get('ready_message')})"
    labels = node.get("labels") or {}
    if labels.get("nvidia.com/gpu.deploy.operands") == "false":
        return None
    if (
        labels.get("nvidia.com/gpu.deploy.device-plugin") == "false"
        and labels.get("gpuops.platform/sharing-dra") == "true"
    ):
        return None  # a DRA pool's node (gpu_sharing): its GPUs are ResourceSlice devices
    alloc = node.get("allocatable") or {}
    shared = alloc.get("nvidia.com/gpu.shared")
    if node.get("gpus", 0) > 0 or (isinstance(shared, int) and shared > 0):
        return None
    resource = "amd.com/gpu" if node.get("vendor") == "amd" else "nvidia.com/gpu"
    return f"allocatable {resource} is {alloc.get(resource, 'absent')} (the device plugin advertises no GPU)"


# -- the kinds the wait option knows -----------------------------------------------------------------------
@dataclass(frozen=True)
class Kind:
    """How to list a kind (group, version, plural; cluster-scoped or not), judge one object and what to do
    when it stays unready."""

    group: str
    version: str
    plural: str
    namespaced: bool
    ready: Callable[[Obj], Unmet]
    hint: str


KINDS: dict[str, Kind] = {
    "ClusterPolicy": Kind(
        "nvidia.com",
        "v1",
        "clusterpolicies",
        False,
        cluster_policy,
        "read the ClusterPolicy's conditions and the gpu-operator pod's log; the findings name the node-level cause",
    ),
    "DeviceConfig": Kind(
        "amd.com",
        "v1alpha1",
        "deviceconfigs",
        True,
        device_config,
        "check the *-device-plugin pods of the AMD operator namespace and the NFD label "
        "feature.node.kubernetes.io/amd-gpu on the nodes",
    ),
    "NicClusterPolicy": Kind(
        "mellanox.com",
        "v1alpha1",
        "nicclusterpolicies",
        False,
        _network_ready.nic_cluster_policy_ready,
        "read status.appliedStates of the NicClusterPolicy and the network-operator pod's log; the operand "
        "DaemonSets run only on nodes labelled feature.node.kubernetes.io/pci-15b3.present=true",
    ),
    "MacvlanNetwork": Kind(
        "mellanox.com",
        "v1alpha1",
        "macvlannetworks",
        False,
        _network_ready.network_ready,
        "read the network's status.reason; its NetworkAttachmentDefinition goes to spec.networkNamespace",
    ),
    "HostDeviceNetwork": Kind(
        "mellanox.com",
        "v1alpha1",
        "hostdevicenetworks",
        False,
        _network_ready.network_ready,
        "read the network's status.reason; its NetworkAttachmentDefinition goes to spec.networkNamespace",
    ),
    "IPoIBNetwork": Kind(
        "mellanox.com",
        "v1alpha1",
        "ipoibnetworks",
        False,
        _network_ready.network_ready,
        "read the network's status.reason; its NetworkAttachmentDefinition goes to spec.networkNamespace",
    ),
    "SriovNetworkNodeState": Kind(
        "sriovnetwork.openshift.io",
        "v1",
        "sriovnetworknodestates",
        True,
        _sriov_ready.sriov_network_node_state,
        "the node's sriov-network-config-daemon reports here: read its log; lastSyncError names the PF; a drain "
        "blocked by a PodDisruptionBudget keeps the state InProgress (kubectl get pdb -A)",
    ),
    "ClusterQueue": Kind(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        False,
        _kueue.queue_ready,
        "kubectl get clusterqueue <name> -o yaml: the Active condition's message names what is missing (a flavor, "
        "a stopPolicy); Kueue's log says more",
    ),
    "LocalQueue": Kind(
        "kueue.x-k8s.io",
        "v1beta2",
        "localqueues",
        True,
        _kueue.queue_ready,
        "kubectl -n <namespace> get localqueue <name> -o yaml: a LocalQueue is active when its ClusterQueue exists "
        "and is active",
    ),
    "DaemonSet": Kind(
        "apps",
        "v1",
        "daemonsets",
        True,
        daemonset,
        "kubectl -n <namespace> get pods -o wide; a DaemonSet that cannot schedule on GPU nodes needs their taints "
        "in its tolerations",
    ),
    "Deployment": Kind(
        "apps",
        "v1",
        "deployments",
        True,
        deployment,
        "kubectl -n <namespace> describe deployment <name>; read the pods' events and logs",
    ),
}


@dataclass(frozen=True)
class NotReady:
    """One object that is not ready and the condition it does not meet."""

    kind: str
    namespace: str | None
    name: str
    condition: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}: {self.condition}"

    def as_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "condition": self.condition}


def judge(kind: str, obj: Obj) -> NotReady | None:
    """The kind's predicate applied to ``obj``: None when ready."""
    unmet = KINDS[kind].ready(obj)
    if unmet is None:
        return None
    meta = obj.get("metadata") or {}
    return NotReady(kind, meta.get("namespace"), meta.get("name") or "", unmet)


# -- waiting ----------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """What a wait ended with: the last snapshot, what was still not ready in it, the seconds waited, whether
    it was waited for at all (False in check mode) and the number of looks."""

    snapshot: Any
    not_ready: list[NotReady]
    elapsed: float
    waited: bool
    probes: int

    @property
    def ready(self) -> bool:
        return not self.not_ready


class Waiter:
    """Calls ``probe() -> (snapshot, [NotReady...])`` until nothing is unready or ``timeout`` seconds have
    passed. Between looks it sleeps 1 s, then twice as long each time, at most ``interval`` seconds (never past
    the deadline): an object a moment from ready costs a second, not a whole interval, and a long wait still
    looks only every ``interval`` seconds. ``clock`` and ``sleep`` are injectable so tests never sleep."""

    first = 1.0

    waits = True

    def __init__(
        self,
        timeout: float,
        interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.timeout = max(0.0, float(timeout))
        self.interval = max(0.1, float(interval))
        self.clock = clock
        self.sleep = sleep

    def wait(self, probe: Callable[[], tuple[T, list[NotReady]]]) -> Outcome:
        start = self.clock()
        probes = 0
        step = min(self.first, self.interval)
        while True:
            snapshot, not_ready = probe()
            probes += 1
            elapsed = self.clock() - start
            if not not_ready or elapsed >= self.timeout:
                return Outcome(snapshot, list(not_ready), elapsed, self.waits, probes)
            self.sleep(min(step, self.timeout - elapsed))
            step = min(step * 2, self.interval)


class NullWaiter(Waiter):
    """Looks once and never sleeps: check mode reports the state as it is, without waiting."""

    waits = False

    def __init__(self) -> None:
        super().__init__(timeout=0)


def timeout_message(outcome: Outcome, timeout: float) -> str:
    """Names every object that is not ready and the condition it does not meet."""
    lead = (
        f"not ready after waiting {outcome.elapsed:.0f}s (timeout {timeout:.0f}s)"
        if outcome.waited
        else "not ready (check mode: looked once, did not wait)"
    )
    return f"{lead}: " + "; ".join(str(n) for n in outcome.not_ready)
