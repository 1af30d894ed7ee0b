from __future__ import annotations

from dataclasses import replace

import pytest
from gpuops_lab.simulator.handlers import driver_upgrade as du

POLICY = {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%", "drain": {"enable": False}}


def views(n, state="upgrade-done", in_sync=False, **kw):
    return [
        du.NodeView(f"n{i}", state, in_sync=in_sync, pod_exists=True, pod_ready=True, unschedulable=False, **kw)
        for i in range(n)
    ]


def run(vs, policy, rounds=200, failing=()):
    """Apply the steps round after round as the cluster would (a deleted driver pod comes back in sync and ready
    one round later); returns the rounds' views and the largest number of nodes in progress at once."""
    history, peak = [], 0
    vs = [replace(v, failing=v.name in failing) for v in vs]
    for _round in range(rounds):
        steps = {s.node: s for s in du.plan(vs, policy)}
        new = []
        for v in vs:
            s = steps.get(v.name)
            if s is None:
                new.append(v)
                continue
            v = replace(v, state=v.state if s.state is None else s.state)
            if s.cordon:
                v = replace(v, unschedulable=True)
            if s.uncordon:
                v = replace(v, unschedulable=False)
            if s.delete_driver_pod:
                v = replace(v, in_sync=True)
            new.append(v)
        vs = new
        history.append(vs)
        peak = max(peak, sum(1 for v in vs if v.state not in du.NOT_IN_PROGRESS))
        if not steps:
            break
    return history, peak


def test_a_version_bump_goes_node_by_node_to_done():
    history, peak = run(views(4), POLICY)
    final = history[-1]
    assert [v.state for v in final] == ["upgrade-done"] * 4
    assert all(v.in_sync and not v.unschedulable for v in final)
    assert peak == 1  # maxParallelUpgrades 1
    # every node went through cordon and pod restart, in name order
    started = [next(i for i, h in enumerate(history) if h[k].state == du.CORDON) for k in range(4)]
    assert started == sorted(started)


def test_no_limit_is_capped_by_max_unavailable():
    _history, peak = run(views(8), {**POLICY, "maxParallelUpgrades": 0, "maxUnavailable": "25%"})
    assert peak == 2
    _history, peak = run(views(4), {**POLICY, "maxParallelUpgrades": 3, "maxUnavailable": 4})
    assert peak == 3


def test_nodes_in_sync_are_labelled_done_and_stay():
    steps = du.plan(views(2, state="", in_sync=True), POLICY)
    assert [(s.node, s.state) for s in steps] == [("n0", "upgrade-done"), ("n1", "upgrade-done")]
    assert du.plan(views(2, in_sync=True), POLICY) == []


def test_auto_upgrade_off_removes_the_labels_and_replaces_nothing():
    steps = du.plan(views(2, state="cordon-required"), {**POLICY, "autoUpgrade": False})
    assert [(s.node, s.state, s.cordon, s.delete_driver_pod) for s in steps] == [
        ("n0", "", False, False),
        ("n1", "", False, False),
    ]


def test_a_failing_node_is_failed_and_holds_its_slot():
    history, _peak = run(views(3), POLICY, rounds=60, failing={"n0"})
    final = {v.name: v.state for v in history[-1]}
    assert final == {"n0": "upgrade-failed", "n1": "upgrade-required", "n2": "upgrade-required"}
    assert history[-1][0].unschedulable  # left cordoned
    # the fault cleared: the node finishes, then the others go
    history, _peak = run(history[-1], POLICY)
    assert [v.state for v in history[-1]] == ["upgrade-done"] * 3


def test_an_initially_cordoned_node_stays_cordoned():
    vs = [replace(v, unschedulable=True, initially_unschedulable=True) for v in views(1)]
    history, _peak = run(vs, {**POLICY, "maxUnavailable": "100%"})
    assert history[-1][0].state == "upgrade-done" and history[-1][0].unschedulable


def test_skip_label_and_drain():
    vs = views(2)
    vs[0] = replace(vs[0], skip=True)
    history, _peak = run(vs, {**POLICY, "drain": {"enable": True}})
    assert [v.state for v in history[-1]] == ["upgrade-done", "upgrade-done"]
    assert not history[-1][0].in_sync  # skipped: its old driver stays
    assert any(h[1].state == du.DRAIN for h in history)


@pytest.mark.parametrize(
    ("value", "total", "expected"), [("25%", 4, 1), ("25%", 5, 2), (2, 10, 2), ("0", 3, 0), ("100%", 3, 3)]
)
def test_scaled(value, total, expected):
    assert du.scaled(value, total) == expected
