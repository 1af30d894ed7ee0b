"""The lab's kubelet (gpuops_lab.kubelet) without a cluster: the pod it runs, the volume files it writes, the Service
routes and the readiness probe it derives from the pod, the status it reports, and one sync pass against fakes."""

from __future__ import annotations

import json

import pytest
from gpuops_lab import kubelet, kueue, kwok, services, volcano
from gpuops_lab.config import LabConfig
from gpuops_lab.pods import Workload

POD = {
    "metadata": {"name": "p", "namespace": "kq", "uid": "0000-00ff", "labels": {"app": "x", "tier": "c"}},
    "spec": {
        "nodeName": "n",
        "containers": [
            {
                "name": "manager",
                "image": "registry.k8s.io/kueue/kueue:v0.19.2",
                "ports": [{"containerPort": 9443, "name": "webhook-server"}, {"containerPort": 8082}],
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}},
                "volumeMounts": [
                    {"name": "cert", "mountPath": "/tmp/certs", "readOnly": True},
                    {"name": "cfg", "mountPath": "/config.yaml", "subPath": "config.yaml"},
                    {"name": "scratch", "mountPath": "/visibility"},
                ],
            }
        ],
        "volumes": [
            {"name": "cert", "secret": {"secretName": "cert-secret"}},
            {"name": "cfg", "configMap": {"name": "cfg-map"}},
            {"name": "scratch", "emptyDir": {}},
        ],
    },
}


def _cfg(tmp_path):
    return LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path / "lab")})


def test_chosen_is_the_newest_scheduled_pod_not_being_deleted():
    def pod(name, created, node="n", deleting=False):
        meta = {"name": name, "creationTimestamp": created}
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:09Z"
        return {"metadata": meta, "spec": {"nodeName": node} if node else {}}

    pods = [
        pod("old", "2026-01-01T00:00:01Z"),
        pod("new", "2026-01-01T00:00:05Z"),
        pod("pending", "2026-01-01T00:00:07Z", node=None),
        pod("going", "2026-01-01T00:00:08Z", deleting=True),
    ]
    assert kubelet.Kubelet.chosen(pods)["metadata"]["name"] == "new"
    assert kubelet.Kubelet.chosen(pods[2:]) is None


def test_volume_files_and_their_writing(tmp_path):
    data = {("Secret", "kq", "cert-secret"): {"tls.crt": b"C", "tls.key": b"K"}, ("ConfigMap", "kq", "cfg-map"): None}
    files = kubelet.volume_files(POD, "manager", lambda kind, ns, name: data[(kind, ns, name)])
    assert files == {"/tmp/certs": {"tls.crt": b"C", "tls.key": b"K"}, "/config.yaml": None}  # emptyDir: none
    root = tmp_path / "pod"
    assert sorted(kubelet.write_volume_files(root, files)) == ["tmp/certs/tls.crt", "tmp/certs/tls.key"]
    assert kubelet.write_volume_files(root, files) == []  # unchanged: nothing written
    data[("ConfigMap", "kq", "cfg-map")] = {"config.yaml": b"a: 1\n", "other": b"x"}
    files = kubelet.volume_files(POD, "manager", lambda kind, ns, name: data[(kind, ns, name)])
    assert files["/config.yaml"] == {"": b"a: 1\n"}  # a subPath mount is the one key's file
    assert kubelet.write_volume_files(root, files) == ["config.yaml"]
    assert (root / "config.yaml").read_bytes() == b"a: 1\n"


def test_service_routes_by_selector_and_target_port():
    spec = POD["spec"]["containers"][0]
    ports = {9443: 20293, 8082: 20300}

    def svc(selector, *svc_ports):
        return {"metadata": {"name": "s"}, "spec": {"selector": selector, "ports": list(svc_ports)}}

    assert kubelet.service_routes(svc({"app": "x"}, {"port": 443, "targetPort": 9443}), POD, spec, ports) == [
        (443, 20293)
    ]
    named = svc({"app": "x"}, {"port": 443, "targetPort": "webhook-server"}, {"port": 80, "targetPort": 8082})
    assert kubelet.service_routes(named, POD, spec, ports) == [(443, 20293), (80, 20300)]
    assert kubelet.service_routes(svc({"app": "y"}, {"port": 443, "targetPort": 9443}), POD, spec, ports) == []
    assert kubelet.service_routes(svc({}, {"port": 443, "targetPort": 9443}), POD, spec, ports) == []  # no selector
    assert kubelet.service_routes(svc({"app": "x"}, {"port": 8443}), POD, spec, ports) == []  # a port not served


def test_probe_url_and_pod_status():
    spec = POD["spec"]["containers"][0]
    assert kubelet.probe_url(spec, {8081: 20295}) == "http://127.0.0.1:20295/readyz"
    assert kubelet.probe_url(spec, {}) is None
    status = kubelet.pod_status(POD, "manager", False, "2026-01-01T00:00:00Z", 2)
    conds = {c["type"]: c for c in status["conditions"]}
    assert status["phase"] == "Running" and conds["Ready"]["status"] == "False"
    assert conds["Ready"]["message"] == "containers with unready status: [manager]"
    (cs,) = status["containerStatuses"]
    assert (cs["ready"], cs["restartCount"], cs["image"]) == (False, 2, spec["image"])
    assert status["podIP"] == kubelet.pod_ip("0000-00ff") and status["podIP"].startswith("10.244.255.")
    ready = kubelet.pod_status({**POD, "status": status}, "manager", True, "2026-01-01T00:00:00Z", 2)
    assert {c["type"]: c["status"] for c in ready["conditions"]}["ContainersReady"] == "True"
    assert {c["type"]: c for c in ready["conditions"]}["Initialized"]["lastTransitionTime"] == conds["Initialized"][
        "lastTransitionTime"
    ]


def test_kwok_leaves_the_kubelets_pods_to_it(tmp_path):
    assert kubelet.kwok_exclusions() == {
        "app.kubernetes.io/name": ["kueue"],
        "app": ["volcano-scheduler", "volcano-controller", "volcano-admission"],
        "batch.kubernetes.io/job-name": ["volcano-admission-init"],
    }
    assert kubelet.workloads() == (kueue.WORKLOAD, *volcano.WORKLOADS)


class _Proc:
    def __init__(self):
        self.started = []
        self.running = False

    def alive(self):
        return self.running

    def start(self, argv, env=None):
        self.started.append((argv, env))
        self.running = True

    def pid(self):
        return 42 if self.running else None

    def stop(self):
        was, self.running = self.running, False
        return was


def test_one_sync_starts_routes_and_reports_then_stops_when_the_pod_goes(tmp_path, monkeypatch):
    """A pass against fakes: the workload's pod is chosen, its volumes written, the binary started once its volumes
    exist, the selecting Service routed, the pod reported not ready (no probe answers); the pod gone, it is stopped
    and its route removed."""
    cfg = _cfg(tmp_path)
    w = Workload(
        name="x",
        selector={"app": "x"},
        container="manager",
        ports=lambda cfg: {9443: 20293, 8081: 1},
        prepare=lambda cfg, pod, root: (["bin", str(root)], {"E": "1"}),
    )
    monkeypatch.setattr(kubelet, "workloads", lambda: (w,))
    pods = [dict(POD)]
    patched = []
    objects = {("Secret", "cert-secret"): {"tls.crt": b"C"}, ("ConfigMap", "cfg-map"): {"config.yaml": b"a"}}
    service = {
        "metadata": {"name": "hook"},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 443, "targetPort": 9443}]},
    }

    k = kubelet.Kubelet.__new__(kubelet.Kubelet)
    k.cfg, k.say, k.running, k._procs = cfg, lambda m: None, {}, {"x": _Proc()}
    monkeypatch.setattr(k, "_pods", lambda w: pods)
    monkeypatch.setattr(k, "_read", lambda kind, ns, name: objects.get((kind, name)))

    class Core:
        def list_namespaced_service(self, ns, **_):
            return type("L", (), {"items": [service]})()

        def patch_namespaced_pod_status(self, name, ns, body):
            patched.append((name, ns, body["status"]["conditions"][3]["status"]))
            pods[0]["status"] = body["status"]  # as the API server stores it

    class Api:
        @staticmethod
        def sanitize_for_serialization(obj):
            return obj

    k.core, k.api_client = Core(), Api()
    k.sync()
    proc = k._procs["x"]
    assert [argv for argv, _env in proc.started] == [["bin", str(kubelet.pod_root(cfg, "kq", "p"))]]
    assert (kubelet.pod_root(cfg, "kq", "p") / "config.yaml").read_bytes() == b"a"
    assert services.read_routes(cfg) == {"kq/hook:443": "127.0.0.1:20293"}
    assert patched == [("p", "kq", "False")]
    k.sync()  # nothing changed: no second start, no second status write
    assert len(proc.started) == 1 and len(patched) == 1
    pods.clear()
    k.sync()
    assert proc.running is False and services.read_routes(cfg) == {} and k.running == {}


def test_a_missing_volume_source_holds_the_start(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path)
    w = Workload("x", {"app": "x"}, "manager", lambda cfg: {}, lambda cfg, pod, root: (["bin"], {}))
    monkeypatch.setattr(kubelet, "workloads", lambda: (w,))
    k = kubelet.Kubelet.__new__(kubelet.Kubelet)
    k.cfg, k.say, k.running, k._procs = cfg, lambda m: None, {}, {"x": _Proc()}
    monkeypatch.setattr(k, "_pods", lambda w: [POD])
    monkeypatch.setattr(k, "_read", lambda kind, ns, name: None)
    k.sync()
    assert k._procs["x"].started == [] and k.running == {}


@pytest.mark.parametrize("stage", ["pod-ready", "pod-complete"])
def test_kwok_pod_ready_and_complete_stages_skip_the_kubelets_pods(tmp_path, stage):
    cfg = _cfg(tmp_path)
    try:
        docs = kwok.render(cfg)
    except Exception as exc:  # noqa: BLE001 - the stages come from the build cache
        pytest.fail(f"kwok stages not in the build cache ({exc}): run make build")
    (ready,) = [d for d in docs if d.get("kind") == "Stage" and d["metadata"]["name"] == stage]
    exprs = ready["spec"]["selector"]["matchExpressions"]
    assert {"key": '.metadata.labels["app.kubernetes.io/name"]', "operator": "NotIn", "values": ["kueue"]} in exprs
    assert {
        "key": '.metadata.labels["batch.kubernetes.io/job-name"]',
        "operator": "NotIn",
        "values": ["volcano-admission-init"],
    } in exprs


class _Core:
    """The kubelet's CoreV1Api: no Services; a status patch stored on the pod as the API server stores it."""

    def __init__(self, pods):
        self.pods, self.patched = pods, []

    def list_namespaced_service(self, ns, **_):
        return type("L", (), {"items": []})()

    def patch_namespaced_pod_status(self, name, ns, body):
        self.patched.append(body["status"])
        self.pods[0]["status"] = body["status"]


def _kubelet(cfg, monkeypatch, w, pods):
    monkeypatch.setattr(kubelet, "workloads", lambda: (w,))
    k = kubelet.Kubelet.__new__(kubelet.Kubelet)
    k.cfg, k.say, k.running, k._procs = cfg, lambda m: None, {}, {w.name: _Proc()}
    monkeypatch.setattr(k, "_pods", lambda w: pods)
    monkeypatch.setattr(k, "_read", lambda kind, ns, name: {})
    k.core, k.api_client = _Core(pods), type("A", (), {"sanitize_for_serialization": staticmethod(lambda o: o)})()
    return k


JOB_POD = {
    "metadata": {"name": "init-x1", "namespace": "vs", "uid": "0000-0001", "labels": {"job": "init"}},
    "spec": {"nodeName": "n", "containers": [{"name": "main", "image": "i", "command": ["./s.sh"]}]},
}


@pytest.mark.parametrize(("code", "phase", "reason"), [(0, "Succeeded", "Completed"), (3, "Failed", "Error")])
def test_a_job_pod_runs_once_to_its_end_and_its_exit_code_is_its_phase(tmp_path, monkeypatch, code, phase, reason):
    cfg = _cfg(tmp_path)
    w = Workload("init", {"job": "init"}, None, lambda cfg: {}, lambda cfg, pod, root: (["s.sh"], {}), kind="job")
    pods = [json.loads(json.dumps(JOB_POD))]
    k = _kubelet(cfg, monkeypatch, w, pods)
    k.sync()
    proc = k._procs["init"]
    assert [argv for argv, _env in proc.started] == [["s.sh"]] and k.core.patched == []  # Pending while it runs
    k.sync()  # still running: nothing more
    assert len(proc.started) == 1 and k.core.patched == []
    proc.running = False
    proc.exit_code = lambda: code
    k.sync()
    (status,) = k.core.patched
    (cs,) = status["containerStatuses"]
    assert status["phase"] == phase and cs["state"]["terminated"]["exitCode"] == code
    assert cs["state"]["terminated"]["reason"] == reason and cs["ready"] is False and cs["name"] == "main"
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "False"
    k.sync()  # the ended pod is not run again (a new pod of the Job would be)
    assert len(proc.started) == 1 and len(k.core.patched) == 1 and k.running == {}


def test_a_container_without_a_readiness_probe_is_ready_while_it_runs(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path)
    pod = json.loads(json.dumps({**JOB_POD, "metadata": {**JOB_POD["metadata"], "labels": {"app": "s"}}}))
    w = Workload("s", {"app": "s"}, None, lambda cfg: {}, lambda cfg, pod, root: (["srv"], {}))
    pods = [pod]
    k = _kubelet(cfg, monkeypatch, w, pods)
    k.sync()
    assert k.core.patched[-1]["phase"] == "Running" and k.core.patched[-1]["containerStatuses"][0]["ready"] is True
    k._procs["s"].running = False
    k._procs["s"].exit_code = lambda: 1
    monkeypatch.setattr(k._procs["s"], "start", lambda argv, env=None: None)  # the restart does not come up
    k.sync()
    assert k.core.patched[-1]["containerStatuses"][0]["ready"] is False
