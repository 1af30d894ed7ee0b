"""Readiness predicates per kind (tables), the waiter with a fake clock (never sleeps for real), and the wait and
vendor scoping of _cluster_status.gather against a fake reader whose answers change from one look to the next."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_status as cs
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_wait
from ansible_collections.gpuops.platform.plugins.module_utils.status import _readiness as rd
from ansible_collections.gpuops.platform.plugins.module_utils.status._gpu_labels import VENDORS
from test_cluster_status import NS, cluster_policy, gpu_node, node, operator_pod, pod, ready_pod


def obj(status=None, spec=None, generation=None, name="x", namespace=None):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if generation is not None:
        meta["generation"] = generation
    return {"metadata": meta, "spec": spec or {}, "status": status or {}}


@pytest.mark.parametrize(
    "kind, o, unmet",
    [
        ("ClusterPolicy", obj({"state": "ready"}), None),
        ("ClusterPolicy", obj({}), "status.state is empty, want ready"),
        ("ClusterPolicy", obj({"state": "notReady"}), "status.state is notReady, want ready"),
        (
            "ClusterPolicy",
            obj(
                {
                    "state": "notReady",
                    "conditions": [
                        {"type": "Ready", "status": "False", "reason": "OperandNotReady", "message": "m"},
                        {"type": "Error", "status": "True", "reason": "NFDLabelsMissing", "message": "no labels"},
                    ],
                }
            ),
            "condition Error reason NFDLabelsMissing: no labels",
        ),
        ("DeviceConfig", obj({"devicePlugin": {"nodesMatchingSelectorNumber": 2, "availableNumber": 2}}), None),
        ("DeviceConfig", obj({"devicePlugin": {"nodesMatchingSelectorNumber": 2, "availableNumber": 1}}), "1 of 2"),
        ("DeviceConfig", obj({}), "status.devicePlugin is not reported yet"),
        ("DeviceConfig", obj({"devicePlugin": {"availableNumber": 0}}), "not reported yet"),
        ("DaemonSet", obj({"desiredNumberScheduled": 3, "numberReady": 3, "updatedNumberScheduled": 3}), None),
        ("DaemonSet", obj({"desiredNumberScheduled": 3, "numberReady": 3}), None),
        ("DaemonSet", obj({"desiredNumberScheduled": 0}), "desiredNumberScheduled is 0"),
        ("DaemonSet", obj({"desiredNumberScheduled": 3, "numberReady": 2}), "2/3 pods ready"),
        (
            "DaemonSet",
            obj({"desiredNumberScheduled": 3, "numberReady": 3, "updatedNumberScheduled": 1}),
            "1/3 pods upd",
        ),
        (
            "DaemonSet",
            obj({"desiredNumberScheduled": 1, "numberReady": 1, "observedGeneration": 1}, generation=2),
            "observedGeneration 1 < metadata.generation 2",
        ),
        ("Deployment", obj({"availableReplicas": 2, "updatedReplicas": 2}, {"replicas": 2}), None),
        ("Deployment", obj({"availableReplicas": 1}), None),  # replicas defaults to 1
        ("Deployment", obj({}), "0/1 replicas available"),
        ("Deployment", obj({"availableReplicas": 2, "updatedReplicas": 1}, {"replicas": 2}), "1/2 replicas updated"),
        ("Deployment", obj({}, {"replicas": 0}), None),
        ("Deployment", obj({"availableReplicas": 1, "observedGeneration": 3}, generation=4), "observedGeneration 3"),
    ],
)
def test_predicates(kind, o, unmet):
    got = rd.KINDS[kind].ready(o)
    if unmet is None:
        assert got is None
    else:
        assert got is not None and unmet in got


@pytest.mark.parametrize(
    "view_node, unmet",
    [
        ({"ready": True, "gpus": 8, "allocatable": {"nvidia.com/gpu": 8}}, None),
        ({"ready": False, "ready_reason": "KubeletNotReady", "ready_message": "PLEG"}, "Ready is not True"),
        ({"ready": True, "gpus": 0, "vendor": "nvidia", "allocatable": {}}, "allocatable nvidia.com/gpu is absent"),
        ({"ready": True, "gpus": 0, "vendor": "amd", "allocatable": {"amd.com/gpu": 0}}, "amd.com/gpu is 0"),
        ({"ready": True, "gpus": 0, "allocatable": {"nvidia.com/gpu.shared": 16}}, None),
        ({"ready": True, "gpus": 0, "labels": {"nvidia.com/gpu.deploy.operands": "false"}}, None),
    ],
)
def test_gpu_node_predicate(view_node, unmet):
    got = rd.gpu_node(view_node)
    assert got is None if unmet is None else unmet in got


def test_every_kind_has_a_predicate_and_a_hint():
    for name, kind in rd.KINDS.items():
        assert callable(kind.ready) and kind.hint and kind.plural.islower(), name


class FakeClock:
    """clock() and sleep(): sleeping only advances the clock."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


NOT_READY = rd.NotReady("ClusterPolicy", None, "cluster-policy", "status.state is notReady, want ready")


def test_clock_times_out():
    fake = FakeClock()
    outcome = rd.Waiter(timeout=12, interval=5, clock=fake.clock, sleep=fake.sleep).wait(lambda: ("s", [NOT_READY]))
    assert not outcome.ready and outcome.waited
    assert fake.sleeps == [1, 2, 4, 5]  # 1 s, doubling, at most the interval, never past the deadline
    assert outcome.elapsed == 12 and outcome.probes == 5
    msg = rd.timeout_message(outcome, 12)
    assert msg == (
        "not ready after waiting 12s (timeout 12s): ClusterPolicy cluster-policy: status.state is notReady, want ready"
    )


def test_waiter_returns_as_soon_as_ready():
    fake = FakeClock()
    answers = iter([[NOT_READY], [NOT_READY], []])
    outcome = rd.Waiter(timeout=600, interval=5, clock=fake.clock, sleep=fake.sleep).wait(
        lambda: ("snap", next(answers))
    )
    assert outcome.ready and outcome.snapshot == "snap" and outcome.probes == 3 and fake.sleeps == [1, 2]


@pytest.mark.parametrize(
    ("timeout", "interval", "sleeps"),
    [
        (20, 3, [1, 2, 3, 3, 3, 3, 3, 2]),  # the pause doubles up to the interval, then stays there
        (3, 10, [1, 2]),  # the deadline comes first
        (5, 0.5, [0.5] * 10),  # an interval under a second is the pause from the start
        (0, 5, []),  # no timeout: one look
    ],
)
def test_waiter_backs_off_to_the_interval(timeout, interval, sleeps):
    fake = FakeClock()
    outcome = rd.Waiter(timeout=timeout, interval=interval, clock=fake.clock, sleep=fake.sleep).wait(
        lambda: ("s", [NOT_READY])
    )
    assert fake.sleeps == sleeps and outcome.probes == len(sleeps) + 1 and outcome.elapsed == timeout


def test_null_waiter_looks_once_and_never_sleeps(monkeypatch):
    monkeypatch.setattr(rd.time, "sleep", lambda s: pytest.fail("slept"))
    outcome = rd.NullWaiter().wait(lambda: ("s", [NOT_READY]))
    assert outcome.probes == 1 and not outcome.waited and not outcome.ready
    assert rd.timeout_message(outcome, 600).startswith("not ready (check mode: looked once, did not wait): Cluster")


def test_namespaced_object_named_with_namespace():
    n = rd.judge("DaemonSet", obj({"desiredNumberScheduled": 2, "numberReady": 1}, name="w", namespace="nfd"))
    assert str(n) == "DaemonSet nfd/w: 1/2 pods ready"
    assert n.as_dict() == {"kind": "DaemonSet", "namespace": "nfd", "name": "w", "condition": "1/2 pods ready"}


# -- gather with wait and vendor ----------------------------------------------------------------------------
class ScriptedReader:
    """Each look (one nodes() call starts one) serves the next snapshot; the last one repeats."""

    def __init__(self, snapshots):
        self.snapshots, self.look, self.requests, self.calls = snapshots, -1, 0, []

    def _snap(self):
        return self.snapshots[min(self.look, len(self.snapshots) - 1)]

    def _count(self, what, value):
        self.requests += 1
        self.calls.append(what)
        return value

    def nodes(self):
        self.look += 1
        return self._count("nodes", self._snap().get("nodes", []))

    def pods(self, namespace):
        return self._count("pods", self._snap().get("pods", []) if namespace == NS else [])

    def daemonsets(self, namespace):
        return self._count("daemonsets", self._snap().get("daemonsets", []))

    def cluster_custom(self, group, version, plural):
        return self._count("clusterpolicies", self._snap().get("cluster_policies"))

    def namespaced_custom(self, group, version, namespace, plural):
        return self._count(f"{plural}/{namespace}", self._snap().get("device_configs"))

    def objects(self, group, version, plural, namespace=None):
        return self._count(f"{plural}/{namespace}", self._snap().get(plural))


def params(**kw):
    return {"operator_namespace": NS, "amd_namespace": "kube-amd-gpu", "node_selector": None, "host_facts": None, **kw}


def fake_waiter(timeout=60):
    fake = FakeClock()
    return rd.Waiter(timeout=timeout, interval=5, clock=fake.clock, sleep=fake.sleep), fake


CP_WAIT = {"timeout": 60, "nodes": True, "objects": [{"kind": "ClusterPolicy", "name": "cluster-policy"}]}


def test_wait_until_cluster_policy_and_nodes_ready():
    before = {"nodes": [gpu_node("g1", gpus=0)], "cluster_policies": [cluster_policy("cluster-policy", "t0", "")]}
    middle = {"nodes": [gpu_node("g1", gpus=0)], "cluster_policies": [cluster_policy("cluster-policy", "t0")]}
    after = {"nodes": [gpu_node("g1")], "cluster_policies": [cluster_policy("cluster-policy", "t0")]}
    reader = ScriptedReader([before, middle, after])
    waiter, fake = fake_waiter()
    res = cs.gather(reader, params(wait=CP_WAIT), waiter)
    assert res["wait"]["ready"] and res["wait"]["probes"] == 3 and fake.sleeps == [1, 2]
    assert res["wait"]["not_ready"] == [] and "msg" not in res["wait"]
    assert res["summary"]["cluster_policy"] == "ready" and res["summary"]["gpu_nodes_ready"] == 1
    assert reader.calls.count("clusterpolicies") == 3  # the ClusterPolicy is read once per look, not twice


def test_wait_timeout_names_object_and_condition():
    cp = cluster_policy(
        "cluster-policy", "t0", "notReady", [{"type": "Ready", "status": "False", "reason": "OperandNotReady"}]
    )
    reader = ScriptedReader([{"nodes": [gpu_node("g1", gpus=0)], "cluster_policies": [cp]}])
    waiter, _clock = fake_waiter(timeout=20)
    res = cs.gather(reader, params(wait=CP_WAIT), waiter)
    w = res["wait"]
    assert not w["ready"] and w["elapsed"] == 20
    assert w["not_ready"] == [
        {
            "kind": "ClusterPolicy",
            "namespace": None,
            "name": "cluster-policy",
            "condition": "status.state is notReady, want ready (condition Ready reason OperandNotReady: None)",
        },
        {
            "kind": "Node",
            "namespace": None,
            "name": "g1",
            "condition": "allocatable nvidia.com/gpu is 0 (the device plugin advertises no GPU)",
        },
    ]
    assert w["msg"].startswith("not ready after waiting 20s (timeout 20s): ClusterPolicy cluster-policy: status.state")
    assert "; Node g1: allocatable nvidia.com/gpu is 0" in w["msg"]
    assert "Fix: ClusterPolicy: read the ClusterPolicy's conditions" in w["msg"]
    assert "Error findings: [clusterpolicy-not-ready]" in w["msg"] and "[gpu-resource-missing] g1:" in w["msg"]


@pytest.mark.parametrize(
    "spec, snapshot, condition",
    [
        ({"kind": "ClusterPolicy", "name": "cluster-policy"}, {"cluster_policies": None}, "CRD clusterpolicies"),
        ({"kind": "ClusterPolicy", "name": "cluster-policy"}, {"cluster_policies": []}, "no such ClusterPolicy"),
        ({"kind": "Deployment", "name": "gpu-operator"}, {"deployments": []}, f"no such Deployment in namespace {NS}"),
        (
            {"kind": "DaemonSet", "namespace": "nfd", "label_selector": "app=nfd"},
            {"daemonsets": [{"metadata": {"name": "o", "namespace": "nfd", "labels": {"app": "x"}}, "status": {}}]},
            "no such DaemonSet in namespace nfd",
        ),
        ({"kind": "DeviceConfig", "name": "default"}, {"device_configs": None}, "CRD deviceconfigs.amd.com"),
    ],
)
def test_wait_missing_objects(spec, snapshot, condition):
    reader = ScriptedReader([{"nodes": [], **snapshot}])
    res = cs.gather(reader, params(wait={"timeout": 0, "nodes": True, "objects": [spec]}), fake_waiter(0)[0])
    assert not res["wait"]["ready"] and condition in res["wait"]["not_ready"][0]["condition"]


def test_wait_nameless_objects_by_label_in_another_namespace():
    ready = obj({"availableReplicas": 1}, name="nfd-master", namespace="nfd")
    ready["metadata"]["labels"] = {"app.kubernetes.io/instance": "nfd"}
    other = obj({}, name="unrelated", namespace="nfd")  # not ready, but not selected
    reader = ScriptedReader([{"nodes": [], "deployments": [ready, other]}])
    spec = {"kind": "Deployment", "namespace": "nfd", "label_selector": "app.kubernetes.io/instance=nfd"}
    res = cs.gather(reader, params(wait={"timeout": 0, "nodes": False, "objects": [spec]}), fake_waiter(0)[0])
    assert res["wait"]["ready"] and "deployments/nfd" in reader.calls


def test_unknown_kind_is_refused():
    with pytest.raises(InvalidInput, match="unknown kind 'Pod'"):
        _cluster_wait.wait_targets({"objects": [{"kind": "Pod"}]}, params())


def amd_node(name, gpus=8):
    return node(
        name,
        labels={"feature.node.kubernetes.io/amd-gpu": "true"},
        alloc={"amd.com/gpu": str(gpus)} if gpus else {},
    )


def mixed():
    """A first converge of a mixed cluster, after the NVIDIA role and before the AMD role: the NVIDIA node is
    served, the AMD node has no device plugin yet and no DeviceConfig exists."""
    return {
        "nodes": [gpu_node("dgx-h100-0"), amd_node("amd-mi300x-0", gpus=0)],
        "pods": [ready_pod("nvidia-device-plugin-daemonset", "dgx-h100-0"), operator_pod()],
        "cluster_policies": [cluster_policy("cluster-policy", "t0")],
        "device_configs": [],
    }


@pytest.mark.parametrize(
    "vendor, nodes, error_nodes",
    [
        (["nvidia"], ["dgx-h100-0"], []),
        (["amd"], ["amd-mi300x-0"], ["amd-mi300x-0"]),
        (None, ["amd-mi300x-0", "dgx-h100-0"], ["amd-mi300x-0"]),
    ],
)
def test_vendor_scoping(vendor, nodes, error_nodes):
    res = cs.gather(ScriptedReader([mixed()]), params(vendor=vendor))
    assert [n["name"] for n in res["nodes"]] == nodes
    assert [(f["id"], f["node"]) for f in res["diagnosis"] if f["severity"] == "error"] == [
        ("gpu-resource-missing", n) for n in error_nodes
    ]


def test_vendor_scoping_skips_the_other_vendors_operator_rules():
    data = mixed()
    data["cluster_policies"] = [cluster_policy("cluster-policy", "t0", "notReady")]
    data["device_configs"] = [
        {
            "metadata": {"name": "default", "namespace": "kube-amd-gpu"},
            "spec": {"selector": {"feature.node.kubernetes.io/amd-gpu": "true"}},
            "status": {"nodeModuleStatus": {"amd-mi300x-0": {"status": "Install-Failed"}}},
        }
    ]
    ids = {v: {f["id"] for f in cs.gather(ScriptedReader([data]), params(vendor=[v]))["diagnosis"]} for v in VENDORS}
    assert "clusterpolicy-not-ready" in ids["nvidia"] and "amd-driver-install-failed" not in ids["nvidia"]
    assert "amd-driver-install-failed" in ids["amd"] and "clusterpolicy-not-ready" not in ids["amd"]


def test_vendor_scoping_drops_the_other_vendors_pods():
    data = mixed()
    data["pods"].append(pod("nvidia-driver-daemonset-x", "nvidia-driver-daemonset", on="amd-mi300x-0"))
    res = cs.gather(ScriptedReader([data]), params(vendor=["amd"]))
    assert res["summary"]["operand_pods"] == 0 and res["summary"]["gpu_nodes_by_vendor"] == {"amd": 1}
