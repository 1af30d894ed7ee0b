"""The remediation's rules as tables: the event's validation field by field, the node's marks (quarantine, notify,
break-fix, return), the circuit breaker's arithmetic, the drain's decision per pod and the repair ladder."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _policy
from ansible_collections.gpuops.platform.plugins.module_utils.remediation._event import validate_event

NOW = datetime(2026, 11, 28, 9, 0, 0, tzinfo=timezone.utc)  # noqa: UP017
EVENT = {
    "node": "gpu-0",
    "alert": "GPUXidFallenOffBus",
    "fault_class": "bus",
    "action": "quarantine",
    "severity": "critical",
    "gpu": {"uuid": "GPU-5c6f1a2b-0000-1111-2222-333344445555", "pci_bus_id": "00000000:17:00.0", "index": 3},
    "starts_at": "2026-11-28T08:00:00.123456789Z",
    "fingerprint": "a1b2c3d4e5f60718",
    "labels": {"Hostname": "gpu-0"},
    "annotations": {"summary": "XID 79"},
    "status": "firing",
}


def _with(path, value):
    ev = copy.deepcopy(EVENT)
    keys = path.split(".")
    target = ev
    for k in keys[:-1]:
        target = target[k]
    if value is KeyError:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return ev


def test_a_good_event_is_normalised():
    ev = validate_event(_with("gpu.index", "3"))
    assert ev["gpu"] == {"uuid": EVENT["gpu"]["uuid"], "pci_bus_id": "00000000:17:00.0", "index": 3}
    assert ev["labels"] == {"Hostname": "gpu-0"}


def test_a_whole_node_alert_has_no_gpu():
    ev = validate_event(_with("gpu", {"uuid": None, "pci_bus_id": "", "index": None}))
    assert ev["gpu"] == {"uuid": None, "pci_bus_id": None, "index": None}


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("node", "GPU_Node", "node"),
        ("node", "", "node"),
        ("node", KeyError, "node"),
        ("alert", "bad alert", "alert"),
        ("fault_class", None, "fault_class"),
        ("action", "cordon", "action"),
        ("severity", 3, "severity"),
        ("gpu", "GPU-1", "gpu"),
        ("gpu.uuid", "not-a-uuid", "gpu.uuid"),
        ("gpu.pci_bus_id", "17:00.0", "gpu.pci_bus_id"),
        ("gpu.index", -1, "gpu.index"),
        ("gpu.index", True, "gpu.index"),
        ("gpu.extra", 1, "gpu"),
        ("starts_at", "yesterday", "starts_at"),
        ("starts_at", "2026-13-40T00:00:00Z", "starts_at"),
        ("fingerprint", "", "fingerprint"),
        ("labels", {"a": 1}, "labels"),
        ("annotations", ["x"], "annotations"),
        ("status", "pending", "status"),
        ("extra", "x", "extra"),
    ],
)
def test_a_bad_field_is_named(path, value, field):
    with pytest.raises(InvalidInput) as exc:
        validate_event(_with(path, value))
    assert exc.value.details["field"] == field
    assert f"gpuops_remediation_event.{field}:" in exc.value.msg
    assert "Nothing was changed" in exc.value.msg


@pytest.mark.parametrize("event", [None, [], "node=gpu-0"])
def test_an_event_that_is_no_mapping_is_refused(event):
    with pytest.raises(InvalidInput):
        validate_event(event)


# -- which node --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("labels", "alloc", "gpu"),
    [
        ({"nvidia.com/gpu.present": "true"}, {}, True),
        ({"feature.node.kubernetes.io/pci-10de.present": "true"}, {}, True),
        ({}, {"nvidia.com/gpu": "8"}, True),
        ({"feature.node.kubernetes.io/amd-gpu": "true"}, {}, True),
        ({}, {"cpu": "64"}, False),
        ({"nvidia.com/gpu.present": "false"}, {}, False),
    ],
)
def test_gpu_nodes_are_told_as_the_inventory_tells_them(labels, alloc, gpu):
    assert _policy.is_gpu_node({"metadata": {"labels": labels}, "status": {"allocatable": alloc}}) is gpu


# -- the marks --------------------------------------------------------------------------------------------------------
def _node(labels=None, annotations=None, unschedulable=False, taints=None):
    return {
        "metadata": {"name": "gpu-0", "resourceVersion": "7", "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"unschedulable": unschedulable, **({"taints": taints} if taints else {})},
    }


def _apply(node, marks):
    out = copy.deepcopy(node)
    for kind in ("labels", "annotations"):
        for k, v in marks[kind].items():
            if v is None:
                out["metadata"][kind].pop(k, None)
            else:
                out["metadata"][kind][k] = v
    out["spec"]["unschedulable"] = marks["unschedulable"]
    out["spec"]["taints"] = marks["taints"]
    if not out["spec"]["taints"]:
        out["spec"].pop("taints")
    return out


TAINT = {"key": "gpuops.platform/quarantined", "value": "bus", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("state", "taint", "cordon", "label"),
    [
        ("quarantined", None, True, "quarantined"),
        ("quarantined", TAINT, True, "quarantined"),
        ("notified", None, False, "notified"),
        ("break-fix", None, True, "break-fix"),
    ],
)
def test_marks_then_a_repeat_changes_nothing(state, taint, cordon, label):
    ev = validate_event(EVENT)
    node = _node()
    marks = _policy.desired_marks(node, ev, state, taint, NOW)
    diffs = _policy.differences(node, marks)
    assert ("spec.unschedulable", False, True) in diffs if cordon else all(d[0] != "spec.unschedulable" for d in diffs)
    after = _apply(node, marks)
    ann = after["metadata"]["annotations"]
    assert after["metadata"]["labels"][_policy.LABEL] == label
    assert ann[_policy.ANNOTATIONS["gpu_uuid"]] == ev["gpu"]["uuid"]
    assert ann[_policy.ANNOTATIONS["gpu_pci_bus_id"]] == "00000000:17:00.0"
    assert ann[_policy.ANNOTATIONS["by"]] == "gpuops"
    assert ann[_policy.ANNOTATIONS["at"]] == "2026-11-28T09:00:00Z"
    assert (after["spec"].get("taints") == [TAINT]) is bool(taint)
    later = NOW + timedelta(minutes=5)
    assert _policy.differences(after, _policy.desired_marks(after, ev, state, taint, later)) == []


def test_a_node_a_person_cordoned_is_not_claimed_and_stays_cordoned_on_return():
    ev = validate_event(EVENT)
    node = _node(unschedulable=True, taints=[{"key": "maintenance", "effect": "NoSchedule"}])
    after = _apply(node, _policy.desired_marks(node, ev, "quarantined", TAINT, NOW))
    assert _policy.ANNOTATIONS["cordoned"] not in after["metadata"]["annotations"]
    back = _apply(after, _policy.returned_marks(after))
    assert back["spec"]["unschedulable"] is True
    assert back["spec"]["taints"] == [{"key": "maintenance", "effect": "NoSchedule"}]
    assert back["metadata"]["labels"] == {} and back["metadata"]["annotations"] == {}


def test_the_return_undoes_the_quarantine():
    ev = validate_event(EVENT)
    node = _node(labels={"keep": "me"}, annotations={"other": "x"})
    after = _apply(node, _policy.desired_marks(node, ev, "quarantined", TAINT, NOW))
    back = _apply(after, _policy.returned_marks(after))
    assert back == node
    assert _policy.differences(back, _policy.returned_marks(back)) == []


@pytest.mark.parametrize(
    ("before", "asked", "kept"),
    [("quarantined", "notified", "quarantined"), ("break-fix", "quarantined", "break-fix")],
)
def test_a_lesser_or_later_alert_does_not_lift_a_mark(before, asked, kept):
    ev = validate_event(EVENT)
    node = _node()
    marked = _apply(node, _policy.desired_marks(node, ev, before, None, NOW))
    assert _policy.desired_marks(marked, ev, asked, None, NOW)["labels"] == {_policy.LABEL: kept}


def test_the_patch_carries_the_resource_version():
    ev = validate_event(EVENT)
    node = _node()
    diffs = _policy.differences(node, _policy.desired_marks(node, ev, "quarantined", None, NOW))
    patch = _policy.node_patch(node, diffs)
    assert patch["metadata"]["resourceVersion"] == "7"
    assert patch["spec"] == {"unschedulable": True}
    assert patch["metadata"]["labels"] == {_policy.LABEL: "quarantined"}


def test_the_view_says_why():
    ev = validate_event(EVENT)
    node = _node()
    after = _apply(node, _policy.desired_marks(node, ev, "quarantined", None, NOW))
    (row,) = _policy.quarantined_view([after, _node()])
    assert row["state"] == "quarantined" and row["alert"] == "GPUXidFallenOffBus" and row["unschedulable"]
    assert row["gpu"].startswith("GPU 3 (GPU-5c6f")


# -- the breaker ------------------------------------------------------------------------------------------------------
def _acts(*minutes_ago):
    return [{"node": f"n{i}", "at": _policy.stamp(NOW - timedelta(minutes=m))} for i, m in enumerate(minutes_ago)]


@pytest.mark.parametrize(
    ("limits", "gpu_nodes", "held", "actions", "tripped", "allowed", "words"),
    [
        ({"max_nodes": 2, "max_percent": 10}, 64, [], [], None, True, ""),
        ({"max_nodes": 2, "max_percent": 10}, 64, ["a"], [], None, True, ""),
        ({"max_nodes": 2, "max_percent": 10}, 64, ["a", "b"], [], None, False, "the limit is 2"),
        (
            {"max_nodes": 0, "max_percent": 10},
            64,
            ["a"] * 1 + [f"x{i}" for i in range(5)],
            [],
            None,
            False,
            "limit is 6",
        ),
        ({"max_nodes": 0, "max_percent": 10}, 64, [f"x{i}" for i in range(5)], [], None, True, ""),
        ({"max_nodes": 0, "max_percent": 10}, 3, [], [], None, True, ""),  # at least one node of a small fleet
        ({"max_nodes": 0, "max_percent": 10}, 3, ["a"], [], None, False, "limit is 1"),
        ({"max_nodes": 0, "max_percent": 0}, 3, ["a", "b"], [], None, True, ""),  # both off
        ({"max_actions": 3, "window": 600}, 64, [], _acts(1, 2, 3), None, False, "3 quarantines in the last 600 s"),
        ({"max_actions": 3, "window": 600}, 64, [], _acts(1, 2, 30), None, True, ""),  # one outside the window
        ({"max_nodes": 5}, 64, [], [], "too many", False, "open since an earlier refusal: too many"),
        ({"max_nodes": 1}, 64, ["gpu-0"], [], "too many", True, "already quarantined"),  # nothing new taken out
    ],
)
def test_breaker(limits, gpu_nodes, held, actions, tripped, allowed, words):
    got = _policy.breaker_decision(limits, gpu_nodes, held, actions, "gpu-0", NOW, tripped)
    assert got["allowed"] is allowed
    assert words in got["reason"]


# -- the drain --------------------------------------------------------------------------------------------------------
def _pod(ns="team", name="p", phase="Running", owner=None, mirror=False, labels=None):
    meta = {"namespace": ns, "name": name, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x"}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    return {"metadata": meta, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("pod", "policies", "default", "decision"),
    [
        (_pod(), {}, "evict", "evict"),
        (_pod(owner="ReplicaSet"), {}, "evict", "evict"),
        (_pod(owner="DaemonSet"), {"team": "evict"}, "evict", "leave"),
        (_pod(mirror=True), {}, "evict", "leave"),
        (_pod(phase="Succeeded"), {}, "evict", "done"),
        (_pod(phase="Failed"), {"team": "wait"}, "evict", "done"),
        (_pod(ns="train"), {"train": "wait"}, "evict", "wait"),
        (_pod(ns="mon"), {"mon": "leave"}, "evict", "leave"),
        (_pod(ns="other"), {"mon": "leave"}, "wait", "wait"),
    ],
)
def test_drain_decision(pod, policies, default, decision):
    assert _policy.pod_decision(pod, policies, default)[0] == decision


def _pdb(name, selector, ns="team"):
    return {"metadata": {"namespace": ns, "name": name}, "spec": {"selector": selector}}


@pytest.mark.parametrize(
    ("pdb", "selects"),
    [
        (_pdb("a", {"matchLabels": {"app": "w"}}), True),
        (_pdb("b", {"matchLabels": {"app": "v"}}), False),
        (_pdb("c", {"matchLabels": {"app": "w"}}, ns="other"), False),
        (_pdb("d", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["w", "v"]}]}), True),
        (_pdb("e", {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}), False),
        (_pdb("f", {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}), True),
        (_pdb("g", {}), True),
    ],
)
def test_budgets_of_a_pod(pdb, selects):
    assert (_policy.blocking_pdbs(_pod(labels={"app": "w"}), [pdb]) != []) is selects


# -- the ladder -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fault_class", "tried", "reboot", "idle", "index", "host", "step"),
    [
        ("memory", [], False, True, 3, True, "reset"),
        ("memory", [], False, None, 3, True, "reset"),  # idleness not known yet: the reset checks it on the host
        ("memory", [], False, False, 3, True, "break_fix"),  # busy GPU, no reboot allowed
        ("memory", [], True, False, 3, True, "reboot"),
        ("memory", ["reset"], True, True, 3, True, "reboot"),
        ("memory", ["reset", "reboot"], True, True, 3, True, "break_fix"),
        ("memory", [], True, True, None, True, "reboot"),  # no GPU index: no reset
        ("memory", [], True, True, 3, False, "break_fix"),  # no host to run it on
        ("bus", [], False, True, 3, True, "break_fix"),  # XID 79: a reset does not bring it back
        ("bus", [], True, True, 3, True, "reboot"),
        ("row_remap_failure", [], True, True, 3, True, "break_fix"),
        ("something_new", [], True, True, 3, True, "break_fix"),
    ],
)
def test_ladder(fault_class, tried, reboot, idle, index, host, step):
    assert _policy.repair_step(fault_class, tried, reboot, idle, index, host)["step"] == step


def test_a_custom_ladder_ends_in_break_fix():
    got = _policy.repair_step("thermal", ["reset"], False, True, 0, True, {"thermal": ["reset"]})
    assert got["step"] == "break_fix" and ("reset", "tried already") in got["skipped"]
