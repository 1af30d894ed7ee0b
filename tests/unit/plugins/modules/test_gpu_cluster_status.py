"""gpu_cluster_status through main(): read-only in both modes, fail_on_error, option handling, typed errors
turned into fail_json. The API is a fake reader serving hand-built objects."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s
from ansible_collections.gpuops.platform.plugins.modules import gpu_cluster_status

NODE_OK = {
    "metadata": {"name": "g1", "labels": {"nvidia.com/gpu.present": "true"}},
    "status": {
        "allocatable": {"nvidia.com/gpu": "8"},
        "capacity": {"nvidia.com/gpu": "8"},
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}
NODE_NO_GPU = {
    "metadata": {"name": "g2", "labels": {"nvidia.com/gpu.present": "true"}},
    "status": {"allocatable": {}, "conditions": [{"type": "Ready", "status": "True"}]},
}


class FakeReader:
    """Only list methods exist: a call to anything else (a write) fails the test with AttributeError."""

    def __init__(self, nodes, cluster_policies=None, error=None):
        self._nodes, self._cps, self._error = nodes, cluster_policies, error
        self.requests = 0

    def _list(self, value):
        self.requests += 1
        if self._error:
            raise self._error
        return value

    def nodes(self):
        return self._list(self._nodes)

    def pods(self, namespace):
        return self._list([])

    def daemonsets(self, namespace):
        return self._list([])

    def cluster_custom(self, group, version, plural):
        return self._list(self._cps)

    def namespaced_custom(self, group, version, namespace, plural):
        return self._list(None)


@pytest.fixture
def api(monkeypatch):
    """api(reader) -> the params new_reader received (one dict per module run)."""
    seen = []

    def install(reader):
        # a fresh count per run
        monkeypatch.setattr(_k8s, "new_reader", lambda params: seen.append(dict(params)) or copy.copy(reader))
        return seen

    return install


@pytest.mark.parametrize("check_mode", [True, False])
def test_reports_without_changes(api, run_module, check_mode):
    api(FakeReader([NODE_OK]))
    result, failed = run_module(gpu_cluster_status, {}, check_mode=check_mode)
    assert not failed and result["changed"] is False
    assert result["api_requests"] == 6
    assert result["summary"]["gpu_nodes"] == 1 and result["summary"]["cluster_policy"] == "not installed"
    assert result["nodes"][0]["allocatable"] == {"nvidia.com/gpu": 8}
    assert [f["id"] for f in result["diagnosis"]] == ["nvidia-operator-not-installed"]


def test_check_mode_equals_real_run(api, run_module):
    api(FakeReader([NODE_OK, NODE_NO_GPU]))
    check = run_module(gpu_cluster_status, {}, check_mode=True)[0]
    real = run_module(gpu_cluster_status, {}, check_mode=False)[0]
    for r in (check, real):
        r.pop("invocation", None)
    assert check == real


@pytest.mark.parametrize("fail_on_error, failed_expected", [(False, False), (True, True)])
def test_fail_on_error(api, run_module, fail_on_error, failed_expected):
    api(FakeReader([NODE_NO_GPU]))
    result, failed = run_module(gpu_cluster_status, {"fail_on_error": fail_on_error})
    assert failed is failed_expected
    assert result["diagnosis"][0]["id"] == "gpu-resource-missing" and result["summary"]["healthy"] is False
    if failed:
        assert result["msg"].startswith("1 GPU cluster finding(s) of severity error; first: gpu-resource-missing")


def test_fail_on_error_passes_when_healthy(api, run_module):
    api(FakeReader([NODE_OK]))
    result, failed = run_module(gpu_cluster_status, {"fail_on_error": True})
    assert not failed and result["summary"]["healthy"] is True


def test_options_reach_the_client(api, run_module, monkeypatch):
    seen = api(FakeReader([NODE_OK]))
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", "/env/kubeconfig")
    result, failed = run_module(
        gpu_cluster_status, {"context": "lab", "api_key": "s3cret", "verify_ssl": False, "ssl_ca_cert": "/ca.pem"}
    )
    assert not failed
    assert {k: seen[0][k] for k in ("kubeconfig", "context", "api_key", "validate_certs", "ca_cert")} == {
        "kubeconfig": "/env/kubeconfig",
        "context": "lab",
        "api_key": "s3cret",
        "validate_certs": False,
        "ca_cert": "/ca.pem",
    }
    assert "s3cret" not in str(result)


def test_node_selector(api, run_module):
    api(FakeReader([NODE_OK, NODE_NO_GPU]))
    result, failed = run_module(gpu_cluster_status, {"node_selector": "kubernetes.io/hostname notin (x),!absent"})
    assert not failed and [n["name"] for n in result["nodes"]] == ["g1", "g2"]
    result, failed = run_module(gpu_cluster_status, {"node_selector": "a b c"})
    assert failed and "node_selector 'a b c'" in result["msg"]


def test_host_facts_refine(api, run_module):
    api(FakeReader([NODE_NO_GPU]))
    facts = {"g2": {"nvidia_driver": {"loaded": False}}}
    result, failed = run_module(gpu_cluster_status, {"host_facts": facts})
    assert not failed and result["nodes"][0]["host_facts"] is True


def test_api_error_fails_with_the_object(api, run_module):
    api(FakeReader([], error=_k8s.ClusterAccessError("cannot list nodes: HTTP 403 forbidden; RBAC", status=403)))
    result, failed = run_module(gpu_cluster_status, {})
    assert failed and result["msg"].startswith("cannot list nodes: HTTP 403") and result["status"] == 403


def test_config_error(run_module, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result, failed = run_module(gpu_cluster_status, {})
    assert failed and "cannot load Kubernetes connection settings" in result["msg"]


def test_missing_library(run_module, monkeypatch):
    monkeypatch.setattr(_k8s, "HAS_KUBERNETES", False)
    monkeypatch.setattr(_k8s, "K8S_IMPORT_ERROR", "ImportError: No module named kubernetes")
    result, failed = run_module(gpu_cluster_status, {})
    assert failed and "kubernetes" in result["msg"] and "Failed to import" in result["msg"]


# -- wait and vendor -----------------------------------------------------------------------------------------
CP_NOT_READY = {
    "metadata": {"name": "cluster-policy", "creationTimestamp": "t0"},
    "status": {"state": "notReady", "conditions": [{"type": "Ready", "status": "False", "reason": "OperandNotReady"}]},
}
CP_READY = {"metadata": {"name": "cluster-policy", "creationTimestamp": "t0"}, "status": {"state": "ready"}}
WAIT_CP = {"timeout": 30, "sleep": 10, "objects": [{"kind": "ClusterPolicy", "name": "cluster-policy"}]}


class LookingReader(FakeReader):
    """Serves ``looks`` in turn (a look starts with the node list); the last one repeats."""

    def __init__(self, looks):
        super().__init__(*looks[0])
        self.looks, self.i = looks, -1

    def nodes(self):
        self.i = min(self.i + 1, len(self.looks) - 1)
        self._nodes, self._cps = self.looks[self.i]
        return super().nodes()


@pytest.fixture
def clock(monkeypatch):
    """A fake clock for the module's waiter: sleeping advances it; the list records the sleeps."""
    from ansible_collections.gpuops.platform.plugins.module_utils.status import _readiness

    now, sleeps = [0.0], []

    def sleep(s):
        sleeps.append(s)
        now[0] += s

    real = _readiness.Waiter
    monkeypatch.setattr(_readiness, "Waiter", lambda **kw: real(clock=lambda: now[0], sleep=sleep, **kw))
    return sleeps


def test_wait_until_ready(api, run_module, clock):
    api(LookingReader([([NODE_NO_GPU], [CP_NOT_READY]), ([NODE_OK], [CP_NOT_READY]), ([NODE_OK], [CP_READY])]))
    result, failed = run_module(gpu_cluster_status, {"wait": WAIT_CP, "node_selector": "kubernetes.io/hostname!=x"})
    assert not failed and result["changed"] is False
    assert result["wait"]["ready"] and result["wait"]["probes"] == 3 and clock == [1, 2]


@pytest.mark.parametrize("return_nodes", [True, False])
def test_wait_without_node_views(api, run_module, clock, return_nodes):
    """return_nodes false: the nodes are read and diagnosed (the summary counts them) but not carried back."""
    api(LookingReader([([NODE_OK], [CP_READY])]))
    args = {"wait": dict(WAIT_CP, nodes=False), "return_nodes": return_nodes}
    result, failed = run_module(gpu_cluster_status, args)
    assert not failed and result["wait"]["ready"] and result["summary"]["gpu_nodes"] == 1
    assert [n["name"] for n in result["nodes"]] == (["g1"] if return_nodes else [])


def test_wait_timeout_fails_naming_object_and_condition(api, run_module, clock):
    api(LookingReader([([NODE_OK], [CP_NOT_READY])]))
    result, failed = run_module(gpu_cluster_status, {"wait": WAIT_CP})
    assert failed and clock == [1, 2, 4, 8, 10, 5]  # backs off to wait.sleep, never past the timeout
    assert result["msg"].startswith(
        "not ready after waiting 30s (timeout 30s): ClusterPolicy cluster-policy: status.state is notReady, want "
        "ready (condition Ready reason OperandNotReady: None). Fix: ClusterPolicy:"
    )
    assert result["wait"]["not_ready"][0]["name"] == "cluster-policy" and result["diagnosis"]


def test_wait_names_the_node_not_ready(api, run_module, clock):
    api(LookingReader([([NODE_NO_GPU], [CP_READY])]))
    result, failed = run_module(gpu_cluster_status, {"wait": dict(WAIT_CP, timeout=0)})
    assert failed and clock == []
    assert "Node g2: allocatable nvidia.com/gpu is absent" in result["msg"]
    assert "[gpu-resource-missing] g2:" in result["msg"]


def test_wait_in_check_mode_looks_once(api, run_module, clock):
    api(LookingReader([([NODE_OK], [CP_NOT_READY]), ([NODE_OK], [CP_READY])]))
    result, failed = run_module(gpu_cluster_status, {"wait": WAIT_CP}, check_mode=True)
    assert failed and clock == [] and result["wait"]["waited"] is False and result["wait"]["probes"] == 1
    assert result["msg"].startswith("not ready (check mode: looked once, did not wait): ClusterPolicy cluster-policy")


@pytest.mark.parametrize(
    "wait, message",
    [
        ({"timeout": -1}, "wait.timeout -1"),
        ({"sleep": 0}, "the sleep at least 1 second"),
        ({"objects": [{"kind": "Pod"}]}, "value of kind must be one of"),
        ({"objects": [{"name": "x"}]}, "missing required arguments: kind"),
    ],
)
def test_wait_bad_values(api, run_module, wait, message):
    api(FakeReader([NODE_OK]))
    result, failed = run_module(gpu_cluster_status, {"wait": wait})
    assert failed and message in result["msg"]


AMD_NODE = {
    "metadata": {"name": "amd-mi300x-0", "labels": {"feature.node.kubernetes.io/amd-gpu": "true"}},
    "status": {"allocatable": {}, "conditions": [{"type": "Ready", "status": "True"}]},
}


@pytest.mark.parametrize(
    "vendor, nodes", [(["nvidia"], ["g1"]), (["amd"], ["amd-mi300x-0"]), (None, ["amd-mi300x-0", "g1"])]
)
def test_vendor(api, run_module, vendor, nodes):
    api(FakeReader([NODE_OK, AMD_NODE], cluster_policies=None))
    result, failed = run_module(gpu_cluster_status, {"fail_on_error": True, **({"vendor": vendor} if vendor else {})})
    assert [n["name"] for n in result["nodes"]] == nodes
    amd_judged = "amd-mi300x-0" in nodes
    assert failed is amd_judged  # the AMD node without a device plugin is an error only where AMD is judged
    assert ("AMD device-plugin pod missing" in result.get("msg", "")) is amd_judged


def test_vendor_choices(api, run_module):
    api(FakeReader([NODE_OK]))
    result, failed = run_module(gpu_cluster_status, {"vendor": ["intel"]})
    assert failed and "value of vendor must be one or more of: nvidia, amd" in result["msg"]


class SharingReader(FakeReader):
    """Serves ResourceSlices and the operator namespace's ConfigMaps too (O(sharing))."""

    def __init__(self, nodes, cluster_policies, configmaps, slices):
        super().__init__(nodes, cluster_policies)
        self._cms, self._slices = configmaps, slices

    def core(self, plural, namespace=None):
        assert (plural, namespace) == ("configmaps", "gpu-operator")
        return self._list(self._cms)

    def objects(self, group, version, plural, namespace=None):
        assert (group, version, plural, namespace) == ("resource.k8s.io", "v1", "resourceslices", None)
        return self._list(self._slices)


def _node(name, labels, alloc):
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", **labels}},
        "status": {"allocatable": alloc, "capacity": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.mark.parametrize("named", [True, False])
def test_sharing_column(api, run_module, named):
    policy = {
        "metadata": {"name": "cluster-policy", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"devicePlugin": {"config": {"name": "sharing", "default": "exclusive"}} if named else {}},
    }
    cm = {
        "metadata": {"name": "sharing"},
        "data": {
            "exclusive": "version: v1\n",
            "ts": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 4}\n",
        },
    }
    nodes = [
        _node("ts-0", {"nvidia.com/device-plugin.config": "ts"}, {"nvidia.com/gpu": "16"}),
        _node("dra-0", {"nvidia.com/gpu.deploy.device-plugin": "false"}, {}),
        _node("plain-0", {}, {"nvidia.com/gpu": "8"}),
    ]
    slices = [{"spec": {"driver": "gpu.nvidia.com", "nodeName": "dra-0", "devices": [{}] * 8}}]
    api(SharingReader(nodes, [policy], [cm], slices))
    result, failed = run_module(gpu_cluster_status, {"sharing": True})
    assert not failed
    got = {n["name"]: n["sharing"]["summary"] for n in result["nodes"]}
    assert got["dra-0"] == "dra 8 device(s) in ResourceSlices: nothing advertised"
    if named:
        assert result["api_requests"] == 8  # six lists, ResourceSlices, the operator namespace's ConfigMaps
        assert got["ts-0"] == "time_slicing ts x4: nvidia.com/gpu=16"
        assert got["plain-0"] == "exclusive exclusive: nvidia.com/gpu=8"
    else:
        assert result["api_requests"] == 7  # no ConfigMap named: no ConfigMap read
        assert got["ts-0"] == "exclusive: nvidia.com/gpu=16"
    # without the option nothing more is read and nodes have no sharing
    api(SharingReader(nodes, [policy], [cm], slices))
    plain, failed = run_module(gpu_cluster_status, {})
    assert not failed and plain["api_requests"] == 6 and all("sharing" not in n for n in plain["nodes"])


class WorkloadReader(FakeReader):
    """Serves pods of all namespaces too (O(workloads))."""

    def __init__(self, nodes, all_pods):
        super().__init__(nodes)
        self._all = all_pods

    def core(self, plural, namespace=None):
        assert (plural, namespace) == ("pods", None)
        return self._list(self._all)


def test_workloads_option(api, run_module):
    pods = [
        {
            "metadata": {"namespace": "ml", "name": "trainer"},
            "spec": {"nodeName": "g1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
            "status": {"phase": "Running"},
        },
        {
            "metadata": {"namespace": "gpu-operator", "name": "nvidia-cuda-validator-x"},
            "spec": {"nodeName": "g1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running"},
        },
    ]
    api(WorkloadReader([NODE_OK], pods))
    result, failed = run_module(gpu_cluster_status, {"workloads": True}, check_mode=True)
    assert not failed and result["changed"] is False and result["api_requests"] == 7
    assert result["gpu_workloads"] == [
        {"namespace": "ml", "name": "trainer", "node": "g1", "phase": "Running", "resources": ["nvidia.com/gpu"]}
    ]
