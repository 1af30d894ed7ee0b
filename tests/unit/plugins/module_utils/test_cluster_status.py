"""Cluster status: object builders (shared with test_diagnosis), selector parsing, pod/node views, collection
with a constant number of requests, and the result shape. No cluster: hand-built dicts as the API returns."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_status as cs
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_views, _label_selectors

NS = "gpu-operator"
NFD_NVIDIA = {"feature.node.kubernetes.io/pci-10de.present": "true"}
GPU_LABELS = {
    **NFD_NVIDIA,
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.deploy.driver": "true",
    "nvidia.com/gpu.deploy.device-plugin": "true",
    "nvidia.com/gpu.deploy.operator-validator": "true",
}
VALIDATION_STEPS = ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]


# -- builders ---------------------------------------------------------------------------------------------
def node(
    name,
    labels=None,
    alloc=None,
    ready=True,
    kernel="5.15.0-119-generic",
    reason=None,
    message=None,
    conditions=(),
    spec=None,
    annotations=None,
):
    res = {"cpu": "224", "memory": "2063Gi", "pods": "110", **(alloc or {})}
    meta = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "metadata": meta,
        "spec": dict(spec or {}),
        "status": {
            "allocatable": dict(res),
            "capacity": dict(res),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": reason or ("KubeletReady" if ready else "KubeletNotReady"),
                    "message": message or ("kubelet is posting ready status" if ready else "container runtime down"),
                },
                *conditions,
            ],
            "nodeInfo": {"kernelVersion": kernel, "kubeletVersion": "v1.34.4"},
        },
    }


def gpu_node(name, gpus=8, **kw):
    labels = {**GPU_LABELS, **kw.pop("labels", {})}
    alloc = {"nvidia.com/gpu": str(gpus)} if gpus is not None else {}
    return node(name, labels=labels, alloc={**alloc, **kw.pop("alloc", {})}, **kw)


def running(container, ready=True, restarts=0):
    return {"name": container, "ready": ready, "restartCount": restarts, "state": {"running": {}}}


def crashloop(container, restarts=7, exit_code=1, message="modprobe: ERROR: could not insert 'nvidia'"):
    return {
        "name": container,
        "ready": False,
        "restartCount": restarts,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}},
        "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error", "message": message}},
    }


def waiting(container, reason="PodInitializing"):
    return {"name": container, "ready": False, "restartCount": 0, "state": {"waiting": {"reason": reason}}}


def done(container, code=0):
    return {"name": container, "ready": code == 0, "restartCount": 0, "state": {"terminated": {"exitCode": code}}}


def pod(
    name,
    component,
    on=None,
    phase="Running",
    ready=True,
    containers=None,
    inits=None,
    init_names=None,
    ns=NS,
    owner="DaemonSet",
    bound=None,
    node_selector=None,
    conditions=None,
    labels=None,
):
    """A pod as the API returns it. ``bound`` binds a not-yet-scheduled pod to a node through the DaemonSet
    controller's matchFields affinity."""
    meta = {"name": name, "namespace": ns, "labels": {"app": component, **(labels or {})}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": component, "controller": True}]
    spec = {"containers": [{"name": "main"}], "nodeSelector": dict(node_selector or {})}
    if on:
        spec["nodeName"] = on
    if bound:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [bound]}]}
                    ]
                }
            }
        }
    if init_names:
        spec["initContainers"] = [{"name": n} for n in init_names]
    conds = list(conditions or [])
    if not any(c["type"] == "Ready" for c in conds):
        conds.append({"type": "Ready", "status": "True" if ready else "False"})
    status = {"phase": phase, "conditions": conds}
    if containers is not None:
        status["containerStatuses"] = containers
    elif phase == "Running":
        status["containerStatuses"] = [running("main", ready=ready)]
    if inits is not None:
        status["initContainerStatuses"] = inits
    return {"metadata": meta, "spec": spec, "status": status}


def ready_pod(component, on, **kw):
    return pod(f"{component}-{on}", component, on=on, **kw)


def driver_crashloop(on, **kw):
    return pod(
        f"nvidia-driver-daemonset-{on}",
        "nvidia-driver-daemonset",
        on=on,
        ready=False,
        containers=[crashloop("nvidia-driver-ctr", **kw)],
        init_names=["k8s-driver-manager"],
        inits=[done("k8s-driver-manager")],
    )


def validator_stuck(on, step):
    """The validator pending in init step ``step`` (the steps before it completed)."""
    idx = VALIDATION_STEPS.index(step)
    inits = [done(s) for s in VALIDATION_STEPS[:idx]] + [
        {"name": step, "ready": False, "restartCount": 0, "state": {"running": {"startedAt": "2026-11-22T10:00:00Z"}}}
    ]
    inits += [waiting(s) for s in VALIDATION_STEPS[idx + 1 :]]
    return pod(
        f"nvidia-operator-validator-{on}",
        "nvidia-operator-validator",
        on=on,
        phase="Pending",
        ready=False,
        containers=[waiting("nvidia-operator-validator")],
        init_names=VALIDATION_STEPS,
        inits=inits,
    )


def unscheduled(component, bound, node_selector, message="0/5 nodes are available: 1 node(s) didn't match selector"):
    return pod(
        f"{component}-{bound}",
        component,
        phase="Pending",
        ready=False,
        containers=[],
        bound=bound,
        node_selector=node_selector,
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
    )


def daemonset(name, node_selector, ns=NS):
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"template": {"spec": {"nodeSelector": dict(node_selector)}}},
        "status": {"desiredNumberScheduled": 1, "numberReady": 0, "numberAvailable": 0},
    }


def operator_pod(state="running", on="cpu-0"):
    containers = [running("gpu-operator")] if state == "running" else [crashloop("gpu-operator", message="bad")]
    return pod(
        "gpu-operator-7d9f-abcde",
        "gpu-operator",
        on=on,
        owner="ReplicaSet",
        ready=state == "running",
        containers=containers,
        labels={"app.kubernetes.io/component": "gpu-operator"},
    )


def cluster_policy(name, created, state="ready", conditions=()):
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {},
        "status": {"state": state, "conditions": list(conditions)} if state is not None else {},
    }


def raw(nodes=(), pods=(), amd_pods=(), daemonsets=(), cluster_policies=None, device_configs=None):
    return {
        "nodes": list(nodes),
        "pods": list(pods),
        "amd_pods": list(amd_pods),
        "daemonsets": list(daemonsets),
        "cluster_policies": cluster_policies,
        "device_configs": device_configs,
    }


def params(**kw):
    return {"operator_namespace": NS, "amd_namespace": "kube-amd-gpu", "host_facts": None, **kw}


def view_of(data, selector=None, **kw):
    return _cluster_views.build_view(data, params(**kw), _label_selectors.parse_selector(selector))


# -- label selectors --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, labels, expected",
    [
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a!=b", {"a": "b"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": "x"}, False),
        ("!a", {}, True),
        ("pool in (train, infer),!maint", {"pool": "infer"}, True),
        ("pool in (train,infer)", {"pool": "batch"}, False),
        ("pool notin (train)", {}, True),
        (
            "nvidia.com/gpu.present=true,kubernetes.io/hostname in (n1,n2)",
            {"nvidia.com/gpu.present": "true", "kubernetes.io/hostname": "n2"},
            True,
        ),
    ],
)
def test_selector(text, labels, expected):
    assert _label_selectors.selector_matches(_label_selectors.parse_selector(text), labels) is expected


@pytest.mark.parametrize("text", ["a=b=c", "in (x)", "a in x", "a b"])
def test_selector_malformed(text):
    with pytest.raises(InvalidInput, match="node_selector"):
        _label_selectors.parse_selector(text)


def test_no_selector():
    assert _label_selectors.parse_selector(None) is None and _label_selectors.parse_selector("  ") is None


# -- pod views --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "obj, state, extra",
    [
        (ready_pod("nvidia-device-plugin-daemonset", "n1"), "Running", {"ready": True, "restarts": 0}),
        (driver_crashloop("n1"), "CrashLoopBackOff", {"ready": False, "restarts": 7, "container": "nvidia-driver-ctr"}),
        (validator_stuck("n1", "toolkit-validation"), "Init", {"init_step": "toolkit-validation", "node": "n1"}),
        (validator_stuck("n1", "driver-validation"), "Init", {"init_step": "driver-validation"}),
        (
            unscheduled("nvidia-driver-daemonset", "n2", {"a": "b"}),
            "Unschedulable",
            {"node": "n2", "scheduled": False, "reason": "Unschedulable"},
        ),
        (
            pod("x", "c", on="n1", phase="Pending", ready=False, containers=[waiting("main", "ImagePullBackOff")]),
            "ImagePullBackOff",
            {"reason": "ImagePullBackOff"},
        ),
        (
            pod("x", "c", on="n1", ready=False, containers=[running("main", ready=False)]),
            "NotReady",
            {"container": "main"},
        ),
        # a crash in an init container: the pod stays Pending, the step is known
        (
            pod(
                "x",
                "c",
                on="n1",
                phase="Pending",
                ready=False,
                containers=[],
                init_names=["toolkit-validation"],
                inits=[crashloop("toolkit-validation", restarts=3)],
            ),
            "CrashLoopBackOff",
            {"init_step": "toolkit-validation", "restarts": 3},
        ),
        # waiting CrashLoopBackOff without a restart yet is not reported as a crash loop
        (
            pod("x", "c", on="n1", ready=False, containers=[crashloop("main", restarts=0)]),
            "NotReady",
            {},
        ),
    ],
)
def test_pod_view(obj, state, extra):
    view = _cluster_views.pod_view(obj)
    assert view["state"] == state, view
    assert {k: view[k] for k in extra} == extra


def test_pod_view_terminating_and_component():
    obj = ready_pod("nvidia-dcgm-exporter", "n1")
    obj["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z"
    obj["metadata"]["ownerReferences"][0]["name"] = "nvidia-dcgm-exporter"
    obj["metadata"]["labels"] = {}
    view = _cluster_views.pod_view(obj)
    assert (view["state"], view["component"], view["owner_kind"]) == (
        "Terminating",
        "nvidia-dcgm-exporter",
        "DaemonSet",
    )


def test_failing_init_step_counts_missing_statuses():
    obj = pod("v", "nvidia-operator-validator", on="n1", phase="Pending", init_names=VALIDATION_STEPS, inits=[])
    assert _cluster_views.failing_init_step(obj)[0] == "driver-validation"


# -- nodes, vendors, resources ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "labels, alloc, vendor",
    [
        ({"nvidia.com/gpu.present": "true"}, {}, "nvidia"),
        ({"feature.node.kubernetes.io/pci-0302_10de.present": "true"}, {}, "nvidia"),
        ({}, {"nvidia.com/mig-1g.10gb": "7"}, "nvidia"),
        ({"feature.node.kubernetes.io/amd-gpu": "true"}, {}, "amd"),
        ({"feature.node.kubernetes.io/pci-1002.present": "true"}, {}, "amd"),
        ({}, {"amd.com/gpu": "8"}, "amd"),
        ({"feature.node.kubernetes.io/pci-8086.present": "true"}, {}, None),
        ({"nvidia.com/gpu.present": "false"}, {}, None),
    ],
)
def test_gpu_vendor(labels, alloc, vendor):
    assert _cluster_views.gpu_vendor(labels, alloc) == vendor


def test_node_view_resources_and_labels():
    n = gpu_node("n1", gpus=0, alloc={"nvidia.com/mig-1g.10gb": "14", "nvidia.com/mig-3g.40gb": "4"})
    view = _cluster_views.node_view(n, "nvidia")
    assert view["allocatable"] == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 14, "nvidia.com/mig-3g.40gb": 4}
    assert view["gpus"] == 18 and view["product"] == "NVIDIA-H100-80GB-HBM3"
    assert "kubernetes.io/hostname" not in view["labels"] and view["labels"]["nvidia.com/gpu.present"] == "true"


_CORDON = {"unschedulable": True, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}


# The SCHEDULING column (node["scheduling"]["summary"]): who cordoned the node, and the taints the GPU stack does not
# tolerate (issue 27)
@pytest.mark.parametrize(
    "spec, labels, annotations, summary, schedulable",
    [
        ({}, {}, {}, "schedulable", True),
        (_CORDON, {}, {}, "cordoned", False),
        (_CORDON, {}, {"gpuops.platform/onboarding-cordoned": "reboot"}, "cordoned (onboarding)", False),
        (_CORDON, {"gpuops.platform/remediation": "quarantined"}, {}, "cordoned (gpuops remediation)", False),
        (
            _CORDON,
            {"nvidia.com/gpu-driver-upgrade-state": "validation-required"},
            {},
            "cordoned (driver upgrade)",
            False,
        ),
        ({"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}, {}, {}, "schedulable", True),
        (
            {
                "taints": [
                    {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
                    {"key": "x", "effect": "NoExecute"},
                ]
            },
            {},
            {},
            "tainted dedicated=ml:NoSchedule,x:NoExecute",
            False,
        ),
        (
            {**_CORDON, "taints": [*_CORDON["taints"], {"key": "maint", "effect": "NoSchedule"}]},
            {},
            {},
            "cordoned, tainted maint:NoSchedule",
            False,
        ),
    ],
    ids=["none", "cordoned", "onboarding", "remediation", "driver-upgrade", "gpu-taint", "tainted", "both"],
)
def test_node_view_scheduling(spec, labels, annotations, summary, schedulable):
    view = _cluster_views.node_view(gpu_node("n1", spec=spec, labels=labels, annotations=annotations), "nvidia")
    assert view["scheduling"]["summary"] == summary
    assert view["scheduling"]["schedulable"] is schedulable and view["unschedulable"] is bool(spec.get("unschedulable"))


def test_cluster_policies_oldest_is_active():
    items = [
        cluster_policy("b", "2026-01-02T00:00:00Z", "ignored"),
        cluster_policy("z", "2026-01-01T00:00:00Z", "ready"),
        cluster_policy("a", "2026-01-02T00:00:00Z", "ignored"),
    ]
    view = _cluster_views.cluster_policies_view(items)
    assert view["active"] == "z" and [c["name"] for c in view["objects"]] == ["z", "a", "b"]
    assert _cluster_views.cluster_policies_view(None) == {"installed": False, "active": None, "objects": []}


@pytest.mark.parametrize(
    "facts, names, expected",
    [
        ({"n1": {"nouveau": {"loaded": True}}}, ["n1"], {"n1": {"nouveau": {"loaded": True}}}),
        ({"n1.example.com": {"x": 1}}, ["n1"], {"n1": {"x": 1}}),
        ({"n1": {"gpuops_host": {"x": 2}}}, ["n1.lab"], {"n1.lab": {"x": 2}}),
        ({"n1": {"ansible_facts": {"gpuops_host": {"x": 3}}}}, ["n1"], {"n1": {"x": 3}}),
        ({"other": {"x": 1}}, ["n1"], {}),
        (None, ["n1"], {}),
    ],
)
def test_match_host_facts(facts, names, expected):
    assert _cluster_views.match_host_facts(facts, names) == expected


def test_build_view_classifies_pods_and_selects_nodes():
    data = raw(
        nodes=[gpu_node("g1"), node("cpu-0"), node("amd-0", labels={"feature.node.kubernetes.io/amd-gpu": "true"})],
        pods=[ready_pod("nvidia-driver-daemonset", "g1"), operator_pod(), ready_pod("nfd-worker", "cpu-0")],
        amd_pods=[ready_pod("default-device-plugin", "amd-0", ns="kube-amd-gpu")],
    )
    view = view_of(data, host_facts={"g1": {"nouveau": {"loaded": False}}})
    assert [n["name"] for n in view["nodes"]] == ["amd-0", "g1"]
    assert [n["vendor"] for n in view["nodes"]] == ["amd", "nvidia"]
    assert [p["component"] for p in view["nodes"][1]["operands"]] == ["nvidia-driver-daemonset"]
    assert [p["name"] for p in view["operator_pods"]] == ["gpu-operator-7d9f-abcde"]
    assert len(view["operand_pods"]) == 3 and view["host_facts"].keys() == {"g1"}
    assert view["nodes"][1]["host_facts"] is True and view["nodes"][0]["host_facts"] is False
    # a user selector replaces GPU detection
    view = view_of(data, selector="kubernetes.io/hostname in (cpu-0)")
    assert [(n["name"], n["vendor"]) for n in view["nodes"]] == [("cpu-0", None)]


# -- collection: constant requests ------------------------------------------------------------------------
class FakeReader:
    """Serves a raw dataset the way _k8s.Reader does, counting one request per list."""

    def __init__(self, data):
        self.data = data
        self.requests = 0
        self.calls = []

    def _count(self, what, value):
        self.requests += 1
        self.calls.append(what)
        return value

    def nodes(self):
        return self._count("nodes", self.data["nodes"])

    def pods(self, namespace):
        key = "pods" if namespace == NS else "amd_pods"
        return self._count(f"pods/{namespace}", self.data[key])

    def daemonsets(self, namespace):
        return self._count(f"daemonsets/{namespace}", self.data["daemonsets"])

    def cluster_custom(self, group, version, plural):
        return self._count(plural, self.data["cluster_policies"])

    def namespaced_custom(self, group, version, namespace, plural):
        return self._count(f"{plural}/{namespace}", self.data["device_configs"])


@pytest.mark.parametrize("count", [1, 10, 1000])
def test_requests_do_not_grow_with_nodes(count):
    nodes = [gpu_node(f"g{i}") for i in range(count)]
    pods = [
        ready_pod(c, f"g{i}")
        for i in range(count)
        for c in ("nvidia-driver-daemonset", "nvidia-device-plugin-daemonset")
    ]
    pods.append(operator_pod(on="g0"))
    reader = FakeReader(raw(nodes=nodes, pods=pods, cluster_policies=[cluster_policy("cluster-policy", "t")]))
    out = cs.gather(reader, params(node_selector=None))
    assert out["api_requests"] == 6 == reader.requests
    assert out["summary"]["gpu_nodes"] == count and out["summary"]["gpu_nodes_ready"] == count
    assert out["summary"]["allocatable"] == {"nvidia.com/gpu": 8 * count}
    assert out["summary"]["healthy"] is True and out["diagnosis"] == []


def test_same_namespace_is_listed_once():
    reader = FakeReader(raw())
    cs.collect(reader, NS, NS)
    assert reader.requests == 5 and reader.calls.count(f"pods/{NS}") == 1


def test_result_shape_when_crds_missing():
    reader = FakeReader(raw(nodes=[gpu_node("g1")], pods=[ready_pod("nvidia-device-plugin-daemonset", "g1")]))
    out = cs.gather(reader, params(node_selector=None))
    assert set(out) == {
        "nodes",
        "operator",
        "cluster_policies",
        "device_configs",
        "summary",
        "diagnosis",
        "api_requests",
    }
    assert out["summary"]["cluster_policy"] == "not installed" and out["summary"]["device_config"] == "not installed"
    assert [f["id"] for f in out["diagnosis"]] == ["nvidia-operator-not-installed"]
    operand = out["nodes"][0]["operands"][0]
    assert set(operand) == set(cs._POD_KEYS) and operand["state"] == "Running"
