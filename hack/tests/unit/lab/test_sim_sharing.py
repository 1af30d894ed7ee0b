"""GPU sharing in the simulator (handlers/sharing.py and its use by the ClusterPolicy handler): the device-plugin
config selected per node, time-slicing / MPS replicas, failures like upstream's, MIG configs mig-manager
generates."""

from __future__ import annotations

import json

import pytest
from gpuops_lab.simulator.handlers import sharing
from gpuops_lab.simulator.handlers.nvidia import DP_CONFIG_ANNOTATION, GpuInfo, GpuModel, mig_apply, mig_resources
from test_sim_nvidia import NS, Lab, waiting

TS4 = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
TS2_RENAMED = (
    "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 2\n      devices: 1\n"
)
MPS2 = "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
DP = "nvidia-device-plugin-daemonset"


@pytest.mark.parametrize(
    ("text", "strategy", "resources"),
    [
        (None, "none", {"nvidia.com/gpu": 4}),
        ("version: v1\n", "none", {"nvidia.com/gpu": 4}),
        (TS4, "time-slicing", {"nvidia.com/gpu": 16}),
        # devices is ignored by the v0.20.0 plugin (DisableResourceNamingInConfig): every GPU is replicated
        (TS2_RENAMED, "time-slicing", {"nvidia.com/gpu.shared": 8}),
        (MPS2, "mps", {"nvidia.com/gpu": 8}),
    ],
)
def test_parse_and_replicate(text, strategy, resources):
    cfg = sharing.parse_config(text)
    assert cfg.strategy == strategy
    assert sharing.replicate({"nvidia.com/gpu": 4}, cfg) == resources
    assert sharing.SharingConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TS4.replace("replicas: 4", "replicas: 1"), "number of replicas must be >= 2"),
        (TS4.replace("      replicas: 4\n", ""), "no replicas specified"),
        ("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n", "no resources specified"),
        ("version: v2\n", "unknown version: v2"),
    ],
)
def test_config_errors(text, message):
    with pytest.raises(sharing.ConfigError, match=message):
        sharing.parse_config(text)


def test_mps_refusals_and_gfd_labels():
    mps = sharing.parse_config(MPS2)
    with pytest.raises(sharing.ConfigError, match="using --mig-strategy=mixed is not supported with MPS"):
        sharing.check_strategy(mps, "mixed", False)
    with pytest.raises(sharing.ConfigError, match="sharing using MPS is not supported for MIG devices"):
        sharing.check_strategy(mps, "single", True)
    sharing.check_strategy(sharing.parse_config(TS4), "mixed", True)
    assert sharing.gfd_sharing_labels(sharing.parse_config(TS4), "NVIDIA-L40S") == {
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
    }
    assert "nvidia.com/gpu.product" not in sharing.gfd_sharing_labels(sharing.parse_config(TS2_RENAMED), "X")


H100 = GpuInfo(8, "NVIDIA-H100-80GB-HBM3", 81559, "2330", None, None)
H200_MODEL = GpuModel("hopper", (9, 0), (("1g.18gb", 7), ("1g.18gb+me", 1), ("1g.35gb", 4), ("2g.35gb", 3)))


@pytest.mark.parametrize(
    ("device", "config", "strategy", "state", "resources"),
    [
        ("2335", "all-1g.18gb", "mixed", "success", {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.18gb": 56}),
        ("2335", "all-1g.10gb", "mixed", "failed", {"nvidia.com/gpu": 8}),  # an H100 name on an H200
        ("2330", "all-1g.18gb", "single", "failed", {"nvidia.com/gpu": 8}),
        ("2330", "all-1g.10gb.me", "mixed", "success", {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb.me": 8}),
        ("2330", "all-enabled", "single", "success", {"nvidia.com/gpu": 0}),
        ("2330", "all-disabled", "single", "success", {"nvidia.com/gpu": 8}),
        # single with more than one MIG device type: the device plugin fails (GFD labels the product MIG-INVALID)
        ("2330", "all-balanced", "single", "success", {"nvidia.com/gpu": 0}),
        (
            "2330",
            "all-balanced",
            "mixed",
            "success",
            {
                "nvidia.com/gpu": 0,
                "nvidia.com/mig-1g.10gb": 16,
                "nvidia.com/mig-2g.20gb": 8,
                "nvidia.com/mig-3g.40gb": 8,
            },
        ),
    ],
)
def test_generated_mig_configs(device, config, strategy, state, resources):
    from gpuops_lab.simulator.handlers.nvidia import GPU_MODELS

    gpu = GpuInfo(8, "GPU", 1, device, None, GPU_MODELS[device])
    got_state, devices = mig_apply(gpu, config)
    assert got_state == state
    assert mig_resources(gpu, strategy, devices) == resources


# --------------------------------------------------------------------------------------------------
# The ClusterPolicy handler with a device-plugin config
# --------------------------------------------------------------------------------------------------

SPEC = {"devicePlugin": {"config": {"name": "dp-config", "default": "exclusive"}}}


def sharing_lab(entries: dict[str, str] | None = None, spec: dict | None = None) -> Lab:
    lab = Lab()
    lab.client.add(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "dp-config", "namespace": NS},
            "data": entries if entries is not None else {"exclusive": "version: v1\n", "ts4": TS4, "ts2": TS2_RENAMED},
        }
    )
    lab.policy("cluster-policy", spec or SPEC)
    return lab


def resources(lab: Lab, node: str) -> dict[str, str]:
    alloc = lab.client.obj("v1", "Node", node)["status"].get("allocatable") or {}
    return {k: v for k, v in alloc.items() if k.startswith("nvidia.com/")}


def label(lab: Lab, node: str, value: str | None) -> None:
    lab.client.patch("v1", "Node", node, None, {"metadata": {"labels": {sharing.DP_CONFIG_LABEL: value}}})


def test_config_selected_by_node_label_else_default():
    lab = sharing_lab()
    lab.node("l0", "pcie-l40s", labels={sharing.DP_CONFIG_LABEL: "ts4"})
    lab.node("l1", "pcie-l40s", labels={sharing.DP_CONFIG_LABEL: "ts2"})
    lab.node("l2", "pcie-l40s")
    lab.settle()
    assert resources(lab, "l0") == {"nvidia.com/gpu": "16"}
    assert resources(lab, "l1") == {"nvidia.com/gpu.shared": "8"}
    assert resources(lab, "l2") == {"nvidia.com/gpu": "4"}
    gfd = lab.gfd("l0")
    assert (gfd["nvidia.com/gpu.replicas"], gfd["nvidia.com/gpu.sharing-strategy"]) == ("4", "time-slicing")
    assert gfd["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    assert lab.gfd("l2")["nvidia.com/gpu.replicas"] == "1"
    # a label change is picked up by config-manager at once
    label(lab, "l2", "ts4")
    lab.settle()
    assert resources(lab, "l2") == {"nvidia.com/gpu": "16"}
    assert json.loads(lab.pod(DP, "l2")["metadata"]["annotations"][DP_CONFIG_ANNOTATION])["entry"] == "ts4"


def test_unknown_entry_fails_the_plugin_and_leaves_resources():
    lab = sharing_lab()
    lab.node("l0", "pcie-l40s", labels={sharing.DP_CONFIG_LABEL: "ts4"})
    lab.node("l1", "pcie-l40s", labels={sharing.DP_CONFIG_LABEL: "nope"})
    lab.settle()
    # a new pod: its config-manager-init fails
    pod = lab.pod(DP, "l1")
    assert waiting(pod, "initContainerStatuses")["config-manager-init"] == "CrashLoopBackOff"
    init = pod["status"]["initContainerStatuses"][-1]
    assert init["state"]["waiting"]["message"] == "specified config nope does not exist"
    assert resources(lab, "l1") == {}
    # a running pod: its config-manager sidecar fails, the plugin keeps what it loaded
    label(lab, "l0", "nope")
    lab.settle()
    pod = lab.pod(DP, "l0")
    assert waiting(pod)["config-manager"] == "CrashLoopBackOff"
    assert resources(lab, "l0") == {"nvidia.com/gpu": "16"}
    assert lab.status()["state"] == "notReady"
    # back to an existing entry: the pod recovers
    label(lab, "l0", "exclusive")
    lab.settle()
    assert resources(lab, "l0") == {"nvidia.com/gpu": "4"}
    assert lab.pod(DP, "l0")["status"]["conditions"][1]["status"] == "True"


def test_missing_default_entry():
    lab = sharing_lab({"ts4": TS4})
    lab.node("l0", "pcie-l40s")
    lab.settle()
    init = lab.pod(DP, "l0")["status"]["initContainerStatuses"][-1]
    # cmd/config-manager formats the (empty) label value, not the default's name
    assert init["state"]["waiting"]["message"] == "specified config  does not exist"
    assert resources(lab, "l0") == {}


def test_configmap_change_needs_a_plugin_restart():
    lab = sharing_lab()
    lab.node("l0", "pcie-l40s", labels={sharing.DP_CONFIG_LABEL: "ts4"})
    lab.settle()
    assert resources(lab, "l0") == {"nvidia.com/gpu": "16"}
    lab.client.patch("v1", "ConfigMap", "dp-config", NS, {"data": {"ts4": TS4.replace("replicas: 4", "replicas: 8")}})
    lab.settle()
    assert resources(lab, "l0") == {"nvidia.com/gpu": "16"}  # replicas not applied: plugin not restarted
    lab.client.delete("v1", "Pod", f"{DP}-l0", NS)
    lab.settle()
    assert resources(lab, "l0") == {"nvidia.com/gpu": "32"}


def test_plugin_refusals_crash_the_plugin():
    lab = sharing_lab(
        {"mps": MPS2, "bad": TS4.replace("replicas: 4", "replicas: 1")},
        {"devicePlugin": {"config": {"name": "dp-config"}}, "mig": {"strategy": "mixed"}},
    )
    lab.node("l0", "pcie-l40s", labels={sharing.DP_CONFIG_LABEL: "mps"})
    lab.node("l1", "pcie-l40s", labels={sharing.DP_CONFIG_LABEL: "bad"})
    lab.settle()
    for node, message in (
        ("l0", "using --mig-strategy=mixed is not supported with MPS"),
        ("l1", "unable to load config: number of replicas must be >= 2"),
    ):
        status = next(
            c for c in lab.pod(DP, node)["status"]["containerStatuses"] if c["name"] == "nvidia-device-plugin"
        )
        assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        assert message in json.dumps(status)
        assert resources(lab, node) == {}


# --------------------------------------------------------------------------------------------------
# mig-manager's nvidia.com/mig.config.state sequence
# --------------------------------------------------------------------------------------------------


def mig_label(lab: Lab, node: str, config: str) -> None:
    lab.client.patch("v1", "Node", node, None, {"metadata": {"labels": {"nvidia.com/mig.config": config}}})


def test_mig_change_goes_through_pending_and_fails_while_gpus_are_in_use():
    from gpuops_lab.simulator.fakeclient import make_pod

    lab = Lab()
    lab.node("h0", "dgx-h100")
    lab.policy("cluster-policy", {"mig": {"strategy": "mixed"}})
    lab.settle()
    assert resources(lab, "h0") == {"nvidia.com/gpu": "8"}
    mig_label(lab, "h0", "all-1g.10gb")
    lab.sim.sync()
    lab.sim.process_pending()
    got = lab.labels("h0")
    assert got["nvidia.com/mig.config.state"] == "pending"
    for key in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm"):
        assert got[f"nvidia.com/gpu.deploy.{key}"] == "paused-for-mig-change"
    lab.settle(8)
    got = lab.labels("h0")
    assert got["nvidia.com/mig.config.state"] == "success"
    assert got["nvidia.com/gpu.deploy.device-plugin"] == got["nvidia.com/gpu.deploy.nvsm"] == "true"
    assert resources(lab, "h0") == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"}
    # a workload holding a MIG device: the next change fails (nvidia-smi cannot reconfigure GPUs in use)
    work = make_pod("work", "default", "h0")
    work["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    lab.client.add(work)
    mig_label(lab, "h0", "all-3g.40gb")
    lab.settle(8)
    assert lab.labels("h0")["nvidia.com/mig.config.state"] == "failed"
    assert lab.labels("h0")["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert resources(lab, "h0") == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"}
    # mig-manager retries on the next label change only
    lab.client.delete("v1", "Pod", "work", "default")
    lab.settle(8)
    assert lab.labels("h0")["nvidia.com/mig.config.state"] == "failed"
    mig_label(lab, "h0", "all-1g.10gb")
    lab.settle(8)
    assert lab.labels("h0")["nvidia.com/mig.config.state"] == "success"


def test_mig_name_invalid_on_the_gpu_fails_at_once():
    lab = Lab()
    lab.node("h0", "dgx-h100", labels={"nvidia.com/mig.config": "all-1g.18gb"})  # an H200 name
    lab.policy("cluster-policy", {"mig": {"strategy": "single"}})
    lab.settle()
    got = lab.labels("h0")
    assert got["nvidia.com/mig.config.state"] == "failed"
    assert got["nvidia.com/gpu.deploy.device-plugin"] == "true"  # nothing paused
    assert resources(lab, "h0") == {"nvidia.com/gpu": "8"}
