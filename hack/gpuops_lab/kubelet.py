"""The lab's kubelet for the controllers it runs for real from their upstream charts.

A chart installs a controller as a Deployment; on a real node the kubelet runs its container with the pod's volumes
mounted and reports it Ready when the readiness probe answers. The lab has no container runtime (images cannot be
pulled), so for the controllers it builds from their Go modules (:func:`workloads`: Kueue; Volcano's scheduler,
controller-manager and admission webhook, and the certificate script of its admission-init hook Job) this process
plays that kubelet, out of cluster:

- it watches the pods of each workload (by the chart's selector labels) and runs the real binary for the newest pod
  that is scheduled and not being deleted - one process per workload, as one replica, named after it
  (`.state/lab/logs/<workload>.log`); a pod replaced by a rollout (a new config checksum) or deleted (uninstall) stops
  it, and a new pod starts it again;
- the pod's ConfigMap and Secret volumes are written as files under `.state/lab/pods/<namespace>/<pod>/<mountPath>`
  and kept in step (a Secret a controller's certificate manager writes appears there, as the kubelet's Secret volume
  sync would make it appear); the workload's `prepare` turns the pod's args and files into the out-of-cluster argv,
  with loopback ports in place of the container ports;
- the Services whose selector matches the pod are routed through the lab's Service network (services.py): each
  Service port's target port (number or name) to the loopback port the workload gives that container port;
- the pod's status is written as the kubelet writes it (Running, its containers started), Ready only while the
  binary's readiness probe (the container's own readinessProbe path, on its loopback port) answers 200 - a container
  without a readiness probe is Ready while it runs, as a kubelet reports it: kwok's pod-ready and pod-complete stages
  leave these pods alone (kwok.py), so a Deployment is available exactly when the controller is;
- a Job's pod (a workload of kind "job": a Helm hook's) is run once to its end and reported Succeeded or Failed by its
  exit code, as a kubelet reports a container with restartPolicy Never; the Job controller takes it from there.

`python -m gpuops_lab.kubelet` (component `kubelet`, started after the control plane). What it does is logged, one
line an event, in `.state/lab/logs/kubelet.log`."""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import signal
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import kueue, volcano
from .config import LabConfig
from .pods import Workload, container, host_path
from .procs import Proc

POLL_SECONDS = 0.5


def workloads() -> tuple[Workload, ...]:
    return (kueue.WORKLOAD, *volcano.WORKLOADS)


def kwok_exclusions() -> dict[str, list[str]]:
    """label key -> the values of the pods this kubelet plays (each workload's first selector label; kwok's pod-ready
    and pod-complete stages skip them)."""
    out: dict[str, list[str]] = {}
    for w in workloads():
        key, value = next(iter(w.selector.items()))
        out.setdefault(key, []).append(value)
    return out


def pod_root(cfg: LabConfig, namespace: str, name: str) -> Path:
    return cfg.state / "pods" / namespace / name


def volume_files(
    pod: dict[str, Any], name: str, read: Callable[[str, str, str], dict[str, bytes] | None]
) -> dict[str, dict[str, bytes] | None]:
    """The files of each ConfigMap/Secret volume the container mounts: mountPath -> {relative path: content} (with a
    subPath: the mountPath is the file itself, key ''), None while the object does not exist. `read(kind, namespace,
    name)` gives an object's data (bytes, Secret data decoded) or None."""
    ns = pod["metadata"]["namespace"]
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    out: dict[str, dict[str, bytes] | None] = {}
    for mount in container(pod, name).get("volumeMounts") or []:
        vol = volumes.get(mount["name"]) or {}
        if "configMap" in vol:
            kind, source, items = "ConfigMap", vol["configMap"]["name"], vol["configMap"].get("items")
        elif "secret" in vol:
            kind, source, items = "Secret", vol["secret"]["secretName"], vol["secret"].get("items")
        else:
            continue  # emptyDir and the rest: a directory (make_dirs)
        data = read(kind, ns, source)
        if data is None:
            out[mount["mountPath"]] = None
            continue
        files = {i["path"]: data[i["key"]] for i in items if i["key"] in data} if items else dict(data)
        sub = mount.get("subPath")
        out[mount["mountPath"]] = {"": files[sub]} if sub and sub in files else ({} if sub else files)
    return out


def make_dirs(root: Path, spec: dict[str, Any], files: dict[str, dict[str, bytes] | None]) -> None:
    """The directories of the container's other mounts (emptyDir and the like)."""
    for mount in spec.get("volumeMounts") or []:
        if mount["mountPath"] not in files:
            host_path(root, mount["mountPath"]).mkdir(parents=True, exist_ok=True)


def write_volume_files(root: Path, files: dict[str, dict[str, bytes] | None]) -> list[str]:
    """Write what changed; returns the paths written (relative to the pod root)."""
    written = []
    for mount_path, content in files.items():
        if content is None:
            continue
        base = host_path(root, mount_path)
        for rel, data in content.items():
            path = base / rel if rel else base
            if path.is_file() and path.read_bytes() == data:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(data)
            tmp.chmod(0o600)
            tmp.replace(path)
            written.append(str(path.relative_to(root)))
    return written


def service_routes(
    service: dict[str, Any], pod: dict[str, Any], spec: dict[str, Any], ports: dict[int, int]
) -> list[tuple[int, int]]:
    """(Service port, loopback port) for each port of a Service that selects the pod and targets a container port the
    workload serves on loopback."""
    selector = (service.get("spec") or {}).get("selector") or {}
    labels = pod["metadata"].get("labels") or {}
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        return []
    named = {p.get("name"): p["containerPort"] for p in spec.get("ports") or [] if p.get("name")}
    out = []
    for p in service["spec"].get("ports") or []:
        target = p.get("targetPort", p["port"])
        target = named.get(target) if isinstance(target, str) else int(target)
        if target in ports:
            out.append((int(p["port"]), ports[target]))
    return out


def probe_url(spec: dict[str, Any], ports: dict[int, int]) -> str | None:
    probe = (spec.get("readinessProbe") or {}).get("httpGet")
    if not probe:
        return None
    port = probe["port"]
    if isinstance(port, str):
        port = {p.get("name"): p["containerPort"] for p in spec.get("ports") or []}.get(port)
    if port not in ports:
        return None
    return f"http://127.0.0.1:{ports[port]}{probe.get('path', '/')}"


def pod_ip(uid: str) -> str:
    """The pod's IP: one of 10.244.255.0/24 (inside kwok's pod CIDR, away from the addresses kwok gives from its
    start), from its UID. Not loopback: the endpoint controllers refuse loopback addresses, and an aggregated API's
    availability check wants a ready endpoint. Nothing connects to it (the Service network routes by Service)."""
    return f"10.244.255.{int(uid.replace('-', '')[-4:], 16) % 254 + 1}"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_status(
    pod: dict[str, Any], name: str | None, ready: bool, started_at: str, restarts: int, exit_code: int | None = None
) -> dict[str, Any]:
    """The status a kubelet writes for a running pod whose one played container is (not) ready; with `exit_code`, for
    a pod whose container (restartPolicy Never) ended: Succeeded on 0, else Failed."""
    now = _now()
    old = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}

    def cond(kind: str, ok: bool) -> dict[str, Any]:
        status = "True" if ok else "False"
        prev = old.get(kind) or {}
        since = prev.get("lastTransitionTime") if prev.get("status") == status else now
        c: dict[str, Any] = {"type": kind, "status": status, "lastTransitionTime": since or now, "lastProbeTime": None}
        if not ok:
            c["reason"] = "ContainersNotReady" if exit_code is None else "PodCompleted"
            c["message"] = f"containers with unready status: [{cname}]"
        return c

    spec = container(pod, name)
    cname = spec["name"]
    state: dict[str, Any] = {"running": {"startedAt": started_at}}
    phase = "Running"
    if exit_code is not None:
        phase = "Succeeded" if exit_code == 0 else "Failed"
        reason = "Completed" if exit_code == 0 else "Error"
        state = {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": started_at, "finishedAt": _now()}}
    return {
        "phase": phase,
        "hostIP": "127.0.0.1",
        "podIP": pod_ip(pod["metadata"]["uid"]),
        "podIPs": [{"ip": pod_ip(pod["metadata"]["uid"])}],
        "startTime": (pod.get("status") or {}).get("startTime") or started_at,
        "conditions": [
            cond("PodReadyToStartContainers", True),
            cond("Initialized", True),
            cond("ContainersReady", ready and exit_code is None),
            cond("Ready", ready and exit_code is None),
            cond("PodScheduled", True),
        ],
        "containerStatuses": [
            {
                "name": cname,
                "image": spec.get("image", ""),
                "imageID": "",
                "containerID": f"gpuops-lab://{pod['metadata']['uid']}",
                "ready": ready and exit_code is None,
                "started": exit_code is None,
                "restartCount": restarts,
                "state": state,
            }
        ],
    }


@dataclass
class _Running:
    pod_uid: str
    namespace: str
    name: str
    started_at: str
    restarts: int = 0
    ready: bool | None = None
    routes: set[tuple[str, str, int]] = field(default_factory=set)


class Kubelet:
    def __init__(self, cfg: LabConfig, api_client: Any = None, say: Callable[[str], None] | None = None) -> None:
        from kubernetes import client, config

        self.cfg = cfg
        self.api_client = api_client or config.new_client_from_config(str(cfg.kubeconfig))
        self.core = client.CoreV1Api(self.api_client)
        self.say = say or (lambda m: print(m, flush=True))
        self.running: dict[str, _Running] = {}
        self._procs: dict[str, Proc] = {}

    def proc(self, w: Workload) -> Proc:
        """One Proc per workload for this kubelet's life: it holds the child's handle, so an exit is reaped."""
        return self._procs.setdefault(w.name, Proc(w.name, self.cfg.run, self.cfg.logs))

    # ---- reads --------------------------------------------------------------------------------------------------
    def _read(self, kind: str, namespace: str, name: str) -> dict[str, bytes] | None:
        from kubernetes import client

        try:
            if kind == "ConfigMap":
                obj = self.core.read_namespaced_config_map(name, namespace)
                data = {k: v.encode() for k, v in (obj.data or {}).items()}
                data.update({k: base64.b64decode(v) for k, v in (obj.binary_data or {}).items()})
                return data
            obj = self.core.read_namespaced_secret(name, namespace)
            return {k: base64.b64decode(v) for k, v in (obj.data or {}).items()}
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _pods(self, w: Workload) -> list[dict[str, Any]]:
        pods = self.core.list_pod_for_all_namespaces(label_selector=w.label_selector(), _request_timeout=10)
        return [self.api_client.sanitize_for_serialization(p) for p in pods.items]

    @staticmethod
    def chosen(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The pod to run: the newest one scheduled to a node, not being deleted and not ended."""
        live = [
            p
            for p in pods
            if p["spec"].get("nodeName")
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        live.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
        return live[-1] if live else None

    # ---- one pass -----------------------------------------------------------------------------------------------
    def sync(self) -> None:
        for w in workloads():
            try:
                self.sync_workload(w)
            except Exception as exc:  # noqa: BLE001 - one workload's error is logged, the loop goes on
                self.say(f"{w.name}: sync failed: {type(exc).__name__}: {exc}")

    def sync_workload(self, w: Workload) -> None:
        pod = self.chosen(self._pods(w))
        run = self.running.get(w.name)
        if run is not None and (pod is None or pod["metadata"]["uid"] != run.pod_uid):
            self.stop(w, "its pod is gone" if pod is None else f"pod {pod['metadata']['name']} replaced it")
            run = None
        if pod is None:
            return
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        root = pod_root(self.cfg, ns, name)
        files = volume_files(pod, w.container, self._read)
        for path in write_volume_files(root, files):
            self.say(f"{w.name}: pod {ns}/{name}: wrote {path}")
        proc = self.proc(w)
        if w.kind == "job" and run is not None:
            if not proc.alive():  # it ended: the pod's phase from its exit code, once
                self.finish(w, pod, run, proc.exit_code())
            return
        if run is None or not proc.alive():
            missing = [m for m, content in files.items() if content is None]
            if missing:  # the kubelet does not start a container whose volume source is missing
                return
            make_dirs(root, container(pod, w.container), files)
            argv, env = w.prepare(self.cfg, pod, root)
            restarts = 0 if run is None else run.restarts + 1
            proc.start(argv, env=env)
            run = _Running(pod["metadata"]["uid"], ns, name, _now(), restarts)
            self.running[w.name] = run
            self.say(f"{w.name}: started for pod {ns}/{name} (pid {proc.pid()}, restarts {restarts})")
        if w.kind == "job":
            return
        self._route(w, pod, run)
        self._report(w, pod, run)

    def finish(self, w: Workload, pod: dict[str, Any], run: _Running, code: int | None) -> None:
        """A job workload's pod ended: Succeeded (exit 0) or Failed, as a kubelet reports it (an exit this kubelet did
        not see counts as a failure)."""
        code = 1 if code is None else code
        status = pod_status(pod, w.container, False, run.started_at, run.restarts, exit_code=code)
        self.core.patch_namespaced_pod_status(run.name, run.namespace, {"status": status})
        self.running.pop(w.name, None)
        self.say(f"{w.name}: pod {run.namespace}/{run.name} {status['phase']} (exit code {code})")

    def _route(self, w: Workload, pod: dict[str, Any], run: _Running) -> None:
        from . import services

        ports = w.ports(self.cfg)
        spec = container(pod, w.container)
        want: dict[tuple[str, str, int], int] = {}
        for svc in self.core.list_namespaced_service(run.namespace, _request_timeout=10).items:
            svc_d = self.api_client.sanitize_for_serialization(svc)
            for port, local in service_routes(svc_d, pod, spec, ports):
                want[(run.namespace, svc_d["metadata"]["name"], port)] = local
        current = services.read_routes(self.cfg)
        for (ns, name, port), local in want.items():
            if current.get(f"{ns}/{name}:{port}") != f"127.0.0.1:{local}":
                services.add_route(self.cfg, ns, name, port, local)
                self.say(f"{w.name}: routed Service {ns}/{name} port {port} to 127.0.0.1:{local}")
        for key in run.routes - set(want):
            services.remove_route(self.cfg, *key)
        run.routes = set(want)

    def _report(self, w: Workload, pod: dict[str, Any], run: _Running) -> None:
        url = probe_url(container(pod, w.container), w.ports(self.cfg))
        ready = self.proc(w).alive()  # no readiness probe: Ready while the container runs
        if url is not None:
            ready = False
            try:
                with urllib.request.urlopen(url, timeout=1) as r:  # noqa: S310 - loopback only
                    ready = r.status == 200
            except Exception:  # noqa: BLE001
                ready = False
        if ready == run.ready and (pod.get("status") or {}).get("phase") == "Running":
            return
        status = pod_status(pod, w.container, ready, run.started_at, run.restarts)
        self.core.patch_namespaced_pod_status(run.name, run.namespace, {"status": status})
        run.ready = ready
        self.say(f"{w.name}: pod {run.namespace}/{run.name} {'Ready' if ready else 'not ready'}")

    def stop(self, w: Workload, why: str) -> None:
        from . import services

        run = self.running.pop(w.name, None)
        if self.proc(w).stop():
            self.say(f"{w.name}: stopped ({why})")
        for key in run.routes if run else ():
            services.remove_route(self.cfg, *key)

    def stop_all(self) -> None:
        for w in workloads():
            self.stop(w, "the kubelet stops")

    def serve(self) -> None:
        self.say("kubelet ready: " + ", ".join(f"{w.name} ({w.label_selector()})" for w in workloads()))
        try:
            while True:
                self.sync()
                time.sleep(POLL_SECONDS)
        finally:
            self.stop_all()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gpuops_lab.kubelet", description=__doc__.split("\n\n", maxsplit=1)[0])
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stops the controllers it runs on the way out
    Kubelet(LabConfig.load()).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
