"""Volcano in the lab: the real scheduler, controller-manager and admission webhook (volcano.sh/volcano v1.15.1:
cmd/scheduler = vc-scheduler, cmd/controller-manager = vc-controller-manager, cmd/webhook-manager = vc-webhook-manager,
built by hack/cluster/build.sh against volcano.sh/apis v1.14.0 plus one constant), installed by upstream's own chart
(installer/helm/chart/volcano at v1.15.1, served by the lab's chart repository) and run by the lab's kubelet
(kubelet.py) for the chart's pods, out of cluster against the lab's API server. Nothing of Volcano is simulated: it
schedules pods whose `schedulerName` is `volcano` (gang scheduling of PodGroups, queues, enqueue gating), opens Queues,
gives bare pods their PodGroups, runs vcjobs, and its webhooks default and validate Queues, PodGroups and vcjobs;
kwok runs the pods it binds.

What the chart installs and the lab serves (checked against v1.15.1, templates/*.yaml):
- its CRDs (templates: every kind of crd/bases, the jobflow subchart's too), so the controllers' informers find every
  kind they watch; `helm uninstall` deletes them;
- the scheduler Deployment (`app: volcano-scheduler`): its configuration is the chart's ConfigMap (`<release>-scheduler-
  configmap`, what the volcano role writes), mounted at /volcano.scheduler and kept in step by the kubelet (the
  scheduler watches the file's directory and reloads it); its klog socket directory (DEBUG_SOCKET_DIR, an emptyDir) and
  cache-dump directory under the pod's directory; metrics (container port 8080, the `<release>-scheduler-service`'s
  target) and healthz on loopback;
- the controller-manager Deployment (`app: volcano-controller`): the chart's arguments as they are (its controllers,
  `*,-sharding-controller` by default, all of them running: their CRDs are the chart's), metrics (8081, the
  `<release>-controllers-service`'s target) and healthz on loopback;
- the admission Deployment (`app: volcano-admission`, vc-webhook-manager): its serving certificate from the Secret
  `volcano-admission-secret` (a Secret volume, /admission.local.config/certificates) and its configuration from
  `<release>-admission-configmap`; it injects its CA into the chart's webhook configurations itself, then serves on the
  `--port` the `<release>-admission-service` targets (8443), which the Service network routes to its loopback port;
- the `<release>-admission-init` pre-install/pre-upgrade hook Job, whose pod runs the admission image's
  gen-admission-secret.sh (openssl and kubectl: a CA and a serving certificate for the Service's DNS names, into that
  Secret): the kubelet runs the same script (copied from the module by the build, its work directory under the pod's
  directory; run by bash, as the image's busybox sh runs its `[[`) and reports the pod Succeeded or Failed, so
  `helm install --wait` waits for the Job as in a cluster.

The chart declares no container ports and no readiness probes: each pod is Ready while its program runs, as a kubelet
reports it (the webhook answers a moment after its pod is Ready, as in a cluster). The kubelet selects the hook Job's
pod by its job-name label, `volcano-admission-init`: the lab serves a release named `volcano` (the role's default;
:data:`RELEASE`). Not run: vc-agent and the agent scheduler (off in the chart by default).

At start (pkg/scheduler/cache/cache.go newDefaultAndRootQueue) the scheduler creates the Queues `root` and `default`
when they are missing; the controller-manager's queue controller opens them. A lab that needs Volcano without the role
installs the chart with :func:`install` (tests/integration/test_volcano_scheduling.py)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from . import charts
from .config import LabConfig
from .errors import LabError
from .pods import Workload, container, host_arg, mount_paths, plain_env, set_flag

VERSION_KEY = "VOLCANO_VERSION"
CHART = "volcano"
RELEASE = "volcano"  # the lab's own release (install), and the role's volcano_release_name default
NAMESPACE = "volcano-system"  # the lab's own release; the role's volcano_namespace default too
SCHEDULER_NAME = "volcano"
SECRET_SCRIPT = "gen-admission-secret.sh"
# container port (the chart's Services' target ports) -> the lab's port name
SCHEDULER_PORTS = {8080: "volcano-metrics"}
CONTROLLER_PORTS = {8081: "volcano-cm-metrics"}
ADMISSION_PORTS = {8443: "volcano-admission"}  # basic.admission_port, the chart's default


def _ports(names: dict[int, str]) -> Any:
    return lambda cfg: {port: cfg.ports[name] for port, name in names.items()}


def _args(pod: dict[str, Any], root: Path) -> tuple[dict[str, Any], list[str], list[str]]:
    spec = container(pod, None)
    mounts = mount_paths(spec)
    return spec, mounts, [host_arg(a, mounts, root) for a in spec.get("args") or []]


def _with(args: list[str], flags: dict[str, str]) -> list[str]:
    for flag, value in flags.items():
        args = set_flag(args, flag, value)
    return args


def scheduler_prepare(cfg: LabConfig, pod: dict[str, Any], root: Path) -> tuple[list[str], dict[str, str]]:
    """vc-scheduler with the chart's arguments, its configuration and socket directory under the pod's directory, its
    servers on loopback."""
    spec, mounts, args = _args(pod, root)
    p = cfg.ports
    dump = root / "tmp" / "cache-dump"
    dump.mkdir(parents=True, exist_ok=True)
    args = _with(
        args,
        {
            "--kubeconfig": str(cfg.kubeconfig),
            "--listen-address": f"127.0.0.1:{p['volcano-metrics']}",
            "--healthz-address": f"127.0.0.1:{p['volcano-healthz']}",
            "--cache-dump-dir": str(dump),
        },
    )
    return [str(cfg.binary("vc-scheduler")), *args], plain_env(spec, mounts, root)


def controller_prepare(cfg: LabConfig, pod: dict[str, Any], root: Path) -> tuple[list[str], dict[str, str]]:
    """vc-controller-manager with the chart's arguments and env, its servers on loopback."""
    spec, mounts, args = _args(pod, root)
    p = cfg.ports
    args = _with(
        args,
        {
            "--kubeconfig": str(cfg.kubeconfig),
            "--listen-address": f"127.0.0.1:{p['volcano-cm-metrics']}",
            "--healthz-address": f"127.0.0.1:{p['volcano-cm-healthz']}",
        },
    )
    return [str(cfg.binary("vc-controller-manager")), *args], plain_env(spec, mounts, root)


def admission_prepare(cfg: LabConfig, pod: dict[str, Any], root: Path) -> tuple[list[str], dict[str, str]]:
    """vc-webhook-manager with the chart's arguments, its certificate and configuration files under the pod's
    directory, its webhook server and healthz on loopback (the Service's target port routed to it)."""
    spec, mounts, args = _args(pod, root)
    p = cfg.ports
    args = _with(
        args,
        {
            "--kubeconfig": str(cfg.kubeconfig),
            "--listen-address": "127.0.0.1",
            "--port": str(p["volcano-admission"]),
            "--healthz-address": f"127.0.0.1:{p['volcano-admission-healthz']}",
        },
    )
    return [str(cfg.binary("vc-webhook-manager")), *args], plain_env(spec, mounts, root)


def admission_init_prepare(cfg: LabConfig, pod: dict[str, Any], root: Path) -> tuple[list[str], dict[str, str]]:
    """The hook Job's command (./gen-admission-secret.sh --service ... --namespace ... --secret ...): the script the
    build copied, with kubectl and openssl on PATH, the lab's kubeconfig, its work directory under the pod's."""
    spec = container(pod, None)
    command = [*(spec.get("command") or []), *(spec.get("args") or [])]
    if not command or Path(command[0]).name != SECRET_SCRIPT:
        raise LabError(f"pod {pod['metadata']['name']}: its container runs {command[:1]}, not ./{SECRET_SCRIPT}")
    work = root / "tmp"
    work.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": f"{cfg.bindir('k8s')}:/usr/local/bin:/usr/bin:/bin",
        "KUBECONFIG": str(cfg.kubeconfig),
        "CERTDIR": str(work),
        "HOME": str(root),  # kubectl's cache directory (~/.kube/cache), not the kubelet's working directory
    }
    # run by bash: its `[[` and `function` are busybox ash's in the image (alpine's /bin/sh), which dash lacks
    return ["/bin/bash", str(cfg.binary(SECRET_SCRIPT)), *command[1:]], env


WORKLOADS = (
    Workload("volcano-scheduler", {"app": "volcano-scheduler"}, None, _ports(SCHEDULER_PORTS), scheduler_prepare),
    Workload("volcano-controller", {"app": "volcano-controller"}, None, _ports(CONTROLLER_PORTS), controller_prepare),
    Workload("volcano-admission", {"app": "volcano-admission"}, None, _ports(ADMISSION_PORTS), admission_prepare),
    Workload(
        "volcano-admission-init",
        {"batch.kubernetes.io/job-name": f"{RELEASE}-admission-init"},
        None,
        lambda cfg: {},
        admission_init_prepare,
        kind="job",
    ),
)
KWOK_TOLERATIONS = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]


def install_argv(cfg: LabConfig, namespace: str = NAMESPACE, values_file: Path | None = None) -> list[str]:
    """`helm upgrade --install` of the upstream chart from the lab's repository, waited on (the hook Job, then the
    Deployments)."""
    return charts.install_argv(cfg, CHART, RELEASE, namespace, values_file)


def default_queue_open(api_client: Any) -> bool:
    """Whether the `default` Queue (made by vc-scheduler at start) is Open: the controller-manager's queue controller
    has synced its caches and works."""
    from kubernetes import client

    try:
        queue = client.CustomObjectsApi(api_client).get_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues", "default"
        )
    except client.ApiException:
        return False
    return (queue.get("status") or {}).get("state") == "Open"


def webhook_serving(api_client: Any) -> bool:
    """Whether the admission webhook answers: a dry-run Queue with a guarantee and no deserved share is refused by it
    (its rule guarantee <= deserved; the CRD's schema allows it)."""
    from kubernetes import client

    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "gpuops-lab-webhook-probe"},
        "spec": {"guarantee": {"resource": {"cpu": "1"}}},
    }
    try:
        client.CustomObjectsApi(api_client).create_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues", queue, dry_run="All"
        )
    except client.ApiException as exc:
        return exc.status in (400, 403, 422) and "validatequeue.volcano.sh" in (exc.body or "")
    return False


def install(
    cfg: LabConfig, namespace: str = NAMESPACE, values: dict[str, Any] | None = None, timeout: float = 60
) -> None:
    """Install (or upgrade) the lab's own Volcano release, tolerating the kwok taint (with `values` merged over), and
    wait until the default Queue is open and the webhook answers: for tests that need Volcano without the role."""
    from kubernetes import config

    merged: dict[str, Any] = {"custom": {"default_tolerations": KWOK_TOLERATIONS}}
    for key, value in (values or {}).items():
        merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
    values_file = cfg.state / f"volcano-values-{namespace}.json"
    values_file.write_text(json.dumps(merged))
    r = subprocess.run(install_argv(cfg, namespace, values_file), capture_output=True, text=True, check=False)  # noqa: S603
    if r.returncode != 0:
        raise LabError(f"helm install of the Volcano chart failed: {r.stderr.strip() or r.stdout.strip()}")
    api_client = config.new_client_from_config(str(cfg.kubeconfig))
    deadline = time.monotonic() + timeout
    while not (default_queue_open(api_client) and webhook_serving(api_client)):
        if time.monotonic() > deadline:
            raise LabError(
                f"Volcano's default Queue is not open or its webhook does not answer {timeout:.0f}s after install"
            )
        time.sleep(0.5)


def uninstall(cfg: LabConfig, namespace: str = NAMESPACE) -> None:
    """Uninstall the lab's Volcano release (its CRDs, and so every Volcano object, go with it) and the certificate
    Secret its hook Job made (not the release's: Helm leaves it)."""
    argv = [str(cfg.binary("helm")), f"--kubeconfig={cfg.kubeconfig}", "uninstall", RELEASE, "-n", namespace, "--wait"]
    r = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if r.returncode != 0 and "not found" not in r.stderr:
        raise LabError(f"helm uninstall of the Volcano release failed: {r.stderr.strip()}")
    argv = [str(cfg.binary("kubectl")), f"--kubeconfig={cfg.kubeconfig}", "-n", namespace, "delete", "secret"]
    subprocess.run([*argv, "volcano-admission-secret", "--ignore-not-found"], capture_output=True, check=True)  # noqa: S603
