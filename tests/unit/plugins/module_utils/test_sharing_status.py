"""sharing/_status and _labels (the gpu_sharing_status module's view and the gpu_sharing role's label plan), and the
module through main() with a fake reader: one row per behaviour."""

from __future__ import annotations

import copy
import json

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _labels
from ansible_collections.gpuops.platform.plugins.module_utils.status import _sharing_status as _status
from ansible_collections.gpuops.platform.plugins.modules import gpu_sharing_status

H100 = {"vendor_id": "10de", "device_id": "2330", "class": "030200"}
L40S = {"vendor_id": "10de", "device_id": "26b9", "class": "030200"}
NIC = {"vendor_id": "15b3", "device_id": "1021", "class": "020700"}
TS = {"name": "l40s-shared", "model": "time_slicing", "group": "l40s", "replicas": 4}
MIG = {"name": "h100-mig", "model": "mig", "node_selector": {"pool": "mig"}, "mig_config": "all-1g.10gb"}
DRA = {"name": "h100-dra", "model": "dra", "node_selector": {"pool": "dra"}}
POOLS = [TS, MIG, DRA]
GROUPS = {"l40s": ["pcie-l40s-0"]}
FACTS = {
    "pcie-l40s-0": {"accelerators": [L40S] * 2},
    "dgx-h100-0": {"accelerators": [H100] * 8 + [NIC]},
    "dgx-h100-1": {"accelerators": [H100] * 8, "nvidia_driver": {"version": "580.82.07"}},
}
LABEL = "nvidia.com/device-plugin.config"
DRAL = _labels.DRA_NODE_LABEL
MIGL, STATE, DEPLOY = "nvidia.com/mig.config", "nvidia.com/mig.config.state", "nvidia.com/gpu.deploy.device-plugin"


def node(name, labels=None, alloc=None, owned=None):
    meta = {"name": name, "labels": dict(labels or {})}
    if owned is not None:
        meta["annotations"] = {_labels.OWNER_ANNOTATION: json.dumps(owned)}
    return {"metadata": meta, "status": {"allocatable": dict(alloc or {})}}


def converged():
    return [
        node("pcie-l40s-0", {LABEL: "l40s-shared"}, {"nvidia.com/gpu": "8"}, [LABEL]),
        node("dgx-h100-0", {"pool": "mig", MIGL: "all-1g.10gb", STATE: "success"}, {"nvidia.com/gpu": "56"}, [MIGL]),
        node("dgx-h100-1", {"pool": "dra", DEPLOY: "false", DRAL: "true"}, {"nvidia.com/gpu": "0"}, [DEPLOY, DRAL]),
        node("cpu-0", {"kubernetes.io/os": "linux"}),
    ]


def slices(devices=8):
    return [
        {
            "metadata": {"name": "dgx-h100-1-gpu.nvidia.com"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "dgx-h100-1", "devices": [{}] * devices},
        }
    ]


def raw(
    nodes=None, pods=(), devices=8, classes=("gpu.nvidia.com", "mig.nvidia.com"), entries=("exclusive", "l40s-shared")
):
    return {
        "nodes": converged() if nodes is None else nodes,
        "pods": list(pods),
        "configmaps": [{"metadata": {"name": "dp"}, "data": dict.fromkeys(entries, "")}],
        "slices": slices(devices),
        "device_classes": [{"metadata": {"name": c}} for c in classes],
    }


PARAMS = {"groups": GROUPS, "host_facts": FACTS, "config_map": "dp", "mig_strategy": "single"}


def gpu_pod(name, node_name, resource="nvidia.com/gpu", phase="Running"):
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"nodeName": node_name, "containers": [{"resources": {"limits": {resource: "1"}}}]},
        "status": {"phase": phase},
    }


def test_converged_pools_are_ready():
    got = _status.view(raw(), POOLS, PARAMS)
    assert got["diagnosis"] == [] and got["not_ready"] == []
    rows = {r["name"]: r for p in got["pools"] for r in p["nodes"]}
    assert rows["pcie-l40s-0"]["expected"] == {"nvidia.com/gpu": 8} and rows["pcie-l40s-0"]["gpus"] == 2
    assert rows["dgx-h100-0"]["expected"] == {"nvidia.com/gpu": 56}
    assert rows["dgx-h100-1"]["resource_slices"] == [{"name": "dgx-h100-1-gpu.nvidia.com", "devices": 8}]
    assert "cpu-0" not in rows


def test_the_per_node_table():
    lines = _status.table(_status.view(raw(), POOLS, PARAMS)["pools"]).splitlines()
    assert lines[0].split() == ["NODE", "POOL", "MODEL", "EXPECTED", "ADVERTISED", "MIG", "SLICES"]
    rows = [line.split() for line in lines[1:]]
    assert rows == [
        ["pcie-l40s-0", "l40s-shared", "time_slicing", "nvidia.com/gpu=8", "nvidia.com/gpu=8", "-", "-"],
        ["dgx-h100-0", "h100-mig", "mig", "nvidia.com/gpu=56", "nvidia.com/gpu=56", "success", "-"],
        ["dgx-h100-1", "h100-dra", "dra", "-", "nvidia.com/gpu=0", "-", "8"],
    ]
    assert _status.table([]) == "no node in any pool"


@pytest.mark.parametrize(
    "change, unready, finding",
    [
        # replicas not applied: the plugin still advertises whole GPUs
        (
            lambda r: r["nodes"][0]["status"]["allocatable"].update({"nvidia.com/gpu": "2"}),
            "pcie-l40s-0",
            "sharing-capacity-mismatch",
        ),
        (
            lambda r: r["nodes"][0]["metadata"]["labels"].update({LABEL: "typo"}),
            "pcie-l40s-0",
            "sharing-config-entry-missing",
        ),
        (lambda r: r["nodes"][1]["metadata"]["labels"].update({STATE: "pending"}), "dgx-h100-0", None),
        (lambda r: r["nodes"][2]["metadata"]["labels"].pop(DEPLOY), "dgx-h100-1", "sharing-dra-and-device-plugin"),
        (lambda r: r["slices"].clear(), "dgx-h100-1", None),
        (lambda r: r["device_classes"].pop(), "mig.nvidia.com", "sharing-dra-deviceclass-missing"),
    ],
)
def test_not_ready_rows(change, unready, finding):
    state = raw()
    change(state)
    got = _status.view(state, POOLS, PARAMS)
    assert unready in {n.name for n in got["not_ready"]}
    assert [f["id"] for f in got["diagnosis"]] == ([finding] if finding else [])


def test_mig_failed_is_final_and_names_the_gpu_pods():
    nodes = converged()
    nodes[1]["metadata"]["labels"][STATE] = "failed"
    pods = [gpu_pod("train", "dgx-h100-0"), gpu_pod("done", "dgx-h100-0", phase="Succeeded"), gpu_pod("x", "cpu-0")]
    got = _status.view(raw(nodes, pods), POOLS, PARAMS)
    assert got["not_ready"] == []  # a failed change is not waited for
    (finding,) = got["diagnosis"]
    assert finding["id"] == "sharing-mig-config-failed" and "ml/train" in finding["evidence"][2]
    row = got["pools"][1]["nodes"][0]
    assert row["gpu_pods"] == ["ml/train"]


def test_mig_failed_names_an_invalid_profile():
    pool = dict(MIG, mig_config="all-1g.18gb")  # H200's, not H100's
    nodes = converged()
    nodes[1]["metadata"]["labels"].update({MIGL: "all-1g.18gb", STATE: "failed"})
    got = _status.view(raw(nodes), [pool], PARAMS)
    (failed,) = [f for f in got["diagnosis"] if f["id"] == "sharing-mig-config-failed"]
    assert "valid there" in failed["evidence"][2]


def test_gpu_count_label_without_host_facts():
    nodes = [node("pcie-l40s-0", {"nvidia.com/gpu.count": "2", LABEL: "l40s-shared"}, {"nvidia.com/gpu": "8"})]
    got = _status.view(raw(nodes), [TS], dict(PARAMS, host_facts=None))
    assert got["not_ready"] == [] and got["pools"][0]["nodes"][0]["gpus"] == 2


def test_label_plan_sets_wanted_and_removes_only_owned():
    nodes = [
        node("pcie-l40s-0", {"grp": "x"}),
        node("dgx-h100-0", {MIGL: "all-1g.10gb"}, owned=[MIGL]),  # left the MIG pool
        node("dgx-h100-1", {DEPLOY: "false"}, owned=[DEPLOY]),  # left the DRA pool
        node("cpu-0", {LABEL: "someone-elses"}),  # foreign: never touched
    ]
    plan = _labels.label_plan(nodes, [TS], {"l40s-shared": ["pcie-l40s-0"]})
    assert plan == [
        {
            "name": "dgx-h100-0",
            "labels": {MIGL: "all-disabled"},
            "annotations": {_labels.OWNER_ANNOTATION: None},
        },
        {"name": "dgx-h100-1", "labels": {DEPLOY: None}, "annotations": {_labels.OWNER_ANNOTATION: None}},
        {
            "name": "pcie-l40s-0",
            "labels": {LABEL: "l40s-shared"},
            "annotations": {_labels.OWNER_ANNOTATION: json.dumps([LABEL])},
        },
    ]
    assert (
        _labels.label_plan(
            converged(), POOLS, {"l40s-shared": ["pcie-l40s-0"], "h100-mig": ["dgx-h100-0"], "h100-dra": ["dgx-h100-1"]}
        )
        == []
    )


class FakeReader:
    """Lists only (a write would fail with AttributeError)."""

    def __init__(self, state):
        self.state, self.requests = state, 0

    def nodes(self):
        self.requests += 1
        return self.state["nodes"]

    def core(self, plural, namespace=None):
        self.requests += 1
        return self.state[plural]

    def objects(self, group, version, plural, namespace=None):
        self.requests += 1
        return self.state["slices" if plural == "resourceslices" else "device_classes"]


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setattr(_k8s, "require_client", lambda module: None)

    def install(state):
        monkeypatch.setattr(_k8s, "new_reader", lambda params: FakeReader(copy.deepcopy(state)))

    return install


ARGS = {"pools": POOLS, "groups": GROUPS, "host_facts": FACTS, "config_map": "dp"}


@pytest.mark.parametrize("check_mode", [True, False])
def test_module_reports_with_constant_requests(api, run_module, check_mode):
    api(raw())
    result, failed = run_module(gpu_sharing_status, dict(ARGS, wait={"timeout": 5}), check_mode=check_mode)
    assert not failed and result["changed"] is False and result["ready"] is True
    assert result["api_requests"] == 5
    assert result["table"].splitlines()[1].startswith("pcie-l40s-0")
    assert result["wait"]["waited"] is True if not check_mode else "wait" not in result


def test_module_wait_fails_naming_the_node(api, run_module, monkeypatch):
    state = raw()
    state["nodes"][0]["status"]["allocatable"]["nvidia.com/gpu"] = "2"
    api(state)
    monkeypatch.setattr(gpu_sharing_status._readiness.Waiter, "wait", lambda self, probe: _once(probe))
    result, failed = run_module(gpu_sharing_status, dict(ARGS, wait={"timeout": 0}))
    assert failed and "pcie-l40s-0" in result["msg"] and "expected 8, advertised 2" in result["msg"]


def _once(probe):
    snapshot, not_ready = probe()
    return gpu_sharing_status._readiness.Outcome(snapshot, not_ready, 0.0, True, 1)


def test_module_refuses_bad_pools_before_reading(api, run_module):
    api(raw())
    result, failed = run_module(gpu_sharing_status, dict(ARGS, pools=[dict(TS, replicas=0)]))
    assert failed and "replicas" in result["msg"] and "api_requests" not in result


def test_reader_core_lists_cluster_wide_or_in_a_namespace():
    class Http:
        paths: list[str] = []

        def get(self, path):
            self.paths.append(path)
            return 200, "OK", b'{"items": [{"metadata": {"name": "a"}}]}'

    http = Http()
    reader = _k8s.Reader(http=http)
    assert reader.core("pods") == [{"metadata": {"name": "a"}}]
    assert reader.core("configmaps", "gpu-operator")
    assert http.paths == ["/api/v1/pods", "/api/v1/namespaces/gpu-operator/configmaps"] and reader.requests == 2


def test_gpus_and_driver_from_gfd_labels_without_host_facts():
    labels = {
        "nvidia.com/gpu.count": "56",  # MIG strategy single: GFD counts the MIG devices
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
        "nvidia.com/cuda.driver.major": "580",
    }
    gpus = _status.nvidia_gpus(None, labels)
    assert gpus == [{"vendor_id": "10de", "device_id": "2330"}] * 8
    assert _status.driver_version(None, labels) == "580"
    assert _status.nvidia_gpus(None, {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": "Unknown"}) == [
        {},
        {},
    ]


def test_a_dra_node_without_device_plugin_is_a_ready_gpu_node():
    from ansible_collections.gpuops.platform.plugins.module_utils.status import _diag_nvidia, _readiness

    labels = {"nvidia.com/gpu.deploy.device-plugin": "false", DRAL: "true"}
    assert _readiness.gpu_node({"ready": True, "labels": labels, "allocatable": {}, "gpus": 0}) is None
    off = {"nvidia.com/gpu.deploy.device-plugin": "false"}  # without the DRA pool's label: not ready
    assert _readiness.gpu_node({"ready": True, "labels": off, "allocatable": {}, "gpus": 0})
    row = _diag_nvidia.nvidia_resource_missing({"operator_namespace": "gpu-operator"}, {"name": "n"}, labels, [])
    assert row["severity"] == "info" and "DRA" in row["cause"]


def test_the_cluster_status_node_view_keeps_the_sharing_labels():
    from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_views

    view = _cluster_views.node_view(node("n", {DRAL: "true", "team": "x"}), "nvidia")
    assert view["labels"] == {DRAL: "true"}


# -- device-plugin restart (restart_plan) ------------------------------------------------------------------------
TS4 = "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}"
TS2 = "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}"


def _dp(name, node, uid, app="nvidia-device-plugin-daemonset"):
    return {"metadata": {"name": name, "uid": uid, "labels": {"app": app}}, "spec": {"nodeName": node}}


def _n(name, entry=None):
    return {"metadata": {"name": name, "labels": {"nvidia.com/device-plugin.config": entry} if entry else {}}}


def _before(data, stale=None):
    meta = {
        "name": "cm",
        "annotations": {_labels.STALE_ANNOTATION: json.dumps(stale)} if stale is not None else {},
    }
    return {"metadata": meta, "data": data}


RESTART_NODES = [_n("ts-0", "ts"), _n("ts-1", "ts"), _n("plain-0"), _n("other-0", "other"), _n("new-0")]
RESTART_PODS = [
    _dp("dp-ts-0", "ts-0", "u-ts-0"),
    _dp("dp-ts-1", "ts-1", "u-ts-1"),
    _dp("dp-plain-0", "plain-0", "u-plain-0"),
    _dp("dp-other-0", "other-0", "u-other-0"),
    _dp("dp-new-0", "new-0", "u-new-0"),
    _dp("gfd-ts-0", "ts-0", "u-gfd", app="gpu-feature-discovery"),
]
CONFIGS = {"exclusive": "version: v1\n", "ts": TS2, "other": TS4}


def test_a_content_change_records_and_restarts_the_pods_of_the_nodes_that_use_the_entry():
    before = _before({"exclusive": "version: v1\n", "ts": TS4, "other": TS4}, stale=["u-gone"])
    patches = [{"name": "new-0", "labels": {"nvidia.com/device-plugin.config": "ts"}}]  # joins the pool now
    got = _labels.restart_plan(before, CONFIGS, RESTART_NODES, patches, RESTART_PODS)
    assert got["changed_entries"] == ["ts"]
    assert json.loads(got["annotation"]) == ["u-new-0", "u-ts-0", "u-ts-1"]
    assert got["pods"] == ["dp-new-0", "dp-ts-0", "dp-ts-1"] and got["nodes"] == ["new-0", "ts-0", "ts-1"]


def test_no_content_change_keeps_the_record_and_restarts_what_it_names_that_still_runs():
    before = _before(dict(CONFIGS), stale=["u-ts-0", "u-gone"])  # a run failed after its write: u-ts-0 still runs
    got = _labels.restart_plan(before, CONFIGS, RESTART_NODES, [], RESTART_PODS)
    assert got["changed_entries"] == [] and json.loads(got["annotation"]) == ["u-gone", "u-ts-0"]
    assert got["pods"] == ["dp-ts-0"]
    # after the restart, the next run: the record names only pods that are gone
    rerun = _labels.restart_plan(before, CONFIGS, RESTART_NODES, [], RESTART_PODS[1:])
    assert rerun["pods"] == [] and rerun["annotation"] == got["annotation"]


@pytest.mark.parametrize(
    ("before", "want_pods"),
    [
        (None, ["dp-other-0", "dp-ts-0", "dp-ts-1"]),  # no ConfigMap yet: every sharing entry is new
        (_before(dict(CONFIGS)), []),  # unchanged, no record
        (_before(dict(CONFIGS), stale="not-a-list"), []),
        ({"metadata": {"annotations": {"gpuops.platform/stale-device-plugin-pods": "{bad"}}, "data": CONFIGS}, []),
    ],
)
def test_restart_plan_edges(before, want_pods):
    assert _labels.restart_plan(before, CONFIGS, RESTART_NODES, [], RESTART_PODS)["pods"] == want_pods
