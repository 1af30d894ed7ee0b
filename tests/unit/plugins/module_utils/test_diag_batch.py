"""The batch diagnosis rules as tables (gpu_cluster_status batch: true): views made of listed objects, the findings."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils import _diagnosis
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _diag_batch as db

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
STAMP = "2027-01-15T07:59:00Z"  # a minute before NOW


def wl(name, ns, queue, admitted=False, finished=False, message="insufficient quota"):
    conds = [{"type": "QuotaReserved", "status": "True" if admitted else "False", "message": message}]
    if admitted:
        conds.append({"type": "Admitted", "status": "True"})
    if finished:
        conds.append({"type": "Finished", "status": "True"})
    return {
        "metadata": {"name": name, "namespace": ns, "ownerReferences": [{"kind": "Job", "name": name}]},
        "spec": {"queueName": queue},
        "status": {"conditions": conds},
    }


def lq(name, ns, cq):
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"clusterQueue": cq}}


def cq(name, flavors=("f",), selector: Any = "all", nominal="4", resource="cpu"):
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": [resource],
                "flavors": [{"name": f, "resources": [{"name": resource, "nominalQuota": nominal}]} for f in flavors],
            }
        ]
    }
    if selector == "all":
        spec["namespaceSelector"] = {}
    elif selector is not None:
        spec["namespaceSelector"] = selector
    return {"metadata": {"name": name}, "spec": spec}


def rf(name, labels=None):
    return {"metadata": {"name": name}, "spec": {"nodeLabels": labels or {}}}


NODES = [{"metadata": {"name": "cpu-0", "labels": {"pool": "cpu"}}, "status": {"allocatable": {"cpu": "64"}}}]


def view(workloads=(), lqs=(), cqs=(), rfs=(), pods=(), kueue=True, ns_labels=None):
    raw = {
        "now": NOW,
        "workloads": list(workloads),
        "localqueues": list(lqs),
        "clusterqueues": list(cqs) if kueue else None,
        "resourceflavors": list(rfs),
        "namespaces": [
            {"metadata": {"name": n, "labels": lab}}
            for n, lab in (ns_labels or {"team": {"kubernetes.io/metadata.name": "team"}}).items()
        ],
        "pods": list(pods),
    }
    return {"batch": db.view(raw, NODES)}


def ids(findings):
    return sorted((f["id"], f["severity"], f["object"]["name"]) for f in findings)


@pytest.mark.parametrize(
    ("v", "expect"),
    [
        (view(workloads=[wl("a", "team", "q")], lqs=[lq("q", "team", "cq")], cqs=[cq("cq")]), []),
        (
            view(workloads=[wl("a", "team", "nope")], lqs=[lq("q", "team", "cq")], cqs=[cq("cq")]),
            [("kueue-local-queue-missing", "error", "a")],
        ),
        (view(workloads=[wl("a", "team", "nope", admitted=True)]), []),  # admitted: not waiting
        (view(workloads=[wl("a", "team", "nope", finished=True)]), []),
        (
            view(workloads=[wl("a", "team", "q")], lqs=[lq("q", "team", "gone")], cqs=[cq("cq")]),
            [("kueue-cluster-queue-missing", "error", "a")],
        ),
        (
            view(workloads=[wl("a", "team", "q")], lqs=[lq("q", "team", "cq")], cqs=[cq("cq", selector=None)]),
            [("kueue-cluster-queue-selects-no-namespace", "error", "cq")],
        ),
        (
            view(
                workloads=[wl("a", "team", "q")],
                lqs=[lq("q", "team", "cq")],
                cqs=[cq("cq", selector={"matchLabels": {"kubernetes.io/metadata.name": "other"}})],
            ),
            [("kueue-cluster-queue-selects-no-namespace", "error", "cq")],
        ),
        (
            view(
                workloads=[wl("a", "team", "q")],
                lqs=[lq("q", "team", "cq")],
                cqs=[
                    cq(
                        "cq",
                        selector={
                            "matchExpressions": [
                                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team"]}
                            ]
                        },
                    )
                ],
            ),
            [],
        ),
        (view(workloads=[wl("a", "team", "nope")], kueue=False), []),  # Kueue not installed: no batch rows
    ],
)
def test_workload_queue_rows(v, expect):
    assert ids(db.rule_workload_queue(v)) == expect


def test_local_queue_missing_names_the_namespace_queues_and_kueue_message():
    (f,) = db.rule_workload_queue(
        view(
            workloads=[wl("a", "team", "nope", message="LocalQueue nope doesn't exist")],
            lqs=[lq("q", "team", "cq")],
            cqs=[cq("cq")],
        )
    )
    assert f["evidence"] == [
        "Workload team/a (Job a) names LocalQueue nope",
        "LocalQueues in namespace team: q",
        "Kueue: LocalQueue nope doesn't exist",
    ]
    assert "kueue_teams" in f["fix"]


@pytest.mark.parametrize(
    ("v", "expect"),
    [
        (view(cqs=[cq("cq", flavors=("f",))], rfs=[rf("f", {"pool": "cpu"})]), []),
        (
            view(cqs=[cq("cq", flavors=("f",))], rfs=[rf("f", {"pool": "gpu"})]),
            [("kueue-flavor-matches-no-node", "warning", "f")],
        ),
        (
            view(
                workloads=[wl("a", "team", "q")],
                lqs=[lq("q", "team", "cq")],
                cqs=[cq("cq", flavors=("f",))],
                rfs=[rf("f", {"pool": "gpu"})],
            ),
            [("kueue-flavor-matches-no-node", "error", "f")],
        ),
        (
            view(
                workloads=[
                    {
                        **wl("a", "team", "q", admitted=True),
                        "status": {
                            "conditions": [{"type": "Admitted", "status": "True"}],
                            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"flavors": {"cpu": "f"}}]},
                        },
                    }
                ],
                lqs=[lq("q", "team", "cq")],
                cqs=[cq("cq", flavors=("f",))],
                rfs=[rf("f", {"pool": "gpu"})],
            ),
            [("kueue-flavor-matches-no-node", "error", "f")],
        ),  # admitted to it: its pods wait for a node that does not exist
        (view(cqs=[], rfs=[rf("f", {"pool": "gpu"})]), []),  # no ClusterQueue uses it
        (view(cqs=[cq("cq", flavors=("f",))], rfs=[rf("f")]), []),  # no node labels: every node
    ],
)
def test_flavor_rows(v, expect):
    assert ids(db.rule_flavor_no_node(v)) == expect


def pod(name, sched, node=None, phase="Pending", scheduled=False, created=STAMP):
    status: dict[str, Any] = {"phase": phase}
    if scheduled:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return {
        "metadata": {"name": name, "namespace": "team", "creationTimestamp": created},
        "spec": {"schedulerName": sched, "nodeName": node},
        "status": status,
    }


@pytest.mark.parametrize(
    ("pods", "expect"),
    [
        ([pod("a", "volcano")], [("pod-scheduler-missing", "error", "schedulerName=volcano")]),
        ([pod("a", "volcano", scheduled=True)], []),  # volcano looked at it: it runs
        ([pod("a", "volcano", created="2027-01-15T07:59:50Z")], []),  # 10 s old: within the grace period
        ([pod("a", "default-scheduler")], []),
        ([pod("a", "volcano", node="n1")], []),
        ([pod("a", "kai-scheduler", phase="Running")], []),
        (
            [pod("a", "volcano"), pod("b", "kai-scheduler")],
            [
                ("pod-scheduler-missing", "error", "schedulerName=kai-scheduler"),
                ("pod-scheduler-missing", "error", "schedulerName=volcano"),
            ],
        ),
    ],
)
def test_scheduler_missing_rows(pods, expect):
    assert ids(db.rule_scheduler_missing(view(pods=pods, kueue=False))) == expect


def test_scheduler_missing_lists_pods_with_their_age():
    (f,) = db.rule_scheduler_missing(view(pods=[pod(f"p{i}", "volcano") for i in range(7)]))
    assert f["evidence"] == [
        "7 pending pod(s) with schedulerName volcano and no PodScheduled condition: "
        "team/p0 (60 s), team/p1 (60 s), team/p2 (60 s), team/p3 (60 s), team/p4 (60 s) and 2 more"
    ]


def test_quota_capacity_warning_with_numbers():
    v = view(cqs=[cq("a", nominal="40"), cq("b", nominal="40")], rfs=[rf("f", {"pool": "cpu"})])
    (f,) = db.rule_quota_capacity(v)
    assert (f["id"], f["severity"]) == ("kueue-quota-above-capacity", "warning")
    assert f["evidence"] == [
        "cpu: nominal quotas sum to 80 (a 40; b 40), the flavor's 1 node(s) have 64 allocatable (cpu-0)"
    ]
    assert db.rule_quota_capacity(view(cqs=[cq("a", nominal="64")], rfs=[rf("f", {"pool": "cpu"})])) == []
    # a ClusterQueue naming a flavor that does not exist is not counted (Kueue keeps it inactive)
    assert (
        db.rule_quota_capacity(view(cqs=[cq("a", flavors=("gone",), nominal="99")], rfs=[rf("f", {"pool": "cpu"})]))
        == []
    )


def vq(name, state="Open"):
    return {"metadata": {"name": name}, "status": {"state": state}}


def pg(name, queue, phase="Pending"):
    return {"metadata": {"namespace": "team", "name": name}, "spec": {"queue": queue}, "status": {"phase": phase}}


def kq(name, parent=None):
    return {"metadata": {"name": name}, "spec": {"parentQueue": parent} if parent else {}}


def kpod(name, queue, node=None):
    return {
        "metadata": {"namespace": "team", "name": name, "labels": {"kai.scheduler/queue": queue}},
        "spec": {"schedulerName": "kai-scheduler", **({"nodeName": node} if node else {})},
        "status": {"phase": "Running" if node else "Pending"},
    }


def sched_view(vqueues=None, pgs=(), kqueues=None, pods=()):
    raw = {"now": NOW, "volcano_queues": vqueues, "volcano_podgroups": list(pgs), "kai_queues": kqueues}
    raw["pods"] = list(pods)
    return {"batch": db.view(raw, NODES)}


@pytest.mark.parametrize(
    ("v", "expect"),
    [
        (sched_view([vq("default"), vq("research")], [pg("g", "research")]), []),
        (sched_view([vq("default")], [pg("g", "research")]), [("volcano-queue-missing", "error", "research")]),
        (sched_view([vq("default")], [pg("g", "research", "Running")]), []),  # running: not stuck on the queue
        (
            sched_view([vq("research", "Closed")], [pg("g", "research", "Inqueue")]),
            [("volcano-queue-closed", "error", "research")],
        ),
        (
            sched_view([vq("default")], [{"metadata": {"namespace": "team", "name": "g"}, "spec": {}}]),
            [],
        ),  # default queue
        (sched_view(None, [pg("g", "research")]), []),  # Volcano not installed: silent
        (sched_view(kqueues=[kq("ml"), kq("research", "ml")], pods=[kpod("p", "research")]), []),
        (
            sched_view(kqueues=[kq("ml"), kq("research", "ml")], pods=[kpod("p", "ml")]),
            [("kai-queue-not-leaf", "error", "ml")],
        ),
        (sched_view(kqueues=[kq("ml")], pods=[kpod("p", "nope")]), [("kai-queue-missing", "error", "nope")]),
        (sched_view(kqueues=[kq("ml")], pods=[kpod("p", "nope", node="n1")]), []),  # placed: not waiting
        (sched_view(kqueues=None, pods=[kpod("p", "nope")]), []),  # KAI not installed: pod-scheduler-missing's job
    ],
)
def test_scheduler_queue_rows(v, expect):
    assert ids(db.rule_scheduler_queue(v)) == expect


def test_scheduler_queue_names_the_queues():
    (f,) = db.rule_scheduler_queue(sched_view([vq("default"), vq("x", "Closed")], [pg("g", "research")]))
    assert f["evidence"] == [
        "1 PodGroup(s) name Queue research: team/g (Pending)",
        "Volcano Queues: default (Open), x (Closed)",
    ]
    (f,) = db.rule_scheduler_queue(sched_view(kqueues=[kq("ml"), kq("a", "ml"), kq("b", "ml")], pods=[kpod("p", "ml")]))
    assert f["evidence"][1] == "leaf queues: a, b" and "leaf queue" in f["cause"]


def test_batch_rules_are_in_the_diagnosis_table_and_silent_without_the_option():
    for rule in (
        db.rule_workload_queue,
        db.rule_flavor_no_node,
        db.rule_scheduler_missing,
        db.rule_quota_capacity,
        db.rule_scheduler_queue,
    ):
        assert rule in _diagnosis.RULES
        assert rule({}) == []
