"""The GPU catalog's Grace-Blackwell entries (issue 27): GB200 (0x2941) and GB300 (0x31c2) as the driver names them,
their memory, and their MIG profiles and layouts as the GPU Operator v26.7.0 default-mig-parted-config has them."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.host import _gpu_catalog as cat

GB200 = ("10de", "2941")
GB300 = ("10de", "31c2")


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (
            GB200,
            {
                "model": "NVIDIA GB200",
                "chip": "GB100",
                "architecture": "Blackwell",
                "memory_gb": 186,
                "mig_capable": True,
            },
        ),
        (
            GB300,
            {
                "model": "NVIDIA GB300",
                "chip": "GB110",
                "architecture": "Blackwell",
                "memory_gb": 288,
                "mig_capable": True,
            },
        ),
        (("10DE", "2941"), {"model": "NVIDIA GB200"}),  # sysfs is lower case; the table answers either
        (("10de", "31c3"), None),  # pci.ids "GB110 [GB300]", not in the driver's table: left out
        (("10de", "31a1"), None),  # pci.ids "GB300 MaxQ": left out
    ],
)
def test_grace_blackwell_entries(ids: tuple[str, str], expected: dict[str, Any] | None) -> None:
    entry = cat.gpu(*ids)
    if expected is None:
        assert entry is None
        return
    assert entry is not None and {k: entry[k] for k in expected} == expected


@pytest.mark.parametrize("ids", [GB200, GB300])
def test_grace_blackwell_entries_have_the_shape_of_the_others(ids: tuple[str, str]) -> None:
    entry = cat.gpu(*ids)
    assert entry is not None and set(entry) == set(cat.GPUS[("10de", "2901")])
    assert entry["mig_max_instances"] == 7
    assert entry["nvswitch_generation"] is None  # the rack's NVLink switch trays: no NVSwitch on the host
    assert cat.nvswitch(*ids) is None  # a GPU is not an NVSwitch


@pytest.mark.parametrize(
    ("ids", "profiles"),
    [
        (
            GB200,
            {"1g.23gb": 7, "1g.23gb+me": 1, "1g.47gb": 4, "2g.47gb": 3, "3g.93gb": 2, "4g.93gb": 1, "7g.186gb": 1},
        ),
        (
            GB300,
            {"1g.35gb": 7, "1g.35gb+me": 1, "1g.70gb": 4, "2g.70gb": 3, "3g.139gb": 2, "4g.139gb": 1, "7g.278gb": 1},
        ),
    ],
)
def test_grace_blackwell_mig_profiles(ids: tuple[str, str], profiles: dict[str, int]) -> None:
    assert cat.mig_profiles(*ids) == profiles
    slices, total = cat.mig_slices(*ids)
    assert total == (7, 8) and set(slices) == set(profiles)
    full = [p for p in profiles if p.startswith("7g.")]
    assert [slices[p] for p in full] == [(7, 8)]


@pytest.mark.parametrize(
    ("ids", "balanced"),
    [
        # default-mig-parted-config all-balanced, device-filter 0x294110DE and 0x31C210DE
        (GB200, {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1}),
        (GB300, {"1g.35gb": 2, "2g.70gb": 1, "3g.139gb": 1}),
    ],
)
def test_grace_blackwell_balanced_layout_is_the_gpu_operators(ids: tuple[str, str], balanced: dict[str, int]) -> None:
    assert cat.mig_balanced(*ids) == balanced


@pytest.mark.parametrize(
    ("ids", "present", "absent"),
    [
        (GB200, ["all-1g.23gb", "all-1g.23gb.me", "all-7g.186gb", "all-balanced"], ["all-7g.180gb", "all-1g.45gb"]),
        (GB300, ["all-1g.35gb", "all-1g.35gb.me", "all-7g.278gb", "all-balanced"], ["all-7g.269gb", "all-1g.34gb"]),
    ],
)
def test_grace_blackwell_mig_config_names(ids: tuple[str, str], present: list[str], absent: list[str]) -> None:
    names = cat.mig_config_names(*ids)
    assert set(present) <= set(names) and not set(absent) & set(names)
