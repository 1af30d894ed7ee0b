"""The lab's OCI registry: the real CNCF Distribution registry (github.com/distribution/distribution/v3, built by
hack/cluster/build.sh) on 127.0.0.1, TLS with a serving certificate of the lab CA (pki.ensure_serving_cert), its
storage under the state directory. At `lab up` every chart packaged for the HTTP chart repository (charts.py) is
pushed to it with the real `helm push`, so the same fixture charts are served both ways:
http://127.0.0.1:<chart-repo port> (index.yaml) and oci://127.0.0.1:<chart-registry port>/charts/<chart>.

Clients trust it with the lab CA (<state>/pki/ca.crt: helm --ca-file, gpuops_chart_repo_ca_file)."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

from . import pki
from .config import LabConfig
from .errors import LabError

VERSION_KEY = "REGISTRY_VERSION"
CERT = "chart-registry"  # <state>/pki/chart-registry.{crt,key}


def config(cfg: LabConfig) -> dict:
    """The registry's configuration (JSON is YAML): loopback only, TLS, filesystem storage, quiet logs."""
    return {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {
            "filesystem": {"rootdirectory": str(cfg.chart_registry_dir)},
            "maintenance": {"uploadpurging": {"enabled": False}},
        },
        "http": {
            "addr": f"127.0.0.1:{cfg.ports['chart-registry']}",
            "secret": "gpuops-lab",  # signs upload state; one registry, so any constant
            "tls": {"certificate": str(cfg.pki / f"{CERT}.crt"), "key": str(cfg.pki / f"{CERT}.key")},
        },
    }


def prepare(cfg: LabConfig) -> None:
    pki.ensure_serving_cert(cfg.pki, CERT)
    cfg.chart_registry_dir.mkdir(parents=True, exist_ok=True)
    cfg.chart_registry_config.write_text(json.dumps(config(cfg), indent=1) + "\n")


def env() -> dict[str, str]:
    # v3 exports OpenTelemetry traces by default (to localhost:4318); the lab has no collector
    return {"OTEL_TRACES_EXPORTER": "none", "OTEL_SDK_DISABLED": "true"}


def push_charts(cfg: LabConfig, workers: int = 4) -> list[str]:
    """`helm push` every chart package of the HTTP chart repository to oci://.../charts; returns the refs."""
    helm = str(cfg.binary("helm"))
    base = cfg.chart_registry_url
    # the lab's own registry config: no user credentials, nothing written in the user's helm config
    common = ["--ca-file", str(cfg.pki / "ca.crt"), "--registry-config", str(cfg.state / "helm-registry.json")]
    tgzs = sorted(cfg.chart_repo_dir.glob("*.tgz"))

    def push(tgz):  # noqa: ANN001, ANN202
        r = subprocess.run([helm, "push", str(tgz), base, *common], capture_output=True, text=True, check=False)  # noqa: S603
        if r.returncode != 0:
            raise LabError(f"helm push {tgz.name} {base} failed: {(r.stderr or r.stdout).strip()}")
        return f"{base}/{tgz.name.removesuffix('.tgz')}"

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(push, tgzs))
