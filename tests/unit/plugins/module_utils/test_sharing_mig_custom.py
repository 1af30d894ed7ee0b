"""Custom mig-parted configs (gpu_sharing_mig_configs, issue 9) as tables: the structure mig-parted v0.15.0 accepts
(api/spec/v1/spec.go), the fit on each GPU model of a pool (profiles, counts, compute/memory slices, device
indexes), the names a pool may use once custom configs replace the generated ones, the ConfigMap document and the
capacity a custom layout gives."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.host import _gpu_catalog as cat
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _capacity, _mig
from ansible_collections.gpuops.platform.plugins.module_utils.status import _sharing_status as _status

H100 = {"vendor_id": "10de", "device_id": "2330"}
H200 = {"vendor_id": "10de", "device_id": "2335"}
A30 = {"vendor_id": "10de", "device_id": "20b7"}
L40S = {"vendor_id": "10de", "device_id": "26b9"}

HALF = [
    {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
    {"devices": [4, 5, 6, 7], "mig-enabled": False},
]
CONFIGS = {
    "half-1g": HALF,
    "three-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
    "mixed-models": [
        {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"device-filter": ["0x233510DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}},
    ],
}


def pool(config: str) -> dict[str, Any]:
    return {"name": "dgx-mig", "model": "mig", "node_selector": {"pool": "mig"}, "mig_config": config}


# ---- structure (before any change) ----


@pytest.mark.parametrize(
    ("configs", "field"),
    [
        (["half-1g"], "gpu_sharing_mig_configs"),
        ({"Bad name!": HALF}, "gpu_sharing_mig_configs[Bad name!]"),
        ({"empty": []}, "gpu_sharing_mig_configs[empty]"),
        ({"c": ["all"]}, "gpu_sharing_mig_configs[c][0]"),
        ({"c": [{"mig-enabled": False}]}, "gpu_sharing_mig_configs[c][0].devices"),
        ({"c": [{"devices": "some", "mig-enabled": False}]}, "gpu_sharing_mig_configs[c][0].devices"),
        ({"c": [{"devices": [-1], "mig-enabled": False}]}, "gpu_sharing_mig_configs[c][0].devices"),
        ({"c": [{"devices": [0, 0], "mig-enabled": False}]}, "gpu_sharing_mig_configs[c][0].devices"),
        ({"c": [{"devices": "all"}]}, "gpu_sharing_mig_configs[c][0].mig-enabled"),
        ({"c": [{"devices": "all", "mig-enabled": "yes"}]}, "gpu_sharing_mig_configs[c][0].mig-enabled"),
        (
            {"c": [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.10gb": 7}}]},
            "gpu_sharing_mig_configs[c][0].mig-devices",
        ),
        ({"c": [{"devices": "all", "mig-enabled": True}]}, "gpu_sharing_mig_configs[c][0].mig-devices"),
        (
            {"c": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 0}}]},
            "gpu_sharing_mig_configs[c][0].mig-devices.1g.10gb",
        ),
        (
            {"c": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": "7"}}]},
            "gpu_sharing_mig_configs[c][0].mig-devices.1g.10gb",
        ),
        (
            {"c": [{"devices": "all", "mig-enabled": True, "mig-devices": {"one-slice": 1}}]},
            "gpu_sharing_mig_configs[c][0].mig-devices",
        ),
        (
            {"c": [{"devices": "all", "mig-enabled": True, "mig_devices": {"1g.10gb": 7}}]},
            "gpu_sharing_mig_configs[c][0].mig_devices|gpu_sharing_mig_configs[c][0].mig-devices",
        ),
        (
            {"c": [{"devices": "all", "mig-enabled": False, "device-filter": "H100"}]},
            "gpu_sharing_mig_configs[c][0].device-filter",
        ),
        (
            {"c": [{"devices": "all", "mig-enabled": False, "device-filter": []}]},
            "gpu_sharing_mig_configs[c][0].device-filter",
        ),
    ],
)
def test_bad_structure_names_the_field(configs: Any, field: str) -> None:
    got = _mig.mig_configs_input_findings(configs)
    assert [f["object"]["name"] for f in got] == field.split("|")
    assert got[0]["id"] == "sharing-input-invalid" and got[0]["severity"] == "error"
    assert got[0]["cause"] and got[0]["fix"] and got[0]["evidence"]


@pytest.mark.parametrize(
    "configs",
    [
        None,
        {},
        CONFIGS,
        # upstream's own shapes: all-enabled (MIG on, no device), a device-filter with a subsystem ID, +me
        {"all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]},
        {"f": [{"device-filter": "0x233010DE:0x16C110DE", "devices": "all", "mig-enabled": False}]},
        {"me": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb+me": 1, "1g.10gb": 6}}]},
    ],
)
def test_good_structure_has_no_findings(configs: Any) -> None:
    assert not _mig.mig_configs_input_findings(configs)


def test_device_filter_reads_as_mig_parted() -> None:
    # pkg/types NewDeviceIDFromString: 0x<device><vendor>, strconv base 0
    assert _mig._device_filter_id("0x233010DE") == ("10de", "2330")
    assert _mig._device_filter_id("0x233510de:0x16c110de") == ("10de", "2335")
    assert _mig._device_filter_id("H100") is None


# ---- the catalog's slices (NVIDIA MIG User Guide): every profile at its maximum fits the GPU ----


@pytest.mark.parametrize("ids", sorted(cat.MIG_PROFILES))
def test_every_profile_at_its_maximum_fits_the_slices(ids: tuple[str, str]) -> None:
    slices, total = cat.mig_slices(*ids)
    profiles = cat.mig_profiles(*ids)
    assert set(slices) == set(profiles)
    for profile, count in profiles.items():
        assert count * slices[profile][0] <= total[0] and count * slices[profile][1] <= total[1], profile


def test_no_mig_no_slices() -> None:
    assert cat.mig_slices(L40S["vendor_id"], L40S["device_id"]) == ({}, (0, 0))


# ---- fit on the pool's GPUs ----

MEMBERS = {"dgx-mig": ["dgx-a", "dgx-b"]}


@pytest.mark.parametrize(
    ("entries", "gpus", "want"),
    [
        (HALF, {"dgx-a": [H100] * 8, "dgx-b": [H100] * 8}, []),
        (CONFIGS["mixed-models"], {"dgx-a": [H100] * 8, "dgx-b": [H200] * 8}, []),
        # a profile the GPU lacks (H200's smallest is 1g.18gb)
        (HALF, {"dgx-a": [H100] * 8, "dgx-b": [H200] * 8}, ["1g.10gb not a MIG profile of NVIDIA H200"]),
        # more instances than one GPU holds
        (
            [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb+me": 2}}],
            {"dgx-a": [H100] * 8, "dgx-b": [H100] * 8},
            ["1g.10gb+me: 2 (at most 1)"],
        ),
        # compute slices: 2 x 3g + 2 x 1g = 8 of 7
        (
            [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2, "1g.10gb": 2}}],
            {"dgx-a": [H100] * 8, "dgx-b": [H100] * 8},
            ["8/7 compute and 10/8 memory slices"],
        ),
        # memory slices: 3g.40gb (4/8) + 2 x 1g.20gb (2/8 each) = 8/8 fits; + a 1g.10gb is 9/8
        (
            [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "1g.20gb": 2, "1g.10gb": 1}}],
            {"dgx-a": [H100] * 8, "dgx-b": [H100] * 8},
            ["6/7 compute and 9/8 memory slices"],
        ),
        # A30: 4 compute and 4 memory slices
        (
            [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.12gb": 2, "1g.6gb": 1}}],
            {"dgx-a": [A30] * 4, "dgx-b": [A30] * 4},
            ["5/4 compute and 5/4 memory slices"],
        ),
        # device indexes beyond a node's GPUs
        (HALF, {"dgx-a": [H100] * 8, "dgx-b": [H100] * 4}, ["dgx-b has 4 GPUs"]),
        # a GPU without MIG
        (HALF, {"dgx-a": [L40S] * 8, "dgx-b": [L40S] * 8}, ["NVIDIA L40S has no MIG"]),
    ],
)
def test_custom_layout_fits_every_gpu_model(entries: list[Any], gpus: dict[str, Any], want: list[str]) -> None:
    got = _mig.mig_findings([pool("custom")], MEMBERS, gpus, {"custom": entries})
    assert [f["id"] for f in got] == ["sharing-mig-custom-config-invalid"] * (1 if want else 0)
    for text in want:
        assert any(text in e for e in got[0]["evidence"]), (text, got[0]["evidence"])


def test_with_custom_configs_a_generated_name_is_refused() -> None:
    gpus = {"dgx-a": [H100] * 8, "dgx-b": [H100] * 8}
    assert not _mig.mig_findings([pool("all-1g.10gb")], MEMBERS, gpus)  # generated: valid without custom configs
    got = _mig.mig_findings([pool("all-1g.10gb")], MEMBERS, gpus, CONFIGS)
    assert [f["id"] for f in got] == ["sharing-mig-config-invalid"]
    assert "gpu_sharing_mig_configs: all-disabled, half-1g, mixed-models, three-3g" in got[0]["evidence"]
    # all-disabled is always there (the role adds it): nodes leaving a MIG pool get it
    assert not _mig.mig_findings([pool("all-disabled")], MEMBERS, gpus, CONFIGS)


def test_the_config_map_document() -> None:
    doc = _mig.mig_parted_config({"half-1g": HALF})
    assert doc == {
        "version": "v1",
        "mig-configs": {"all-disabled": [{"devices": "all", "mig-enabled": False}], "half-1g": HALF},
    }
    mine = [{"devices": "all", "mig-enabled": False}]
    assert _mig.mig_parted_config({"all-disabled": mine})["mig-configs"] == {"all-disabled": mine}


# ---- capacity of a custom layout, per GPU index ----


@pytest.mark.parametrize(
    ("config", "gpus", "strategy", "want"),
    [
        ("half-1g", [H100] * 8, "mixed", {"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 28}),
        ("half-1g", [H100] * 8, "single", {"nvidia.com/gpu": 32}),
        ("three-3g", [H100] * 2, "mixed", {"nvidia.com/mig-3g.40gb": 4}),
        ("mixed-models", [H200] * 2, "mixed", {"nvidia.com/mig-1g.18gb": 14}),
        ("all-disabled", [H100] * 8, "single", {"nvidia.com/gpu": 8}),
    ],
)
def test_expected_capacity_of_a_custom_layout(
    config: str, gpus: list[dict[str, str]], strategy: str, want: dict[str, int]
) -> None:
    assert _capacity.expected_capacity(pool(config), gpus, strategy, CONFIGS) == want


def test_mig_layouts_later_entry_wins() -> None:
    entries = [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"devices": [1], "mig-enabled": False},
    ]
    assert _mig.mig_layouts(entries, ("10de", "2330"), 2) == [{"1g.10gb": 7}, None]


# ---- the single MIG strategy: one profile on every GPU of a node, or MIG off (k8s-device-plugin device_map.go) ----


@pytest.mark.parametrize(
    ("config", "strategy", "want"),
    [
        ("all-1g.10gb", "single", []),
        ("all-disabled", "single", []),
        ("three-3g", "single", []),
        ("all-balanced", "mixed", []),
        ("half-1g", "mixed", []),
        ("all-balanced", "single", ["more than one MIG profile: 1g.10gb, 2g.20gb, 3g.40gb"]),
        ("all-enabled", "single", ["a MIG-enabled GPU without MIG devices"]),
        ("half-1g", "single", ["GPUs with MIG enabled and disabled on one node"]),
        ("all-1g.18gb", "single", []),  # not a name of the H100: mig_findings' finding, not this one
    ],
)
def test_single_strategy_needs_one_profile_everywhere(config: str, strategy: str, want: list[str]) -> None:
    gpus = {"dgx-a": [H100] * 8, "dgx-b": [H100] * 8}
    configs = CONFIGS if config in CONFIGS else None
    got = _mig.mig_strategy_findings([pool(config)], MEMBERS, gpus, strategy, configs)
    assert [f["id"] for f in got] == ["sharing-mig-strategy-single-mixed-layout"] * (2 if want else 0)
    for text in want:
        assert text in got[0]["evidence"], got[0]["evidence"]


def test_gpus_from_gfd_labels_under_a_custom_single_layout() -> None:

    # 8 H100 with 2 x 3g.40gb each: GFD (single) labels 16 MIG devices; the node has 8 GPUs
    labels = {
        "nvidia.com/gpu.count": "16",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb",
        "nvidia.com/mig.config": "three-3g",
    }
    assert len(_status.nvidia_gpus(None, labels, CONFIGS)) == 8
    one = {"one-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1}}]}
    assert len(_status.nvidia_gpus(None, {**labels, "nvidia.com/mig.config": "one-3g"}, one)) == 16
    assert len(_status.nvidia_gpus(None, labels)) == 8  # the generated all-3g.40gb: 2 per GPU
