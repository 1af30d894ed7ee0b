"""The lab's OCI registry: its port (own variable, else the chart repository's + 1), its configuration (loopback,
TLS with a lab-CA serving certificate, storage under the state directory) and that certificate."""

from __future__ import annotations

import ssl

import pytest
from cryptography import x509
from gpuops_lab import pki, registry
from gpuops_lab.config import LabConfig


@pytest.mark.parametrize(
    ("env", "port"),
    [
        ({}, 18880),
        ({"GPUOPS_LAB_CHART_REPO_PORT": "20879"}, 20880),
        ({"GPUOPS_LAB_CHART_REPO_PORT": "20879", "GPUOPS_LAB_CHART_REGISTRY_PORT": "30000"}, 30000),
    ],
)
def test_registry_port_follows_the_chart_repo(env, port):
    cfg = LabConfig.load(env)
    assert cfg.ports["chart-registry"] == port
    assert cfg.chart_registry_url == f"oci://127.0.0.1:{port}/charts"


def test_config_and_serving_cert(tmp_path):
    cfg = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path), "GPUOPS_LAB_CHART_REGISTRY_PORT": "20880"})
    pki.ensure_pki(cfg.pki)
    registry.prepare(cfg)
    conf = registry.config(cfg)
    assert conf["http"]["addr"] == "127.0.0.1:20880"
    assert conf["storage"]["filesystem"]["rootdirectory"] == str(tmp_path / "chart-registry")
    assert cfg.chart_registry_config.is_file() and cfg.chart_registry_dir.is_dir()
    crt = x509.load_pem_x509_certificate((cfg.pki / "chart-registry.crt").read_bytes())
    crt.verify_directly_issued_by(x509.load_pem_x509_certificate((cfg.pki / "ca.crt").read_bytes()))
    sans = crt.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    ssl.create_default_context().load_cert_chain(cfg.pki / "chart-registry.crt", cfg.pki / "chart-registry.key")
    assert pki.ensure_serving_cert(cfg.pki, "chart-registry") is False  # made once
    assert cfg.binary("registry").name == "registry" and "registry-v" in cfg.binary("registry").parent.name
