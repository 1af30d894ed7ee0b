"""The GPU sharing rules as tables (issue 9): pools -> input findings naming the field, pools x nodes -> members
and overlap/empty findings, MIG names x GPU models, DRA guards, device-plugin config entries and the capacity the
device plugin advertises."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils import _sharing_plan as _plan
from ansible_collections.gpuops.platform.plugins.module_utils.host import _gpu_catalog as cat
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _capacity, _mig, _pools

H100 = {"vendor_id": "10de", "device_id": "2330"}
H200 = {"vendor_id": "10de", "device_id": "2335"}
L40S = {"vendor_id": "10de", "device_id": "26b9"}
A30 = {"vendor_id": "10de", "device_id": "20b7"}
A100_40 = {"vendor_id": "10de", "device_id": "20b0"}

TS = {"name": "l40s-shared", "model": "time_slicing", "group": "gpu_l40s", "replicas": 4}
MIG = {"name": "dgx-mig", "model": "mig", "node_selector": {"pool": "mig"}, "mig_config": "all-1g.10gb"}
DRA = {"name": "dgx-dra", "model": "dra", "node_selector": {"pool": "dra"}}


def ids(findings: list[dict[str, Any]]) -> list[str]:
    return [f["id"] for f in findings]


def fields(findings: list[dict[str, Any]]) -> list[str]:
    return [f["object"]["name"] for f in findings]


# ---- MIG names per GPU model (_gpu_catalog): the names mig-manager v0.15.0 generates ----


@pytest.mark.parametrize(
    ("gpu", "present", "absent"),
    [
        (H100, ["all-1g.10gb", "all-1g.10gb.me", "all-7g.80gb", "all-balanced", "all-disabled"], ["all-1g.18gb"]),
        (H200, ["all-1g.18gb", "all-1g.35gb", "all-7g.141gb", "all-balanced"], ["all-1g.10gb"]),
        (A30, ["all-1g.6gb", "all-2g.12gb.me", "all-4g.24gb", "all-balanced"], ["all-7g.24gb", "all-1g.10gb"]),
        (A100_40, ["all-1g.5gb", "all-1g.10gb", "all-7g.40gb"], ["all-1g.20gb"]),
        (L40S, [], ["all-disabled", "all-1g.10gb"]),
    ],
)
def test_mig_config_names_follow_the_gpu_profiles(gpu: dict[str, str], present: list[str], absent: list[str]) -> None:
    names = cat.mig_config_names(gpu["vendor_id"], gpu["device_id"])
    assert set(present) <= set(names)
    assert not set(absent) & set(names)


@pytest.mark.parametrize(
    ("gpu", "balanced"),
    [
        (H100, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),  # 1g.10gb (7) wins over 1g.20gb (4), as in balanced.go
        (H200, {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),
        (A30, {"1g.6gb": 2, "2g.12gb": 1}),  # 4 slices: 2x1g + 1x2g
        (A100_40, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
        (L40S, {}),
    ],
)
def test_balanced_layout_matches_the_gpu_operator_default_config(gpu: dict[str, str], balanced: dict[str, int]) -> None:
    # the same layouts as default-mig-parted-config's all-balanced entries in GPU Operator v26.7.0
    assert cat.mig_balanced(gpu["vendor_id"], gpu["device_id"]) == balanced


# ---- input ----


@pytest.mark.parametrize(
    ("pools", "strategy", "field"),
    [
        ([{**TS, "model": "sliced"}], "single", "gpu_sharing_pools[0].model"),
        ([{**TS, "replicas": 0}], "single", "gpu_sharing_pools[0].replicas"),
        ([{**TS, "replicas": -2}], "single", "gpu_sharing_pools[0].replicas"),
        ([{**TS, "replicas": 1}], "single", "gpu_sharing_pools[0].replicas"),  # upstream: replicas must be >= 2
        ([{**TS, "replicas": "4"}], "single", "gpu_sharing_pools[0].replicas"),
        ([{**TS, "name": "L40S_shared"}], "single", "gpu_sharing_pools[0].name"),
        ([{**TS, "name": "exclusive"}], "single", "gpu_sharing_pools[0].name"),
        ([{**TS, "node_selector": {"a": "b"}}], "single", "gpu_sharing_pools[0]"),  # group and selector
        ([{k: v for k, v in TS.items() if k != "group"}], "single", "gpu_sharing_pools[0]"),  # neither
        ([{**MIG, "node_selector": {"pool": True}}], "single", "gpu_sharing_pools[0].node_selector"),
        ([{**TS, "devices": 0}], "single", "gpu_sharing_pools[0].devices"),
        ([{**TS, "devices": ["x"]}], "single", "gpu_sharing_pools[0].devices"),
        ([{**TS, "devices": 2}], "single", "gpu_sharing_pools[0].devices"),  # v0.20.0 ignores a selection
        ([{**TS, "devices": [0, 1]}], "single", "gpu_sharing_pools[0].devices"),
        ([{**TS, "rename_by_default": "yes"}], "single", "gpu_sharing_pools[0].rename_by_default"),
        ([{**TS, "mig_config": "all-1g.10gb"}], "single", "gpu_sharing_pools[0].mig_config"),  # not a TS field
        ([{**MIG, "replicas": 2}], "single", "gpu_sharing_pools[0].replicas"),  # not a MIG field
        ([{**MIG, "model": "kai_fraction"}], "single", "gpu_sharing_pools[0].mig_config"),  # KAI takes no field
        ([{**MIG, "mig_config": ""}], "single", "gpu_sharing_pools[0].mig_config"),
        ([{**TS, "model": "mps"}], "mixed", "gpu_sharing_pools[0].model"),  # MPS with mixed: refused upstream
        ([TS, TS], "single", "gpu_sharing_pools"),  # duplicate names
        ([TS], "dual", "gpu_sharing_mig_strategy"),
        ("not a list", "single", "gpu_sharing_pools"),
    ],
)
def test_bad_input_names_the_field(pools: Any, strategy: str, field: str) -> None:
    found = _pools.pool_input_findings(pools, strategy)
    assert field in fields(found), found
    assert all(f["evidence"] and f["fix"] for f in found)


def test_good_pools_have_no_findings() -> None:
    kai = {"name": "frac", "model": "kai_fraction", "node_selector": {"pool": "frac"}}
    pools = [TS, {**TS, "name": "mps-pool", "model": "mps", "group": "x", "devices": "all"}, MIG, DRA, kai]
    assert _pools.pool_input_findings(pools, "single") == []
    assert _pools.pool_input_findings([MIG], "mixed") == []


# ---- membership ----

NODES = {
    "pcie-l40s-0": {"groups": ["gpu_l40s"], "labels": {}},
    "dgx-h100-0": {"groups": ["dgx"], "labels": {"pool": "mig"}},
    "dgx-h100-1": {"groups": ["dgx"], "labels": {"pool": "dra"}},
    "cpu-0": {"groups": [], "labels": {}},
}


def test_members_by_group_and_selector() -> None:
    members, found = _pools.pool_members([TS, MIG, DRA], NODES)
    assert members == {"l40s-shared": ["pcie-l40s-0"], "dgx-mig": ["dgx-h100-0"], "dgx-dra": ["dgx-h100-1"]}
    assert found == []


def test_a_node_in_two_pools_is_named() -> None:
    both = {**DRA, "name": "all-dgx", "node_selector": None, "group": "dgx"}
    _members, found = _pools.pool_members([MIG, both], NODES)
    assert ids(found) == ["sharing-node-in-two-pools"]
    assert found[0]["object"]["name"] == "dgx-h100-0"
    assert "dgx-mig, all-dgx" in found[0]["evidence"][0]


def test_a_pool_matching_no_node_lists_the_nodes() -> None:
    _members, found = _pools.pool_members([{**MIG, "node_selector": {"pool": "mgi"}}], NODES)
    assert ids(found) == ["sharing-pool-empty"]
    assert "pool=mgi" in found[0]["evidence"][0] and "dgx-h100-0" in found[0]["evidence"][0]


# ---- MIG names against the pool's GPUs ----


@pytest.mark.parametrize(
    ("config", "gpus", "bad_models"),
    [
        ("all-1g.10gb", {"n1": [H100] * 8}, []),
        ("all-1g.10gb", {"n1": [H200] * 8}, ["NVIDIA H200"]),  # H200's smallest is 1g.18gb
        ("all-1g.10gb", {"n1": [H100] * 8, "n2": [H200] * 8}, ["NVIDIA H200"]),
        ("all-balanced", {"n1": [H100] * 8, "n2": [H200] * 8}, []),  # a name valid on both models
        ("all-1g.10gb", {"n1": [L40S]}, ["NVIDIA L40S"]),  # no MIG at all
        ("all-1g.10gb", {"n1": [A100_40]}, []),  # 4 x 1g.10gb on A100-40GB
    ],
)
def test_mig_name_must_be_valid_on_every_gpu_model(
    config: str, gpus: dict[str, list[dict[str, str]]], bad_models: list[str]
) -> None:
    pool = {**MIG, "mig_config": config}
    found = _mig.mig_findings([pool], {"dgx-mig": sorted(gpus)}, gpus)
    assert [f["evidence"][1].split(" on ")[0] for f in found] == bad_models
    for f in found:
        assert f["id"] == "sharing-mig-config-invalid" and f["evidence"][2].startswith("valid there: ")


# ---- DRA ----


@pytest.mark.parametrize(
    ("k8s", "served", "drivers", "want"),
    [
        ("v1.34.4", ["v1", "v1beta2"], {"dgx-h100-1": "580.95.05"}, []),
        ("v1.33.5", ["v1beta2", "v1beta1"], {"dgx-h100-1": "580.95.05"}, ["sharing-dra-kubernetes-too-old"]),
        ("v1.34.4", ["v1"], {"dgx-h100-1": "570.172.08"}, ["sharing-dra-driver-too-old"]),
        ("v1.34.4", ["v1"], {}, ["sharing-dra-driver-too-old"]),  # no driver found on the host
    ],
)
def test_dra_guards(k8s: str, served: list[str], drivers: dict[str, str], want: list[str]) -> None:
    assert ids(_pools.dra_findings([DRA], {"dgx-dra": ["dgx-h100-1"]}, k8s, served, drivers)) == want


def test_no_dra_pool_no_dra_guard() -> None:
    assert _pools.dra_findings([TS], {"l40s-shared": ["pcie-l40s-0"]}, "v1.30.0", [], {}) == []


# ---- device-plugin config and capacity ----


def test_device_plugin_configs() -> None:
    mps = {**TS, "name": "mps-pool", "model": "mps", "rename_by_default": True, "fail_requests_greater_than_one": False}
    kai = {"name": "frac", "model": "kai_fraction", "group": "g"}  # whole GPUs: no entry of its own
    got = _pools.device_plugin_configs([TS, mps, MIG, {**TS, "name": "two", "devices": "all"}, kai])
    assert got == {
        "exclusive": {"version": "v1"},
        "l40s-shared": {
            "version": "v1",
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
        },
        "mps-pool": {
            "version": "v1",
            "sharing": {
                "mps": {
                    "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
                    "renameByDefault": True,
                    "failRequestsGreaterThanOne": False,
                }
            },
        },
        "two": {
            "version": "v1",
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
        },
    }


@pytest.mark.parametrize(
    ("pool", "gpus", "strategy", "want"),
    [
        ({"model": "exclusive"}, [L40S] * 4, "single", {"nvidia.com/gpu": 4}),
        (TS, [L40S] * 4, "single", {"nvidia.com/gpu": 16}),
        ({**TS, "rename_by_default": True}, [L40S] * 4, "single", {"nvidia.com/gpu.shared": 16}),
        ({**TS, "model": "mps", "replicas": 2}, [H100] * 8, "single", {"nvidia.com/gpu": 16}),
        (MIG, [H100] * 8, "single", {"nvidia.com/gpu": 56}),
        (MIG, [H100] * 8, "mixed", {"nvidia.com/mig-1g.10gb": 56}),
        ({**MIG, "mig_config": "all-1g.10gb.me"}, [H100] * 8, "mixed", {"nvidia.com/mig-1g.10gb.me": 8}),
        ({**MIG, "mig_config": "all-balanced"}, [H100] * 8, "single", {"nvidia.com/gpu": 32}),
        (
            {**MIG, "mig_config": "all-balanced"},
            [H100] * 8,
            "mixed",
            {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8},
        ),
        ({**MIG, "mig_config": "all-disabled"}, [H100] * 8, "single", {"nvidia.com/gpu": 8}),
        (DRA, [H100] * 8, "single", {}),
        ({"model": "kai_fraction"}, [L40S] * 4, "single", {"nvidia.com/gpu": 4}),  # KAI shares whole GPUs
    ],
)
def test_expected_capacity(
    pool: dict[str, Any], gpus: list[dict[str, str]], strategy: str, want: dict[str, int]
) -> None:
    assert _capacity.expected_capacity(pool, gpus, strategy) == want


@pytest.mark.parametrize(
    ("advertised", "wrong"),
    [
        ({"nvidia.com/gpu": "16", "cpu": "32"}, []),
        ({"nvidia.com/gpu": "4"}, ["nvidia.com/gpu: expected 16, advertised 4"]),  # replicas not applied
        ({}, ["nvidia.com/gpu: expected 16, advertised 0"]),
        (
            {"nvidia.com/gpu": "16", "nvidia.com/gpu.shared": "16"},
            ["nvidia.com/gpu.shared: expected 0, advertised 16"],
        ),  # a stale renamed resource
    ],
)
def test_capacity_findings(advertised: dict[str, str], wrong: list[str]) -> None:
    found = _capacity.capacity_findings({"n1": {"nvidia.com/gpu": 16}}, {"n1": advertised}, {"n1": "l40s-shared"})
    assert [e for f in found for e in f["evidence"][1:]] == wrong
    assert all(f["id"] == "sharing-capacity-mismatch" and f["object"]["name"] == "n1" for f in found)


GROUPS = {
    "all": ["h1", "h2", "h3", "ctl"],
    "ungrouped": [],
    "dgx_h100": ["h1", "h2"],
    "l40s": ["h3"],
    "spare": [],
    "h100_mig": ["h2"],
}


@pytest.mark.parametrize(
    ("pools", "expect"),
    [
        (
            [
                {"name": "a", "model": "exclusive", "group": "dgx_h100"},
                {"name": "b", "model": "exclusive", "group": "l40s"},
            ],
            [],
        ),
        (
            [{"name": "a", "model": "exclusive", "group": "dgx_h10"}],
            [("sharing-pool-group-unknown", "gpu_sharing_pools[0].group", "did you mean dgx_h100?")],
        ),
        (
            [{"name": "a", "model": "exclusive", "group": "spare"}],
            [("sharing-pool-empty", "gpu_sharing_pools[0].group", "")],
        ),
        (  # two pools, one host: one node cannot have two sharing models
            [
                {"name": "a", "model": "time_slicing", "group": "dgx_h100", "replicas": 4},
                {"name": "b", "model": "mig", "group": "h100_mig", "mig_config": "all-1g.10gb"},
            ],
            [("sharing-node-in-two-pools", "h2", "pools a (group dgx_h100), b (group h100_mig)")],
        ),
        ([{"name": "a", "model": "exclusive", "node_selector": {"x": "y"}}], []),  # the cluster's labels decide later
    ],
)
def test_inventory_settles_group_pools_before_any_change(pools, expect):
    found = _plan.input_findings({"gpu_sharing_pools": pools}, GROUPS)
    assert [(f["id"], f["object"]["name"]) for f in found] == [(e[0], e[1]) for e in expect], found
    for f, e in zip(found, expect, strict=True):
        assert e[2] in " ".join([*f["evidence"], f["cause"], f["fix"]])
    # without the inventory's groups (a caller that has none), only the pools' own fields are checked
    assert _plan.input_findings({"gpu_sharing_pools": pools}, None) == []
