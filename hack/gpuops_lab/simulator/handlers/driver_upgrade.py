"""The GPU Operator's driver upgrade controller, as the simulator plays it (pure; the ClusterPolicy handler reads
the cluster and carries out the steps).

Upstream (NVIDIA/gpu-operator v26.7.0 controllers/upgrade_controller.go, which drives NVIDIA/k8s-operator-libs
pkg/upgrade vendored at d720f2557494):

- The driver DaemonSet's update strategy is always OnDelete (assets/state-driver/0500_daemonset.yaml; the
  ClusterPolicy's RollingUpdate is never applied to it, object_controls.go applyUpdateStrategyConfig), so a new
  driver version reaches a node only when its driver pod is deleted - by this controller when
  ``driver.upgradePolicy.autoUpgrade`` is true, by hand otherwise. With autoUpgrade false the controller removes
  every node's state label.
- Each driver node carries ``nvidia.com/gpu-driver-upgrade-state`` (consts.go, driver name ``gpu``): a node whose
  driver pod is in sync is ``upgrade-done``, one whose pod is out of date ``upgrade-required``; then
  cordon-required -> wait-for-jobs-required -> pod-deletion-required -> (drain-required when drain.enable) ->
  pod-restart-required -> validation-required -> uncordon-required -> upgrade-done. A node labelled
  ``nvidia.com/gpu-driver-upgrade.skip=true`` is left alone.
- How many nodes may start (common_manager.go GetUpgradesAvailable): maxParallelUpgrades (0 = no limit) minus the
  nodes in progress (every state but unknown, upgrade-required and upgrade-done: a failed node holds its slot),
  capped by maxUnavailable (a count or a percentage of the driver nodes, rounded up) minus the nodes unavailable
  now (cordoned, plus those in cordon-required). A node someone cordoned by hand proceeds without a slot.
- A node goes to ``upgrade-failed`` when its new driver pod keeps failing; it leaves that state (to
  uncordon-required) once its driver pod is in sync and ready again (ProcessUpgradeFailedNodes).
- Before cordoning, the controller records whether the node was already unschedulable
  (``nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable``) and leaves such a node cordoned at the end.

The simulator's simplifications, said: a pod is "out of date" when the template it was made from (a hash in its
annotation ``sim.gpuops.io/driver-template``) is not the DaemonSet's now - upstream compares controller revisions,
the same fact by another name; one state per reconcile;
waitForCompletion's podSelector is not modelled (the step passes); pod deletion removes the node's pods that
request nvidia.com/gpu outside the operator's namespace; drain deletes the node's pods that no DaemonSet owns; the
fault ``driver-upgrade-fail`` on a node stands for a new driver that keeps failing there: once its pod was
replaced, the node goes to upgrade-failed (and stays there while the fault is on).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
INITIAL_STATE_ANNOTATION = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
# the simulator's own mark of the driver pod template (a hash of it), standing in for the controller revision
TEMPLATE_ANNOTATION = "sim.gpuops.io/driver-template"
FAULT_UPGRADE_FAIL = "driver-upgrade-fail"

UNKNOWN = ""
REQUIRED = "upgrade-required"
CORDON = "cordon-required"
WAIT_JOBS = "wait-for-jobs-required"
POD_DELETION = "pod-deletion-required"
DRAIN = "drain-required"
POD_RESTART = "pod-restart-required"
VALIDATION = "validation-required"
UNCORDON = "uncordon-required"
DONE = "upgrade-done"
FAILED = "upgrade-failed"
NOT_IN_PROGRESS = (UNKNOWN, REQUIRED, DONE)


@dataclass(frozen=True)
class NodeView:
    """What the controller sees of one driver node."""

    name: str
    state: str
    in_sync: bool  # the driver pod was made from the DaemonSet's template now (or there is none: nothing to replace)
    pod_exists: bool
    pod_ready: bool
    unschedulable: bool
    initially_unschedulable: bool = False
    failing: bool = False  # the fault driver-upgrade-fail
    skip: bool = False


@dataclass
class Step:
    """What to do to one node in this reconcile."""

    node: str
    state: str | None = None  # the new state label (None: unchanged)
    cordon: bool = False
    uncordon: bool = False
    record_initial: bool = False  # write the initial-state annotation before cordoning
    delete_driver_pod: bool = False
    delete_gpu_pods: bool = False
    drain: bool = False
    notes: list[str] = field(default_factory=list)


def scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)."""
    text = str(value).strip()
    if text.endswith("%"):
        return math.ceil(total * int(text[:-1]) / 100)
    return int(text)


def available_slots(views: Sequence[NodeView], max_parallel: int, max_unavailable: int | str) -> int:
    """GetUpgradesAvailable: how many upgrade-required nodes may start now."""
    total = len(views)
    in_progress = sum(1 for v in views if v.state not in NOT_IN_PROGRESS)
    required = sum(1 for v in views if v.state == REQUIRED)
    cap = scaled(max_unavailable, total) if max_unavailable not in (None, "") else total
    available = required if int(max_parallel) == 0 else int(max_parallel) - in_progress
    available = min(available, cap)
    unavailable = sum(1 for v in views if v.unschedulable) + sum(1 for v in views if v.state == CORDON)
    if unavailable >= cap:
        return 0
    if cap < total and available + unavailable > cap:
        available = cap - unavailable
    return max(0, available)


def plan(views: Sequence[NodeView], policy: Mapping[str, Any]) -> list[Step]:
    """The steps of one reconcile for ``views`` (the driver nodes) under ``policy`` (driver.upgradePolicy).
    Nodes that need nothing get no step."""
    if not policy.get("autoUpgrade"):
        return [Step(v.name, state=UNKNOWN) for v in views if v.state != UNKNOWN]
    drain = bool((policy.get("drain") or {}).get("enable"))
    active = [v for v in views if not v.skip]
    steps: list[Step] = []
    slots = available_slots(active, int(policy.get("maxParallelUpgrades", 1) or 0), policy.get("maxUnavailable", "25%"))
    for v in sorted(active, key=lambda x: x.name):
        if v.state in (UNKNOWN, DONE):
            want = DONE if v.in_sync else REQUIRED
            if want != v.state:
                steps.append(Step(v.name, state=want))
        elif v.state == REQUIRED:
            if v.in_sync:  # nothing left to replace (deleted by hand): done without cordoning
                steps.append(Step(v.name, state=DONE))
            elif v.unschedulable:  # cordoned by hand: it proceeds without a slot (ProcessUpgradeRequiredNodes)
                steps.append(Step(v.name, state=CORDON))
            elif slots > 0:
                slots -= 1
                steps.append(Step(v.name, state=CORDON))
        elif v.state == CORDON:
            steps.append(Step(v.name, state=WAIT_JOBS, cordon=True, record_initial=True))
        elif v.state == WAIT_JOBS:
            steps.append(Step(v.name, state=POD_DELETION))
        elif v.state == POD_DELETION:
            steps.append(Step(v.name, state=DRAIN if drain else POD_RESTART, delete_gpu_pods=True))
        elif v.state == DRAIN:
            steps.append(Step(v.name, state=POD_RESTART, drain=True))
        elif v.state == POD_RESTART:
            if not v.in_sync and v.pod_exists:
                steps.append(Step(v.name, delete_driver_pod=True))
            elif v.in_sync and v.failing:
                steps.append(Step(v.name, state=FAILED, notes=["the new driver pod keeps failing"]))
            elif v.in_sync and v.pod_ready:
                steps.append(Step(v.name, state=VALIDATION))
        elif v.state == VALIDATION:
            if v.in_sync and v.pod_ready and not v.failing:
                steps.append(Step(v.name, state=UNCORDON))
        elif v.state == UNCORDON:
            steps.append(Step(v.name, state=DONE, uncordon=not v.initially_unschedulable))
        elif v.state == FAILED:
            if v.in_sync and v.pod_ready and not v.failing:
                steps.append(Step(v.name, state=UNCORDON))
            elif not v.failing and not v.in_sync and v.pod_exists:
                steps.append(Step(v.name, delete_driver_pod=True))
    return steps
