"""sharing/_node: the sharing model a node runs, from the cluster alone (the readiness table's SHARING column)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _labels
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _node as sn

TS4 = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
MPS2 = json.dumps({"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}})
CONFIGS = {"exclusive": "version: v1\n", "ts-l40s": TS4, "mps-a": MPS2, "broken": "version: [v1\n"}
CFG = "nvidia.com/device-plugin.config"
MIG = "nvidia.com/mig.config"
STATE = "nvidia.com/mig.config.state"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (TS4, ("time_slicing", [4])),
        (MPS2, ("mps", [2])),
        ("version: v1\n", ("exclusive", [])),
        ({"version": "v1", "sharing": {"timeSlicing": {"resources": []}}}, ("exclusive", [])),
        ("version: [v1\n", ("invalid", [])),
        ("- a list\n", ("invalid", [])),
        ("sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: many}]}}", ("invalid", [])),
        (
            "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}, {name: nvidia.com/mig-1g.10gb, "
            "replicas: 7}]}}",
            ("time_slicing", [2, 7]),
        ),
    ],
)
def test_entry_model(text, want):
    assert sn.entry_model(text) == want


@pytest.mark.parametrize(
    ("labels", "alloc", "configs", "default", "dra", "model", "detail"),
    [
        # nothing named: exclusive
        ({}, {"nvidia.com/gpu": 8}, None, None, None, "exclusive", ""),
        # the label names an entry with time-slicing
        ({CFG: "ts-l40s"}, {"nvidia.com/gpu": 16}, CONFIGS, "exclusive", None, "time_slicing", "ts-l40s x4"),
        # no label: the ClusterPolicy's default entry
        ({}, {"nvidia.com/gpu": 8}, CONFIGS, "mps-a", None, "mps", "mps-a x2"),
        ({}, {"nvidia.com/gpu": 8}, CONFIGS, "exclusive", None, "exclusive", "exclusive"),
        # an entry that does not exist / does not parse: the device plugin fails there
        ({CFG: "nope"}, {}, CONFIGS, "exclusive", None, "unknown", "config entry nope missing"),
        ({CFG: "broken"}, {}, CONFIGS, "exclusive", None, "unknown", "config entry broken invalid"),
        # MIG outranks the device-plugin entry; all-disabled is not MIG
        (
            {MIG: "all-1g.10gb", STATE: "success", CFG: "ts-l40s"},
            {"nvidia.com/gpu": 56},
            CONFIGS,
            None,
            None,
            "mig",
            "all-1g.10gb (success)",
        ),
        ({MIG: "all-1g.10gb"}, {}, CONFIGS, None, None, "mig", "all-1g.10gb (no state)"),
        ({MIG: "all-disabled", CFG: "ts-l40s"}, {}, CONFIGS, None, None, "time_slicing", "ts-l40s x4"),
        # DRA slices outrank everything
        ({MIG: "all-1g.10gb"}, {}, CONFIGS, None, 8, "dra", "8 device(s) in ResourceSlices"),
        ({}, {}, None, None, 0, "exclusive", ""),
        # an exclusive node of a kai_fraction pool; the label does not hide a sharing entry
        (
            {"gpuops.platform/sharing-kai-fraction": "true"},
            {"nvidia.com/gpu": 8},
            None,
            None,
            None,
            "kai_fraction",
            "(KAI Scheduler shares whole GPUs)",
        ),
        (
            {"gpuops.platform/sharing-kai-fraction": "true", CFG: "ts-l40s"},
            {},
            CONFIGS,
            None,
            None,
            "time_slicing",
            "ts-l40s x4",
        ),
    ],
)
def test_node_sharing(labels, alloc, configs, default, dra, model, detail):  # pylint: disable=too-many-arguments,too-many-positional-arguments
    got = sn.node_sharing(labels, alloc, configs, default, dra)
    assert (got["model"], got["detail"]) == (model, detail)
    assert got["advertised"] == alloc


def test_summary_and_advertised_filter():
    got = sn.node_sharing({CFG: "ts-l40s"}, {"nvidia.com/gpu.shared": 16, "cpu": 8}, CONFIGS, None, None)
    assert got["advertised"] == {"nvidia.com/gpu.shared": 16}
    assert got["summary"] == "time_slicing ts-l40s x4: nvidia.com/gpu.shared=16"
    assert sn.node_sharing({}, {}, None, None, 3)["summary"] == "dra 3 device(s) in ResourceSlices: nothing advertised"


def test_policy_config_takes_the_oldest_policy():
    old = {
        "metadata": {"name": "b", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"devicePlugin": {"config": {"name": "cm-old", "default": "exclusive"}}},
    }
    new = {
        "metadata": {"name": "a", "creationTimestamp": "2026-02-01T00:00:00Z"},
        "spec": {"devicePlugin": {"config": {"name": "cm-new"}}},
    }
    assert sn.policy_config([new, old]) == ("cm-old", "exclusive")
    assert sn.policy_config([new]) == ("cm-new", None)
    assert sn.policy_config(None) == (None, None)
    assert sn.policy_config([{"metadata": {"name": "x"}}]) == (None, None)


def test_slice_devices_counts_only_the_nvidia_driver():
    slices = [
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "devices": [{}, {}]}},
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "devices": [{}]}},
        {"spec": {"driver": "gpu.amd.com", "nodeName": "n1", "devices": [{}]}},
        {"spec": {"driver": "gpu.nvidia.com", "devices": [{}]}},
    ]
    assert sn.slice_devices(slices) == {"n1": 3}


def test_wanted_labels_per_model():

    assert _labels.wanted_labels({"name": "frac", "model": "kai_fraction"}) == {
        "gpuops.platform/sharing-kai-fraction": "true"
    }
    assert _labels.wanted_labels({"name": "ts", "model": "time_slicing"}) == {CFG: "ts"}
    assert _labels.wanted_labels({"name": "x", "model": "exclusive"}) == {}
