"""Kueue in the lab: the real controller (sigs.k8s.io/kueue v0.19.2, cmd/kueue, built by hack/cluster/build.sh)
runs out of cluster against the lab's API server and admits Jobs for real (quota, cohorts, borrowing, preemption,
flavors); kwok runs the pods it lets start. Nothing of Kueue is simulated.

What it needs (checked against v0.19.2, ../shared/reference/real-controllers.md):
- its CRDs (config/components/crd/bases, copied beside the binary at build time: read from the build cache, never
  committed) before it starts, and its namespace (the Configuration's `namespace`);
- a Configuration file (:func:`config`): leader election off; internal cert management off (on, it waits for a
  Secret-mounted certificate and hangs); the webhook server on 127.0.0.1 with a serving certificate signed by the lab
  CA; metrics and health probe on loopback ports; VisibilityOnDemand off (it needs a hardcoded certificate path);
  the batch/job integration only. The metrics certificate path is hardcoded upstream (/etc/kueue/metrics/certs): the
  build patches it to follow KUEUE_METRICS_CERT_DIR, so the lab writes nothing under /etc;
- its webhooks registered after it is ready (:func:`webhook_configurations`, from the module's
  config/components/webhook/manifests.yaml) on the Service the chart names, `kueue-webhook-service` port 443, as the
  chart renders them, with the lab CA as caBundle (Kueue's internal certificate management would inject its own).
  The lab creates that Service (:func:`ensure_service`) and routes it to the webhook's loopback port through its
  Service network (services.py); the serving certificate carries `kueue-webhook-service.kueue-system.svc`, the name
  the API server checks. Only the webhooks for Kueue's own kinds and batch/v1 Jobs are registered (the lab enables no
  other integration; the pod webhook stays unregistered). They have `failurePolicy: Fail`: while Kueue is stopped,
  Job creation would be refused, so :func:`deregister_webhooks` runs before the lab stops it (Lab.stop_kueue,
  Lab.down).

Kueue's CRDs carry no conversion webhook in config/components/crd/bases (kustomize adds it): v1beta2 is the storage
version and the only one the collection writes, so no conversion is ever needed in the lab."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from .config import LabConfig
from .errors import LabError
from .k8s import ensure_crd

VERSION_KEY = "KUEUE_VERSION"
NAMESPACE = "kueue-system"
# What the chart names them (its webhook templates prefix the release's fullname, `kueue`)
WEBHOOK_NAMES = {
    "MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration",
}
# The Service the chart's webhooks name (`<fullname>-webhook-service`, values.yaml webhookService.ports) and the name
# the API server checks in the serving certificate when it calls it
SERVICE = "kueue-webhook-service"
SERVICE_PORT = 443
SERVICE_TARGET_PORT = 9443
SERVICE_DNS = f"{SERVICE}.{NAMESPACE}.svc"
# The API groups whose webhooks the lab registers: Kueue's own kinds and batch/v1 Jobs
WEBHOOK_GROUPS = frozenset({"kueue.x-k8s.io", "batch"})
FRAMEWORKS = ("batch/job",)


def crd_files(cfg: LabConfig) -> list[Path]:
    files = sorted((cfg.bindir("kueue") / "crd").glob("*.yaml"))
    if not files:
        raise LabError(f"no Kueue CRDs in {cfg.bindir('kueue')}/crd: rebuild it (hack/cluster/build.sh kueue)")
    return files


def cert_dir(cfg: LabConfig) -> Path:
    return cfg.state / "kueue-certs"


def config_path(cfg: LabConfig) -> Path:
    return cfg.state / "kueue.yaml"


def config(cfg: LabConfig) -> dict[str, Any]:
    p = cfg.ports
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{p['kueue-probe']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{p['kueue-metrics']}"},
        "webhook": {"host": "127.0.0.1", "port": p["kueue-webhook"], "certDir": str(cert_dir(cfg))},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "featureGates": {"VisibilityOnDemand": False},
    }


def write_files(cfg: LabConfig) -> None:
    """The Configuration and the serving certificate (tls.crt/tls.key in the webhook's certDir, also the metrics
    certificate through KUEUE_METRICS_CERT_DIR), signed by the lab CA."""
    from . import pki

    d = cert_dir(cfg)
    d.mkdir(parents=True, exist_ok=True)
    if pki.ensure_serving_cert(cfg.pki, "kueue-webhook", dns=(SERVICE_DNS,)) or not (d / "tls.crt").is_file():
        (d / "tls.crt").write_bytes((cfg.pki / "kueue-webhook.crt").read_bytes())
        (d / "tls.key").write_bytes((cfg.pki / "kueue-webhook.key").read_bytes())
        (d / "tls.key").chmod(0o600)
    config_path(cfg).write_text(yaml.safe_dump(config(cfg), sort_keys=False))


def env(cfg: LabConfig) -> dict[str, str]:
    return {"KUBECONFIG": str(cfg.kubeconfig), "KUEUE_METRICS_CERT_DIR": str(cert_dir(cfg))}


def argv(cfg: LabConfig) -> list[str]:
    return [str(cfg.binary("kueue")), f"--config={config_path(cfg)}", "--zap-log-level=info"]


def ensure_prereqs(api_client: Any, cfg: LabConfig, timeout: float = 30.0) -> None:
    """Its CRDs, its namespace, its webhook Service (routed to its loopback port) and its files, before it starts."""
    for path in crd_files(cfg):
        ensure_crd(api_client, path, timeout)
    try:
        client.CoreV1Api(api_client).create_namespace(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    ensure_service(api_client, cfg)
    write_files(cfg)


def service_object() -> dict[str, Any]:
    """The webhook Service as the chart renders it (its name, namespace and port; no selector: the lab's Kueue is no
    pod, the Service network routes the port to its loopback address)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": SERVICE,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/component": "webhook-service", "app.kubernetes.io/managed-by": "gpuops-lab"},
        },
        "spec": {
            "type": "ClusterIP",
            "ports": [{"port": SERVICE_PORT, "protocol": "TCP", "targetPort": SERVICE_TARGET_PORT}],
        },
    }


def ensure_service(api_client: Any, cfg: LabConfig) -> None:
    from . import services

    try:
        client.CoreV1Api(api_client).create_namespaced_service(NAMESPACE, service_object())
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    services.add_route(cfg, NAMESPACE, SERVICE, SERVICE_PORT, cfg.ports["kueue-webhook"])


def webhook_configurations(cfg: LabConfig, manifests: Path | None = None) -> list[dict[str, Any]]:
    """Kueue's webhook configurations for the lab: each webhook whose rules touch only :data:`WEBHOOK_GROUPS`, on the
    chart's Service (:data:`SERVICE` in :data:`NAMESPACE`, port 443, the manifest's path) with the lab CA as its
    caBundle."""
    manifests = manifests or cfg.bindir("kueue") / "webhook" / "manifests.yaml"
    if not manifests.is_file():
        raise LabError(f"no Kueue webhook manifests at {manifests}: rebuild it (hack/cluster/build.sh kueue)")
    ca = base64.b64encode((cfg.pki / "ca.crt").read_bytes()).decode()
    out = []
    for doc in yaml.safe_load_all(manifests.read_text()):
        if not doc or doc.get("kind") not in WEBHOOK_NAMES:
            continue
        hooks = []
        for hook in doc.get("webhooks") or []:
            groups = {g for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []}
            if not groups or not groups <= WEBHOOK_GROUPS:
                continue
            path = hook["clientConfig"]["service"]["path"]
            service = {"name": SERVICE, "namespace": NAMESPACE, "path": path, "port": SERVICE_PORT}
            hook = {**hook, "clientConfig": {"service": service, "caBundle": ca}}
            hooks.append(hook)
        if not hooks:
            raise LabError(
                f"{manifests}: no {doc['kind']} webhook for {sorted(WEBHOOK_GROUPS)}: update hack/gpuops_lab/kueue.py"
            )
        out.append(
            {
                "apiVersion": doc["apiVersion"],
                "kind": doc["kind"],
                "metadata": {"name": WEBHOOK_NAMES[doc["kind"]]},
                "webhooks": hooks,
            }
        )
    return out


def _admission(api_client: Any) -> Any:
    return client.AdmissionregistrationV1Api(api_client)


def register_webhooks(api_client: Any, cfg: LabConfig) -> list[str]:
    api = _admission(api_client)
    calls = {
        "MutatingWebhookConfiguration": (
            api.create_mutating_webhook_configuration,
            api.replace_mutating_webhook_configuration,
            api.read_mutating_webhook_configuration,
        ),
        "ValidatingWebhookConfiguration": (
            api.create_validating_webhook_configuration,
            api.replace_validating_webhook_configuration,
            api.read_validating_webhook_configuration,
        ),
    }
    names = []
    for obj in webhook_configurations(cfg):
        create, replace, read = calls[obj["kind"]]
        name = obj["metadata"]["name"]
        try:
            create(obj)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            obj["metadata"]["resourceVersion"] = read(name).metadata.resource_version
            replace(name, obj)
        names.append(f"{obj['kind']}/{name}")
    return names


def deregister_webhooks(api_client: Any) -> list[str]:
    """Remove Kueue's webhook configurations (failurePolicy Fail: with Kueue stopped they refuse every Job)."""
    api = _admission(api_client)
    gone = []
    for kind, delete in (
        ("MutatingWebhookConfiguration", api.delete_mutating_webhook_configuration),
        ("ValidatingWebhookConfiguration", api.delete_validating_webhook_configuration),
    ):
        try:
            delete(WEBHOOK_NAMES[kind])
            gone.append(f"{kind}/{WEBHOOK_NAMES[kind]}")
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    return gone
