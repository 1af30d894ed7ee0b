"""Custom mig-parted configs in the simulator: mig-manager reads the ConfigMap the ClusterPolicy names
(migManager.config.name, key config.yaml) and then knows only its names; a layout valid for the node's GPU applies
(success), any other fails, as for the generated table."""

from __future__ import annotations

import pytest
from gpuops_lab.simulator.handlers import sharing
from gpuops_lab.simulator.handlers.nvidia import GPU_MODELS, GpuInfo, mig_apply, mig_resources
from test_sim_nvidia import NS, Lab
from test_sim_sharing import mig_label, resources

H100 = "2330"
HALF = "version: v1\nmig-configs:\n  half:\n  - {devices: [0, 1, 2, 3], mig-enabled: true, mig-devices: {1g.10gb: 7}}\n"
CUSTOM = """version: v1
mig-configs:
  all-disabled:
  - {devices: all, mig-enabled: false}
  two-3g:
  - {devices: all, mig-enabled: true, mig-devices: {3g.40gb: 2}}
  h200-only:
  - {devices: all, mig-enabled: true, mig-devices: {1g.18gb: 7}}
  too-big:
  - {devices: all, mig-enabled: true, mig-devices: {3g.40gb: 2, 1g.10gb: 2}}
  filtered:
  - {device-filter: "0x233010DE", devices: all, mig-enabled: true, mig-devices: {1g.20gb: 4}}
  - {device-filter: "0x233510DE", devices: all, mig-enabled: true, mig-devices: {1g.35gb: 4}}
"""


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "unknown version"),
        ("version: v1\nmig-configs: {}\n", "at least one entry"),
        ("version: v1\nmig-configs: {a: []}\n", "at least one entry in 'a'"),
        ("version: v1\nmig-configs: {a: [{mig-enabled: false}]}\n", "missing required field: devices"),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true}]}\n", "'mig-devices' when"),
        (
            "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, mig-devices: {1g.10gb: 1}}]}\n",
            "MIG devices included",
        ),
        ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, x: 1}]}\n", "unexpected field: x"),
    ],
)
def test_parse_refuses_what_mig_parted_refuses(text: str, error: str) -> None:
    with pytest.raises(sharing.ConfigError, match=error):
        sharing.parse_mig_parted(text)


@pytest.mark.parametrize(
    ("config", "state", "resources_mixed"),
    [
        ("two-3g", "success", {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 16}),
        ("filtered", "success", {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.20gb": 32}),
        ("all-disabled", "success", {"nvidia.com/gpu": 8}),
        ("h200-only", "failed", {"nvidia.com/gpu": 8}),  # no 1g.18gb on an H100
        ("too-big", "failed", {"nvidia.com/gpu": 8}),  # 8 of 7 compute slices
        ("all-1g.10gb", "failed", {"nvidia.com/gpu": 8}),  # generated names are gone with a custom file
    ],
)
def test_custom_configs_on_an_h100(config: str, state: str, resources_mixed: dict[str, int]) -> None:
    gpu = GpuInfo(8, "GPU", 1, H100, None, GPU_MODELS[H100])
    got_state, devices = mig_apply(gpu, config, sharing.parse_mig_parted(CUSTOM))
    assert got_state == state
    assert mig_resources(gpu, "mixed", devices) == resources_mixed


def test_different_layouts_per_gpu_are_not_simulated() -> None:
    gpu = GpuInfo(8, "GPU", 1, H100, None, GPU_MODELS[H100])
    assert mig_apply(gpu, "half", sharing.parse_mig_parted(HALF)) == ("failed", None)


def test_mig_manager_reads_the_configmap_the_cluster_policy_names() -> None:
    lab = Lab()
    lab.client.add(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "custom-mig", "namespace": NS},
            "data": {"config.yaml": CUSTOM},
        }
    )
    lab.node("h0", "dgx-h100", labels={"nvidia.com/mig.config": "two-3g"})
    lab.policy("cluster-policy", {"mig": {"strategy": "mixed"}, "migManager": {"config": {"name": "custom-mig"}}})
    lab.settle(8)
    assert lab.labels("h0")["nvidia.com/mig.config.state"] == "success"
    assert resources(lab, "h0") == {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "16"}
    mig_label(lab, "h0", "h200-only")
    lab.settle(8)
    assert lab.labels("h0")["nvidia.com/mig.config.state"] == "failed"
    assert resources(lab, "h0") == {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "16"}  # left as applied
    # an invalid file: every name fails (mig-parted assert --valid-config)
    lab.client.patch("v1", "ConfigMap", "custom-mig", NS, {"data": {"config.yaml": "version: v1\n"}})
    mig_label(lab, "h0", "all-disabled")
    lab.settle(8)
    assert lab.labels("h0")["nvidia.com/mig.config.state"] == "failed"
