"""gpuops_lab.kueue: the chart's Configuration as the lab's kubelet runs Kueue out of cluster (only what running out of
cluster needs changed), the argv and environment of the pod's manager container, and the lab's own release."""

from __future__ import annotations

import yaml
from gpuops_lab import kueue
from gpuops_lab.config import LabConfig

CHART_CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081"},
    "metrics": {"bindAddress": ":8443"},
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
    "clientConnection": {"qps": 300, "burst": 500},
    "integrations": {"frameworks": ["batch/job"]},
    "internalCertManagement": {"enable": True, "webhookServiceName": "kueue-webhook-service"},
    "pprofBindAddress": ":8083",
}


def _cfg(tmp_path):
    return LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path / "lab"), "GPUOPS_LAB_NFD_MASTER_PORT": "30290"})


def test_ports_follow_nfd_master(tmp_path):
    cfg = _cfg(tmp_path)
    assert kueue.container_ports(cfg) == {9443: 30293, 8081: 30295, 8443: 30294, 8082: 30300}


def test_lab_config_changes_only_what_running_out_of_cluster_needs(tmp_path):
    cfg = _cfg(tmp_path)
    root = tmp_path / "pod"
    conf = kueue.lab_config(cfg, CHART_CONFIG, "team-ns", root)
    assert conf["namespace"] == "team-ns"
    assert conf["health"] == {"healthProbeBindAddress": "127.0.0.1:30295"}
    assert conf["metrics"] == {"bindAddress": "127.0.0.1:30294"}
    assert conf["webhook"] == {
        "port": 30293,
        "host": "127.0.0.1",
        "certDir": str(root / "tmp/k8s-webhook-server/serving-certs"),
    }
    assert conf["visibilityServer"] == {"bindAddress": "127.0.0.1", "bindPort": 30300}
    assert conf["leaderElection"] == {**CHART_CONFIG["leaderElection"], "resourceNamespace": "team-ns"}
    assert "pprofBindAddress" not in conf
    # the rest lands as the chart (the role) wrote it
    for key in ("clientConnection", "integrations", "internalCertManagement", "apiVersion", "kind"):
        assert conf[key] == CHART_CONFIG[key]
    assert CHART_CONFIG["webhook"] == {"port": 9443}  # not changed in place
    named = kueue.lab_config(
        cfg, {**CHART_CONFIG, "leaderElection": {"leaderElect": True, "resourceNamespace": "x"}}, "n", root
    )
    assert named["leaderElection"]["resourceNamespace"] == "x"
    off = kueue.lab_config(cfg, {**CHART_CONFIG, "leaderElection": {"leaderElect": False}}, "n", root)
    assert off["leaderElection"] == {"leaderElect": False}


def test_prepare_runs_the_pods_args_with_the_lab_config(tmp_path):
    cfg = _cfg(tmp_path)
    root = tmp_path / "pod"
    (root).mkdir()
    (root / "controller_manager_config.yaml").write_text(yaml.safe_dump(CHART_CONFIG))
    pod = {
        "metadata": {"name": "kueue-controller-manager-x", "namespace": "kq"},
        "spec": {
            "containers": [
                {
                    "name": "manager",
                    "args": ["--config=/controller_manager_config.yaml", "--zap-log-level=2", "--feature-gates=A=true"],
                }
            ]
        },
    }
    argv, env = kueue.prepare(cfg, pod, root)
    assert argv == [
        str(cfg.binary("kueue")),
        f"--config={root / 'lab-config.yaml'}",
        f"--kubeconfig={cfg.kubeconfig}",
        "--zap-log-level=2",
        "--feature-gates=A=true",
    ]
    assert yaml.safe_load((root / "lab-config.yaml").read_text())["namespace"] == "kq"
    assert env["KUEUE_METRICS_CERT_DIR"] == str(root / "etc/kueue/metrics/certs")
    assert env["KUEUE_VISIBILITY_CERT_DIR"] == str(root / "visibility")
    for d in ("tmp/k8s-webhook-server/serving-certs", "etc/kueue/metrics/certs", "visibility"):
        assert (root / d).is_dir()


def test_install_argv_is_the_upstream_chart_from_the_labs_repository(tmp_path):
    cfg = _cfg(tmp_path)
    argv = kueue.install_argv(cfg, "kq", tmp_path / "v.json")
    assert argv[2:6] == ["upgrade", "--install", "kueue", "kueue"]
    assert f"--repo={cfg.chart_repo_url}" in argv and f"--version={cfg.versions['KUEUE_VERSION']}" in argv
    assert "--namespace=kq" in argv and "--wait" in argv and argv[-1] == f"--values={tmp_path / 'v.json'}"
