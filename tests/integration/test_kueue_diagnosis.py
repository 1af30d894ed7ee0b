"""The batch diagnosis rows (gpu_cluster_status batch: true), each produced by its fault against the real Kueue of the
lab: a Job naming a LocalQueue that does not exist; a ClusterQueue with a nil namespaceSelector; a flavor whose node
labels match no node; pods naming a scheduler that does not run; quota above the nodes' capacity (warning, numbers)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from gpuops_lab.k8s import wait_for
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".state/collections"))

from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_status, _diag_batch  # noqa: E402

API = ("kueue.x-k8s.io", "v1beta2")
KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]


def _job(name, queue, cpu="1"):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": KWOK,
                    "containers": [
                        {"name": "c", "image": "registry.invalid/c:1", "resources": {"requests": {"cpu": cpu}}}
                    ],
                }
            }
        },
    }


@pytest.fixture(scope="module", autouse=True)
def kueue_release(cluster):
    """Kueue from its upstream chart, in a namespace of this module (the lab runs Kueue for a release's pod only)."""
    from gpuops_lab import kueue

    namespace = f"kueue-diag-{uuid.uuid4().hex[:6]}"
    kueue.install(cluster.cfg, namespace, {"controllerManager": {"tolerations": KWOK}})
    yield namespace
    kueue.uninstall(cluster.cfg, namespace)


@pytest.fixture
def kueue_objects(cluster):
    custom = client.CustomObjectsApi(cluster.api_client)
    made: list[tuple[str, str | None, str]] = []

    def make(plural, obj, namespace=None):
        if namespace:
            custom.create_namespaced_custom_object(*API, namespace, plural, obj)
        else:
            custom.create_cluster_custom_object(*API, plural, obj)
        made.append((plural, namespace, obj["metadata"]["name"]))

    yield make
    for plural, namespace, name in reversed(made):
        try:
            if namespace:
                custom.delete_namespaced_custom_object(*API, namespace, plural, name)
            else:
                custom.delete_cluster_custom_object(*API, plural, name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def _gather(cluster):
    reader = _k8s.Reader(_k8s.new_api_client({"kubeconfig": cluster.kubeconfig}))
    params = {
        "operator_namespace": "gpu-operator",
        "amd_namespace": "gpu-operator",
        "host_facts": None,
        "node_selector": None,
        "batch": True,
    }
    return _cluster_status.gather(reader, params)


def _rows(res, fid):
    return [f for f in res["diagnosis"] if f["id"] == fid]


def test_batch_rows_each_from_its_fault(cluster, namespace, kueue_objects):
    tag = uuid.uuid4().hex[:6]
    batch = client.BatchV1Api(cluster.api_client)
    custom = client.CustomObjectsApi(cluster.api_client)
    # 1. a Job naming a LocalQueue its namespace does not have
    batch.create_namespaced_job(namespace, _job("no-lq", "nope"))
    # 2. a hand-made ClusterQueue without namespaceSelector (nil: selects no namespace), its LocalQueue, a Job
    kueue_objects(
        "resourceflavors", {"apiVersion": "/".join(API), "kind": "ResourceFlavor", "metadata": {"name": f"any-{tag}"}}
    )
    rg = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": f"any-{tag}", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
        }
    ]
    kueue_objects(
        "clusterqueues",
        {
            "apiVersion": "/".join(API),
            "kind": "ClusterQueue",
            "metadata": {"name": f"nil-{tag}"},
            "spec": {"resourceGroups": rg},
        },
    )
    kueue_objects(
        "localqueues",
        {
            "apiVersion": "/".join(API),
            "kind": "LocalQueue",
            "metadata": {"name": "nil"},
            "spec": {"clusterQueue": f"nil-{tag}"},
        },
        namespace,
    )
    batch.create_namespaced_job(namespace, _job("nil-selector", "nil"))
    # 3. a flavor whose node labels match no node, a ClusterQueue on it (all namespaces), its LocalQueue, a Job
    kueue_objects(
        "resourceflavors",
        {
            "apiVersion": "/".join(API),
            "kind": "ResourceFlavor",
            "metadata": {"name": f"nowhere-{tag}"},
            "spec": {"nodeLabels": {"gpuops.test/pool": "nowhere"}},
        },
    )
    rg2 = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": f"nowhere-{tag}", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
        }
    ]
    kueue_objects(
        "clusterqueues",
        {
            "apiVersion": "/".join(API),
            "kind": "ClusterQueue",
            "metadata": {"name": f"nowhere-{tag}"},
            "spec": {"namespaceSelector": {}, "resourceGroups": rg2},
        },
    )
    kueue_objects(
        "localqueues",
        {
            "apiVersion": "/".join(API),
            "kind": "LocalQueue",
            "metadata": {"name": "nowhere"},
            "spec": {"clusterQueue": f"nowhere-{tag}"},
        },
        namespace,
    )
    batch.create_namespaced_job(namespace, _job("no-node", "nowhere"))
    # 5. quota above capacity: 1000 CPUs of quota on a flavor of the cpu-0 node (64 allocatable)
    kueue_objects(
        "resourceflavors",
        {
            "apiVersion": "/".join(API),
            "kind": "ResourceFlavor",
            "metadata": {"name": f"cpu0-{tag}"},
            "spec": {"nodeLabels": {"kubernetes.io/hostname": "cpu-0"}},
        },
    )
    rg3 = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": f"cpu0-{tag}", "resources": [{"name": "cpu", "nominalQuota": "1k"}]}],
        }
    ]
    kueue_objects(
        "clusterqueues",
        {
            "apiVersion": "/".join(API),
            "kind": "ClusterQueue",
            "metadata": {"name": f"big-{tag}"},
            "spec": {"namespaceSelector": {}, "resourceGroups": rg3},
        },
    )

    def workloads_seen():
        wls = custom.list_namespaced_custom_object(*API, namespace, "workloads")["items"]
        return len(wls) == 3 and all((w.get("status") or {}).get("conditions") for w in wls)

    assert wait_for(workloads_seen, 30), "Kueue made no Workload for the three Jobs"
    res = _gather(cluster)
    (lq,) = [f for f in _rows(res, "kueue-local-queue-missing") if f["object"]["namespace"] == namespace]
    assert lq["severity"] == "error" and lq["object"]["kind"] == "Workload"
    assert f"LocalQueues in namespace {namespace}: nil, nowhere" in lq["evidence"]
    assert any("Job no-lq" in e for e in lq["evidence"])
    (nil,) = [f for f in _rows(res, "kueue-cluster-queue-selects-no-namespace") if f["object"]["name"] == f"nil-{tag}"]
    assert f"ClusterQueue nil-{tag} namespaceSelector: nil (Kueue: selects no namespace)" in nil["evidence"]
    (nowhere,) = [f for f in _rows(res, "kueue-flavor-matches-no-node") if f["object"]["name"] == f"nowhere-{tag}"]
    assert nowhere["severity"] == "error" and any(f"{namespace}/job-no-node-" in e for e in nowhere["evidence"])
    (big,) = [f for f in _rows(res, "kueue-quota-above-capacity") if f["object"]["name"] == f"cpu0-{tag}"]
    assert big["severity"] == "warning"
    assert big["evidence"] == [
        f"cpu: nominal quotas sum to 1000 (big-{tag} 1k), the flavor's 1 node(s) have 64 allocatable (cpu-0)"
    ]
    assert res["api_requests"] >= 6


def test_pods_naming_a_scheduler_that_does_not_run(cluster, namespace, core, volcano_release):
    # Volcano runs (its chart installed) but not KAI: a kai-scheduler pod is one nobody looks at, a volcano pod one
    # that Volcano answers (a PodScheduled condition, placed or not) and the rule must leave alone
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gang-0"},
        "spec": {
            "schedulerName": "kai-scheduler",
            "tolerations": KWOK,
            "containers": [{"name": "c", "image": "registry.invalid/c:1"}],
        },
    }
    core.create_namespaced_pod(namespace, pod)
    for name, sched in (("default-0", "default-scheduler"), ("volcano-0", "volcano")):
        core.create_namespaced_pod(
            namespace, {**pod, "metadata": {"name": name}, "spec": {**pod["spec"], "schedulerName": sched}}
        )
    reader = _k8s.Reader(_k8s.new_api_client({"kubeconfig": cluster.kubeconfig}))
    raw = _diag_batch.collect(reader)
    nodes = reader.nodes()
    # just created: inside the grace period, no finding yet
    assert [
        f
        for f in _diag_batch.rule_scheduler_missing({"batch": _diag_batch.view(raw, nodes)})
        if namespace in f["evidence"][0]
    ] == []

    # Volcano has looked at its pod: PodScheduled is set, whether it placed it or not
    def volcano_looked():
        conditions = core.read_namespaced_pod("volcano-0", namespace).status.conditions or []
        return any(c.type == "PodScheduled" for c in conditions)

    assert wait_for(volcano_looked, 60)
    raw = _diag_batch.collect(reader)
    raw["now"] += 60  # a minute later: still no PodScheduled condition on the kai-scheduler pod (nobody looked at it)
    (row,) = [
        f
        for f in _diag_batch.rule_scheduler_missing({"batch": _diag_batch.view(raw, nodes)})
        if namespace in f["evidence"][0]
    ]
    assert row["id"] == "pod-scheduler-missing" and row["object"]["name"] == "schedulerName=kai-scheduler"
    assert f"{namespace}/gang-0" in row["evidence"][0]
    assert "default-0" not in row["evidence"][0] and "volcano-0" not in row["evidence"][0]
    assert wait_for(lambda: core.read_namespaced_pod("default-0", namespace).spec.node_name, 30)  # the default one runs
