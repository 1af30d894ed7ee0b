"""The fixture charts' CRDs on the real API server: a misspelled field is rejected with strict field validation, a
wrong enum value is rejected, a correct object is accepted, and what the charts render with default values is
accepted. CRDs that were missing are created for the test and removed afterwards; CRDs already installed (by a
chart in another test) are used as they are and left alone."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHARTS = REPO / "tests" / "fixtures" / "charts"
GPU_OP = CHARTS / "gpu-operator" / "v26.7.0"
AMD = CHARTS / "amd-gpu-operator" / "v1.5.1"
CRD_FILES = [
    GPU_OP / "crds" / "nvidia.com_clusterpolicies.yaml",
    GPU_OP / "crds" / "nvidia.com_nvidiadrivers.yaml",
    AMD / "crds" / "deviceconfig-crd.yaml",
    CHARTS / "node-feature-discovery" / "crds" / "nodefeaturegroups.yaml",
]
CP_SPEC = {
    key: {}
    for key in ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter", "operator")
} | {"toolkit": {"enabled": True}, "mig": {"strategy": "mixed"}}


def _kubectl(cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = [str(cluster.cfg.binary("kubectl")), "--kubeconfig", cluster.kubeconfig, *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False, timeout=60)


def _create(cluster, obj: dict, *extra: str) -> subprocess.CompletedProcess[str]:
    return _kubectl(cluster, "create", "--validate=strict", "-o", "json", *extra, "-f", "-", stdin=json.dumps(obj))


def _established(cluster, name: str, timeout: float = 30.0) -> bool:
    query = '{.status.conditions[?(@.type=="Established")].status}'
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _kubectl(cluster, "get", "crd", name, "-o", f"jsonpath={query}").stdout.strip() == "True":
            return True
        time.sleep(0.3)
    return False


@pytest.fixture(scope="module")
def crds(cluster):
    created = []
    try:
        for path in CRD_FILES:
            name = yaml.safe_load(path.read_text())["metadata"]["name"]
            if _kubectl(cluster, "get", "crd", name).returncode != 0:
                r = _kubectl(cluster, "create", "-f", str(path))
                assert r.returncode == 0, r.stderr
                created.append(name)
            assert _established(cluster, name), f"CRD {name} not Established"
        time.sleep(1)  # discovery of the new resources
        yield
    finally:
        for name in created:
            _kubectl(cluster, "delete", "crd", name, "--wait=false")


def _cluster_policy(spec: dict) -> dict:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        # the label keeps the lab's operator simulator away: this test sets the status itself
        "metadata": {"name": f"t-{uuid.uuid4().hex[:8]}", "labels": {"sim.gpuops.io/instance": "schema-test"}},
        "spec": spec,
    }


def test_cluster_policy_strict_schema(cluster, crds):
    misspelled = _cluster_policy({**CP_SPEC, "driver": {"enabeld": True}})
    r = _create(cluster, misspelled)
    assert r.returncode != 0 and 'unknown field "spec.driver.enabeld"' in r.stderr, r.stderr

    wrong_enum = _cluster_policy({**CP_SPEC, "mig": {"strategy": "all"}})
    r = _create(cluster, wrong_enum)
    assert r.returncode != 0 and "spec.mig.strategy" in r.stderr and "Unsupported value" in r.stderr, r.stderr

    wrong_type = _cluster_policy({**CP_SPEC, "driver": {"upgradePolicy": {"maxParallelUpgrades": "two"}}})
    r = _create(cluster, wrong_type)
    assert r.returncode != 0 and "spec.driver.upgradePolicy.maxParallelUpgrades" in r.stderr, r.stderr

    missing = _cluster_policy({k: v for k, v in CP_SPEC.items() if k != "driver"})
    r = _create(cluster, missing)
    assert r.returncode != 0 and "spec.driver: Required value" in r.stderr, r.stderr

    good = _cluster_policy(CP_SPEC)
    r = _create(cluster, good)
    assert r.returncode == 0, r.stderr
    name = good["metadata"]["name"]
    try:
        stored = json.loads(r.stdout)
        # CRD defaults are applied by the API server
        assert stored["spec"]["driver"]["kernelModuleType"] == "auto"
        assert stored["spec"]["operator"]["runtimeClass"] == "nvidia"
        status = json.dumps({"status": {"state": "bogus"}})
        r = _kubectl(cluster, "patch", "clusterpolicy", name, "--subresource=status", "--type=merge", "-p", status)
        assert r.returncode != 0 and "status.state" in r.stderr, r.stderr
        status = json.dumps({"status": {"state": "ready", "namespace": "gpu-operator"}})
        r = _kubectl(cluster, "patch", "clusterpolicy", name, "--subresource=status", "--type=merge", "-p", status)
        assert r.returncode == 0, r.stderr
        r = _kubectl(cluster, "get", "clusterpolicy", name)
        assert r.returncode == 0 and "ready" in r.stdout.splitlines()[1], r.stdout  # the Status printer column
    finally:
        _kubectl(cluster, "delete", "clusterpolicy", name, "--wait=false")


def _helm_template(cluster, chart: Path, namespace: str) -> list[dict]:
    helm = str(cluster.cfg.binary("helm"))
    r = subprocess.run(
        [helm, "template", "rel", str(chart), "--namespace", namespace],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def test_rendered_custom_resources_fit_the_crds(cluster, crds, namespace):
    (cp,) = [d for d in _helm_template(cluster, GPU_OP, namespace) if d["kind"] == "ClusterPolicy"]
    r = _create(cluster, cp, "--dry-run=server")
    assert r.returncode == 0, r.stderr
    (dc,) = [d for d in _helm_template(cluster, AMD, namespace) if d["kind"] == "DeviceConfig"]
    r = _create(cluster, dc, "--dry-run=server", "-n", namespace)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["spec"]["driver"]["driverType"] == "container"  # CRD default


def test_device_config_and_nfd_group_strict_schema(cluster, crds, namespace):
    dc = {"apiVersion": "amd.com/v1alpha1", "kind": "DeviceConfig", "metadata": {"name": "dc"}}
    r = _create(cluster, {**dc, "spec": {"driver": {"enabel": True}}}, "-n", namespace)
    assert r.returncode != 0 and 'unknown field "spec.driver.enabel"' in r.stderr, r.stderr
    r = _create(cluster, {**dc, "spec": {"metricsExporter": {"serviceType": "LoadBalancer"}}}, "-n", namespace)
    assert r.returncode != 0 and "Unsupported value" in r.stderr, r.stderr
    r = _create(cluster, {**dc, "spec": {"driver": {"enable": True, "version": "6.4"}}}, "-n", namespace)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["spec"]["driver"] == {"enable": True, "version": "6.4", "driverType": "container"}

    nfg = {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureGroup", "metadata": {"name": "gpus"}}

    def group(op: str) -> dict:
        match = [{"feature": "pci.device", "matchExpressions": {"vendor": {"op": op, "value": ["10de"]}}}]
        return {**nfg, "spec": {"featureGroupRules": [{"name": "nvidia", "matchFeatures": match}]}}

    r = _create(cluster, group("Any"), "-n", namespace)
    assert r.returncode != 0 and "Unsupported value" in r.stderr, r.stderr
    r = _create(cluster, group("In"), "-n", namespace)
    assert r.returncode == 0, r.stderr

    nvd = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": f"t-{uuid.uuid4().hex[:8]}"},
    }
    r = _create(cluster, {**nvd, "spec": {"driverType": "cpu"}}, "--dry-run=server")
    assert r.returncode != 0 and "spec.driverType" in r.stderr, r.stderr
    r = _create(cluster, {**nvd, "spec": {"driverType": "gpu"}}, "--dry-run=server")
    assert r.returncode == 0, r.stderr
    spec = json.loads(r.stdout)["spec"]
    assert spec == {"default": False, "driverType": "gpu", "image": "nvcr.io/nvidia/driver", "kernelModuleType": "auto"}
