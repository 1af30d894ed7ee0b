"""The local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler (built from
their Go modules), the Service network (services.py), kwok for simulated nodes, the local chart repository, the real
nfd-master (labels nodes from the NodeFeature objects the simulator publishes), the real SR-IOV Network Operator
(sriov.py), the lab's kubelet (kubelet.py: the real Kueue controller and Volcano's scheduler, controller-manager and
admission webhook for their upstream charts' pods, kueue.py and volcano.py) and the operator simulator.

up() is idempotent (already running parts are reported and left alone); down() stops every process
it started, by PID, and removes the state directory."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import charts, kwok, nfd, pki, registry, services, sriov
from .config import BUILD_SCRIPT, HACK, LabConfig
from .errors import LabError
from .procs import Proc, port_free, wait_until

ORDER = (
    "etcd",
    "service-proxy",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "chart-repo",
    "chart-registry",
    "nfd-master",
    "sriov-network-operator",
    "kubelet",
    "simulator",
)
# `make demo` builds and starts only what the demo's site.yml uses (GPUOPS_LAB_PROFILE=demo): not the OCI chart
# registry or the SR-IOV Network Operator, which inventories/local enables none of (component -> its binaries), nor
# Volcano's binaries (the kubelet runs them for Volcano's chart, which the demo does not install). A later `lab up`
# without the profile (make test) builds and starts the rest.
DEMO_SKIPS: dict[str, tuple[str, ...]] = {
    "chart-registry": ("registry",),
    "sriov-network-operator": ("sriov-network-operator",),
}
DEMO_SKIPPED_BINARIES = ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager", "gen-admission-secret.sh")


def demo_profile() -> bool:
    return os.environ.get("GPUOPS_LAB_PROFILE", "") == "demo"


BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "helm",
    "nfd-master",
    "sriov-network-operator",
    "registry",
    "kueue",
    "vc-scheduler",
    "vc-controller-manager",
    "vc-webhook-manager",
    "gen-admission-secret.sh",
)


@dataclass
class Lab:
    cfg: LabConfig
    say: Callable[[str], None] = print

    def proc(self, name: str) -> Proc:
        return Proc(name, self.cfg.run, self.cfg.logs)

    # ---- build -------------------------------------------------------------------------------------
    def components(self) -> tuple[str, ...]:
        """The components this lab runs, in start order: all of them, or the demo's (:data:`DEMO_SKIPS`)."""
        return tuple(n for n in ORDER if not (demo_profile() and n in DEMO_SKIPS))

    def binaries_ready(self) -> list[str]:
        missing = []
        skipped = (
            {b for bs in DEMO_SKIPS.values() for b in bs} | set(DEMO_SKIPPED_BINARIES) if demo_profile() else set()
        )
        for b in BINARIES:
            if b in skipped:
                continue
            d = self.cfg.binary(b).parent
            if not (d / "SHA256SUMS").is_file() or not self.cfg.binary(b).is_file():
                missing.append(b)
        from . import monitoring  # Prometheus, kube-state-metrics: not started by `up`, built by `build` all the same

        return missing + monitoring.missing_binaries(self.cfg) + charts.missing_upstream(self.cfg, not demo_profile())

    def build(self) -> None:
        if not self.binaries_ready():
            return
        if shutil.which("go") is None:
            raise LabError(
                "building the control plane needs Go >= 1.25 on PATH ('go' not found): install Go "
                "(Debian: apt-get install golang-go, or https://go.dev/dl) or put prebuilt binaries in "
                f"{self.cfg.cache}/bin"
            )
        self.say(f"building control plane binaries and charts into {self.cfg.cache} (first time: 15-40 min)")
        env = {**os.environ, "GPUOPS_CACHE": str(self.cfg.cache)}
        target = "demo" if demo_profile() else "all"
        rc = subprocess.call(["bash", str(BUILD_SCRIPT), target], env=env)  # noqa: S603,S607
        if rc != 0:
            raise LabError(f"{BUILD_SCRIPT} failed with code {rc}; see its output above")

    # ---- readiness probes --------------------------------------------------------------------------
    def _ssl(self, client: bool = True) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.cfg.pki / "ca.crt"))
        if client:
            ctx.load_cert_chain(str(self.cfg.pki / "admin.crt"), str(self.cfg.pki / "admin.key"))
        return ctx

    def _get(self, url: str, ctx: ssl.SSLContext | None = None, timeout: float = 2.0) -> bytes:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:  # noqa: S310 - loopback only
            return r.read()

    def apiserver_ready(self) -> bool:
        try:
            return self._get(f"{self.cfg.apiserver_url}/readyz", self._ssl()) == b"ok"
        except Exception:  # noqa: BLE001
            return False

    def _insecure(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # self-signed serving certs of KCM/scheduler, loopback only
        return ctx

    # ---- components --------------------------------------------------------------------------------
    def _argv(self, name: str) -> list[str]:
        c, p, d = self.cfg, self.cfg.ports, self.cfg.pki
        kc = str(c.kubeconfig)
        if name == "etcd":
            cu, pu = f"http://127.0.0.1:{p['etcd']}", f"http://127.0.0.1:{p['etcd-peer']}"
            return [
                str(c.binary("etcd")),
                "--name",
                "gpuops-lab",
                "--data-dir",
                str(c.state / "etcd"),
                "--listen-client-urls",
                cu,
                "--advertise-client-urls",
                cu,
                "--listen-peer-urls",
                pu,
                "--initial-advertise-peer-urls",
                pu,
                "--initial-cluster",
                f"gpuops-lab={pu}",
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
            ]
        if name == "kube-apiserver":
            return [
                str(c.binary(name)),
                f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p['kube-apiserver']}",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--tls-cert-file={d / 'apiserver.crt'}",
                f"--tls-private-key-file={d / 'apiserver.key'}",
                f"--client-ca-file={d / 'ca.crt'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={d / 'sa.pub'}",
                f"--service-account-signing-key-file={d / 'sa.key'}",
                f"--service-cluster-ip-range={services.SERVICE_CIDR}",
                f"--egress-selector-config-file={services.egress_path(c)}",
                # the aggregation layer (Kueue's visibility API): its client certificate and the request headers
                f"--proxy-client-cert-file={d / 'front-proxy-client.crt'}",
                f"--proxy-client-key-file={d / 'front-proxy-client.key'}",
                f"--requestheader-client-ca-file={d / 'front-proxy-ca.crt'}",
                f"--requestheader-allowed-names={pki.FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                "--profiling=false",
                "--v=0",
            ]
        # controller-manager and scheduler: the admin kubeconfig for everything, serving on loopback only
        client_and_serving = [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={p.get(name, 0)}",
            "--leader-elect=false",
            "--profiling=false",
            "--v=0",
        ]
        if name == "kube-controller-manager":
            return [
                str(c.binary(name)),
                *client_and_serving,
                f"--service-account-private-key-file={d / 'sa.key'}",
                f"--root-ca-file={d / 'ca.crt'}",
                f"--cluster-signing-cert-file={d / 'ca.crt'}",
                f"--cluster-signing-key-file={d / 'ca.key'}",
                "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller",
                "--use-service-account-credentials=false",
            ]
        if name == "kube-scheduler":
            return [str(c.binary(name)), *client_and_serving]
        if name == "kwok":
            return [
                str(c.binary("kwok")),
                f"--kubeconfig={kc}",
                f"--config={c.state / 'kwok.yaml'}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--manage-nodes-with-label-selector=",
                "--manage-single-node=",
                "--cidr=10.244.0.0/16",
                "--node-ip=127.0.0.1",
                "--node-lease-duration-seconds=40",
            ]
        if name == "chart-repo":
            return [
                sys.executable,
                "-m",
                "http.server",
                str(p["chart-repo"]),
                "--bind",
                "127.0.0.1",
                "--directory",
                str(c.chart_repo_dir),
            ]
        if name == "chart-registry":
            return [str(c.binary("registry")), "serve", str(c.chart_registry_config)]
        if name == "nfd-master":
            return [
                str(c.binary("nfd-master")),
                f"-kubeconfig={kc}",
                f"-config={c.state / 'nfd-master.conf'}",
                f"-port={p['nfd-master']}",
            ]
        if name == "sriov-network-operator":
            return [
                str(c.binary(name)),
                f"--kubeconfig={kc}",
                f"--metrics-bind-address=127.0.0.1:{p['sriov-metrics']}",
                f"--health-probe-bind-address=127.0.0.1:{p['sriov-probe']}",
            ]
        if name == "kubelet":
            return [sys.executable, "-m", "gpuops_lab.kubelet"]
        if name == "simulator":
            return [sys.executable, "-m", "gpuops_lab.simulator", "--kubeconfig", kc]
        if name == "service-proxy":
            return [sys.executable, "-m", "gpuops_lab.services"]
        raise KeyError(name)

    def _env(self, name: str) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(HACK)}
        if name == "nfd-master":
            env.update(KUBERNETES_NAMESPACE=nfd.NAMESPACE, NODE_NAME=nfd.CONTROL_PLANE_NODE)
        if name == "chart-registry":
            env.update(registry.env())
        if name == "sriov-network-operator":
            env.update(sriov.env(self.cfg.versions[sriov.VERSION_KEY]), KUBECONFIG=str(self.cfg.kubeconfig))
        return env

    def _before_start(self, name: str) -> None:
        if name == "kube-apiserver":
            services.write_egress_config(self.cfg)
        if name == "chart-registry":
            registry.prepare(self.cfg)
        if name == "nfd-master":
            from kubernetes import config

            (self.cfg.state / "nfd-master.conf").write_text(json.dumps(nfd.MASTER_CONFIG) + "\n")
            nfd.ensure_master_prereqs(config.new_client_from_config(str(self.cfg.kubeconfig)), self.cfg)
        if name == "sriov-network-operator":
            from kubernetes import config

            sriov.ensure_prereqs(config.new_client_from_config(str(self.cfg.kubeconfig)), cfg=self.cfg)

    def _api(self):  # noqa: ANN202 - a kubernetes ApiClient for the lab's admin kubeconfig
        from kubernetes import config

        return config.new_client_from_config(str(self.cfg.kubeconfig))

    def _ready_probe(self, name: str) -> tuple[Callable[[], bool], str, float]:
        p = self.cfg.ports
        if name == "etcd":
            return (lambda: b"true" in self._get(f"http://127.0.0.1:{p['etcd']}/health")), "/health", 30
        if name == "kube-apiserver":
            return self.apiserver_ready, "/readyz", 60
        if name in ("kube-controller-manager", "kube-scheduler"):
            url = f"https://127.0.0.1:{p[name]}/healthz"
            return (lambda: self._get(url, self._insecure()) == b"ok"), "/healthz", 30
        if name == "chart-repo":
            return (lambda: bool(self._get(f"{self.cfg.chart_repo_url}/index.yaml"))), "GET /index.yaml", 15
        if name == "chart-registry":
            url = f"https://127.0.0.1:{p['chart-registry']}/v2/"
            return (lambda: self._get(url, self._ssl(client=False)) == b"{}"), f"GET {url}", 15
        if name == "simulator":
            return (lambda: "simulator ready" in self.proc(name).tail(200)), "'simulator ready' in its log", 30
        if name == "service-proxy":
            return (lambda: "service-proxy ready" in self.proc(name).tail(20)), "'service-proxy ready' in its log", 15
        if name == "nfd-master":
            url = f"http://127.0.0.1:{p[name]}/healthz"
            return (lambda: self._get(url) is not None), f"GET {url}", 30
        if name == "sriov-network-operator":
            url = f"http://127.0.0.1:{p['sriov-probe']}/readyz"
            return (lambda: self._get(url) == b"ok"), f"GET {url}", 60
        if name == "kubelet":
            return (lambda: "kubelet ready" in self.proc(name).tail(50)), "'kubelet ready' in its log", 30
        if name == "kwok":
            return self._kwok_running, "'Watch nodes' in its log and still running 1 s later", 20
        raise KeyError(name)

    def _kwok_running(self) -> bool:
        proc = self.proc("kwok")
        started = proc.pidfile.stat().st_mtime
        return "Watch nodes" in proc.tail(50) and time.time() - started > 1.0 and proc.alive()

    def _ports_of(self, name: str) -> list[tuple[str, int]]:
        p = self.cfg.ports
        return {
            "etcd": [("etcd", p["etcd"]), ("etcd peer", p["etcd-peer"])],
            "kube-apiserver": [("kube-apiserver", p["kube-apiserver"])],
            "kube-controller-manager": [("kube-controller-manager", p["kube-controller-manager"])],
            "kube-scheduler": [("kube-scheduler", p["kube-scheduler"])],
            "chart-repo": [("chart repository", p["chart-repo"])],
            "chart-registry": [("OCI chart registry", p["chart-registry"])],
            "nfd-master": [("nfd-master metrics", p["nfd-master"])],
            "sriov-network-operator": [
                ("sriov-network-operator metrics", p["sriov-metrics"]),
                ("sriov-network-operator health probe", p["sriov-probe"]),
            ],
            "kubelet": [  # the controllers it runs (kubelet.WORKLOADS)
                ("kueue webhook", p["kueue-webhook"]),
                ("kueue metrics", p["kueue-metrics"]),
                ("kueue health probe", p["kueue-probe"]),
                ("kueue visibility API", p["kueue-visibility"]),
                ("vc-scheduler metrics", p["volcano-metrics"]),
                ("vc-scheduler healthz", p["volcano-healthz"]),
                ("vc-controller-manager metrics", p["volcano-cm-metrics"]),
                ("vc-controller-manager healthz", p["volcano-cm-healthz"]),
                ("vc-webhook-manager webhook", p["volcano-admission"]),
                ("vc-webhook-manager healthz", p["volcano-admission-healthz"]),
            ],
        }.get(name, [])

    def status(self) -> dict[str, int | None]:
        return {n: self.proc(n).pid() for n in self.components()}

    def up(self) -> bool:
        """Start what is not running. Returns False when everything was already up (no-op)."""
        st = self.status()
        if all(st.values()) and self.apiserver_ready():
            self.say(f"lab already up (kubeconfig {self.cfg.kubeconfig})")
            return False
        self.build()
        for name in self.components():
            if st[name] is None:
                for what, port in self._ports_of(name):
                    if not port_free(port):
                        raise LabError(
                            f"port {port} ({what}) on 127.0.0.1 is already in use by another program; stop it "
                            f"(see: ss -ltnp 'sport = :{port}') or choose another port with the "
                            "GPUOPS_LAB_*_PORT variables (hack/gpuops_lab/config.py)"
                        )
        t0 = time.monotonic()
        self.cfg.state.mkdir(parents=True, exist_ok=True)
        pki.ensure_pki(self.cfg.pki)
        pki.write_kubeconfig(self.cfg.kubeconfig, self.cfg.pki, self.cfg.apiserver_url)
        kwok.write_config(self.cfg)
        charts.build_repo(self.cfg)
        pushing: threading.Thread | None = None
        pushed: dict[str, object] = {}
        for name in self.components():
            proc = self.proc(name)
            if proc.alive():
                self.say(f"  {name}: already running (pid {proc.pid()})")
                continue
            self._before_start(name)
            cwd = self.cfg.bindir(name) if name == "sriov-network-operator" else None  # it reads ./bindata
            proc.start(self._argv(name), env=self._env(name), cwd=cwd)
            ready, what, timeout = self._ready_probe(name)
            wait_until(proc, ready, timeout, what)
            self.say(f"  {name}: ready (pid {proc.pid()}, log {proc.log})")
            if name == "chart-registry":  # the push runs while the next components start; joined below
                pushing = threading.Thread(target=self._push_charts, args=(pushed,), daemon=True)
                pushing.start()
        if pushing is not None:
            pushing.join()
            if isinstance(pushed.get("error"), Exception):
                raise pushed["error"]
        self.wait_namespace_sa("default")
        self.say(f"lab up in {time.monotonic() - t0:.1f}s; kubeconfig {self.cfg.kubeconfig}")
        return True

    def _push_charts(self, out: dict[str, object]) -> None:
        """Push the fixture charts to the OCI registry (registry.py); the error, if any, goes to out["error"]."""
        t1 = time.monotonic()
        try:
            refs = registry.push_charts(self.cfg)
        except Exception as exc:  # noqa: BLE001 - re-raised by up() in the main thread
            out["error"] = exc
            return
        took = time.monotonic() - t1
        self.say(f"  chart-registry: {len(refs)} charts pushed to {self.cfg.chart_registry_url} in {took:.1f}s")

    def wait_namespace_sa(self, ns: str, timeout: float = 30) -> None:
        """Pods need the namespace's default ServiceAccount (made by KCM); wait for it."""
        url = f"{self.cfg.apiserver_url}/api/v1/namespaces/{ns}/serviceaccounts/default"
        deadline = time.monotonic() + timeout
        while True:
            try:
                json.loads(self._get(url, self._ssl()))
                return
            except Exception:  # noqa: BLE001
                if time.monotonic() > deadline:
                    self.proc("kube-controller-manager").check()
                    raise LabError(
                        f"ServiceAccount {ns}/default did not appear within {timeout}s; "
                        f"see {self.proc('kube-controller-manager').log}"
                    ) from None
                time.sleep(0.3)

    def check(self) -> None:
        """Raise ComponentDied naming the first component that is not running, and its log."""
        for name in self.components():
            self.proc(name).check()

    def cpu(self) -> dict[str, float]:
        """CPU seconds each running lab process has used so far (make test prints it at `down`: what a lab costs)."""
        from . import monitoring

        names = [*ORDER, "kueue", *monitoring.COMPONENTS, "eda"]
        used = {n: self.proc(n).cpu_seconds() for n in dict.fromkeys(names)}
        return {n: s for n, s in used.items() if s is not None}

    def down(self) -> list[str]:
        from . import eda, monitoring  # started only when asked (monitoring.start, eda.up); stopped with the lab

        stopped = [eda.PROC] if eda.down(self.cfg) else []
        stopped += monitoring.stop(self.cfg)
        for name in reversed(ORDER):
            if self.proc(name).stop():
                stopped.append(name)
            if name == "kubelet" and self.proc("kueue").stop():  # the kubelet stops it; left by a kubelet that died
                stopped.append("kueue")
        services.socket_path(self.cfg).unlink(missing_ok=True)  # under /tmp when the state path is long
        if self.cfg.state.exists():
            shutil.rmtree(self.cfg.state)
        return stopped


def kubectl(cfg: LabConfig, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [str(cfg.binary("kubectl")), f"--kubeconfig={cfg.kubeconfig}", *args]
    return subprocess.run(argv, check=check, capture_output=True, text=True)  # noqa: S603


def helm_path(cfg: LabConfig) -> Path:
    return cfg.binary("helm")
