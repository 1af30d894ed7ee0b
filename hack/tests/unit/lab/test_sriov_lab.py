"""The real SR-IOV Network Operator as a lab component: its ports (their own variables, else following nfd-master's),
its environment, the ConfigMap and CRDs it needs before it starts, and how the lab starts and probes it."""

from __future__ import annotations

import pytest
from gpuops_lab import sriov
from gpuops_lab.cluster import BINARIES, ORDER, Lab
from gpuops_lab.config import LabConfig
from gpuops_lab.errors import LabError


def test_ports_have_variables_and_follow_nfd_master_when_unset(tmp_path):
    base = {"GPUOPS_LAB_STATE": str(tmp_path)}
    assert {k: v for k, v in LabConfig.load(base).ports.items() if k.startswith("sriov")} == {
        "sriov-metrics": 20291,
        "sriov-probe": 20292,
    }
    shifted = LabConfig.load({**base, "GPUOPS_LAB_NFD_MASTER_PORT": "22290"}).ports
    assert (shifted["sriov-metrics"], shifted["sriov-probe"]) == (22291, 22292)
    own = LabConfig.load({**base, "GPUOPS_LAB_NFD_MASTER_PORT": "22290", "GPUOPS_LAB_SRIOV_PROBE_PORT": "30000"})
    assert own.ports["sriov-probe"] == 30000
    with pytest.raises(LabError, match="GPUOPS_LAB_SRIOV_METRICS_PORT"):
        LabConfig.load({**base, "GPUOPS_LAB_SRIOV_METRICS_PORT": "x"})


def test_environment_as_the_recipe_says():
    env = sriov.env("1.6.0")
    assert env["NAMESPACE"] == sriov.NAMESPACE == "sriov-network-operator"
    assert (env["RESOURCE_PREFIX"], env["CLUSTER_TYPE"], env["RELEASEVERSION"]) == (
        "openshift.io",
        "kubernetes",
        "v1.6.0",
    )
    assert env["SRIOV_NETWORK_CONFIG_DAEMON_IMAGE"].endswith(":v1.6.0")
    for var in ("SRIOV_CNI_IMAGE", "SRIOV_DEVICE_PLUGIN_IMAGE", "SRIOV_INFINIBAND_CNI_IMAGE", "METRICS_EXPORTER_IMAGE"):
        assert env[var]


def test_supported_nic_ids_from_the_upstream_chart_adoptable_by_helm():
    """Upstream's templates/configmap.yaml in the build cache (build.sh sriov-chart; missing: a failure)."""
    cm = sriov.nic_ids_configmap()
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["name"] == "supported-nic-ids"
    assert cm["data"]["Nvidia_mlx5_ConnectX-7"] == "15b3 1021 101e"
    assert not any("{{" in v for v in cm["data"].values())
    meta = cm["metadata"]
    assert meta["namespace"] == sriov.NAMESPACE and meta["labels"] == {"app.kubernetes.io/managed-by": "Helm"}
    assert meta["annotations"] == {
        "meta.helm.sh/release-name": "sriov-network-operator",
        "meta.helm.sh/release-namespace": "sriov-network-operator",
    }
    names = [p.name for p in sriov.crd_files()]
    assert len(names) == 8 and "k8s.cni.cncf.io_networkattachmentdefinitions_crd.yaml" in names


def test_the_lab_runs_it_on_loopback_from_its_build_directory(tmp_path):
    cfg = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path), "GPUOPS_LAB_NFD_MASTER_PORT": "22290"})
    lab = Lab(cfg, say=lambda _msg: None)
    assert ORDER.index("nfd-master") < ORDER.index("sriov-network-operator") < ORDER.index("simulator")
    assert "sriov-network-operator" in BINARIES
    argv = lab._argv("sriov-network-operator")
    assert argv[0] == str(cfg.bindir("sriov-network-operator") / "sriov-network-operator")
    assert cfg.bindir("sriov-network-operator").name == "sriov-network-operator-v1.6.0"
    assert "--metrics-bind-address=127.0.0.1:22291" in argv and "--health-probe-bind-address=127.0.0.1:22292" in argv
    env = lab._env("sriov-network-operator")
    assert env["KUBECONFIG"] == str(cfg.kubeconfig) and env["NAMESPACE"] == "sriov-network-operator"
    assert [p for _w, p in lab._ports_of("sriov-network-operator")] == [22291, 22292]
    _probe, what, _timeout = lab._ready_probe("sriov-network-operator")
    assert what == "GET http://127.0.0.1:22292/readyz"
