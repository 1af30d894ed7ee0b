# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Diagnosis of the batch layer (gpu_cluster_status option ``batch``): why a queued job does not start.

:func:`collect` lists Kueue's Workloads, LocalQueues, ClusterQueues and ResourceFlavors (``kueue.x-k8s.io/v1beta2``;
none when Kueue is not installed), the namespaces and every pod: five to six requests. :func:`view` keeps what the
rules read. The rules (pure functions of the view, in ``_diagnosis.RULE_TABLE``):

- ``kueue-local-queue-missing``: a pending Workload names a LocalQueue its namespace does not have;
- ``kueue-cluster-queue-missing`` / ``kueue-cluster-queue-selects-no-namespace``: its LocalQueue points at a
  ClusterQueue that does not exist, or whose namespaceSelector is nil (Kueue: nil selects no namespace) or does not
  match the namespace's labels;
- ``kueue-flavor-matches-no-node``: a ResourceFlavor of a ClusterQueue whose node labels match no node (error when a
  workload waits on it - queued in a ClusterQueue that uses it, or admitted to it with pods no node can run - else a
  warning);
- ``pod-scheduler-missing``: pods that name a scheduler (``spec.schedulerName``) no running scheduler answers to - no
  PodScheduled condition 30 s after creation;
- ``kueue-quota-above-capacity`` (warning, the numbers): a flavor's nominal quotas, summed over the ClusterQueues,
  above what its nodes have allocatable (the rule of the kueue role, ``_kueue_quota.capacity_findings``);
- ``volcano-queue-missing`` / ``volcano-queue-closed``: an unscheduled PodGroup names a Volcano Queue that does not
  exist or is Closed (Volcano keeps its pods pending for ever; ``scheduling.volcano.sh/v1beta1``);
- ``kai-queue-missing`` / ``kai-queue-not-leaf``: a pending pod's ``kai.scheduler/queue`` label names a KAI Queue that
  does not exist, or a parent queue (only leaf queues take pods; ``scheduling.run.ai/v2``).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue_quota
from ansible_collections.gpuops.platform.plugins.module_utils.status._diag_common import finding

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
SCHEDULER_GRACE_S = 30
DEFAULT_SCHEDULER = "default-scheduler"
MAX_LISTED = 5
_KAI_QUEUE_LABEL = "kai.scheduler/queue"


def collect(reader: Any) -> dict[str, Any]:
    """The objects the batch rules read; Kueue's kinds are None when Kueue's CRDs are not installed."""
    out: dict[str, Any] = {"now": time.time()}
    for plural in ("workloads", "localqueues", "clusterqueues", "resourceflavors"):
        out[plural] = reader.objects(GROUP, VERSION, plural)
    out["volcano_queues"] = reader.objects("scheduling.volcano.sh", "v1beta1", "queues")
    out["volcano_podgroups"] = reader.objects("scheduling.volcano.sh", "v1beta1", "podgroups")
    out["kai_queues"] = reader.objects("scheduling.run.ai", "v2", "queues")
    out["namespaces"] = reader.core("namespaces") or []
    out["pods"] = reader.core("pods") or []
    return out


def _meta(obj: Mapping[str, Any]) -> Any:
    return obj.get("metadata") or {}


def _conditions(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}


def view(raw: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """What the rules read: the Kueue objects as listed (or None), namespace labels, the nodes (name, labels,
    allocatable) and the pending pods that name another scheduler."""
    pending = []
    for pod in raw.get("pods") or []:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        sched = spec.get("schedulerName") or DEFAULT_SCHEDULER
        if sched == DEFAULT_SCHEDULER or spec.get("nodeName") or status.get("phase") != "Pending":
            continue
        pending.append(
            {
                "namespace": _meta(pod).get("namespace"),
                "name": _meta(pod).get("name"),
                "scheduler": sched,
                "created": _meta(pod).get("creationTimestamp"),
                "scheduled_condition": "PodScheduled" in _conditions(pod),
            }
        )
    return {
        "now": raw.get("now") or time.time(),
        "kueue": raw.get("clusterqueues") is not None,
        "workloads": raw.get("workloads") or [],
        "local_queues": raw.get("localqueues") or [],
        "cluster_queues": raw.get("clusterqueues") or [],
        "resource_flavors": raw.get("resourceflavors") or [],
        "namespace_labels": {_meta(n).get("name"): _meta(n).get("labels") or {} for n in raw.get("namespaces") or []},
        "nodes": [
            {"metadata": _meta(n), "status": {"allocatable": (n.get("status") or {}).get("allocatable") or {}}}
            for n in nodes
        ],
        "foreign_pending_pods": pending,
        # None when the scheduler's CRDs are not installed
        "volcano_queues": None
        if raw.get("volcano_queues") is None
        else {
            _meta(q).get("name"): ((q.get("status") or {}).get("state") or "") for q in raw.get("volcano_queues") or []
        },
        "volcano_podgroups": [
            {
                "namespace": _meta(pg).get("namespace"),
                "name": _meta(pg).get("name"),
                "queue": (pg.get("spec") or {}).get("queue") or "default",
                "phase": (pg.get("status") or {}).get("phase") or "Pending",
            }
            for pg in raw.get("volcano_podgroups") or []
        ],
        "kai_queues": None
        if raw.get("kai_queues") is None
        else {
            _meta(q).get("name"): (q.get("spec") or {}).get("parentQueue") or "" for q in raw.get("kai_queues") or []
        },
        "kai_pending_pods": [
            {
                "namespace": _meta(p).get("namespace"),
                "name": _meta(p).get("name"),
                "queue": (_meta(p).get("labels") or {}).get(_KAI_QUEUE_LABEL),
            }
            for p in raw.get("pods") or []
            if (_meta(p).get("labels") or {}).get(_KAI_QUEUE_LABEL)
            and (p.get("status") or {}).get("phase") == "Pending"
            and not (p.get("spec") or {}).get("nodeName")
        ],
    }


def _label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """A metav1.LabelSelector against a label set: matchLabels and matchExpressions (In, NotIn, Exists,
    DoesNotExist); ``{}`` matches everything."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(op, False)
        if not ok:
            return False
    return True


def _waiting(wl: Mapping[str, Any]) -> bool:
    """Queued and not admitted, not finished."""
    conds = _conditions(wl)
    return (conds.get("Admitted") or {}).get("status") != "True" and (conds.get("Finished") or {}).get(
        "status"
    ) != "True"


def _wl_ref(wl: Mapping[str, Any]) -> dict[str, Any]:
    return {"kind": "Workload", "namespace": _meta(wl).get("namespace"), "name": _meta(wl).get("name")}


def _owner(wl: Mapping[str, Any]) -> str:
    owners = _meta(wl).get("ownerReferences") or []
    return f" ({owners[0].get('kind')} {owners[0].get('name')})" if owners else ""


def _kueue_says(wl: Mapping[str, Any]) -> str:
    msg = (_conditions(wl).get("QuotaReserved") or {}).get("message")
    return f"Kueue: {msg}" if msg else ""


def rule_workload_queue(view_: dict[str, Any]) -> list[dict[str, Any]]:
    """A waiting Workload whose LocalQueue is missing, or whose ClusterQueue is missing or does not select its
    namespace."""
    batch = view_.get("batch") or {}
    if not batch.get("kueue"):
        return []
    lqs = {(_meta(lq).get("namespace"), _meta(lq).get("name")): lq for lq in batch["local_queues"]}
    cqs = {_meta(cq).get("name"): cq for cq in batch["cluster_queues"]}
    out = []
    for wl in batch["workloads"]:
        if not _waiting(wl):
            continue
        ns, queue = _meta(wl).get("namespace"), (wl.get("spec") or {}).get("queueName")
        evidence = [f"Workload {ns}/{_meta(wl).get('name')}{_owner(wl)} names LocalQueue {queue}"]
        lq = lqs.get((ns, queue))
        if lq is None:
            here = sorted(name for (lns, name) in lqs if lns == ns)
            out.append(
                finding(
                    fid="kueue-local-queue-missing",
                    severity="error",
                    obj=_wl_ref(wl),
                    node=None,
                    evidence=[
                        *evidence,
                        f"LocalQueues in namespace {ns}: {', '.join(here) or 'none'}",
                        _kueue_says(wl),
                    ],
                    cause=f"namespace {ns} has no LocalQueue {queue}: Kueue keeps the job suspended until one exists",
                    fix=f"add namespace {ns} to a team of kueue_teams (the kueue role makes its LocalQueue), or set "
                    "the job's "
                    f"label kueue.x-k8s.io/queue-name to one of the namespace's LocalQueues",
                )
            )
            continue
        cq_name = (lq.get("spec") or {}).get("clusterQueue")
        cq = cqs.get(cq_name)
        evidence.append(f"LocalQueue {ns}/{queue} points at ClusterQueue {cq_name}")
        if cq is None:
            out.append(
                finding(
                    fid="kueue-cluster-queue-missing",
                    severity="error",
                    obj=_wl_ref(wl),
                    node=None,
                    evidence=[*evidence, f"ClusterQueues: {', '.join(sorted(cqs)) or 'none'}", _kueue_says(wl)],
                    cause=f"ClusterQueue {cq_name} does not exist: the LocalQueue admits nothing",
                    fix="create the team's ClusterQueue (kueue_teams) or point the LocalQueue at an existing one",
                )
            )
            continue
        selector = (cq.get("spec") or {}).get("namespaceSelector")
        labels = batch["namespace_labels"].get(ns, {"kubernetes.io/metadata.name": ns})
        if selector is None or not _label_selector_matches(selector, labels):
            shown = "nil (Kueue: selects no namespace)" if selector is None else str(selector)
            out.append(
                finding(
                    fid="kueue-cluster-queue-selects-no-namespace",
                    severity="error",
                    obj={"kind": "ClusterQueue", "name": cq_name},
                    node=None,
                    evidence=[
                        *evidence,
                        f"ClusterQueue {cq_name} namespaceSelector: {shown}",
                        f"namespace {ns} labels: {labels}",
                        _kueue_says(wl),
                    ],
                    cause=f"ClusterQueue {cq_name} does not select namespace {ns}, so it admits none of its workloads"
                    + (" (a nil namespaceSelector selects no namespace; {} selects all)" if selector is None else ""),
                    fix=f"add {ns} to the team's namespaces in kueue_teams (the kueue role always writes a selector), "
                    "or fix "
                    "the ClusterQueue's namespaceSelector",
                )
            )
    return out


def _flavor_nodes(rf: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    want = (rf.get("spec") or {}).get("nodeLabels") or {}
    return [
        _meta(n).get("name") for n in nodes if all((_meta(n).get("labels") or {}).get(k) == v for k, v in want.items())
    ]


def rule_flavor_no_node(view_: dict[str, Any]) -> list[dict[str, Any]]:
    """A ResourceFlavor named by a ClusterQueue whose node labels match no node."""
    batch = view_.get("batch") or {}
    if not batch.get("kueue"):
        return []
    users: dict[str, list[str]] = {}
    for cq in batch["cluster_queues"]:
        for group in (cq.get("spec") or {}).get("resourceGroups") or []:
            for fl in group.get("flavors") or []:
                users.setdefault(fl.get("name"), []).append(_meta(cq).get("name"))
    waiting: dict[str, list[str]] = {}  # ClusterQueue -> its workloads still waiting for quota
    admitted: dict[str, list[str]] = {}  # flavor -> workloads admitted to it, not finished (their pods wait for nodes)
    lqs = {(_meta(q).get("namespace"), _meta(q).get("name")): q for q in batch["local_queues"]}
    for wl in batch["workloads"]:
        ref = f"{_meta(wl).get('namespace')}/{_meta(wl).get('name')}"
        conds = _conditions(wl)
        if (conds.get("Finished") or {}).get("status") == "True":
            continue
        if _waiting(wl):
            lq = lqs.get((_meta(wl).get("namespace"), (wl.get("spec") or {}).get("queueName")))
            if lq is not None:
                waiting.setdefault(str((lq.get("spec") or {}).get("clusterQueue")), []).append(ref)
            continue
        for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
            for flavor in set((psa.get("flavors") or {}).values()):
                admitted.setdefault(flavor, []).append(ref)
    out = []
    for rf in batch["resource_flavors"]:
        name = _meta(rf).get("name")
        labels = (rf.get("spec") or {}).get("nodeLabels") or {}
        if name not in users or not labels or _flavor_nodes(rf, batch["nodes"]):
            continue
        stuck = sorted({w for cq in users[name] for w in waiting.get(cq, [])} | set(admitted.get(name, [])))
        out.append(
            finding(
                fid="kueue-flavor-matches-no-node",
                severity="error" if stuck else "warning",
                obj={"kind": "ResourceFlavor", "name": name},
                node=None,
                evidence=[
                    f"ResourceFlavor {name} nodeLabels {labels}: no node has them",
                    f"ClusterQueues using it: {', '.join(sorted(users[name]))}",
                    "workloads waiting on it (queued, or admitted with pods no node can run): "
                    + ", ".join(stuck[:MAX_LISTED])
                    + (f" and {len(stuck) - MAX_LISTED} more" if len(stuck) > MAX_LISTED else "")
                    if stuck
                    else "",
                ],
                cause="Kueue injects the flavor's node labels as the pods' nodeSelector: quota on this flavor can only "
                "admit pods that no node can run",
                fix="fix the flavor's nodeLabels to the nodes' real labels (the kueue role makes GPU flavors from the "
                "nodes' "
                "nvidia.com/gpu.product), or add the nodes",
            )
        )
    return out


def _age(pod: Mapping[str, Any], now: float) -> float | None:
    stamp = pod.get("created")
    if not stamp:
        return None
    try:
        created = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)  # noqa: UP017 - imports on Python 3.9
    except ValueError:
        return None
    return now - created.timestamp()


def rule_scheduler_missing(view_: dict[str, Any]) -> list[dict[str, Any]]:
    """Pending pods that name a scheduler nobody answers to (no PodScheduled condition after the grace period)."""
    batch = view_.get("batch") or {}
    by_scheduler: dict[str, list[str]] = {}
    for pod in batch.get("foreign_pending_pods") or []:
        age = _age(pod, batch.get("now") or time.time())
        if pod["scheduled_condition"] or age is None or age < SCHEDULER_GRACE_S:
            continue
        by_scheduler.setdefault(pod["scheduler"], []).append(f"{pod['namespace']}/{pod['name']} ({int(age)} s)")
    out = []
    for sched, pods in sorted(by_scheduler.items()):
        listed = ", ".join(sorted(pods)[:MAX_LISTED]) + (
            f" and {len(pods) - MAX_LISTED} more" if len(pods) > MAX_LISTED else ""
        )
        out.append(
            finding(
                fid="pod-scheduler-missing",
                severity="error",
                obj={"kind": "Pod", "namespace": None, "name": f"schedulerName={sched}"},
                node=None,
                evidence=[
                    f"{len(pods)} pending pod(s) with schedulerName {sched} and no PodScheduled condition: {listed}",
                ],
                cause=f"no scheduler named {sched} runs: a scheduler that looked at a pod sets its PodScheduled "
                "condition, "
                "even when it cannot place it",
                fix=f"install the scheduler (for example the gpuops.platform role of {sched}) or remove schedulerName "
                "from "
                "the pods' spec (the default scheduler then places them)",
            )
        )
    return out


def rule_quota_capacity(view_: dict[str, Any]) -> list[dict[str, Any]]:
    """Nominal quotas above the flavor's nodes' allocatable (warning, with the numbers)."""
    batch = view_.get("batch") or {}
    if not batch.get("kueue"):
        return []
    flavors = [
        {"name": _meta(rf).get("name"), "nodes": _flavor_nodes(rf, batch["nodes"])} for rf in batch["resource_flavors"]
    ]
    known = {f["name"] for f in flavors}
    cqs = [
        cq
        for cq in batch["cluster_queues"]
        if all(
            fl.get("name") in known
            for g in (cq.get("spec") or {}).get("resourceGroups") or []
            for fl in g.get("flavors") or []
        )
    ]
    out = []
    for f in _kueue_quota.capacity_findings(cqs, flavors, batch["nodes"]):
        out.append(
            finding(
                fid=f["id"],
                severity=f["severity"],
                obj=f["object"],
                node=None,
                evidence=f["evidence"],
                cause=f["cause"],
                fix=f["fix"],
            )
        )
    return out


def queue_rows(view_: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per ClusterQueue, flavor and resource: the quota (nominal, borrowing and lending limits) next to the
    usage Kueue reports (``status.flavorsUsage``: total and borrowed), with the queue's admitted and pending workload
    counts - what ``playbooks/diagnose.yml`` prints as QUEUES."""
    batch = view_.get("batch") or {}
    rows = []
    for cq in sorted(batch.get("cluster_queues") or [], key=lambda q: _meta(q).get("name") or ""):
        spec, status = cq.get("spec") or {}, cq.get("status") or {}
        usage = {
            (fl.get("name"), r.get("name")): r
            for fl in status.get("flavorsUsage") or []
            for r in fl.get("resources") or []
        }
        for group in spec.get("resourceGroups") or []:
            for fl in group.get("flavors") or []:
                for res in fl.get("resources") or []:
                    used = usage.get((fl.get("name"), res.get("name"))) or {}
                    rows.append(
                        {
                            "cluster_queue": _meta(cq).get("name"),
                            "cohort": spec.get("cohortName"),
                            "flavor": fl.get("name"),
                            "resource": res.get("name"),
                            "nominal": str(res.get("nominalQuota")),
                            "borrowing_limit": None
                            if res.get("borrowingLimit") is None
                            else str(res["borrowingLimit"]),
                            "lending_limit": None if res.get("lendingLimit") is None else str(res["lendingLimit"]),
                            "used": str(used.get("total", "0")),
                            "borrowed": str(used.get("borrowed", "0")),
                            "admitted": status.get("admittedWorkloads", 0),
                            "pending": status.get("pendingWorkloads", 0),
                        }
                    )
    return rows


def _listed(items: list[str]) -> str:
    items = sorted(items)
    return ", ".join(items[:MAX_LISTED]) + (f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def rule_scheduler_queue(view_: dict[str, Any]) -> list[dict[str, Any]]:
    """Volcano PodGroups and KAI pods waiting on a queue that does not exist, is closed, or is not a leaf."""
    batch = view_.get("batch") or {}
    out = []
    vqueues = batch.get("volcano_queues")
    if vqueues is not None:
        stuck: dict[tuple[str, str], list[str]] = {}
        for pg in batch.get("volcano_podgroups") or []:
            if pg["phase"] not in ("Pending", "Inqueue"):
                continue
            state = vqueues.get(pg["queue"])
            why = "missing" if state is None else "closed" if state in ("Closed", "Closing") else None
            if why:
                stuck.setdefault((why, pg["queue"]), []).append(f"{pg['namespace']}/{pg['name']} ({pg['phase']})")
        for (why, queue), groups in sorted(stuck.items()):
            out.append(
                finding(
                    fid=f"volcano-queue-{why}",
                    severity="error",
                    obj={"kind": "Queue", "name": queue},
                    node=None,
                    evidence=[
                        f"{len(groups)} PodGroup(s) name Queue {queue}: {_listed(groups)}",
                        "Volcano Queues: "
                        + ", ".join(n + " (" + (st or "no state") + ")" for n, st in sorted(vqueues.items()))
                        if why == "missing"
                        else f"Queue {queue} state: {vqueues[queue]}",
                    ],
                    cause=f"Volcano schedules a PodGroup only from an open queue: Queue {queue} "
                    + ("does not exist" if why == "missing" else "is closed")
                    + ", so the gang waits for ever",
                    fix="add the queue to volcano_queues (the volcano role makes it) or set the job's spec.queue to an "
                    "existing queue"
                    if why == "missing"
                    else f"open the queue (vcctl queue operate --name {queue} --action open) or move the jobs",
                )
            )
    kqueues = batch.get("kai_queues")
    if kqueues is not None:
        parents = set(kqueues.values())
        stuck = {}
        for pod in batch.get("kai_pending_pods") or []:
            why = "missing" if pod["queue"] not in kqueues else "not-leaf" if pod["queue"] in parents else None
            if why:
                stuck.setdefault((why, pod["queue"]), []).append(f"{pod['namespace']}/{pod['name']}")
        for (why, queue), pods in sorted(stuck.items()):
            leaves = sorted(n for n in kqueues if n not in parents)
            out.append(
                finding(
                    fid=f"kai-queue-{why}",
                    severity="error",
                    obj={"kind": "Queue", "name": queue},
                    node=None,
                    evidence=[
                        f"{len(pods)} pending pod(s) with label {_KAI_QUEUE_LABEL}={queue}: {_listed(pods)}",
                        f"leaf queues: {', '.join(leaves) or 'none'}",
                    ],
                    cause=f"KAI Scheduler places pods only from a leaf queue: Queue {queue} "
                    + ("does not exist" if why == "missing" else "has child queues"),
                    fix=f"label the pods with one of the leaf queues, or add a leaf queue {queue} to "
                    "kai_scheduler_queues",
                )
            )
    return out
