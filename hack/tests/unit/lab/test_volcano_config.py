"""The lab's Volcano wiring without a cluster: the ports of its three programs, and the argv and environment the kubelet
gives each for a pod as upstream's chart renders it (the chart's arguments kept, every listener on loopback, the files
they name under the pod's directory, the hook Job's script with kubectl and its own work directory); no component of
`lab up` runs Volcano any more, and no simulator handler stands in for it."""

from __future__ import annotations

import pytest
from gpuops_lab import kubelet, volcano
from gpuops_lab.cluster import BINARIES, ORDER
from gpuops_lab.config import LabConfig
from gpuops_lab.errors import LabError
from gpuops_lab.simulator.handlers import BUILTIN_HANDLERS


def _cfg(tmp_path, **env):
    return LabConfig.load(
        {
            "GPUOPS_LAB_STATE": str(tmp_path / "lab"),
            "GPUOPS_CACHE": str(tmp_path / "cache"),
            "GPUOPS_LAB_NFD_MASTER_PORT": "30290",
            **env,
        }
    )


def test_ports_follow_nfd_master_after_kueue_and_have_variables(tmp_path):
    cfg = _cfg(tmp_path)
    assert (cfg.ports["volcano-metrics"], cfg.ports["volcano-healthz"]) == (30296, 30297)
    assert cfg.ports["kueue-probe"] == 30295  # the next free offsets after Kueue's +3/+4/+5
    default = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path)}).ports
    assert (default["volcano-metrics"], default["volcano-healthz"]) == (20296, 20297)
    own = _cfg(tmp_path, GPUOPS_LAB_VOLCANO_HEALTHZ_PORT="31000")
    assert own.ports["volcano-healthz"] == 31000 and own.ports["volcano-metrics"] == 30296
    with pytest.raises(LabError, match="GPUOPS_LAB_VOLCANO_METRICS_PORT"):
        _cfg(tmp_path, GPUOPS_LAB_VOLCANO_METRICS_PORT="x")
    ports = list(LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path)}).ports.values())
    assert len(ports) == len(set(ports))


def test_controller_manager_ports_follow_nfd_master_and_have_variables(tmp_path):
    cfg = _cfg(tmp_path)
    assert (cfg.ports["volcano-cm-metrics"], cfg.ports["volcano-cm-healthz"]) == (30298, 30299)
    default = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path)}).ports
    assert (default["volcano-cm-metrics"], default["volcano-cm-healthz"]) == (20298, 20299)
    own = _cfg(tmp_path, GPUOPS_LAB_VOLCANO_CM_HEALTHZ_PORT="31001", GPUOPS_LAB_VOLCANO_CM_METRICS_PORT="31002")
    assert (own.ports["volcano-cm-metrics"], own.ports["volcano-cm-healthz"]) == (31002, 31001)
    with pytest.raises(LabError, match="GPUOPS_LAB_VOLCANO_CM_METRICS_PORT"):
        _cfg(tmp_path, GPUOPS_LAB_VOLCANO_CM_METRICS_PORT="x")


def test_pinned_version_and_binary(tmp_path):
    cfg = _cfg(tmp_path)
    assert cfg.versions["VOLCANO_VERSION"] == "1.15.1" and cfg.versions["VOLCANO_APIS_VERSION"] == "1.14.0"
    assert cfg.binary("vc-scheduler") == tmp_path / "cache" / "bin" / "volcano-v1.15.1" / "vc-scheduler"
    assert cfg.binary("vc-controller-manager") == cfg.bindir("volcano") / "vc-controller-manager"
    assert cfg.binary("vc-webhook-manager") == cfg.bindir("volcano") / "vc-webhook-manager"
    assert cfg.binary("gen-admission-secret.sh") == cfg.bindir("volcano") / "gen-admission-secret.sh"
    for name in ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager", "gen-admission-secret.sh"):
        assert name in BINARIES


def test_admission_ports_follow_nfd_master_and_have_variables(tmp_path):
    cfg = _cfg(tmp_path)
    assert (cfg.ports["volcano-admission"], cfg.ports["volcano-admission-healthz"]) == (30301, 30302)
    own = _cfg(tmp_path, GPUOPS_LAB_VOLCANO_ADMISSION_PORT="31003")
    assert own.ports["volcano-admission"] == 31003 and own.ports["volcano-admission-healthz"] == 30302


# the pods as upstream's chart 1.15.1 renders them (templates/scheduler.yaml, controllers.yaml, admission.yaml,
# admission-init.yaml; tests/unit/charts/test_checked_charts.py pins these against the chart itself)
def _pod(labels, container, volumes=(), name="p-1"):
    return {
        "metadata": {"name": name, "namespace": "volcano-system", "uid": "u-1", "labels": labels},
        "spec": {"nodeName": "n", "containers": [container], "volumes": list(volumes)},
    }


SCHEDULER_POD = _pod(
    {"app": "volcano-scheduler"},
    {
        "name": "volcano-scheduler",
        "args": [
            "--logtostderr",
            "--scheduler-conf=/volcano.scheduler/volcano-scheduler.conf",
            "--scheduler-name=volcano",
            "--enable-healthz=true",
            "--enable-metrics=true",
            "--leader-elect=false",
            "--kube-api-qps=2000",
            "-v=3",
            "2>&1",
        ],
        "env": [{"name": "DEBUG_SOCKET_DIR", "value": "/tmp/klog-socks"}],
        "volumeMounts": [
            {"name": "scheduler-config", "mountPath": "/volcano.scheduler"},
            {"name": "klog-sock", "mountPath": "/tmp/klog-socks"},
        ],
    },
    [
        {"name": "scheduler-config", "configMap": {"name": "volcano-scheduler-configmap"}},
        {"name": "klog-sock", "emptyDir": {}},
    ],
)
CONTROLLER_POD = _pod(
    {"app": "volcano-controller"},
    {
        "name": "volcano-controllers",
        "args": ["--logtostderr", "--enable-healthz=true", "--enable-metrics=true", "--leader-elect=false", "-v=4"],
        "env": [
            {"name": "KUBE_POD_NAMESPACE", "value": "volcano-system"},
            {"name": "HELM_RELEASE_NAME", "value": "volcano"},
            {"name": "GOMEMLIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
        ],
    },
)
CERTS = "/admission.local.config/certificates"
ADMISSION_POD = _pod(
    {"app": "volcano-admission"},
    {
        "name": "admission",
        "args": [
            "--enabled-admission=/jobs/mutate,/queues/validate",
            f"--tls-cert-file={CERTS}/tls.crt",
            f"--tls-private-key-file={CERTS}/tls.key",
            f"--ca-cert-file={CERTS}/ca.crt",
            "--admission-conf=/admission.local.config/configmap/volcano-admission.conf",
            "--webhook-namespace=volcano-system",
            "--webhook-service-name=volcano-admission-service",
            "--enable-healthz=true",
            "--port=8443",
        ],
        "volumeMounts": [
            {"name": "admission-certs", "mountPath": CERTS, "readOnly": True},
            {"name": "admission-config", "mountPath": "/admission.local.config/configmap"},
        ],
    },
    [
        {"name": "admission-certs", "secret": {"secretName": "volcano-admission-secret"}},
        {"name": "admission-config", "configMap": {"name": "volcano-admission-configmap"}},
    ],
)
INIT_POD = _pod(
    {"batch.kubernetes.io/job-name": "volcano-admission-init", "job-name": "volcano-admission-init"},
    {
        "name": "main",
        "command": [
            "./gen-admission-secret.sh",
            "--service",
            "volcano-admission-service",
            "--namespace",
            "volcano-system",
            "--secret",
            "volcano-admission-secret",
        ],
    },
)


def _workload(name):
    (w,) = [w for w in volcano.WORKLOADS if w.name == name]
    return w


def test_each_chart_pod_is_one_workload_of_the_kubelet():
    for pod, name in (
        (SCHEDULER_POD, "volcano-scheduler"),
        (CONTROLLER_POD, "volcano-controller"),
        (ADMISSION_POD, "volcano-admission"),
        (INIT_POD, "volcano-admission-init"),
    ):
        labels = pod["metadata"]["labels"]
        assert [w.name for w in volcano.WORKLOADS if all(labels.get(k) == v for k, v in w.selector.items())] == [name]
    assert [w.kind for w in volcano.WORKLOADS] == ["server", "server", "server", "job"]
    assert all(w in kubelet.workloads() for w in volcano.WORKLOADS)


def test_scheduler_runs_the_charts_arguments_with_its_files_and_listeners_local(tmp_path):
    cfg = _cfg(tmp_path)
    root = tmp_path / "pod"
    argv, env = volcano.scheduler_prepare(cfg, SCHEDULER_POD, root)
    assert argv[0] == str(cfg.binary("vc-scheduler"))
    assert argv[1:10] == [
        "--logtostderr",
        f"--scheduler-conf={root}/volcano.scheduler/volcano-scheduler.conf",
        "--scheduler-name=volcano",
        "--enable-healthz=true",
        "--enable-metrics=true",
        "--leader-elect=false",
        "--kube-api-qps=2000",
        "-v=3",
        "2>&1",
    ]
    assert argv[10:] == [
        f"--kubeconfig={cfg.kubeconfig}",
        "--listen-address=127.0.0.1:30296",
        "--healthz-address=127.0.0.1:30297",
        f"--cache-dump-dir={root}/tmp/cache-dump",
    ]
    assert env == {"DEBUG_SOCKET_DIR": f"{root}/tmp/klog-socks"}
    assert (root / "tmp" / "cache-dump").is_dir()
    assert _workload("volcano-scheduler").ports(cfg) == {8080: 30296}


def test_controller_manager_runs_the_charts_arguments_and_env(tmp_path):
    cfg = _cfg(tmp_path)
    argv, env = volcano.controller_prepare(cfg, CONTROLLER_POD, tmp_path / "pod")
    assert argv == [
        str(cfg.binary("vc-controller-manager")),
        "--logtostderr",
        "--enable-healthz=true",
        "--enable-metrics=true",
        "--leader-elect=false",
        "-v=4",
        f"--kubeconfig={cfg.kubeconfig}",
        "--listen-address=127.0.0.1:30298",
        "--healthz-address=127.0.0.1:30299",
    ]
    assert env == {"KUBE_POD_NAMESPACE": "volcano-system", "HELM_RELEASE_NAME": "volcano"}  # valueFrom is not served
    assert _workload("volcano-controller").ports(cfg) == {8081: 30298}


def test_webhook_manager_reads_its_certificates_from_the_pods_secret_volume(tmp_path):
    cfg = _cfg(tmp_path)
    root = tmp_path / "pod"
    argv, _env = volcano.admission_prepare(cfg, ADMISSION_POD, root)
    assert argv[0] == str(cfg.binary("vc-webhook-manager"))
    assert f"--tls-cert-file={root}{CERTS}/tls.crt" in argv
    assert f"--ca-cert-file={root}{CERTS}/ca.crt" in argv
    assert f"--admission-conf={root}/admission.local.config/configmap/volcano-admission.conf" in argv
    assert "--webhook-service-name=volcano-admission-service" in argv and "--port=8443" not in argv
    assert argv[-4:] == [
        f"--kubeconfig={cfg.kubeconfig}",
        "--listen-address=127.0.0.1",
        "--port=30301",
        "--healthz-address=127.0.0.1:30302",
    ]
    assert _workload("volcano-admission").ports(cfg) == {8443: 30301}
    files = kubelet.volume_files(
        ADMISSION_POD,
        None,
        lambda kind, ns, name: {"tls.crt": b"c", "tls.key": b"k", "ca.crt": b"a"} if kind == "Secret" else None,
    )
    assert files[CERTS] == {"tls.crt": b"c", "tls.key": b"k", "ca.crt": b"a"}
    assert files["/admission.local.config/configmap"] is None  # not started until the ConfigMap is there


def test_the_hook_jobs_pod_runs_the_admission_images_script(tmp_path):
    cfg = _cfg(tmp_path)
    root = tmp_path / "pod"
    argv, env = volcano.admission_init_prepare(cfg, INIT_POD, root)
    assert argv == [
        "/bin/bash",
        str(cfg.binary("gen-admission-secret.sh")),
        "--service",
        "volcano-admission-service",
        "--namespace",
        "volcano-system",
        "--secret",
        "volcano-admission-secret",
    ]
    assert env["CERTDIR"] == str(root / "tmp") and (root / "tmp").is_dir()
    assert env["KUBECONFIG"] == str(cfg.kubeconfig)
    assert env["PATH"].split(":", maxsplit=1)[0] == str(cfg.bindir("k8s"))  # its kubectl
    other = {**INIT_POD, "spec": {**INIT_POD["spec"], "containers": [{"name": "main", "command": ["sh", "-c", "x"]}]}}
    with pytest.raises(LabError, match="not ./gen-admission-secret.sh"):
        volcano.admission_init_prepare(cfg, other, root)


def test_the_lab_no_longer_starts_volcano_itself():
    assert not {"vc-scheduler", "vc-controller-manager"} & set(ORDER)


def test_install_argv_is_the_served_chart_at_the_pinned_version(tmp_path):
    cfg = _cfg(tmp_path)
    argv = volcano.install_argv(cfg, "ns", tmp_path / "v.json")
    assert argv[2:6] == ["upgrade", "--install", "volcano", "volcano"] and "--namespace=ns" in argv
    assert f"--version={cfg.versions['VOLCANO_VERSION']}" in argv and argv[-1] == f"--values={tmp_path / 'v.json'}"


def test_no_simulator_handler_plays_the_controller_manager():
    assert not [h for h in BUILTIN_HANDLERS if "volcano" in h.__module__ or "Volcano" in h.__name__]
