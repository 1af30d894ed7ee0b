"""gpu_cluster_status against the real control plane: simulated GPU nodes, operand pods bound to them with the
fault states the operator simulator produces (CrashLoopBackOff, stuck in Init, Pending on a node without NFD
labels), two ClusterPolicies; the module, run through `ansible`, names the cause of each. The pods' status is
written through the status subresource, with the annotation that keeps kwok from setting them Running.

(Named *_lab.py: tests/unit/plugins/modules/test_gpu_cluster_status.py has the plain name, and pytest cannot
collect two test modules of one basename in a session.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from gpuops_lab.k8s import ensure_crd, wait_for
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".state" / "collections"))

from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_status  # noqa: E402

MANAGED = "sim.gpuops.io/managed-status"
TOLERATE_ALL = [{"operator": "Exists"}]
CP_CRD = REPO / "tests/fixtures/charts/gpu-operator/v26.7.0/crds/nvidia.com_clusterpolicies.yaml"
CP_SPEC = dict.fromkeys(
    [
        "daemonsets",
        "dcgm",
        "dcgmExporter",
        "devicePlugin",
        "driver",
        "gfd",
        "nodeStatusExporter",
        "operator",
        "toolkit",
    ],
    {},
)
VALIDATION_STEPS = ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]


def _pod(namespace, name, component, node=None, bound=None, node_selector=None, init=(), managed=True):
    spec = {
        "containers": [{"name": "main", "image": "registry.invalid/operand:1"}],
        "initContainers": [{"name": n, "image": "registry.invalid/validator:1"} for n in init],
        "tolerations": TOLERATE_ALL,
        "nodeSelector": dict(node_selector or {}),
    }
    if node:
        spec["nodeName"] = node
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
    meta = {"name": name, "namespace": namespace, "labels": {"app": component}}
    if managed:
        meta["annotations"] = {MANAGED: "true"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _crashloop_status(container="main"):
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [
            {
                "name": container,
                "image": "registry.invalid/operand:1",
                "imageID": "",
                "ready": False,
                "restartCount": 6,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": "modprobe nvidia failed"}},
            }
        ],
    }


def _init_stuck_status(step):
    idx = VALIDATION_STEPS.index(step)
    inits = [
        {
            "name": s,
            "image": "registry.invalid/validator:1",
            "imageID": "",
            "ready": i < idx,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}
            if i < idx
            else ({"running": {}} if i == idx else {"waiting": {"reason": "PodInitializing"}}),
        }
        for i, s in enumerate(VALIDATION_STEPS)
    ]
    return {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}], "initContainerStatuses": inits}


@pytest.fixture
def cluster_policies(cluster):
    """Two ClusterPolicies of this test (created one second apart)."""
    ensure_crd(cluster.api_client, CP_CRD)
    custom = client.CustomObjectsApi(cluster.api_client)
    tag = uuid.uuid4().hex[:6]
    names = [f"t{tag}-first", f"t{tag}-second"]
    # the lab's simulator leaves objects labelled for another simulator instance alone
    labels = {"sim.gpuops.io/instance": f"t{tag}"}
    try:
        for i, name in enumerate(names):
            if i:
                time.sleep(1.1)  # creationTimestamp has a one-second resolution
            body = {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": name, "labels": labels},
                "spec": CP_SPEC,
            }
            custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", body)
            state = "ready" if i == 0 else "ignored"
            custom.patch_cluster_custom_object_status(
                "nvidia.com", "v1", "clusterpolicies", name, {"status": {"state": state}}
            )
        yield names
    finally:
        for name in names:
            try:
                custom.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
def faulty(cluster, core, namespace, add_nodes):
    """Three dgx-h100 nodes labelled as the operator labels GPU nodes, one cpu-only node, and operand pods:
    driver CrashLoopBackOff on n0; validator stuck in toolkit-validation and toolkit CrashLoopBackOff on n1;
    a driver pod bound to the cpu node pending on the labels the operator only sets on NFD-labelled nodes."""
    gpu = add_nodes("dgx-h100", 3)
    (cpu,) = add_nodes("cpu-only", 1)
    deploy = {f"nvidia.com/gpu.deploy.{c}": "true" for c in ("driver", "device-plugin", "operator-validator")}
    for name in gpu:
        core.patch_node(name, {"metadata": {"labels": {"nvidia.com/gpu.present": "true", **deploy}}})
    n0, n1 = gpu[0], gpu[1]
    pods = [
        (_pod(namespace, f"nvidia-driver-daemonset-{n0}", "nvidia-driver-daemonset", node=n0), _crashloop_status()),
        (
            _pod(
                namespace,
                f"nvidia-operator-validator-{n1}",
                "nvidia-operator-validator",
                node=n1,
                init=VALIDATION_STEPS,
            ),
            _init_stuck_status("toolkit-validation"),
        ),
        (
            _pod(namespace, f"nvidia-container-toolkit-daemonset-{n1}", "nvidia-container-toolkit-daemonset", node=n1),
            _crashloop_status(),
        ),
    ]
    for body, status in pods:
        core.create_namespaced_pod(namespace, body)
        core.patch_namespaced_pod_status(body["metadata"]["name"], namespace, {"status": status})
    pending = _pod(
        namespace,
        f"nvidia-driver-daemonset-{cpu}",
        "nvidia-driver-daemonset",
        bound=cpu,
        node_selector={"nvidia.com/gpu.deploy.driver": "true"},
        managed=False,
    )
    core.create_namespaced_pod(namespace, pending)

    def unschedulable():
        st = core.read_namespaced_pod(pending["metadata"]["name"], namespace).status
        return any(c.type == "PodScheduled" and c.status == "False" for c in (st.conditions or []))

    assert wait_for(unschedulable, 60), "the scheduler did not mark the pending pod unschedulable"
    return {"gpu": gpu, "cpu": cpu, "namespace": namespace}


def _run_module(cluster, args: dict) -> tuple[int, dict]:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_HOME": str(REPO / ".state" / "ansible-home"),
    }
    argv = [
        str(Path(sys.executable).parent / "ansible"),
        "localhost",
        "-m",
        "gpuops.platform.gpu_cluster_status",
        "-a",
        json.dumps({"kubeconfig": cluster.kubeconfig, **args}),
        "-e",
        f"ansible_python_interpreter={sys.executable}",
    ]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=300, check=False)
    assert r.stdout.strip(), r.stderr
    out = json.loads(r.stdout)
    return r.returncode, out["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_module_names_the_causes(cluster, faulty, cluster_policies):
    gpu, cpu, ns = faulty["gpu"], faulty["cpu"], faulty["namespace"]
    n0, n1, n2 = gpu
    host_facts = {n0: {"nouveau": {"loaded": True, "in_use": True}, "nvidia_driver": {"loaded": False}}}
    rc, res = _run_module(
        cluster,
        {
            "operator_namespace": ns,
            "amd_namespace": f"{ns}-amd",
            "node_selector": f"kubernetes.io/hostname in ({','.join(gpu)})",
            "host_facts": host_facts,
        },
    )
    assert rc == 0 and res["changed"] is False, res
    assert res["api_requests"] == 6
    assert [n["name"] for n in res["nodes"]] == sorted(gpu)
    by = {(f["id"], f["node"]): f for f in res["diagnosis"]}

    crash = by[("driver-crashloop", n0)]
    assert crash["object"] == {"kind": "Pod", "namespace": ns, "name": f"nvidia-driver-daemonset-{n0}"}
    assert "nouveau" in crash["cause"] and "nouveau_blacklist" in crash["fix"]

    stuck = by[("validator-init-stuck", n1)]
    assert stuck["object"]["name"] == f"nvidia-container-toolkit-daemonset-{n1}"
    assert "Container Toolkit" in stuck["cause"] and "toolkit-validation" in stuck["evidence"][0]

    pending = by[("operand-pending-labels", cpu)]
    assert pending["object"]["name"] == f"nvidia-driver-daemonset-{cpu}"
    assert "NFD labels missing" in pending["cause"] and "nvidia.com/gpu.deploy.driver=true" in pending["evidence"][1]

    for name in gpu:
        assert ("gpu-resource-missing", name) in by
    assert by[("gpu-resource-missing", n0)]["object"]["name"] == f"nvidia-driver-daemonset-{n0}"
    node0 = next(n for n in res["nodes"] if n["name"] == n0)
    assert node0["host_facts"] is True and node0["operands"][0]["state"] == "CrashLoopBackOff"
    assert node0["operands"][0]["restarts"] == 6

    ignored = [f for f in res["diagnosis"] if f["id"] == "clusterpolicy-ignored"]
    assert cluster_policies[1] in {f["object"]["name"] for f in ignored}
    assert res["cluster_policies"]["active"] != cluster_policies[1]
    assert res["summary"]["healthy"] is False


def test_fail_on_error_and_constant_requests(cluster, faulty, add_nodes):
    ns = faulty["namespace"]
    rc, res = _run_module(cluster, {"operator_namespace": ns, "amd_namespace": ns, "fail_on_error": True})
    assert rc != 0 and res["failed"] is True and "severity error" in res["msg"]
    assert res["diagnosis"], "the result is returned with the failure"
    # the same requests with 40 more nodes (same namespace twice: the pods are listed once)
    reader = _k8s.Reader(_k8s.new_api_client({"kubeconfig": cluster.kubeconfig}))
    params = {"operator_namespace": ns, "amd_namespace": ns, "host_facts": None, "node_selector": None}
    before = _cluster_status.gather(reader, params)
    add_nodes("dgx-h100", 40)
    reader = _k8s.Reader(_k8s.new_api_client({"kubeconfig": cluster.kubeconfig}))
    after = _cluster_status.gather(reader, params)
    assert before["api_requests"] == after["api_requests"] == 5
    assert after["summary"]["gpu_nodes"] >= before["summary"]["gpu_nodes"] + 40


# -- against the operator simulator's documented faults ----------------------------------------------------
SIM_FAULTS = {
    0: "driver-crashloop",
    1: "host-driver-conflict",
    2: "toolkit-not-ready",
    3: "validator-init-stuck",
    4: "nfd-labels-missing",
}


@pytest.fixture
def simulated(cluster, core, namespace, add_nodes):
    """An in-process ClusterPolicy simulator instance of this test (the lab's own simulator leaves objects of
    another instance alone) reconciling one ClusterPolicy over six dgx-h100 nodes, five of them with a fault."""
    from gpuops_lab.simulator.faults import FAULTS_ANNOTATION
    from gpuops_lab.simulator.framework import RealClient, Simulator
    from gpuops_lab.simulator.handlers.nvidia import INSTANCE_LABEL, ClusterPolicyHandler

    ensure_crd(cluster.api_client, CP_CRD)
    gpu = add_nodes("dgx-h100", 6)
    for i, name in enumerate(gpu):
        meta = {"labels": {INSTANCE_LABEL: namespace}}
        if i in SIM_FAULTS:
            meta["annotations"] = {FAULTS_ANNOTATION: SIM_FAULTS[i]}
        core.patch_node(name, {"metadata": meta})
    handler = ClusterPolicyHandler(instance=namespace, operator_namespace=namespace)
    sim = Simulator(RealClient.from_kubeconfig(cluster.kubeconfig), [handler], resync_period=2.0, watch_timeout=30)
    sim.start()
    custom = client.CustomObjectsApi(cluster.api_client)
    name = f"{namespace}-policy"
    try:
        assert sim.wait_ready(30), "simulator watches not established within 30s"
        body = {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": name, "labels": {INSTANCE_LABEL: namespace}},
            "spec": {
                **CP_SPEC,
                "daemonsets": {
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
                },
                "driver": {"enabled": True, "version": "595.91.07"},
                "dcgm": {"enabled": False},
                "nodeStatusExporter": {"enabled": False},
            },
        }
        custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", body)
        yield {"gpu": gpu, "namespace": namespace, "policy": name, "instance_label": INSTANCE_LABEL}
    finally:
        try:
            custom.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        wait_for(lambda: not client.AppsV1Api(cluster.api_client).list_namespaced_daemon_set(namespace).items, 30)
        sim.stop()


def test_diagnoses_the_simulator_faults(cluster, simulated):
    gpu, ns = simulated["gpu"], simulated["namespace"]
    reader_params = {
        "operator_namespace": ns,
        "amd_namespace": ns,
        "host_facts": None,
        "node_selector": f"{simulated['instance_label']}={ns}",
    }
    expected = {
        ("driver-crashloop", gpu[0]),
        ("validator-init-stuck", gpu[0]),
        ("node-not-ready", gpu[1]),
        ("validator-init-stuck", gpu[2]),
        ("validator-init-stuck", gpu[3]),
        ("gpu-resource-missing", gpu[4]),
    }

    last = {}

    def diagnosed():
        reader = _k8s.Reader(_k8s.new_api_client({"kubeconfig": cluster.kubeconfig}))
        last["res"] = res = _cluster_status.gather(reader, reader_params)
        got = {(f["id"], f["node"]) for f in res["diagnosis"]}
        healthy = next(n for n in res["nodes"] if n["name"] == gpu[5])
        # the simulated operator writes the ClusterPolicy's state on its own round, which can come after the pods'
        # faults are visible (seen under a full make test's load): wait for it too
        policies = res["cluster_policies"]["objects"]
        policy = (
            bool(policies)
            and policies[0]["state"] == "notReady"
            or "clusterpolicy-not-ready" in {f["id"] for f in res["diagnosis"]}
        )
        return res if expected <= got and policy and healthy["allocatable"].get("nvidia.com/gpu") == 8 else None

    res = wait_for(diagnosed, 120, 2.0)
    assert res, f"faults not diagnosed within 120s: {[(f['id'], f['node']) for f in last['res']['diagnosis']]}"
    by = {(f["id"], f["node"]): f for f in res["diagnosis"]}
    assert by[("driver-crashloop", gpu[0])]["object"]["name"].startswith("nvidia-driver-daemonset")
    assert by[("validator-init-stuck", gpu[0])]["object"]["name"].startswith("nvidia-driver-daemonset")
    conflict = by[("node-not-ready", gpu[1])]
    assert "host driver and driver container both present" in conflict["cause"]
    toolkit = by[("validator-init-stuck", gpu[2])]
    assert toolkit["object"]["name"].startswith("nvidia-container-toolkit-daemonset") and "NotReady" in toolkit["cause"]
    stuck = by[("validator-init-stuck", gpu[3])]
    assert stuck["object"]["name"].startswith("nvidia-operator-validator") and "driver-validation" in stuck["cause"]
    nfd = by[("gpu-resource-missing", gpu[4])]
    assert "nvidia.com/gpu.deploy.device-plugin=true" in nfd["cause"]
    assert not [f for f in res["diagnosis"] if f["node"] == gpu[5]], "the healthy node has findings"
    assert res["cluster_policies"]["objects"][0]["state"] == "notReady" or any(
        f["id"] == "clusterpolicy-not-ready" for f in res["diagnosis"]
    )


# -- wait and vendor scoping (a mixed NVIDIA + AMD cluster) ---------------------------------------------------
def test_wait_and_vendor_scoping_on_a_mixed_cluster(cluster, core, namespace, add_nodes):
    """The first converge of a mixed cluster, after the NVIDIA role and before the AMD one: the dgx-h100 node
    advertises its GPUs, the amd-mi300x node has no device plugin yet. The NVIDIA role's wait (vendor nvidia)
    passes, waiting for a Deployment that the real controllers roll out; judged for every vendor, the wait
    fails naming the AMD node and the condition it does not meet, and the diagnosis gives the cause."""
    (dgx,) = add_nodes("dgx-h100", 1)
    (amd,) = add_nodes("amd-mi300x", 1)
    selector = f"gpuops.test/instance={namespace}"
    for name in (dgx, amd):
        core.patch_node(name, {"metadata": {"labels": {"gpuops.test/instance": namespace}}})
    gpus = {"nvidia.com/gpu": "8"}
    core.patch_node_status(dgx, {"status": {"capacity": gpus, "allocatable": gpus}})
    client.AppsV1Api(cluster.api_client).create_namespaced_deployment(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{"name": "main", "image": "registry.invalid/web:1"}],
                        "nodeSelector": {"kubernetes.io/hostname": dgx},
                        "tolerations": TOLERATE_ALL,
                    },
                },
            },
        },
    )
    base = {"operator_namespace": namespace, "amd_namespace": f"{namespace}-amd", "node_selector": selector}
    deployment = {"kind": "Deployment", "name": "web", "namespace": namespace}

    rc, res = _run_module(
        cluster, {**base, "vendor": ["nvidia"], "wait": {"timeout": 90, "sleep": 1, "objects": [deployment]}}
    )
    assert rc == 0 and res["wait"]["ready"] is True, res.get("msg")
    assert res["wait"]["probes"] >= 1 and [n["name"] for n in res["nodes"]] == [dgx]
    assert not [f for f in res["diagnosis"] if f["severity"] == "error"]

    rc, res = _run_module(cluster, {**base, "wait": {"timeout": 2, "sleep": 1, "objects": [deployment]}})
    assert rc != 0 and res["failed"] is True
    assert [n["name"] for n in res["nodes"]] == sorted([dgx, amd])
    assert res["wait"]["not_ready"] == [
        {
            "kind": "Node",
            "namespace": None,
            "name": amd,
            "condition": "allocatable amd.com/gpu is absent (the device plugin advertises no GPU)",
        }
    ]
    assert f"Node {amd}: allocatable amd.com/gpu is absent" in res["msg"]
    assert f"[gpu-resource-missing] {amd}: AMD device-plugin pod missing on the node" in res["msg"]

    # the AMD role's own view of the same cluster: only the AMD node, and it is the one not ready
    rc, res = _run_module(cluster, {**base, "vendor": ["amd"], "wait": {"timeout": 0}})
    assert rc != 0 and [n["name"] for n in res["nodes"]] == [amd]
    assert [n["name"] for n in res["wait"]["not_ready"]] == [amd]


# -- cordoned and tainted GPU nodes (issue 27) -------------------------------------------------------------
def test_cordoned_and_tainted_nodes(cluster, core, namespace, add_nodes):
    """Four dgx-h100 nodes advertising their GPUs: one cordoned by hand, one cordoned by onboarding (its
    annotation), one cordoned by the GPU Operator's driver upgrade (its state label), one tainted. The real
    node lifecycle controller adds node.kubernetes.io/unschedulable to the cordoned ones, which is not reported
    as a taint; each cordon is judged by its marker, the foreign taint is named. The lab's kwok taint is
    tolerated by the device-plugin DaemonSet (as the local inventory's gpu_operator_tolerations do), so it counts
    as the GPU stack's."""
    hand, onboarding, upgrade, tainted = add_nodes("dgx-h100", 4)
    labels = {"app": "nvidia-device-plugin-daemonset"}
    client.AppsV1Api(cluster.api_client).create_namespaced_daemon_set(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "nvidia-device-plugin-daemonset"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "main", "image": "registry.invalid/device-plugin:1"}],
                        "nodeSelector": {"gpuops.test/none": "true"},  # no pod: only its tolerations are read
                        "tolerations": [
                            {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        ],
                    },
                },
            },
        },
    )
    gpus = {"nvidia.com/gpu": "8"}
    for name in (hand, onboarding, upgrade, tainted):
        core.patch_node(name, {"metadata": {"labels": {"gpuops.test/instance": namespace}}})
        core.patch_node_status(name, {"status": {"capacity": gpus, "allocatable": gpus}})
    core.patch_node(onboarding, {"metadata": {"annotations": {"gpuops.platform/onboarding-cordoned": "reboot"}}})
    core.patch_node(upgrade, {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade-state": "drain-required"}}})
    for name in (hand, onboarding, upgrade):
        core.patch_node(name, {"spec": {"unschedulable": True}})
    core.patch_node(tainted, {"spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}})

    def lifecycle_taint():
        return (core.read_node(hand).spec.taints or []) and any(
            t.key == "node.kubernetes.io/unschedulable" for t in core.read_node(hand).spec.taints
        )

    assert wait_for(lifecycle_taint, 60), "the node lifecycle controller did not taint the cordoned node"
    rc, res = _run_module(
        cluster,
        {
            "operator_namespace": namespace,
            "amd_namespace": namespace,
            "node_selector": f"gpuops.test/instance={namespace}",
        },
    )
    assert rc == 0, res
    summary = {n["name"]: n["scheduling"]["summary"] for n in res["nodes"]}
    assert summary == {
        hand: "cordoned",
        onboarding: "cordoned (onboarding)",
        upgrade: "cordoned (driver upgrade)",
        tainted: "tainted dedicated=ml:NoSchedule",
    }
    got = {(f["id"], f["node"]): f for f in res["diagnosis"] if f["id"] in ("node-cordoned", "node-tainted")}
    assert {k: f["severity"] for k, f in got.items()} == {
        ("node-cordoned", hand): "warning",
        ("node-cordoned", onboarding): "info",
        ("node-cordoned", upgrade): "info",
        ("node-tainted", tainted): "warning",
    }
    assert "annotation gpuops.platform/onboarding-cordoned=reboot" in got[("node-cordoned", onboarding)]["evidence"]
    assert f"node {tainted}: taint dedicated=ml:NoSchedule" in got[("node-tainted", tainted)]["evidence"]
