"""What the queues the kueue role writes admit, through the real Kueue v0.19.2 controller of the lab (nothing of Kueue
is simulated; kwok runs the pods it lets start, held running with sim.gpuops.io/run-until-deleted):

- gang admission: a 16-GPU Job on a queue with 12 GPUs of quota stays suspended (no pod) while a 4-GPU Job is
  admitted; with the small Job gone it still waits (all or nothing: 12 of 16 is never admitted); the role re-run with
  16 GPUs of quota admits it, both pods at once;
- borrowing within a cohort and preemption back: a team borrows its neighbour's idle H100s; when the lender submits
  work Kueue preempts the borrower's workload to give the lender its nominal quota back;
- flavors: a Job that asks for H100s (by GPU product) is admitted to the H100 flavor and lands on H100 nodes, even with
  an L40S flavor listed first; a Job that asks for any GPU gets the first flavor, L40S, and lands there.

The GPUs come from the lab's inventory nodes (dgx-h100-0/1: 8 x H100 each; pcie-l40s-0: 4 x L40S) once the GPU Operator
(simulated) advertises them; the module installs it once."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from gpuops_lab.k8s import wait_for
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
API = ("kueue.x-k8s.io", "v1beta2")
H100 = "NVIDIA-H100-80GB-HBM3"
KWOK = [
    {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
]


def play(tmp: Path, cluster, roles: list[dict], **hostvars) -> subprocess.CompletedProcess[str]:
    inv = tmp / f"inv-{uuid.uuid4().hex[:6]}.yml"
    base = {
        "ansible_connection": "local",
        "ansible_python_interpreter": str(REPO / ".venv/bin/python"),
        "gpuops_kubeconfig": cluster.kubeconfig,
        "gpuops_chart_repo_mirror": cluster.chart_repo_url,
        "gpuops_nfd_managed": True,
    }
    inv.write_text(
        yaml.safe_dump({"all": {"children": {"cluster_controller": {"hosts": {"localhost": {**base, **hostvars}}}}}})
    )
    pb = tmp / "play.yml"
    pb.write_text(
        yaml.safe_dump([{"name": "roles", "hosts": "cluster_controller", "gather_facts": False, "roles": roles}])
    )
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    return subprocess.run(
        ["ansible-playbook", str(pb), "-i", str(inv)], cwd=REPO, capture_output=True, text=True, env=env, check=False
    )


@pytest.fixture(scope="module")
def gpus(cluster, tmp_path_factory):
    """The GPU Operator (simulated) on the inventory's GPU nodes, until the module ends."""
    tmp = tmp_path_factory.mktemp("kueue-gpus")
    ns = f"kq-gop-{uuid.uuid4().hex[:6]}"
    gop = {"gpu_operator_namespace": ns, "gpu_operator_operator_tolerations": KWOK, "gpu_operator_tolerations": KWOK}
    try:
        r = play(tmp, cluster, [{"role": "gpuops.platform.gpu_operator"}], **gop, gpu_operator_wait_timeout=150)
        assert r.returncode == 0, r.stdout[-3000:]
        core = client.CoreV1Api(cluster.api_client)

        def advertised():
            nodes = {n.metadata.name: n for n in core.list_node().items}
            want = {"dgx-h100-0": ("8", H100), "dgx-h100-1": ("8", H100), "pcie-l40s-0": ("4", "NVIDIA-L40S")}
            return all(
                n in nodes
                and (nodes[n].status.allocatable or {}).get("nvidia.com/gpu") == gpus
                and (nodes[n].metadata.labels or {}).get("nvidia.com/gpu.product") == product
                for n, (gpus, product) in want.items()
            )

        assert wait_for(advertised, 60), (
            "the inventory's GPU nodes (lab up --inventory-nodes) do not advertise their GPUs (without NFD's "
            "pci-10de label - after an uninstall deleted the NFD CRDs - the simulated device plugin has no node): "
            + str({n.metadata.name: (n.status.allocatable or {}).get("nvidia.com/gpu") for n in core.list_node().items})
        )
        yield tmp
    finally:
        r = play(tmp, cluster, [{"role": "gpuops.platform.gpu_operator"}], **gop, gpu_operator_state="absent")
        assert r.returncode == 0, r.stdout[-3000:]


KUEUE = {"kueue_values": {"controllerManager": {"tolerations": KWOK}}, "kueue_wait_timeout": 60}


@pytest.fixture(scope="module")
def release(cluster, gpus):
    """The Kueue release (one per module, its own namespace); removed with kueue_state=absent at the end."""
    common = {**KUEUE, "kueue_namespace": f"kq-{uuid.uuid4().hex[:6]}"}
    yield common
    r = play(gpus, cluster, [{"role": "gpuops.platform.kueue"}], **common, kueue_teams=[], kueue_state="absent")
    assert r.returncode == 0, r.stdout[-3000:]


@pytest.fixture
def queues(cluster, gpus, release, namespace):
    """kueue(teams) runs the role; afterwards the test's Jobs go, then the role with no team prunes its queues (and
    flavors stay: they follow the nodes)."""

    def run(teams, **extra):
        return play(gpus, cluster, [{"role": "gpuops.platform.kueue"}], **release, kueue_teams=teams, **extra)

    yield run
    batch = client.BatchV1Api(cluster.api_client)
    custom = client.CustomObjectsApi(cluster.api_client)
    batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
    wait_for(lambda: not custom.list_namespaced_custom_object(*API, namespace, "workloads")["items"], 60)
    r = run([])
    assert r.returncode == 0, r.stdout[-3000:]
    left = custom.list_cluster_custom_object(*API, "clusterqueues", label_selector="gpuops.platform/role=kueue")[
        "items"
    ]
    assert left == [], [q["metadata"]["name"] for q in left]


def job(name: str, queue: str, pods: int, gpus: int, node_selector: dict | None = None) -> dict:
    spec = {
        "restartPolicy": "Never",
        "tolerations": KWOK,
        "containers": [
            {
                "name": "train",
                "image": "registry.invalid/train:1",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {"metadata": {"annotations": {"sim.gpuops.io/run-until-deleted": "true"}}, "spec": spec},
        },
    }


class Jobs:
    def __init__(self, cluster, ns):
        self.batch = client.BatchV1Api(cluster.api_client)
        self.core = client.CoreV1Api(cluster.api_client)
        self.custom = client.CustomObjectsApi(cluster.api_client)
        self.ns = ns

    def submit(self, obj):
        self.batch.create_namespaced_job(self.ns, obj)

    def suspended(self, name):
        return self.batch.read_namespaced_job(name, self.ns).spec.suspend

    def pods(self, name, phase="Running"):
        items = self.core.list_namespaced_pod(self.ns, label_selector=f"job-name={name}").items
        return [p for p in items if phase is None or p.status.phase == phase]

    def workload(self, name):
        items = self.custom.list_namespaced_custom_object(*API, self.ns, "workloads")["items"]
        return next((w for w in items if w["metadata"]["ownerReferences"][0]["name"] == name), None)

    def condition(self, name, ctype):
        wl = self.workload(name) or {}
        return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)

    def running(self, name, count, timeout=30):
        return wait_for(lambda: not self.suspended(name) and len(self.pods(name)) == count, timeout)

    def delete(self, name):
        self.batch.delete_namespaced_job(name, self.ns, propagation_policy="Foreground")
        wait_for(lambda: not self.pods(name, phase=None) and self.workload(name) is None, 30)


def test_gang_admission_all_or_nothing_and_quota_raised_by_the_role(cluster, namespace, queues):
    team = {"name": f"gang-{namespace}", "namespaces": [namespace], "local_queue": "gang"}
    r = queues([{**team, "quotas": [{"flavor": H100, "resources": {"nvidia.com/gpu": 12}}]}])
    assert r.returncode == 0, r.stdout[-3000:]
    jobs = Jobs(cluster, namespace)
    jobs.submit(job("big", "gang", pods=2, gpus=8))
    jobs.submit(job("small", "gang", pods=1, gpus=4))
    assert jobs.running("small", 1), "the 4-GPU Job was not admitted within its 12-GPU quota"
    pending = wait_for(lambda: (c := jobs.condition("big", "QuotaReserved")) and c["status"] == "False" and c, 30)
    # Kueue v0.19.2: "insufficient quota for nvidia.com/gpu in flavor nvidia-h100-80gb-hbm3, ... current podset
    # request (16) > maximum capacity (12)"
    assert pending and "insufficient quota for nvidia.com/gpu in flavor nvidia-h100-80gb-hbm3" in pending["message"], (
        pending
    )
    assert jobs.suspended("big") is True and jobs.pods("big", phase=None) == []
    # the small Job gone, 16 GPUs still do not fit 12: never a partial admission
    jobs.delete("small")
    assert jobs.suspended("big") is True and jobs.pods("big", phase=None) == []
    message = jobs.condition("big", "QuotaReserved")["message"]
    assert "request (16) > maximum capacity (12)" in message, message  # Kueue names the request and the quota
    # the role re-run with a new value: the Job is admitted, both pods at once, on H100 nodes
    r = queues([{**team, "quotas": [{"flavor": H100, "resources": {"nvidia.com/gpu": 16}}]}])
    assert r.returncode == 0, r.stdout[-3000:]
    assert jobs.running("big", 2), jobs.condition("big", "QuotaReserved")
    assert sorted(p.spec.node_name for p in jobs.pods("big")) == ["dgx-h100-0", "dgx-h100-1"]


def test_borrowing_within_a_cohort_and_preemption_back(cluster, namespace, core, queues):
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=f"{namespace}-b")))
    try:
        cohort = f"c-{namespace}"
        lender = {
            "name": f"lender-{namespace}",
            "namespaces": [namespace],
            "local_queue": "lender",
            "cohort": cohort,
            "preemption": {"reclaim_within_cohort": "Any"},
            "quotas": [{"flavor": H100, "resources": {"nvidia.com/gpu": 8}}],
        }
        borrower = {
            "name": f"borrower-{namespace}",
            "namespaces": [f"{namespace}-b"],
            "local_queue": "borrower",
            "cohort": cohort,
            "quotas": [{"flavor": H100, "resources": {"nvidia.com/gpu": {"nominal": 8, "borrowing_limit": 8}}}],
        }
        r = queues([lender, borrower])
        assert r.returncode == 0, r.stdout[-3000:]
        theirs, ours = Jobs(cluster, f"{namespace}-b"), Jobs(cluster, namespace)
        theirs.submit(job("wide", "borrower", pods=3, gpus=4))  # 12 GPUs: 8 of its own, 4 borrowed
        assert theirs.running("wide", 3), theirs.condition("wide", "QuotaReserved")
        custom = client.CustomObjectsApi(cluster.api_client)

        def usage():
            status = custom.get_cluster_custom_object(*API, "clusterqueues", borrower["name"]).get("status") or {}
            used = ((status.get("flavorsUsage") or [{}])[0].get("resources") or [{}])[0]
            return (used.get("total"), used.get("borrowed"))

        assert wait_for(lambda: usage() == ("12", "4"), 15), usage()  # 12 in use, 4 of them borrowed
        # the lender wants its nominal quota back: Kueue preempts the borrower
        ours.submit(job("mine", "lender", pods=2, gpus=4))
        evicted = wait_for(lambda: (c := theirs.condition("wide", "Evicted")) and c["status"] == "True" and c, 30)
        assert evicted and evicted["reason"] == "Preempted", theirs.workload("wide")
        assert ours.running("mine", 2), ours.condition("mine", "QuotaReserved")
        assert wait_for(lambda: theirs.suspended("wide") is True, 30)
    finally:
        client.BatchV1Api(cluster.api_client).delete_collection_namespaced_job(
            f"{namespace}-b", propagation_policy="Background"
        )
        custom = client.CustomObjectsApi(cluster.api_client)
        wait_for(lambda: not custom.list_namespaced_custom_object(*API, f"{namespace}-b", "workloads")["items"], 60)
        core.delete_namespace(f"{namespace}-b")


def test_flavors_a_job_asking_for_h100s_never_lands_on_l40s(cluster, namespace, queues):
    team = {
        "name": f"mixed-{namespace}",
        "namespaces": [namespace],
        "local_queue": "mixed",
        "quotas": [
            {"flavor": "nvidia-l40s", "resources": {"nvidia.com/gpu": 4}},  # listed first: Kueue tries it first
            {"flavor": H100, "resources": {"nvidia.com/gpu": 8}},
        ],
    }
    r = queues([team])
    assert r.returncode == 0, r.stdout[-3000:]
    jobs = Jobs(cluster, namespace)
    jobs.submit(job("h100", "mixed", pods=1, gpus=4, node_selector={"nvidia.com/gpu.product": H100}))
    jobs.submit(job("any", "mixed", pods=1, gpus=4))
    assert jobs.running("h100", 1) and jobs.running("any", 1)
    flavor = jobs.workload("h100")["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"]
    assert flavor == "nvidia-h100-80gb-hbm3"
    (pod,) = jobs.pods("h100")
    assert pod.spec.node_name.startswith("dgx-h100-")
    (other,) = jobs.pods("any")
    assert (
        jobs.workload("any")["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"]
        == "nvidia-l40s"
    )
    assert other.spec.node_selector["nvidia.com/gpu.product"] == "NVIDIA-L40S"  # injected by Kueue from the flavor
    assert other.spec.node_name == "pcie-l40s-0"
    assert json.dumps(r.stdout).count("kueue-quota-above-capacity") == 0
