"""The real Kueue controller (v0.19.2) in the lab: it admits by quota, its webhooks make a queued Job suspended, and
the lab removes its webhook configurations when it stops Kueue (failurePolicy Fail: left behind, they would refuse
every Job)."""

from __future__ import annotations

import uuid

from gpuops_lab import kueue
from gpuops_lab.k8s import wait_for
from kubernetes import client

API = ("kueue.x-k8s.io", "v1beta2")


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


def test_kueue_admits_by_quota_and_suspends_queued_jobs(cluster, namespace):
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


def test_stopping_kueue_removes_its_webhooks_and_up_restores_them(cluster, namespace):
    adm = client.AdmissionregistrationV1Api(cluster.api_client)
    batch = client.BatchV1Api(cluster.api_client)
    assert _webhooks(adm) == set(kueue.WEBHOOK_NAMES.values())
    try:
        assert cluster.lab.stop_kueue() is True
        assert cluster.lab.proc("kueue").pid() is None
        assert _webhooks(adm) == set()
        # with Kueue stopped, a queued Job is still accepted (no webhook left to refuse it), and stays as written
        batch.create_namespaced_job(namespace, _job("while-stopped", namespace, "absent", "1"))
        assert not batch.read_namespaced_job("while-stopped", namespace).spec.suspend
    finally:
        assert cluster.lab.up() is True  # starts what is not running: Kueue, and registers its webhooks again
    assert _webhooks(adm) == set(kueue.WEBHOOK_NAMES.values())
    batch.create_namespaced_job(namespace, _job("after", namespace, "absent", "1"))
    assert batch.read_namespaced_job("after", namespace).spec.suspend is True  # the webhook is back
