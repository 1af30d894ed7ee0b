"""gpu_node_quarantine and gpu_node_drain through main() over a fake cluster: dry run writes only Events, check mode
writes nothing, act cordons and marks once (a repeat changes nothing), the breaker refuses past its limit and opens,
CPU and unknown nodes are refused untouched, a conflicting write is read and decided again; the drain evicts through
the Eviction API, retries what a budget refuses and fails at its timeout naming the pod and the budget."""

from __future__ import annotations

import copy
import json

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _api, _drain, _policy
from ansible_collections.gpuops.platform.plugins.modules import gpu_node_drain, gpu_node_quarantine, gpu_reset

EVENT = {
    "node": "gpu-0",
    "alert": "GPUXidFallenOffBus",
    "fault_class": "bus",
    "action": "quarantine",
    "severity": "critical",
    "gpu": {"uuid": "GPU-5c6f1a2b-0000-1111-2222-333344445555", "pci_bus_id": "00000000:17:00.0", "index": 3},
    "starts_at": "2026-11-28T08:00:00Z",
    "fingerprint": "a1b2c3d4e5f60718",
    "labels": {},
    "annotations": {},
    "status": "firing",
}


def _node(name, gpu=True):
    labels = {"nvidia.com/gpu.present": "true"} if gpu else {"node-role": "cpu"}
    return {"metadata": {"name": name, "labels": labels, "annotations": {}, "resourceVersion": "1"}, "spec": {}}


class FakeApi:
    """The cluster as _api.ClusterApi sees it; records every write."""

    def __init__(self, nodes):
        self.nodes_ = {n["metadata"]["name"]: n for n in nodes}
        self.cm = None
        self.cm_rv = 0
        self.writes = []
        self.events = {}
        self.pods = []
        self.pdb_refusals = {}
        self.conflicts = 0

    # reads
    def node(self, name):
        return copy.deepcopy(self.nodes_.get(name))

    def nodes(self):
        return copy.deepcopy(list(self.nodes_.values()))

    def breaker(self, namespace):
        if self.cm is None:
            return {"status": "CLOSED", "reason": "", "active": {}, "actions": []}, None
        return copy.deepcopy(self.cm), str(self.cm_rv)

    def pods_on(self, node):
        return copy.deepcopy([p for p in self.pods if p["spec"]["nodeName"] == node])

    def pdbs(self):
        return [{"metadata": {"namespace": "team", "name": "w"}, "spec": {"selector": {"matchLabels": {"app": "w"}}}}]

    # writes
    def patch_node(self, name, patch):
        node = self.nodes_[name]
        if self.conflicts:
            self.conflicts -= 1
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        if patch["metadata"]["resourceVersion"] != node["metadata"]["resourceVersion"]:
            raise _api.Conflict("changed")
        self.writes.append(("patch", name, patch))
        for kind in ("labels", "annotations"):
            for k, v in (patch["metadata"].get(kind) or {}).items():
                if v is None:
                    node["metadata"][kind].pop(k, None)
                else:
                    node["metadata"][kind][k] = v
        node["spec"].update(patch.get("spec") or {})
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)

    def write_breaker(self, namespace, state, rv):
        if rv != (None if self.cm is None else str(self.cm_rv)):
            raise _api.Conflict("changed")
        self.writes.append(("breaker", namespace, copy.deepcopy(state)))
        self.cm = copy.deepcopy(dict(state))
        self.cm_rv += 1

    def record(self, node, reason, message, key, warning=False):
        name = (node["metadata"]["name"], reason, key)
        self.writes.append(("event", reason, message))
        created = name not in self.events
        self.events[name] = message
        return created

    def evict(self, namespace, name):
        pod = f"{namespace}/{name}"
        self.writes.append(("evict", pod))
        if self.pdb_refusals.get(pod, 0) > 0:
            self.pdb_refusals[pod] -= 1
            return 429, "Cannot evict pod as it would violate the pod's disruption budget."
        self.pods = [p for p in self.pods if f"{p['metadata']['namespace']}/{p['metadata']['name']}" != pod]
        return 201, "evicted"


@pytest.fixture
def cluster(monkeypatch):
    fake = FakeApi([_node("gpu-0"), _node("gpu-1"), _node("gpu-2"), _node("cpu-0", gpu=False)])
    monkeypatch.setattr(_k8s, "require_client", lambda module: None)
    monkeypatch.setattr(_k8s, "new_reader", lambda params: object())
    monkeypatch.setattr(_api, "ClusterApi", lambda reader: fake)
    return fake


def _q(run_module, event=None, check_mode=False, **args):
    event = EVENT if event is None else event
    return run_module(gpu_node_quarantine, {"event": event, "plan_drain": False, **args}, check_mode=check_mode)


def test_dry_run_writes_only_the_plan_event(run_module, cluster):
    result, failed = _q(run_module)
    assert not failed and not result["changed"]
    assert [w[0] for w in cluster.writes] == ["event"]
    assert cluster.writes[0][1] == "GpuopsRemediationPlanned" and "would: cordon" in cluster.writes[0][2]
    assert "cordon" in result["plan"]["changes"] and result["plan"]["breaker"]["allowed"]
    assert result["plan"]["repair"]["step"] == "break_fix"  # bus: reboot not allowed, no host
    assert cluster.nodes_["gpu-0"]["spec"] == {}


@pytest.mark.parametrize("mode", ["dry_run", "act"])
def test_check_mode_writes_nothing(run_module, cluster, mode):
    result, failed = _q(run_module, check_mode=True, mode=mode)
    assert not failed and result["changed"] is (mode == "act")
    assert cluster.writes == []
    assert result["diff"]["after"]["spec.unschedulable"] is True


def test_act_marks_once(run_module, cluster):
    result, failed = _q(run_module, mode="act", taint={"key": "gpuops.platform/quarantined"})
    assert not failed and result["changed"]
    node = cluster.nodes_["gpu-0"]
    assert node["spec"]["unschedulable"] is True
    assert node["spec"]["taints"] == [{"key": "gpuops.platform/quarantined", "effect": "NoSchedule"}]
    assert node["metadata"]["labels"][_policy.LABEL] == "quarantined"
    assert node["metadata"]["annotations"]["gpuops.platform/remediation.gpu-pci-bus-id"] == "00000000:17:00.0"
    assert cluster.cm["active"].keys() == {"gpu-0"} and len(cluster.cm["actions"]) == 1
    assert [w[1] for w in cluster.writes if w[0] == "event"] == ["GpuopsQuarantined"]
    writes = len(cluster.writes)
    again, failed = _q(run_module, mode="act", taint={"key": "gpuops.platform/quarantined"})
    assert not failed and not again["changed"] and len(cluster.writes) == writes


def test_a_conflicting_write_is_decided_again(run_module, cluster):
    cluster.conflicts = 1
    result, failed = _q(run_module, mode="act")
    assert not failed and result["changed"] and cluster.nodes_["gpu-0"]["spec"]["unschedulable"] is True


def test_label_action_notifies_without_cordon(run_module, cluster):
    result, failed = _q(run_module, event=dict(EVENT, action="label", alert="GPUThermalThrottling"), mode="act")
    assert not failed and result["changed"]
    assert "unschedulable" not in cluster.nodes_["gpu-0"]["spec"]
    assert cluster.nodes_["gpu-0"]["metadata"]["labels"][_policy.LABEL] == "notified"
    assert cluster.cm is None  # the breaker counts quarantines only


@pytest.mark.parametrize("event", [dict(EVENT, action="none"), dict(EVENT, status="resolved")])
def test_nothing_to_do(run_module, cluster, event):
    result, failed = _q(run_module, event=event, mode="act")
    assert not failed and not result["changed"] and cluster.writes == []


@pytest.mark.parametrize(("node", "words"), [("cpu-0", "is not a GPU node"), ("ghost", "does not exist")])
def test_refused_nodes_are_untouched(run_module, cluster, node, words):
    result, failed = _q(run_module, event=dict(EVENT, node=node), mode="act")
    assert failed and words in result["msg"] and "nothing was changed" in result["msg"]
    assert cluster.writes == []


def test_a_bad_event_fails_before_any_read(run_module, cluster):
    result, failed = _q(run_module, event=dict(EVENT, gpu={"index": "x3"}), mode="act")
    assert failed and "gpuops_remediation_event.gpu.index" in result["msg"] and cluster.writes == []


def test_the_breaker_refuses_opens_and_stays_open(run_module, cluster):
    for node in ("gpu-0",):
        assert not _q(run_module, event=dict(EVENT, node=node), mode="act", breaker={"max_nodes": 1})[1]
    result, failed = _q(run_module, event=dict(EVENT, node="gpu-1"), mode="act", breaker={"max_nodes": 1})
    assert failed and "NOT quarantined" in result["msg"] and "A person decides" in result["msg"]
    assert "unschedulable" not in cluster.nodes_["gpu-1"]["spec"]
    assert cluster.cm["status"] == "TRIPPED"
    assert cluster.writes[-1][:2] == ("event", "GpuopsCircuitBreakerOpen")
    # open: even below the limit (gpu-0 returned) nothing new is quarantined until a person closes it
    _q(run_module, event=EVENT, mode="act", state="returned")
    result, failed = _q(run_module, event=dict(EVENT, node="gpu-2"), mode="act", breaker={"max_nodes": 1})
    assert failed and "open since an earlier refusal" in result["msg"]
    cluster.cm["status"] = "CLOSED"
    assert not _q(run_module, event=dict(EVENT, node="gpu-2"), mode="act", breaker={"max_nodes": 1})[1]


def test_the_breaker_in_dry_run_warns_and_fails_not(run_module, cluster):
    _q(run_module, mode="act", breaker={"max_nodes": 1})
    result, failed = _q(run_module, event=dict(EVENT, node="gpu-1"), breaker={"max_nodes": 1})
    assert not failed and "would NOT be quarantined" in result["msg"] and result["warnings"]
    assert cluster.cm["status"] == "CLOSED"


def test_break_fix_then_return(run_module, cluster):
    _q(run_module, mode="act")
    result, failed = _q(run_module, mode="act", state="break_fix")
    assert not failed and cluster.nodes_["gpu-0"]["metadata"]["labels"][_policy.LABEL] == "break-fix"
    result, failed = _q(run_module, mode="act", state="returned")
    assert not failed and result["changed"]
    node = cluster.nodes_["gpu-0"]
    assert node["spec"]["unschedulable"] is False and _policy.LABEL not in node["metadata"]["labels"]
    assert not [k for k in node["metadata"]["annotations"] if k.startswith("gpuops.platform/")]
    assert cluster.cm["active"] == {}
    assert not _q(run_module, mode="act", state="returned")[0]["changed"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"breaker": {"max_percent": 101}}, "breaker.max_percent"),
        ({"breaker": {"max_nodes": -1}}, "breaker.max_nodes"),
        ({"drain": {"namespaces": {"a": "kill"}}}, "drain.namespaces.a"),
        ({"ladder": {"bus": ["pray"]}}, "ladder.bus"),
    ],
)
def test_bad_options(run_module, cluster, args, words):
    result, failed = _q(run_module, mode="act", **args)
    assert failed and words in result["msg"] and cluster.writes == []


# -- the drain --------------------------------------------------------------------------------------------------------
def _pod(name, ns="team", owner=None, app="w"):
    meta = {"namespace": ns, "name": name, "labels": {"app": app}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x"}]
    return {"metadata": meta, "spec": {"nodeName": "gpu-0"}, "status": {"phase": "Running"}}


@pytest.fixture
def no_sleep(monkeypatch):
    clock = {"t": 0.0}
    monkeypatch.setattr(gpu_node_drain.time, "monotonic", lambda: clock["t"])
    monkeypatch.setattr(gpu_node_drain.time, "sleep", lambda s: clock.__setitem__("t", clock["t"] + s))
    return clock


def _d(run_module, check_mode=False, **args):
    return run_module(gpu_node_drain, {"node": "gpu-0", **args}, check_mode=check_mode)


def test_drain_refuses_an_uncordoned_node(run_module, cluster, no_sleep):
    cluster.pods = [_pod("a")]
    result, failed = _d(run_module, mode="act")
    assert failed and "not cordoned" in result["msg"] and cluster.writes == []


def test_drain_dry_run_and_check_mode(run_module, cluster, no_sleep):
    cluster.pods = [_pod("a"), _pod("ds", owner="DaemonSet"), _pod("m", ns="mon")]
    result, failed = _d(run_module, namespaces={"mon": "leave"})
    assert not failed and not result["changed"]
    assert {r["pod"]: r["decision"] for r in result["plan"]} == {
        "team/a": "evict",
        "team/ds": "leave",
        "mon/m": "leave",
    }
    assert [w[0] for w in cluster.writes] == ["event"]
    cluster.writes.clear()
    cluster.nodes_["gpu-0"]["spec"]["unschedulable"] = True
    result, failed = _d(run_module, check_mode=True, mode="act")
    assert not failed and result["changed"] and cluster.writes == [] and len(cluster.pods) == 3


def test_drain_retries_what_a_budget_refuses(run_module, cluster, no_sleep):
    cluster.nodes_["gpu-0"]["spec"]["unschedulable"] = True
    cluster.pods = [_pod("a"), _pod("b"), _pod("ds", owner="DaemonSet")]
    cluster.pdb_refusals = {"team/b": 2}
    result, failed = _d(run_module, mode="act", poll=5, timeout=60)
    assert not failed and result["changed"] and sorted(result["evicted"]) == ["team/a", "team/b"]
    assert [p["metadata"]["name"] for p in cluster.pods] == ["ds"]
    assert [w[1] for w in cluster.writes if w[0] == "evict"] == ["team/a", "team/b", "team/b", "team/b"]
    again, failed = _d(run_module, mode="act")
    assert not failed and not again["changed"]


def test_drain_timeout_names_the_pod_and_the_budget(run_module, cluster, no_sleep):
    cluster.nodes_["gpu-0"]["spec"]["unschedulable"] = True
    cluster.pods = [_pod("b")]
    cluster.pdb_refusals = {"team/b": 1000}
    result, failed = _d(run_module, mode="act", poll=5, timeout=20)
    assert failed and "did not finish within 20 s" in result["msg"]
    assert "team/b" in result["msg"] and "PodDisruptionBudget team/w" in result["msg"]
    assert "stays quarantined" in result["msg"]


def test_drain_waits_for_wait_pods(run_module, cluster, no_sleep, monkeypatch):
    cluster.nodes_["gpu-0"]["spec"]["unschedulable"] = True
    cluster.pods = [_pod("job", ns="train")]
    rounds = {"n": 0}
    real = _drain.Drain._plan

    def plan(self, node):
        rounds["n"] += 1
        if rounds["n"] == 3:
            cluster.pods[0]["status"]["phase"] = "Succeeded"
        return real(self, node)

    monkeypatch.setattr(_drain.Drain, "_plan", plan)
    result, failed = _d(run_module, mode="act", namespaces={"train": "wait"}, poll=1, timeout=60)
    assert not failed and result["evicted"] == [] and not [w for w in cluster.writes if w[0] == "evict"]
    assert json.dumps(result["plan"]).count('"wait"') == 1


# -- the GPU reset (on the host) ----------------------------------------------------------------------------------
GPUS = "0, GPU-aaaaaaaa-0000, 00000000:07:00.0\n3, GPU-5c6f1a2b-0000-1111-2222-333344445555, 00000000:17:00.0\n"


@pytest.mark.parametrize("check_mode", [False, True])
def test_reset_an_idle_gpu(run_module, commands, check_mode):
    commands.tools.add("nvidia-smi")
    commands.on(r"--query-gpu", (0, GPUS, ""))
    args = {"index": 3, "uuid": EVENT["gpu"]["uuid"], "pci_bus_id": "0000:17:00.0"}
    result, failed = run_module(gpu_reset, args, check_mode=check_mode)
    assert not failed and result["changed"] and result["idle"] and result["reset"] is not check_mode
    assert ("nvidia-smi -r -i 3" in commands.calls) is not check_mode


def test_a_busy_gpu_is_not_reset(run_module, commands):
    commands.tools.add("nvidia-smi")
    commands.on(r"--query-gpu", (0, GPUS, ""))
    commands.on(r"--query-compute-apps", (0, "4242, python\n", ""))
    result, failed = run_module(gpu_reset, {"index": 3})
    assert not failed and not result["changed"] and result["processes"] == ["4242 python"]
    assert not [c for c in commands.calls if " -r " in c]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"index": 5}, "GPU index 5 is not on this host"),
        ({"index": 3, "uuid": "GPU-bbbbbbbb-0000"}, "not GPU-bbbbbbbb-0000 as the event says"),
        ({"index": 3, "pci_bus_id": "0000:18:00.0"}, "not 0000:18:00.0 as the event says"),
    ],
)
def test_reset_refuses_another_gpu(run_module, commands, args, words):
    commands.tools.add("nvidia-smi")
    commands.on(r"--query-gpu", (0, GPUS, ""))
    result, failed = run_module(gpu_reset, args)
    assert failed and words in result["msg"] and not [c for c in commands.calls if " -r " in c]


def test_break_fix_of_a_node_not_quarantined_asks_the_breaker(run_module, cluster):
    _q(run_module, mode="act", breaker={"max_nodes": 1})
    result, failed = _q(
        run_module, event=dict(EVENT, node="gpu-1"), mode="act", state="break_fix", breaker={"max_nodes": 1}
    )
    assert failed and "NOT quarantined" in result["msg"] and "unschedulable" not in cluster.nodes_["gpu-1"]["spec"]


def test_drain_in_check_mode_plans_on_a_node_the_quarantine_would_cordon(run_module, cluster, no_sleep):
    cluster.pods = [_pod("a")]
    result, failed = _d(run_module, check_mode=True, mode="act")
    assert not failed and result["changed"] and cluster.writes == []
