"""The example handler FakeDevicePlugin: its decisions (tables) and the engine running it against the
fake client, synchronously and with threads."""

from __future__ import annotations

import time

import pytest
from gpuops_lab.simulator.fakeclient import FakeKubeClient, make_daemonset, make_node, make_pod
from gpuops_lab.simulator.faults import FAULTS_ANNOTATION
from gpuops_lab.simulator.framework import NODE, Key, Simulator
from gpuops_lab.simulator.handlers import BUILTIN_HANDLERS
from gpuops_lab.simulator.handlers.example import (
    ADVERTISES,
    FAULT_UNHEALTHY,
    OWNED_ANNOTATION,
    FakeDevicePlugin,
    desired_resources,
    parse_advertises,
    plan_node,
)

WIDGET = "example.com/widget"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("example.com/widget=2", {WIDGET: 2}),
        (" example.com/widget = 2 , example.com/gadget=0", {WIDGET: 2, "example.com/gadget": 0}),
        ("example.com/widget=1,example.com/widget=2", {WIDGET: 3}),
        ("", {}),
        (None, {}),
    ],
)
def test_parse_advertises(value, expected):
    assert parse_advertises(value) == expected


@pytest.mark.parametrize("value", ["widget=2", "example.com/widget", "example.com/widget=-1", "example.com/w=x"])
def test_parse_advertises_rejects(value):
    with pytest.raises(ValueError):
        parse_advertises(value)


DS = make_daemonset("plugin", "ns", labels={ADVERTISES: "true"}, annotations={ADVERTISES: "example.com/widget=2"})
DS["metadata"]["uid"] = "ds-uid"
DS2 = make_daemonset("plugin2", "ns", labels={ADVERTISES: "true"}, annotations={ADVERTISES: "example.com/widget=1"})
DS2["metadata"]["uid"] = "ds2-uid"
UNLABELLED = make_daemonset("quiet", "ns", annotations={ADVERTISES: "example.com/widget=5"})
UNLABELLED["metadata"]["uid"] = "quiet-uid"
BAD = make_daemonset("bad", "ns", labels={ADVERTISES: "true"}, annotations={ADVERTISES: "nonsense"})
BAD["metadata"]["uid"] = "bad-uid"
ALL_DS = {Key.of(d): d for d in (DS, DS2, UNLABELLED, BAD)}


def pod(owner=DS, node="n1", ready=True, deleting=False, name="p"):
    p = make_pod(name, "ns", node, owner=owner, ready=ready)
    if deleting:
        p["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return p


@pytest.mark.parametrize(
    ("pods", "faults", "expected"),
    [
        ([pod()], set(), {WIDGET: 2}),
        ([pod(ready=False)], set(), {}),
        ([pod(deleting=True)], set(), {}),
        ([pod(node="n2")], set(), {}),
        ([pod(owner=None)], set(), {}),
        ([pod(owner=UNLABELLED)], set(), {}),
        ([pod()], {FAULT_UNHEALTHY}, {}),
        ([pod()], {"something-else"}, {WIDGET: 2}),
        ([pod(), pod(owner=DS2, name="p2")], set(), {WIDGET: 3}),
        ([pod(owner=BAD)], set(), {}),
        ([pod(owner=make_daemonset("gone", "ns") | {"metadata": {"name": "gone", "uid": "x"}})], set(), {}),
    ],
)
def test_desired_resources(pods, faults, expected):
    errors: list[str] = []
    assert desired_resources("n1", pods, ALL_DS, frozenset(faults), errors) == expected
    if any(p["metadata"].get("ownerReferences", [{}])[0].get("name") == "bad" for p in pods):
        assert errors and "nonsense" in errors[0]


def node_with(allocatable: dict[str, str], owned: str | None = None) -> dict:
    n = make_node("n1", allocatable={"cpu": "4", **allocatable})
    if owned is not None:
        n["metadata"]["annotations"][OWNED_ANNOTATION] = owned
    return n


@pytest.mark.parametrize(
    ("node", "desired", "changes"),
    [
        (node_with({}), {WIDGET: 2}, {WIDGET: "2"}),
        (node_with({WIDGET: "2"}, WIDGET), {WIDGET: 2}, {}),
        (node_with({WIDGET: "1"}, WIDGET), {WIDGET: 2}, {WIDGET: "2"}),
        (node_with({WIDGET: "2"}, WIDGET), {}, {WIDGET: None}),
        (node_with({WIDGET: "2"}), {}, {}),  # not ours: left alone
        (node_with({}, WIDGET), {}, {}),  # ours but already gone
    ],
)
def test_plan_node(node, desired, changes):
    assert plan_node(node, desired) == changes


def test_example_is_not_a_builtin_but_loadable():
    from gpuops_lab.simulator.__main__ import load_handlers

    assert FakeDevicePlugin not in BUILTIN_HANDLERS
    [h] = load_handlers("gpuops_lab.simulator.handlers.example:FakeDevicePlugin")
    assert isinstance(h, FakeDevicePlugin)


def test_custom_label_is_independent():
    custom = make_daemonset("c", "ns", labels={"x.io/mine": "1"}, annotations={"x.io/mine": "example.com/widget=7"})
    custom["metadata"]["uid"] = "c-uid"
    dss = {**ALL_DS, Key.of(custom): custom}
    pods = [pod(), pod(owner=custom, name="pc")]
    assert desired_resources("n1", pods, dss, frozenset()) == {WIDGET: 2}
    assert desired_resources("n1", pods, dss, frozenset(), label="x.io/mine") == {WIDGET: 7}


# -- engine + fake client --------------------------------------------------------------------------


def allocatable(client: FakeKubeClient, node: str) -> str | None:
    n = client.obj("v1", "Node", node)
    assert n["status"]["capacity"].get(WIDGET) == n["status"]["allocatable"].get(WIDGET)
    return n["status"]["allocatable"].get(WIDGET)


def owned(client: FakeKubeClient, node: str) -> str | None:
    return client.obj("v1", "Node", node)["metadata"]["annotations"].get(OWNED_ANNOTATION)


@pytest.fixture
def env():
    client = FakeKubeClient()
    for n in ("n1", "n2", "n3"):
        client.add(make_node(n))
    ds = client.add(
        make_daemonset("plugin", "ns", labels={ADVERTISES: "true"}, annotations={ADVERTISES: "example.com/widget=2"})
    )
    client.add(make_pod("plugin-a", "ns", "n1", owner=ds))
    client.add(make_pod("plugin-b", "ns", "n2", owner=ds, ready=False))
    client.add(make_pod("unrelated", "ns", "n3"))
    sim = Simulator(client, [FakeDevicePlugin()])

    def step():
        sim.sync()
        sim.process_pending()
        sim.sync()  # our own writes come back as events; they must settle without more writes
        sim.process_pending()

    return client, sim, step, ds


def test_ready_pods_advertise_resources(env):
    client, sim, step, _rest = env
    step()
    assert allocatable(client, "n1") == "2"
    assert owned(client, "n1") == WIDGET
    assert allocatable(client, "n2") is None
    assert allocatable(client, "n3") is None
    writes = len(client.writes)
    step()
    sim.resync()
    sim.process_pending()
    assert len(client.writes) == writes  # steady state: no writes


def test_pod_becoming_ready_and_unready(env):
    client, sim, step, _rest = env
    step()
    client.patch(
        "v1",
        "Pod",
        "plugin-b",
        "ns",
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        "strategic",
        "status",
    )
    step()
    assert allocatable(client, "n2") == "2"
    client.patch(
        "v1",
        "Pod",
        "plugin-a",
        "ns",
        {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
        "strategic",
        "status",
    )
    step()
    assert allocatable(client, "n1") is None
    assert owned(client, "n1") is None


def test_fault_annotation_removes_resource(env):
    client, sim, step, _rest = env
    step()
    client.patch("v1", "Node", "n1", None, {"metadata": {"annotations": {FAULTS_ANNOTATION: FAULT_UNHEALTHY}}})
    step()
    assert allocatable(client, "n1") is None
    client.patch("v1", "Node", "n1", None, {"metadata": {"annotations": {FAULTS_ANNOTATION: None}}})
    step()
    assert allocatable(client, "n1") == "2"


def test_fault_configmap_for_all_nodes(env):
    client, sim, step, _rest = env
    step()
    client.add(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpuops-sim-faults", "namespace": "gpuops-sim"},
            "data": {"_all": FAULT_UNHEALTHY},
        }
    )
    step()
    assert allocatable(client, "n1") is None


def test_daemonset_deleted_removes_resource(env):
    client, sim, step, _rest = env
    step()
    client.delete("apps/v1", "DaemonSet", "plugin", "ns")  # cascades to its pods
    step()
    assert allocatable(client, "n1") is None
    assert owned(client, "n1") is None


def test_annotation_change_updates_count(env):
    client, sim, step, _rest = env
    step()
    client.patch(
        "apps/v1",
        "DaemonSet",
        "plugin",
        "ns",
        {"metadata": {"annotations": {ADVERTISES: "example.com/widget=4,example.com/gadget=1"}}},
    )
    step()
    assert allocatable(client, "n1") == "4"
    assert client.obj("v1", "Node", "n1")["status"]["allocatable"]["example.com/gadget"] == "1"
    assert owned(client, "n1") == "example.com/gadget,example.com/widget"
    client.patch(
        "apps/v1", "DaemonSet", "plugin", "ns", {"metadata": {"annotations": {ADVERTISES: "example.com/widget=4"}}}
    )
    step()
    assert "example.com/gadget" not in client.obj("v1", "Node", "n1")["status"]["allocatable"]
    assert owned(client, "n1") == WIDGET


def test_threaded_run_with_fake_client():
    client = FakeKubeClient()
    client.add(make_node("n1"))
    sim = Simulator(client, [FakeDevicePlugin()], resync_period=0.2, watch_timeout=1)
    sim.start()
    try:
        assert sim.wait_ready(2.0)
        ds = client.create(
            make_daemonset(
                "plugin", "ns", labels={ADVERTISES: "true"}, annotations={ADVERTISES: "example.com/widget=2"}
            )
        )
        client.create(make_pod("plugin-a", "ns", "n1", owner=ds))
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and allocatable(client, "n1") != "2":
            time.sleep(0.01)
        assert allocatable(client, "n1") == "2"
        client.patch("v1", "Node", "n1", None, {"metadata": {"annotations": {FAULTS_ANNOTATION: FAULT_UNHEALTHY}}})
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and allocatable(client, "n1") is not None:
            time.sleep(0.01)
        assert allocatable(client, "n1") is None
    finally:
        t0 = time.monotonic()
        sim.stop(timeout=2.0)
        assert time.monotonic() - t0 < 1.0
    assert sim.informers[NODE].established.is_set()
