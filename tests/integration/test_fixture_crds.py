"""The fixture charts' CRDs, and the upstream NFD and SR-IOV Network Operator charts' (served by the lab from its build
cache), on the real API server: a misspelled field is rejected with strict field validation, a
wrong enum value is rejected, a correct object is accepted, and what the charts render with default values is
accepted. CRDs that were missing are created for the test and removed afterwards; CRDs already installed (by a
chart in another test) are used as they are and left alone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".state" / "collections"))

from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _alertmanager  # noqa: E402

CHARTS = REPO / "tests" / "fixtures" / "charts"
GPU_OP = CHARTS / "gpu-operator" / "v26.7.0"
AMD = CHARTS / "amd-gpu-operator" / "v1.5.1"
# The NFD chart is upstream's (issue 27 §6): its one CRD file (NodeFeature, NodeFeatureGroup, NodeFeatureRule) is read
# from the lab's build cache, as the lab's chart repository packages it.
NFD_CRDS = "the upstream NFD chart's crds/"  # a marker, read through gpuops_lab.nfd
CRD_FILES = [
    GPU_OP / "crds" / "nvidia.com_clusterpolicies.yaml",
    GPU_OP / "crds" / "nvidia.com_nvidiadrivers.yaml",
    AMD / "crds" / "deviceconfig-crd.yaml",
    NFD_CRDS,
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


def _crd_docs(cluster, files: list) -> list[tuple[str, dict]]:
    """(file name, CRD) of every CRD in the files; NFD_CRDS stands for the upstream NFD chart's, read as the lab reads
    them (gpuops_lab.nfd.crd_manifests, from the build cache), and a sriov_crd(...) for a file of the upstream SR-IOV
    chart's crds/ among those the lab installs (gpuops_lab.sriov.crd_files)."""
    from gpuops_lab import nfd, sriov

    out = []
    for f in files:
        if f == NFD_CRDS:
            out += [(path.name, doc) for path, doc in nfd.crd_manifests(cluster.cfg)]
        elif isinstance(f, str) and f.startswith(sriov_crd("")):
            (path,) = [p for p in sriov.crd_files(cluster.cfg) if sriov_crd(p.name) == f]
            out += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
        else:
            out += [(f.name, doc) for doc in yaml.safe_load_all(f.read_text()) if doc]
    return out


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
        for fname, doc in _crd_docs(cluster, CRD_FILES):
            name = doc["metadata"]["name"]
            if _kubectl(cluster, "get", "crd", name).returncode != 0:
                r = _kubectl(cluster, "create", "-f", "-", stdin=json.dumps(doc))
                assert r.returncode == 0, f"{fname}: {r.stderr}"
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


# The CRDs closed where anything writes (issue 27 §6): on the real API server, with strict field validation, a field
# upstream's schema does not have is rejected where the fixture used to keep unknown fields, and so are a value outside
# upstream's enum and a duration that does not match its pattern; an object as upstream's schema allows it is
# accepted. Dry runs only, except the status writes, which need the object (deleted afterwards).
KPS = CHARTS / "kube-prometheus-stack" / "crds"


def sriov_crd(name: str) -> str:
    """A marker for a CRD file of upstream's SR-IOV Network Operator chart (the lab serves it from its build cache)."""
    return f"the upstream SR-IOV chart's crds/{name}"


STRICT_CRD_FILES = [
    NFD_CRDS,
    KPS / "monitoring.coreos.com_prometheuses.yaml",
    KPS / "monitoring.coreos.com_servicemonitors.yaml",
    KPS / "monitoring.coreos.com_prometheusrules.yaml",
    KPS / "monitoring.coreos.com_alertmanagerconfigs.yaml",
    CHARTS / "kai-scheduler" / "crds" / "scheduling.run.ai_queues.yaml",
    sriov_crd("sriovnetwork.openshift.io_sriovnetworknodepolicies.yaml"),
    sriov_crd("sriovnetwork.openshift.io_sriovnetworknodestates.yaml"),
    AMD / "charts" / "kmm" / "crds" / "module-crd.yaml",
    AMD / "charts" / "kmm" / "crds" / "nodemodulesconfig-crd.yaml",
    AMD / "charts" / "remediation-crds" / "crds" / "workflow-crd.yaml",
    AMD / "charts" / "remediation-crds" / "crds" / "workflowtemplate-crd.yaml",
]


@pytest.fixture(scope="module")
def strict_crds(cluster):
    created = []
    try:
        for fname, doc in _crd_docs(cluster, STRICT_CRD_FILES):
            name = doc["metadata"]["name"]
            if _kubectl(cluster, "get", "crd", name).returncode != 0:
                r = _kubectl(cluster, "create", "-f", "-", stdin=json.dumps(doc))
                assert r.returncode == 0, f"{fname}: {r.stderr}"  # the API server takes the schema as structural
                created.append(name)
            assert _established(cluster, name), f"CRD {name} not Established"
        time.sleep(1)  # discovery of the new resources
        yield
    finally:
        for name in created:
            _kubectl(cluster, "delete", "crd", name, "--wait=false")


def _obj(api_version: str, kind: str, **fields) -> dict:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": f"t-{uuid.uuid4().hex[:8]}"}, **fields}


MON = "monitoring.coreos.com/v1"
SRIOV_V1 = "sriovnetwork.openshift.io/v1"
_POLICY = {"resourceName": "r", "nodeSelector": {}, "numVfs": 4, "nicSelector": {"pfNames": ["ens1f0"]}}
_BRIDGE = {"datapathType": "netdev", "externalIDs": {"a": "b"}}
_UPLINK = {"pciAddress": "0000:3b:00.0", "interface": {"type": "dpdk", "mtuRequest": 9000}}
_ENDPOINT = {"port": "metrics", "interval": "15s", "scheme": "https", "relabelings": [{"action": "labeldrop"}]}
_RULES = [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "for": "5m"}]}]
_DUR = "should match"  # the API server's pattern message
_AMC_VARS = {
    "monitoring_mode": "attach",
    "monitoring_remediation_webhook_url": "http://rulebook.gpuops:5050/alerts",
    "monitoring_remediation_token_secret": "rulebook-token",
    "monitoring_remediation_token_key": "token",
}
_AMC = _alertmanager.config_object(_AMC_VARS, "default", {})
_AMC["metadata"] = {"name": f"t-{uuid.uuid4().hex[:8]}"}


def _amc(change) -> dict:
    """The role's AlertmanagerConfig with ``change`` applied to a copy of its spec."""
    obj = json.loads(json.dumps(_AMC))
    change(obj["spec"])
    return obj


# (object, the error the API server must give; "" when it must accept the object)
STRICT_CASES = {
    "NodeFeature: unknown feature type": (
        _obj("nfd.k8s-sigs.io/v1alpha1", "NodeFeature", spec={"features": {"flag": {}}}),
        'unknown field "spec.features.flag"',
    ),
    "NodeFeature: as nfd-worker publishes it": (
        _obj(
            "nfd.k8s-sigs.io/v1alpha1",
            "NodeFeature",
            spec={
                "features": {
                    "flags": {"kernel.loadedmodule": {"elements": {"nvidia": {}}}},
                    "attributes": {"cpu.model": {"elements": {"vendor_id": "AMD"}}},
                    "instances": {"pci.device": {"elements": [{"attributes": {"vendor": "10de"}}]}},
                }
            },
        ),
        "",
    ),
    "Prometheus: unknown toleration field": (
        _obj(MON, "Prometheus", spec={"tolerations": [{"key": "k", "operator": "Exists", "efect": "NoSchedule"}]}),
        'unknown field "spec.tolerations[0].efect"',
    ),
    "Prometheus: retention pattern": (_obj(MON, "Prometheus", spec={"retention": "10 days"}), _DUR),
    "Prometheus: tolerations and retention as upstream allows": (
        _obj(MON, "Prometheus", spec={"retention": "10d", "tolerations": [{"key": "k", "operator": "Exists"}]}),
        "",
    ),
    "ServiceMonitor: scheme": (
        _obj(MON, "ServiceMonitor", spec={"selector": {}, "endpoints": [{**_ENDPOINT, "scheme": "tcp"}]}),
        "Unsupported value",
    ),
    "ServiceMonitor: relabeling action": (
        _obj(
            MON, "ServiceMonitor", spec={"selector": {}, "endpoints": [{"port": "m", "relabelings": [{"action": "x"}]}]}
        ),
        "Unsupported value",
    ),
    "ServiceMonitor: metric relabeling action": (
        _obj(
            MON,
            "ServiceMonitor",
            spec={"selector": {}, "endpoints": [{"port": "m", "metricRelabelings": [{"action": "x"}]}]},
        ),
        "Unsupported value",
    ),
    "ServiceMonitor: endpoints required": (_obj(MON, "ServiceMonitor", spec={"selector": {}}), "Required value"),
    "ServiceMonitor: as upstream allows": (
        _obj(MON, "ServiceMonitor", spec={"selector": {}, "endpoints": [_ENDPOINT]}),
        "",
    ),
    "PrometheusRule: for pattern": (
        _obj(MON, "PrometheusRule", spec={"groups": [{"name": "g", "rules": [{"expr": "1", "for": "5 min"}]}]}),
        _DUR,
    ),
    "PrometheusRule: as upstream allows": (_obj(MON, "PrometheusRule", spec={"groups": _RULES}), ""),
    "SriovNetworkNodePolicy: unknown bridge field": (
        _obj(SRIOV_V1, "SriovNetworkNodePolicy", spec={**_POLICY, "bridge": {"ovs": {"uplinks": []}}}),
        'unknown field "spec.bridge.ovs.uplinks"',
    ),
    "SriovNetworkNodePolicy: OVS bridge as upstream allows": (
        _obj(
            SRIOV_V1,
            "SriovNetworkNodePolicy",
            spec={**_POLICY, "bridge": {"ovs": {"bridge": _BRIDGE, "uplink": {"interface": {"type": "dpdk"}}}}},
        ),
        "",
    ),
    "SriovNetworkNodeState: spec bridge without name": (
        _obj(SRIOV_V1, "SriovNetworkNodeState", spec={"bridges": {"ovs": [{"bridge": _BRIDGE}]}}),
        "Required value",
    ),
    "SriovNetworkNodeState: spec bridges as upstream allows": (
        _obj(SRIOV_V1, "SriovNetworkNodeState", spec={"bridges": {"ovs": [{"name": "br", "uplinks": [_UPLINK]}]}}),
        "",
    ),
    "kmm Module: unknown root field": (
        _obj("kmm.sigs.x-k8s.io/v1beta1", "Module", spec={}, spek={}),
        'unknown field "spek"',
    ),
    "Argo Workflow: unknown root field": (
        _obj("argoproj.io/v1alpha1", "Workflow", spec={}, spek={}),
        'unknown field "spek"',
    ),
    "Argo WorkflowTemplate: spec required": (_obj("argoproj.io/v1alpha1", "WorkflowTemplate"), "Required value"),
    "AlertmanagerConfig: as the monitoring role writes it (with a token Secret)": (_AMC, ""),
    "AlertmanagerConfig: matchType": (
        _amc(lambda s: s["route"]["matchers"][0].update(matchType="~")),
        "Unsupported value",
    ),
    "AlertmanagerConfig: webhook URL pattern": (
        _amc(lambda s: s["receivers"][0]["webhookConfigs"][0].update(url="rulebook:5050/alerts")),
        "should match",
    ),
    "AlertmanagerConfig: groupWait pattern": (_amc(lambda s: s["route"].update(groupWait="1 s")), _DUR),
    "AlertmanagerConfig: unknown webhook field": (
        _amc(lambda s: s["receivers"][0]["webhookConfigs"][0].update(sendResloved=True)),
        "unknown field",
    ),
    "AlertmanagerConfig: credentials key required": (
        _amc(lambda s: s["receivers"][0]["webhookConfigs"][0]["httpConfig"]["authorization"]["credentials"].pop("key")),
        "Required value",
    ),
}


@pytest.mark.parametrize("case", STRICT_CASES)
def test_closed_crds_on_the_api_server(cluster, strict_crds, namespace, case):
    obj, error = STRICT_CASES[case]
    r = _create(cluster, obj, "--dry-run=server", "-n", namespace)  # kubectl ignores -n for a cluster-scoped kind
    if error:
        assert r.returncode != 0 and error in r.stderr, r.stderr
    else:
        assert r.returncode == 0, r.stderr


# (the object, a status upstream's schema rejects, the error, a status it accepts)
STATUS_CASES = {
    "Prometheus": (
        _obj(MON, "Prometheus", spec={}),
        {"avaliableReplicas": 1},
        'unknown field "status.avaliableReplicas"',
        {
            "availableReplicas": 1,
            "conditions": [{"type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        },
    ),
    "Queue": (
        _obj("scheduling.run.ai/v2", "Queue", spec={}),
        {"allocatd": {"cpu": "1"}},
        'unknown field "status.allocatd"',
        {"allocated": {"cpu": "500m", "nvidia.com/gpu": 2}, "childQueues": []},
    ),
    "SriovNetworkNodeState": (
        _obj(SRIOV_V1, "SriovNetworkNodeState", spec={}),
        {"bridges": {"ovs": [{"name": "br", "uplink": {}}]}},
        'unknown field "status.bridges.ovs[0].uplink"',
        {"bridges": {"ovs": [{"name": "br", "uplinks": [_UPLINK]}]}, "syncStatus": "Succeeded"},
    ),
}


@pytest.mark.parametrize("case", STATUS_CASES)
def test_closed_status_on_the_api_server(cluster, strict_crds, namespace, case):
    obj, bad, error, good = STATUS_CASES[case]
    # the label keeps the lab's simulators away from these objects (the sim.gpuops.io/instance convention)
    obj = {**obj, "metadata": {**obj["metadata"], "labels": {"sim.gpuops.io/instance": "schema-test"}}}
    scope = ("-n", namespace)  # ignored for the cluster-scoped Queue
    r = _create(cluster, obj, *scope)
    assert r.returncode == 0, r.stderr
    live = json.loads(r.stdout)
    try:
        for status, expected in ((bad, error), (good, "")):
            body = json.dumps({**live, "status": status})
            r = _kubectl(cluster, "replace", "--subresource=status", "--validate=strict", *scope, "-f", "-", stdin=body)
            if expected:
                assert r.returncode != 0 and expected in r.stderr, r.stderr
            else:
                assert r.returncode == 0, r.stderr
    finally:
        resource = live["apiVersion"].split("/")[0]  # qualified: Volcano's Queue is a "queue" too
        plural = {"Prometheus": "prometheuses", "Queue": "queues"}.get(obj["kind"], obj["kind"].lower() + "s")
        _kubectl(cluster, "delete", f"{plural}.{resource}", obj["metadata"]["name"], *scope, "--wait=false")
