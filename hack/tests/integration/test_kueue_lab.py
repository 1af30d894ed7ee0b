"""The real Kueue controller (v0.19.2) in the lab, installed by upstream's own chart and run by the lab's kubelet for
the chart's pod: it admits by quota, its webhooks (on the chart's Service, through the lab's Service network, with the
CA Kueue's own certificate manager injected) make a queued Job suspended, its visibility API answers through the
aggregation layer, and uninstalling the release stops it."""

from __future__ import annotations

import uuid

import pytest
from gpuops_lab import kueue
from gpuops_lab.k8s import wait_for
from kubernetes import client

API = ("kueue.x-k8s.io", "v1beta2")
KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]
NAMESPACE = f"kueue-lab-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def release(cluster):
    """The lab's own Kueue release (the chart's defaults, tolerating the kwok taint), in a namespace of this module;
    uninstalled by the last test."""
    kueue.install(cluster.cfg, NAMESPACE, {"controllerManager": {"tolerations": KWOK}})
    yield NAMESPACE
    kueue.uninstall(cluster.cfg, NAMESPACE)


def _job(name, ns, queue, cpu, parallelism=1):
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [{"operator": "Exists"}],
                    # a long activeDeadline: kwok completes pods at once, which frees the quota; hold them running
                    "containers": [
                        {"name": "c", "image": "registry.invalid/pause:1", "resources": {"requests": {"cpu": cpu}}}
                    ],
                }
            },
        },
    }


def _webhooks(adm):
    names = {w.metadata.name for w in adm.list_mutating_webhook_configuration().items}
    names |= {w.metadata.name for w in adm.list_validating_webhook_configuration().items}
    return {n for n in names if n.startswith("kueue-")}


def test_kueue_admits_by_quota_and_suspends_queued_jobs(cluster, release, namespace):
    custom = client.CustomObjectsApi(cluster.api_client)
    batch = client.BatchV1Api(cluster.api_client)
    name = f"t-{uuid.uuid4().hex[:6]}"
    custom.create_cluster_custom_object(
        *API, "resourceflavors", {"apiVersion": "/".join(API), "kind": "ResourceFlavor", "metadata": {"name": name}}
    )
    cq = {
        "apiVersion": "/".join(API),
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "stopPolicy": "None",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": name, "resources": [{"name": "cpu", "nominalQuota": "0"}]}],
                }
            ],
        },
    }
    custom.create_cluster_custom_object(*API, "clusterqueues", cq)
    try:
        lq = {
            "apiVersion": "/".join(API),
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": namespace},
            "spec": {"clusterQueue": name},
        }
        custom.create_namespaced_custom_object(*API, namespace, "localqueues", lq)
        batch.create_namespaced_job(namespace, _job("big", namespace, "q", "2"))
        # the mutating webhook suspended the Job; with no quota Kueue keeps it so, and says why
        assert batch.read_namespaced_job("big", namespace).spec.suspend is True

        def pending():
            wls = custom.list_namespaced_custom_object(*API, namespace, "workloads")["items"]
            conds = [c for w in wls for c in (w.get("status") or {}).get("conditions") or []]
            return [c for c in conds if c["type"] == "QuotaReserved" and c["status"] == "False"]

        reason = wait_for(pending, 30)
        assert reason and "insufficient" in reason[0]["message"].lower(), reason
        assert batch.read_namespaced_job("big", namespace).spec.suspend is True
        # quota raised: Kueue admits it and unsuspends the Job
        cq_live = custom.get_cluster_custom_object(*API, "clusterqueues", name)
        cq_live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "2"
        custom.replace_cluster_custom_object(*API, "clusterqueues", name, cq_live)
        assert wait_for(lambda: batch.read_namespaced_job("big", namespace).spec.suspend is False, 30)
    finally:
        batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
        wait_for(lambda: not custom.list_namespaced_custom_object(*API, namespace, "workloads")["items"], 30)
        custom.delete_cluster_custom_object(*API, "clusterqueues", name)
        custom.delete_cluster_custom_object(*API, "resourceflavors", name)


def test_visibility_api_through_the_aggregation_layer(cluster, release):
    apireg = client.ApiregistrationV1Api(cluster.api_client)
    for version in ("v1beta1", "v1beta2"):
        name = f"{version}.visibility.kueue.x-k8s.io"
        conds = wait_for(
            lambda n=name: [
                c
                for c in apireg.read_api_service(n).status.conditions or []
                if c.type == "Available" and c.status == "True"
            ],
            60,
        )
        assert conds, f"APIService {name} not available"
    found = client.CustomObjectsApi(cluster.api_client).get_api_resources("visibility.kueue.x-k8s.io", "v1beta2")
    resources = {r.name for r in found.resources}
    assert "clusterqueues/pendingworkloads" in resources


def test_uninstall_stops_kueue_and_removes_its_webhooks(cluster, release, namespace):
    adm = client.AdmissionregistrationV1Api(cluster.api_client)
    batch = client.BatchV1Api(cluster.api_client)
    assert cluster.lab.proc("kueue").pid() is not None
    kueue.uninstall(cluster.cfg, release)
    assert wait_for(lambda: cluster.lab.proc("kueue").pid() is None, 30), "the kubelet did not stop Kueue"
    assert _webhooks(adm) == set()
    # with Kueue gone, a Job naming a queue is accepted as written (no webhook left to suspend it)
    batch.create_namespaced_job(namespace, _job("after-uninstall", namespace, "absent", "1"))
    assert not batch.read_namespaced_job("after-uninstall", namespace).spec.suspend
