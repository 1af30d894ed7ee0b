"""sharing/_plan (the gpu_sharing role's plan in one call) and the gpu_sharing_plan module through main() with a fake
reader: the input rules, the plan from the cluster as listed, what the run's plan can judge before earlier layers ran,
the device-plugin restart, and the fields handed to the gpu_operator role."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils import _sharing_plan as _plan
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _labels
from ansible_collections.gpuops.platform.plugins.modules import gpu_sharing_plan
from test_sharing_status import DRA, FACTS, GROUPS, H100, MIG, MIGL, POOLS, TS, converged, gpu_pod, node

HOST0 = {"kubernetes.io/hostname": "dgx-h100-0"}
MIG_ON_DGX0 = {"name": "m", "model": "mig", "node_selector": HOST0, "mig_config": "all-1g.5gb"}  # A100 40GB's name
GFD_H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}


def sharing_plan(variables, nodes, groups=None, facts=None, version="", served=(), pods=(), allowed=False, **more):
    """The plan of ``variables`` (gpu_sharing_* by name) against ``nodes`` (as ``_plan.read`` returns them)."""
    params = {
        "state": "present",
        "pools": variables.get("gpu_sharing_pools") or [],
        "mig_strategy": variables.get("gpu_sharing_mig_strategy", "single"),
        "mig_configs": variables.get("gpu_sharing_mig_configs") or {},
        "groups": groups,
        "host_facts": facts,
        "allow_mig_change_with_gpu_pods": allowed,
        **more,
    }
    raw = {"nodes": nodes, "version": version, "served": list(served), "config_map": None, "device_plugin_pods": []}
    return _plan.plan(params, raw, pods)


def test_input_rules():
    assert _plan.input_findings({"gpu_sharing_pools": POOLS}, None) == []
    bad = _plan.input_findings({"gpu_sharing_pools": [dict(TS, replicas=1)], "gpu_sharing_mig_strategy": "mixed"}, None)
    assert [f["object"]["name"] for f in bad] == ["gpu_sharing_pools[0].replicas"]


def test_plan():
    nodes = [
        node(n["metadata"]["name"], {k: v for k, v in n["metadata"]["labels"].items() if k == "pool"})
        for n in converged()
    ]
    plan = sharing_plan({"gpu_sharing_pools": POOLS}, nodes, GROUPS, FACTS, "v1.34.4", ["v1"])
    assert plan["members"] == {"l40s-shared": ["pcie-l40s-0"], "h100-mig": ["dgx-h100-0"], "h100-dra": ["dgx-h100-1"]}
    assert [f["id"] for f in plan["findings"]] == []
    assert set(plan["configs"]) == {"exclusive", "l40s-shared"} and "replicas: 4" in plan["configs"]["l40s-shared"]
    assert [p["name"] for p in plan["labels"]] == ["dgx-h100-0", "dgx-h100-1", "pcie-l40s-0"]
    assert plan["expected"]["dgx-h100-0"] == {"nvidia.com/gpu": 56} and plan["dra_nodes"] == ["dgx-h100-1"]
    old = sharing_plan(
        {"gpu_sharing_pools": POOLS},
        nodes,
        GROUPS,
        dict(FACTS, **{"dgx-h100-1": {"accelerators": [H100], "nvidia_driver": {"version": "570.1"}}}),
        "v1.33.0",
        [],
    )
    assert [f["id"] for f in old["findings"]] == ["sharing-dra-kubernetes-too-old", "sharing-dra-driver-too-old"]
    absent = sharing_plan({"gpu_sharing_pools": []}, converged(), GROUPS, FACTS)
    assert [p["name"] for p in absent["labels"]] == ["dgx-h100-0", "dgx-h100-1", "pcie-l40s-0"]


@pytest.mark.parametrize("allowed, severity", [(False, "error"), (True, "warning")])
def test_mig_change_with_gpu_pods(allowed, severity):
    nodes = [node("dgx-h100-0", {"pool": "mig", MIGL: "all-disabled"}), node("dgx-h100-1", {"pool": "dra"})]
    pods = [gpu_pod("train", "dgx-h100-0"), gpu_pod("infer", "dgx-h100-1")]
    plan = sharing_plan({"gpu_sharing_pools": [MIG, DRA]}, nodes, GROUPS, FACTS, "v1.34.4", ["v1"], pods, allowed)
    (finding,) = plan["findings"]
    assert finding["id"] == "sharing-mig-change-gpu-pods-running" and finding["severity"] == severity
    assert finding["object"]["name"] == "dgx-h100-0" and "ml/train" in finding["evidence"][1]
    # the role plans without pods first and reads only the pods of mig_change_nodes: the same finding
    first = sharing_plan({"gpu_sharing_pools": [MIG, DRA]}, nodes, GROUPS, FACTS, "v1.34.4", ["v1"])
    assert first["mig_change_nodes"] == ["dgx-h100-0"] and first["findings"] == []
    on_those = [p for p in pods if p["spec"]["nodeName"] in first["mig_change_nodes"]]
    second = sharing_plan({"gpu_sharing_pools": [MIG, DRA]}, nodes, GROUPS, FACTS, "v1.34.4", ["v1"], on_those, allowed)
    assert second == plan
    # nothing to change on the node: no finding, no node whose pods matter
    nodes[0]["metadata"]["labels"][MIGL] = "all-1g.10gb"
    again = sharing_plan({"gpu_sharing_pools": [MIG]}, nodes, GROUPS, FACTS, "v1.34.4", ["v1"], pods)
    assert again["findings"] == [] and again["mig_change_nodes"] == []


# ---- what the run's plan judges before earlier layers ran ----


def test_a_mig_name_no_gpu_has_is_an_input_error():
    found = _plan.input_findings({"gpu_sharing_pools": [dict(MIG, mig_config="all-1g.10g")]}, None)
    assert [(f["id"], f["object"]["name"]) for f in found] == [
        ("sharing-input-invalid", "gpu_sharing_pools[0].mig_config")
    ]
    # a name some GPU has (A100 40GB's) passes the inputs: the GPU model of the pool's nodes decides
    assert _plan.input_findings({"gpu_sharing_pools": [dict(MIG, mig_config="all-1g.5gb")]}, None) == []
    # with custom configs the names are the user's (mig_findings checks the pool names against them)
    assert (
        _plan.input_findings(
            {
                "gpu_sharing_pools": [dict(MIG, mig_config="mine")],
                "gpu_sharing_mig_configs": {"mine": [{"devices": "all", "mig-enabled": False}]},
            },
            None,
        )
        == []
    )


@pytest.mark.parametrize("planning", [False, True])
def test_a_mig_name_that_does_not_fit_a_known_gpu_model_is_an_error_before_any_change(planning):
    """GPU Feature Discovery's labels of a node the GPU Operator already labelled give the model without host facts."""
    pool = {
        "name": "m",
        "model": "mig",
        "node_selector": {"kubernetes.io/hostname": "dgx-h100-0"},
        "mig_config": "all-1g.5gb",
    }
    nodes = [node("dgx-h100-0", {**HOST0, **GFD_H100})]
    plan = sharing_plan({"gpu_sharing_pools": [pool]}, nodes, planning=planning)
    (finding,) = plan["findings"]
    assert finding["id"] == "sharing-mig-config-invalid" and finding["severity"] == "error"
    assert "all-1g.5gb" in finding["evidence"][0] and "H100" in finding["evidence"][1]


@pytest.mark.parametrize("planning", [False, True])
def test_a_gpu_model_not_known_yet_is_a_warning(planning):
    """A fresh node (no host facts, no GFD labels): the name cannot be judged yet; said, not silent."""
    pool = {
        "name": "m",
        "model": "mig",
        "node_selector": {"kubernetes.io/hostname": "dgx-h100-0"},
        "mig_config": "all-1g.5gb",
    }
    plan = sharing_plan(
        {"gpu_sharing_pools": [pool]}, [node("dgx-h100-0", {"kubernetes.io/hostname": "dgx-h100-0"})], planning=planning
    )
    (finding,) = plan["findings"]
    assert finding["id"] == "sharing-gpu-model-unknown" and finding["severity"] == "warning"
    assert "dgx-h100-0" in finding["evidence"][1]
    # the host facts, once the host plane gathered them, decide
    facts = {"dgx-h100-0": {"accelerators": [H100] * 8}}
    judged = sharing_plan(
        {"gpu_sharing_pools": [pool]},
        [node("dgx-h100-0", {"kubernetes.io/hostname": "dgx-h100-0"})],
        facts=facts,
        planning=planning,
    )
    assert [f["id"] for f in judged["findings"]] == ["sharing-mig-config-invalid"]


@pytest.mark.parametrize(
    ("selector", "planning", "severity"),
    [
        ({"nvidia.com/gpu.product": "NVIDIA-L40S"}, True, "warning"),  # the GPU Operator labels it later in the run
        ({"feature.node.kubernetes.io/pci-10de.present": "true"}, True, "warning"),  # NFD does
        ({"nvidia.com/gpu.product": "NVIDIA-L40S"}, False, "error"),  # the role's own run: the labels are there
        ({"a": "b"}, True, "error"),  # no layer writes it: a typo, refused up front
    ],
)
def test_an_empty_node_selector_pool(selector, planning, severity):
    pool = {"name": "p", "model": "time_slicing", "node_selector": selector, "replicas": 2}
    plan = sharing_plan({"gpu_sharing_pools": [pool]}, converged(), planning=planning)
    (finding,) = plan["findings"]
    assert finding["id"] == "sharing-pool-empty" and finding["severity"] == severity


@pytest.mark.parametrize(("planning", "severity"), [(True, "warning"), (False, "error")])
def test_a_dra_driver_not_known_yet(planning, severity):
    plan = sharing_plan({"gpu_sharing_pools": [DRA]}, converged(), GROUPS, {}, "v1.34.4", ["v1"], planning=planning)
    (finding,) = plan["findings"]
    assert finding["id"] == "sharing-dra-driver-too-old" and finding["severity"] == severity
    # a known old driver is an error while planning too
    old = {"dgx-h100-1": {"accelerators": [H100], "nvidia_driver": {"version": "570.1"}}}
    plan = sharing_plan({"gpu_sharing_pools": [DRA]}, converged(), GROUPS, old, "v1.34.4", ["v1"], planning=True)
    assert [f["severity"] for f in plan["findings"]] == ["error"]


# ---- the device-plugin restart, planned with the rest ----


def test_the_restart_is_planned_from_the_configmap_as_read():
    nodes = [node("pcie-l40s-0", {"l": "1"})]
    pool = dict(TS, group=None, node_selector={"l": "1"})
    pods = [
        {
            "metadata": {"name": "dp-1", "uid": "u1", "labels": {"app": _labels.DEVICE_PLUGIN_APP}},
            "spec": {"nodeName": "pcie-l40s-0"},
        }
    ]
    params = {"state": "present", "pools": [pool], "mig_strategy": "single", "mig_configs": {}, "groups": {}}
    raw = {"nodes": nodes, "version": "v1.34.4", "served": ["v1"], "config_map": None, "device_plugin_pods": pods}
    first = _plan.plan(params, raw)
    assert (
        first["restart"]["changed_entries"] == ["exclusive", "l40s-shared"]
        and first["restart"]["annotation"] == '["u1"]'
    )
    written = {"metadata": {"annotations": {_labels.STALE_ANNOTATION: '["u1"]'}}, "data": first["configs"]}
    nodes[0]["metadata"]["labels"]["nvidia.com/device-plugin.config"] = "l40s-shared"
    again = _plan.plan(params, dict(raw, config_map=written, device_plugin_pods=[]))
    assert again["restart"] == {"changed_entries": [], "annotation": '["u1"]', "pods": [], "nodes": []}


# ---- the hand-off to the gpu_operator role ----


@pytest.mark.parametrize(
    ("present", "configs", "want"),
    [
        (True, {}, ["dp", "exclusive", "mixed", ""]),
        (True, {"c": []}, ["dp", "exclusive", "mixed", "mig-cm"]),
        (False, {"c": []}, ["", "", "mixed", ""]),
    ],
)
def test_gpu_operator_fields(present, configs, want):
    got = _plan.gpu_operator_fields(present, "dp", "mixed", "mig-cm", configs)
    assert list(got.values()) == want and all(k.startswith("gpu_operator_") for k in got)


def test_a_hand_off_over_an_inventory_value_is_said_naming_both():
    fields = _plan.gpu_operator_fields(True, "dp", "single", "mig-cm", {})
    assert _plan.handoff_warnings(fields, {}) == []
    assert _plan.handoff_warnings(fields, {"gpu_operator_mig_strategy": "single"}) == []  # the same value
    (line,) = _plan.handoff_warnings(fields, {"gpu_operator_mig_strategy": "mixed", "gpu_operator_x": "y"})
    assert "gpu_operator_mig_strategy" in line and "'mixed'" in line and "'single'" in line


# ---- the module through main() ----


class FakeReader:
    """GETs only (a write would fail with AttributeError); ``paths`` records every request."""

    def __init__(self, state):
        self.state, self.requests, self.paths = state, 0, []

    def nodes(self):
        self.requests += 1
        self.paths.append("/api/v1/nodes")
        return self.state["nodes"]

    def get(self, what, path, verb="read"):
        self.requests += 1
        self.paths.append(path)
        if path == "/version":
            return {"gitVersion": "v1.34.4"}
        node_name = path.split("spec.nodeName%3D", 1)[1]
        return {"items": [p for p in self.state["pods"] if p["spec"]["nodeName"] == node_name]}

    def get_optional(self, what, path, metadata_only=False):
        self.requests += 1
        self.paths.append(path)
        if path == "/apis/resource.k8s.io":
            return {"versions": [{"version": "v1"}]}
        return None  # no ConfigMap, no device-plugin pods yet


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setattr(_k8s, "require_client", lambda module: None)
    readers = []

    def install(state):
        def new(params):
            readers.append(FakeReader(copy.deepcopy(state)))
            return readers[-1]

        monkeypatch.setattr(_k8s, "new_reader", new)
        return readers

    return install


ARGS = {"pools": POOLS, "groups": GROUPS, "host_facts": FACTS, "namespace": "gpu-operator", "config_map": "dp"}


def fresh_nodes():
    return [
        node(n["metadata"]["name"], {k: v for k, v in n["metadata"]["labels"].items() if k == "pool"})
        for n in converged()
    ]


@pytest.mark.parametrize("check_mode", [True, False])
def test_module_plans_read_only(api, run_module, check_mode):
    readers = api({"nodes": fresh_nodes(), "pods": []})
    result, failed = run_module(gpu_sharing_plan, ARGS, check_mode=check_mode)
    assert not failed and result["changed"] is False, result
    assert result["findings"] == [] and result["dra_nodes"] == ["dgx-h100-1"] and result["api_requests"] == 6
    assert result["gpu_operator"]["gpu_operator_device_plugin_config_name"] == "dp"
    assert result["summary"][0].startswith("l40s-shared (time_slicing): pcie-l40s-0")
    # a MIG change (dgx-h100-0 gets its MIG config) reads only that node's pods
    assert readers[0].paths[-1] == "/api/v1/pods?fieldSelector=spec.nodeName%3Ddgx-h100-0"


def test_module_refuses_a_mig_change_under_gpu_pods_naming_them(api, run_module):
    api({"nodes": fresh_nodes(), "pods": [gpu_pod("train", "dgx-h100-0"), gpu_pod("x", "pcie-l40s-0")]})
    result, failed = run_module(gpu_sharing_plan, ARGS)
    assert failed and "sharing-mig-change-gpu-pods-running" in result["msg"] and "ml/train" in result["msg"]
    assert result["msg"].endswith("Nothing was changed.") and "ml/x" not in result["msg"]


@pytest.mark.parametrize("check_mode", [True, False])
def test_module_without_cluster_reads_nothing(api, run_module, check_mode):
    readers = api({"nodes": [], "pods": []})
    args = dict(ARGS, cluster=False, inventory={"gpu_operator_mig_strategy": "mixed"})
    result, failed = run_module(gpu_sharing_plan, args, check_mode=check_mode)
    assert not failed and readers == [] and "members" not in result
    assert "gpu_operator_mig_strategy: the inventory sets 'mixed'" in str(result["warnings"])
    bad, failed = run_module(gpu_sharing_plan, dict(args, pools=[dict(MIG, mig_config="all-1g.10g")]))
    assert failed and "gpu_sharing_pools[0].mig_config" in bad["msg"] and readers == []


def test_module_plans_away_with_state_absent(api, run_module):
    api({"nodes": converged(), "pods": []})
    result, failed = run_module(gpu_sharing_plan, dict(ARGS, state="absent"))
    assert (
        not failed
        and result["members"] == {}
        and result["gpu_operator"]["gpu_operator_device_plugin_config_name"] == ""
    )
    assert [p["name"] for p in result["labels"]] == ["dgx-h100-0", "dgx-h100-1", "pcie-l40s-0"]


@pytest.mark.parametrize(
    ("state", "mig_parted", "kinds"),
    [
        ("present", "", ["Namespace gpu-operator", "ConfigMap gpu-sharing-device-plugin"]),
        (
            "present",
            "version: v1\n",
            ["Namespace gpu-operator", "ConfigMap gpu-sharing-device-plugin", "ConfigMap gpu-sharing-mig-parted"],
        ),
        # absent: nothing applied; the prune deletes the role's ConfigMaps (never the namespace)
        ("absent", "", []),
    ],
)
def test_config_objects_are_what_the_one_apply_task_applies_and_prunes(state, mig_parted, kinds):
    params = {"state": state, "namespace": "gpu-operator", "config_map": "gpu-sharing-device-plugin"}
    params["mig_config_map"] = "gpu-sharing-mig-parted"
    got = _plan.config_objects(params, {"any": "version: v1"}, mig_parted, {"annotation": '["uid-1"]'})
    assert [f"{o['kind']} {o['metadata']['name']}" for o in got["objects"]] == kinds
    assert got["prune"]["kinds"] == [{"api_version": "v1", "kind": "ConfigMap", "namespace": "gpu-operator"}]
    assert got["prune"]["labels"]["gpuops.platform/role"] == "gpu_sharing"
    if kinds:
        ns, dp = got["objects"][:2]
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
        assert "gpuops.platform/role" not in ns["metadata"]["labels"]  # not the role's: never pruned
        assert dp["metadata"]["annotations"] == {"gpuops.platform/stale-device-plugin-pods": '["uid-1"]'}
        assert dp["data"] == {"any": "version: v1"}
