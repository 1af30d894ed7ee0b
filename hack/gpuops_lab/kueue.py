"""Kueue in the lab: the real controller (sigs.k8s.io/kueue v0.19.2, cmd/kueue, built by hack/cluster/build.sh),
installed by upstream's own chart (charts/kueue at v0.19.2, served by the lab's chart repository) and run by the
lab's kubelet (kubelet.py) for the chart's controller-manager pod, out of cluster against the lab's API server. It
admits Jobs for real (quota, cohorts, borrowing, preemption, flavors); kwok runs the pods it lets start. Nothing of
Kueue is simulated.

What the chart installs and the lab serves (checked against v0.19.2, ../shared/reference/real-controllers.md):
- its CRDs (templates, with a conversion webhook on `<release>-webhook-service`), its admission webhook
  configurations (every integration's, on the same Service) and the visibility APIServices (on
  `<release>-visibility-server`, `insecureSkipTLSVerify`): the kubelet routes both Services to the controller's
  loopback ports through the lab's Service network (services.py);
- its Configuration (the ConfigMap `<release>-manager-config`, what the kueue role writes): the kubelet runs the
  controller with it as the pod would, with only what running out of cluster needs changed (:func:`lab_config`):
  loopback addresses and the lab's ports in place of the container ports, the pod's namespace (in a pod, read from
  its service-account mount), the webhook certificate directory where the kubelet writes the pod's Secret volume;
- its internal certificate management (the chart's default): Kueue writes its CA and serving certificate into the
  Secret `<release>-webhook-server-cert` and injects the CA into the webhook configurations and the CRDs' conversion
  webhooks itself; it waits until the certificate appears in its certificate directory, which the kubelet's Secret
  volume sync makes happen;
- the two certificate directories upstream hardcodes (metrics `/etc/kueue/metrics/certs`, visibility `/visibility`)
  follow KUEUE_METRICS_CERT_DIR / KUEUE_VISIBILITY_CERT_DIR (build patches): under the pod's directory.

The controller runs while the release's pod does: `helm uninstall` (the role's kueue_state=absent) stops it. A lab
that needs Kueue without the role installs the chart with :func:`install` (hack/tests/integration/test_kueue_lab.py)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from . import charts
from .config import LabConfig
from .errors import LabError
from .pods import Workload, container, host_path

VERSION_KEY = "KUEUE_VERSION"
CHART = "kueue"
NAMESPACE = "kueue-system"  # the lab's own release (install); the role's kueue_namespace default too
RELEASE = "kueue"
CONFIG_MOUNT = "/controller_manager_config.yaml"
DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"  # noqa: S108 - Kueue's default (the chart mounts it)
METRICS_CERT_DIR = "/etc/kueue/metrics/certs"
VISIBILITY_CERT_DIR = "/visibility"
# the container ports of the chart's manager container (templates/manager/manager.yaml) -> the lab's port names
CONTAINER_PORTS = {9443: "kueue-webhook", 8081: "kueue-probe", 8443: "kueue-metrics", 8082: "kueue-visibility"}


def container_ports(cfg: LabConfig) -> dict[int, int]:
    return {port: cfg.ports[name] for port, name in CONTAINER_PORTS.items()}


def lab_config(cfg: LabConfig, chart_config: dict[str, Any], namespace: str, root: Path) -> dict[str, Any]:
    """The chart's Configuration as this controller runs it out of cluster: the same document with the servers on
    loopback at the lab's ports, the pod's namespace (also the leader-election Lease's, unless the document names
    one: in a pod both come from its service-account mount), and the webhook certificate directory under the pod's
    root."""
    conf = json.loads(json.dumps(chart_config))
    p = cfg.ports
    conf["namespace"] = namespace
    election = conf.get("leaderElection") or {}
    if election.get("leaderElect") and not election.get("resourceNamespace"):  # in a pod: its service-account mount's
        conf["leaderElection"] = {**election, "resourceNamespace": namespace}
    conf.setdefault("health", {})["healthProbeBindAddress"] = f"127.0.0.1:{p['kueue-probe']}"
    conf.setdefault("metrics", {})["bindAddress"] = f"127.0.0.1:{p['kueue-metrics']}"
    webhook = conf.setdefault("webhook", {})
    cert_dir = webhook.get("certDir") or DEFAULT_CERT_DIR
    webhook.update(host="127.0.0.1", port=p["kueue-webhook"], certDir=str(host_path(root, cert_dir)))
    conf["visibilityServer"] = {"bindAddress": "127.0.0.1", "bindPort": p["kueue-visibility"]}
    conf.pop("pprofBindAddress", None)
    return conf


def prepare(cfg: LabConfig, pod: dict[str, Any], root: Path) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of the pod's manager container, out of cluster (kubelet.Workload.prepare)."""
    args = list(container(pod, WORKLOAD.container).get("args") or [])
    config_arg = next((a for a in args if a.startswith("--config=")), None)
    if config_arg is None:
        raise LabError(f"pod {pod['metadata']['name']}: its manager container has no --config argument")
    chart_config = yaml.safe_load(host_path(root, config_arg.split("=", 1)[1]).read_text()) or {}
    conf = lab_config(cfg, chart_config, pod["metadata"]["namespace"], root)
    path = root / "lab-config.yaml"
    path.write_text(yaml.safe_dump(conf, sort_keys=False))
    for d in (conf["webhook"]["certDir"], host_path(root, METRICS_CERT_DIR), host_path(root, VISIBILITY_CERT_DIR)):
        Path(d).mkdir(parents=True, exist_ok=True)
    argv = [str(cfg.binary("kueue")), f"--config={path}", f"--kubeconfig={cfg.kubeconfig}"]
    argv += [a for a in args if a != config_arg]
    env = {
        "KUBECONFIG": str(cfg.kubeconfig),
        "KUEUE_METRICS_CERT_DIR": str(host_path(root, METRICS_CERT_DIR)),
        "KUEUE_VISIBILITY_CERT_DIR": str(host_path(root, VISIBILITY_CERT_DIR)),
    }
    return argv, env


WORKLOAD = Workload(
    name="kueue",
    selector={"app.kubernetes.io/name": "kueue", "control-plane": "controller-manager"},
    container="manager",
    ports=container_ports,
    prepare=prepare,
)


def install_argv(cfg: LabConfig, namespace: str = NAMESPACE, values_file: Path | None = None) -> list[str]:
    """`helm upgrade --install` of the upstream chart from the lab's repository, waited on (its pod is Ready once
    Kueue's readiness probe answers)."""
    return charts.install_argv(cfg, CHART, RELEASE, namespace, values_file)


def install(cfg: LabConfig, namespace: str = NAMESPACE, values: dict[str, Any] | None = None) -> None:
    """Install (or upgrade) the lab's own Kueue release: for tests that need Kueue without the kueue role."""
    values_file = None
    if values:
        values_file = cfg.state / f"kueue-values-{namespace}.json"
        values_file.write_text(json.dumps(values))
    r = subprocess.run(install_argv(cfg, namespace, values_file), capture_output=True, text=True, check=False)  # noqa: S603
    if r.returncode != 0:
        raise LabError(f"helm install of the Kueue chart failed: {r.stderr.strip() or r.stdout.strip()}")


GROUP = "kueue.x-k8s.io"


def delete_objects(api_client: Any, timeout: float = 60.0) -> int:
    """Delete every object of Kueue's API group and wait until they are gone, while Kueue runs: it holds finalizers on
    its queues, flavors and workloads and removes them only when it runs (stopped first, the CRDs' deletion would wait
    on them forever - as in a cluster, where the kueue role deletes its queues before the release). Returns how many
    were deleted."""
    from kubernetes import client, dynamic

    dyn = dynamic.DynamicClient(api_client)
    crds = client.ApiextensionsV1Api(api_client).list_custom_resource_definition().items
    kinds = [
        (c.spec.names.kind, next(v.name for v in c.spec.versions if v.storage)) for c in crds if c.spec.group == GROUP
    ]
    deleted = 0
    for kind, version in kinds:
        res = dyn.resources.get(api_version=f"{GROUP}/{version}", kind=kind)
        for obj in res.get().items:
            res.delete(name=obj.metadata.name, namespace=obj.metadata.namespace)
            deleted += 1
    deadline = time.monotonic() + timeout
    for kind, version in kinds:
        res = dyn.resources.get(api_version=f"{GROUP}/{version}", kind=kind)
        while left := res.get().items:
            if time.monotonic() > deadline:
                names = ", ".join(f"{o.metadata.namespace or ''}/{o.metadata.name}" for o in left)
                raise LabError(f"Kueue did not release its {kind} objects within {timeout:.0f}s: {names}")
            time.sleep(0.5)
    return deleted


def uninstall(cfg: LabConfig, namespace: str = NAMESPACE, timeout: float = 30.0) -> None:
    """Uninstall the lab's Kueue release: Kueue's objects first, while it runs (:func:`delete_objects`), then its
    aggregated ClusterRoles (as helm_release_apply does: uninstalled with the roles they aggregate,
    kube-controller-manager's clusterrole-aggregation controller creates them again without Helm's labels, and the
    next install refuses them), then the release."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(str(cfg.kubeconfig))
    delete_objects(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    ours = [
        r.metadata.name
        for r in rbac.list_cluster_role().items
        if r.aggregation_rule
        and (r.metadata.annotations or {}).get("meta.helm.sh/release-name") == RELEASE
        and (r.metadata.annotations or {}).get("meta.helm.sh/release-namespace") == namespace
    ]
    for name in ours:
        rbac.delete_cluster_role(name)
    deadline = time.monotonic() + timeout
    while ours and {r.metadata.name for r in rbac.list_cluster_role().items} & set(ours):
        if time.monotonic() > deadline:
            raise LabError(f"ClusterRoles {', '.join(ours)} still there {timeout:.0f}s after their deletion")
        time.sleep(0.2)
    argv = [str(cfg.binary("helm")), f"--kubeconfig={cfg.kubeconfig}", "uninstall", RELEASE, "-n", namespace, "--wait"]
    r = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if r.returncode != 0 and "not found" not in r.stderr:
        raise LabError(f"helm uninstall of the Kueue release failed: {r.stderr.strip()}")
