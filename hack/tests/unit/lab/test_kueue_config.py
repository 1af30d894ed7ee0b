"""The lab's Kueue wiring without a cluster: its Configuration and which webhooks it registers, and how."""

from __future__ import annotations

import base64

import yaml
from gpuops_lab import kueue
from gpuops_lab.config import LabConfig

MANIFESTS = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mjob.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}}
  failurePolicy: Fail
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}]
  sideEffects: None
  admissionReviewVersions: [v1]
- name: mpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
  failurePolicy: Fail
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- name: vclusterqueue.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-kueue-x-k8s-io-v1beta2-clusterqueue}
  failurePolicy: Fail
  rules:
  - {apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta2], operations: [CREATE, UPDATE], resources: [clusterqueues]}
  sideEffects: None
  admissionReviewVersions: [v1]
- name: vdeployment.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate-apps-v1-deployment}}
  failurePolicy: Fail
  rules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"""


def _cfg(tmp_path):
    cfg = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path / "lab"), "GPUOPS_LAB_NFD_MASTER_PORT": "30290"})
    (cfg.pki).mkdir(parents=True)
    (cfg.pki / "ca.crt").write_text("CA PEM")
    return cfg


def test_ports_follow_nfd_master_and_config_binds_loopback(tmp_path):
    cfg = _cfg(tmp_path)
    assert (cfg.ports["kueue-webhook"], cfg.ports["kueue-metrics"], cfg.ports["kueue-probe"]) == (30293, 30294, 30295)
    conf = kueue.config(cfg)
    assert conf["webhook"] == {"host": "127.0.0.1", "port": 30293, "certDir": str(kueue.cert_dir(cfg))}
    assert conf["health"]["healthProbeBindAddress"] == "127.0.0.1:30295"
    assert conf["metrics"]["bindAddress"] == "127.0.0.1:30294"
    assert conf["internalCertManagement"] == {"enable": False}
    assert conf["featureGates"] == {"VisibilityOnDemand": False}
    assert kueue.env(cfg)["KUEUE_METRICS_CERT_DIR"] == str(kueue.cert_dir(cfg))


def test_webhooks_only_for_kueue_kinds_and_jobs_on_the_charts_service(tmp_path):
    cfg = _cfg(tmp_path)
    path = tmp_path / "manifests.yaml"
    path.write_text(MANIFESTS)
    out = kueue.webhook_configurations(cfg, path)
    assert [(o["kind"], o["metadata"]["name"]) for o in out] == [
        ("MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "kueue-validating-webhook-configuration"),
    ]
    mutating, validating = out
    assert [w["name"] for w in mutating["webhooks"]] == ["mjob.kb.io"]  # the pod webhook is not registered
    assert [w["name"] for w in validating["webhooks"]] == ["vclusterqueue.kb.io"]
    cc = mutating["webhooks"][0]["clientConfig"]
    assert cc == {
        "service": {
            "name": "kueue-webhook-service",
            "namespace": "kueue-system",
            "path": "/mutate-batch-v1-job",
            "port": 443,
        },
        "caBundle": base64.b64encode(b"CA PEM").decode(),
    }
    assert mutating["webhooks"][0]["failurePolicy"] == "Fail"
    assert yaml.safe_load(yaml.safe_dump(out))  # plain data


def test_missing_manifests_name_the_rebuild(tmp_path):
    import pytest
    from gpuops_lab.errors import LabError

    with pytest.raises(LabError, match="build.sh kueue"):
        kueue.webhook_configurations(_cfg(tmp_path), tmp_path / "nope.yaml")


def test_webhook_service_as_the_chart_names_it():
    svc = kueue.service_object()
    assert (svc["metadata"]["namespace"], svc["metadata"]["name"]) == ("kueue-system", "kueue-webhook-service")
    assert svc["spec"]["ports"] == [{"port": 443, "protocol": "TCP", "targetPort": 9443}]
    assert kueue.SERVICE_DNS == "kueue-webhook-service.kueue-system.svc"
