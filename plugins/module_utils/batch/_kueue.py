# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The kueue role's rules, once: pure functions (no I/O). Facts checked against kubernetes-sigs/kueue v0.19.2
(apis/kueue/v1beta2, pkg/webhooks/clusterqueue_webhook.go, charts/kueue) and ../shared/reference/upstream-apis.md §8.

- The flavors and the quota rules are in :mod:`_kueue_quota` (one ResourceFlavor per GPU product the nodes carry,
  a team's quotas per flavor, its preemption policy, quotas above the flavor's nodes).
- :func:`build`: from the role's variables and the cluster's nodes, the chart values (the manager's Configuration,
  the pinned image), the ResourceFlavors, ClusterQueues (one per team: quotas per flavor, cohort, borrowing and
  lending limits, preemption, a namespace selector that is never nil) and LocalQueues (one per team namespace), and
  the findings: an error for each input Kueue would refuse or that cannot work (an unknown flavor or GPU product,
  limits without a cohort, a lending limit above the nominal quota, a team that selects no namespace, two teams
  claiming one LocalQueue), a warning where a flavor's quota is above what its nodes have.

Kueue's semantics the rules follow: a ClusterQueue's ``namespaceSelector`` nil selects no namespace and ``{}``
every namespace (the role always writes one: the team's namespaces by ``kubernetes.io/metadata.name``, or ``{}``
when the team asks for all); ``borrowingLimit`` and ``lendingLimit`` must be nil without a cohort (CRD rule and
webhook); ``lendingLimit`` may not exceed ``nominalQuota``; every flavor of a resource group lists every covered
resource, in order (the role puts one group per team and fills a resource a flavor's quota does not name with 0).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue_quota
from ansible_collections.gpuops.platform.plugins.module_utils.common import _quantity
from ansible_collections.gpuops.platform.plugins.module_utils.common._plain import plain
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

Finding = dict[str, Any]
Obj = dict[str, Any]

API_VERSION = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
OWNER_LABELS = _owned.owner_labels("kueue")
OWNER_SELECTOR = _owned.selector(OWNER_LABELS)
# Delete order: a LocalQueue before its ClusterQueue, a ClusterQueue before the flavors it names (Kueue holds a
# ClusterQueue with admitted workloads, and a flavor a ClusterQueue names, with its resource-in-use finalizer)
KINDS = ("LocalQueue", "ClusterQueue", "ResourceFlavor")
PLURALS = {"LocalQueue": "localqueues", "ClusterQueue": "clusterqueues", "ResourceFlavor": "resourceflavors"}
# KAI Scheduler's CRDs: KAI v0.20 watches kueue.x-k8s.io/v1alpha1 Topology, which Kueue 0.19's CRD no longer serves
KAI_CRDS = ("queues.scheduling.run.ai", "podgroups.scheduling.run.ai", "schedulingshards.kai.scheduler")
KAI_TOPOLOGY_CRD = "topologies.kai.scheduler"
IMAGE = {"repository": "registry.k8s.io/kueue/kueue", "pullPolicy": "IfNotPresent"}
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
FRAMEWORKS = (
    "batch/job",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/rayservice",
    "ray.io/raycluster",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/paddlejob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/jaxjob",
    "workload.codeflare.dev/appwrapper",
    "trainer.kubeflow.org/trainjob",
    "sparkoperator.k8s.io/sparkapplication",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
)
LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
MAX_FLAVORS = 64  # flavors of one resource group (CRD MaxItems)
MAX_RESOURCES = 64  # covered resources of one group


def _label(name: Any) -> bool:
    return isinstance(name, str) and 0 < len(name) <= 63 and bool(LABEL_RE.match(name))


def _owned_obj(obj: Obj) -> Obj:
    return _owned.owned(obj, OWNER_LABELS)


def prune_objects(wanted: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]]) -> list[Obj]:
    """The live LocalQueues, ClusterQueues and ResourceFlavors the role labelled that ``wanted`` no longer holds,
    in delete order (:data:`KINDS`); objects without the role's labels are never returned."""
    return _owned.prune_objects(wanted, live, OWNER_LABELS, KINDS)


def landing_findings(wanted: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """``kueue-object-not-landed`` per applied object whose spec or labels are not the live object's."""
    return _owned.landing_findings(
        wanted,
        live,
        "kueue-object-not-landed",
        "install Kueue's CRDs of the chart's version (kueue_chart_version), or find the other writer "
        "(kubectl get --show-managed-fields)",
    )


def admitted_findings(
    cluster_queues: Sequence[Mapping[str, Any]], workloads: Sequence[Mapping[str, Any]], force: bool = False
) -> list[Finding]:
    """Removing ClusterQueues that still hold admitted, unfinished workloads: an error naming them (a warning with
    ``force``: the role then drains those queues with ``stopPolicy: HoldAndDrain`` - Kueue evicts the workloads and
    suspends their Jobs - because Kueue keeps a ClusterQueue with admitted workloads until they finish). The finding's
    ``object.names`` lists the ClusterQueues that hold them."""
    names = {str((cq.get("metadata") or {}).get("name")) for cq in cluster_queues}
    held: dict[str, list[str]] = {}
    for wl in workloads:
        status = wl.get("status") or {}
        conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        cq = (status.get("admission") or {}).get("clusterQueue")
        if cq in names and conds.get("Admitted") == "True" and conds.get("Finished") != "True":
            meta = wl.get("metadata") or {}
            held.setdefault(cq, []).append(f"{meta.get('namespace')}/{meta.get('name')} (ClusterQueue {cq})")
    if not held:
        return []
    listed = sorted(w for ws in held.values() for w in ws)
    finding = _kueue_quota.finding(
        "kueue-workloads-admitted",
        "warning" if force else "error",
        {"kind": "ClusterQueue", "name": ", ".join(sorted(held))},
        [f"{len(listed)} admitted workload(s): {', '.join(listed)}"],
        "removing their queues stops running jobs: with kueue_force the role drains the queues "
        "(stopPolicy HoldAndDrain: Kueue evicts the workloads and suspends their Jobs) before deleting them",
        "let them finish or delete them, or set kueue_force: true to drain and remove the queues anyway",
    )
    finding["object"]["names"] = sorted(held)
    return [finding]


def queue_ready(obj: Mapping[str, Any]) -> str | None:
    """A ClusterQueue or LocalQueue is ready when Kueue has set its ``Active`` condition True (a ClusterQueue whose
    flavors do not all exist, or that is stopped, is not active; a LocalQueue is active when its ClusterQueue is).
    Returns what is unmet, or None."""
    conds = ((obj.get("status") or {}).get("conditions")) or []
    active = next((c for c in conds if c.get("type") == "Active"), None)
    if active is None:
        return "no Active condition yet (Kueue has not reconciled it: is the controller running?)"
    if active.get("status") != "True":
        return f"Active is {active.get('status')} ({active.get('reason')}: {active.get('message')})"
    return None


def coexistence_findings(crd_names: Sequence[str]) -> list[Finding]:
    """An error when an old KAI Scheduler is in the cluster: KAI up to v0.10.x (and the retracted v0.20.x) watch
    kueue.x-k8s.io/v1alpha1 Topology, which Kueue 0.19's CRD no longer serves (KAI then stalls). Those versions have
    KAI's CRDs without KAI's own Topology CRD (``topologies.kai.scheduler``, from v0.11.0); a KAI with it (the
    pinned v0.17.0) only copies Kueue's Topologies and runs next to Kueue."""
    kai = [c for c in crd_names if c in KAI_CRDS]
    if not kai or KAI_TOPOLOGY_CRD in crd_names:
        return []
    return [
        _kueue_quota.finding(
            "kueue-kai-topology-conflict",
            "error",
            {"kind": "CustomResourceDefinition", "name": "topologies.kueue.x-k8s.io"},
            [
                f"KAI Scheduler's CRDs are installed ({', '.join(sorted(kai))}) without its own {KAI_TOPOLOGY_CRD}: a "
                "KAI Scheduler older than v0.11.0 (or the retracted v0.20.x)"
            ],
            "Kueue 0.19's Topology CRD serves v1beta1/v1beta2 only; that KAI Scheduler watches kueue.x-k8s.io/v1alpha1 "
            "Topology and stalls once Kueue's chart replaces the CRD",
            "upgrade KAI Scheduler to v0.11.0 or later (the kai_scheduler role pins v0.17.0) before installing Kueue, "
            "or do not install Kueue here",
        )
    ]


def _team(
    team: Any,
    ti: int,
    flavors: Sequence[Mapping[str, Any]],
    findings: list[Finding],
    gpu_flavors: bool = True,
    check_mode: bool = False,
) -> tuple[Obj, list[Obj]] | None:
    if not isinstance(team, Mapping):
        findings.append(
            _kueue_quota.finding(
                "kueue-team-invalid",
                "error",
                {"kind": "ClusterQueue", "name": f"kueue_teams[{ti}]"},
                [f"kueue_teams[{ti}]: {_kueue_quota.show(team)}"],
                "a team is a mapping",
                "see the role's argument specs",
            )
        )
        return None
    name = team.get("name")
    ref = {"kind": "ClusterQueue", "name": str(name)}
    before = len(findings)
    if not _kueue_quota.subdomain(name):
        findings.append(
            _kueue_quota.finding(
                "kueue-team-name-invalid",
                "error",
                ref,
                [f"kueue_teams[{ti}].name: {_kueue_quota.show(name)}"],
                "the team's name is its ClusterQueue's name: a DNS-1123 subdomain",
                "rename the team",
            )
        )
        return None
    cohort = team.get("cohort")
    if cohort is not None and not _kueue_quota.subdomain(cohort):
        findings.append(
            _kueue_quota.finding(
                "kueue-cohort-invalid",
                "error",
                ref,
                [f"kueue_teams[{ti}].cohort: {_kueue_quota.show(cohort)}"],
                "a cohort name is a DNS-1123 subdomain",
                "rename the cohort",
            )
        )
    namespaces = list(team.get("namespaces") or [])
    all_ns = bool(team.get("all_namespaces"))
    bad_ns = [n for n in namespaces if not _label(n)]
    if bad_ns:
        findings.append(
            _kueue_quota.finding(
                "kueue-namespace-invalid",
                "error",
                ref,
                [f"kueue_teams[{ti}].namespaces: {', '.join(map(str, bad_ns))}"],
                "a namespace name is a DNS-1123 label",
                "fix the namespace names",
            )
        )
    if not namespaces and not all_ns:
        findings.append(
            _kueue_quota.finding(
                "kueue-team-selects-no-namespace",
                "error",
                ref,
                [f"kueue_teams[{ti}]: no namespaces and all_namespaces false"],
                "a ClusterQueue whose namespaceSelector is nil admits nothing (nil selects no namespace), and "
                "without a "
                "namespace there is no LocalQueue to submit to",
                f"list the team's namespaces in kueue_teams[{ti}].namespaces (or set all_namespaces: true for "
                "every namespace)",
            )
        )
    strategy = team.get("queueing_strategy", "BestEffortFIFO")
    if strategy not in QUEUEING_STRATEGIES:
        findings.append(
            _kueue_quota.finding(
                "kueue-queueing-strategy-invalid",
                "error",
                ref,
                [f"kueue_teams[{ti}].queueing_strategy: {_kueue_quota.show(strategy)}"],
                f"queueingStrategy is one of {', '.join(QUEUEING_STRATEGIES)}",
                "fix it",
            )
        )
    quotas = _kueue_quota.quota_entries(team, ti, flavors, findings, gpu_flavors, check_mode)
    preemption = _kueue_quota.preemption(team, ti, findings)
    if any(f["severity"] == "error" for f in findings[before:]) or len(quotas) < len(team.get("quotas") or []):
        return None
    # sorted: the object does not depend on the order the variables list the resources in
    covered = sorted({r for _flavor, entry in quotas for r in entry})
    if len(covered) > MAX_RESOURCES or len(quotas) > MAX_FLAVORS:
        findings.append(
            _kueue_quota.finding(
                "kueue-quota-too-large",
                "error",
                ref,
                [f"{len(quotas)} flavors, {len(covered)} resources"],
                f"a resource group holds at most {MAX_FLAVORS} flavors and {MAX_RESOURCES} resources",
                "split the team",
            )
        )
        return None
    flavors_spec = []
    for flavor, entry in quotas:
        resources = []
        for res in covered:
            values = entry.get(res, {"nominal": 0})
            # as the API server stores them (resource.Quantity's canonical strings): the landing check compares those
            item: dict[str, Any] = {"name": res, "nominalQuota": _quantity.canonical(values["nominal"])}
            if "borrowing_limit" in values:
                item["borrowingLimit"] = _quantity.canonical(values["borrowing_limit"])
            if "lending_limit" in values:
                item["lendingLimit"] = _quantity.canonical(values["lending_limit"])
            resources.append(item)
        flavors_spec.append({"name": flavor["name"], "resources": resources})
    selector = (
        {}
        if all_ns
        else {"matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "In", "values": sorted(set(namespaces))}]}
    )
    spec: dict[str, Any] = {"namespaceSelector": selector, "queueingStrategy": strategy}
    if flavors_spec:
        spec["resourceGroups"] = [{"coveredResources": covered, "flavors": flavors_spec}]
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = preemption
    cq = _owned_obj({"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    lq_name = team.get("local_queue") or name
    lqs = [
        _owned_obj(
            {
                "apiVersion": API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": lq_name, "namespace": ns},
                "spec": {"clusterQueue": name},
            }
        )
        for ns in sorted(set(namespaces))
    ]
    return cq, lqs


# The manager Configuration of the pinned chart (kubernetes-sigs/kueue v0.19.2, charts/kueue/values.yaml
# managerConfig.controllerManagerConfigYaml, read from the Go module zip sigs.k8s.io/kueue@v0.19.2). The chart takes
# the Configuration as one YAML string, so a role that sets two keys of it must give all of it: these defaults stay
# (the API client's qps 300 / burst 500 and the reconcilers' concurrency, which Kueue's own defaults make 20 / 30 and
# 1), the role's keys go over them. tests/fixtures/charts/kueue/values.yaml carries the same string.
UPSTREAM_MANAGER_CONFIG: dict[str, Any] = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081"},
    "metrics": {"bindAddress": ":8443"},
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
    "controller": {
        "groupKindConcurrency": {
            "Job.batch": 5,
            "Pod": 5,
            "Workload.kueue.x-k8s.io": 10,
            "LocalQueue.kueue.x-k8s.io": 5,
            "ClusterQueue.kueue.x-k8s.io": 5,
            "ResourceFlavor.kueue.x-k8s.io": 1,
        }
    },
    "clientConnection": {"qps": 300, "burst": 500},
    "integrations": {
        "frameworks": [
            "batch/job",
            "kubeflow.org/mpijob",
            "ray.io/rayjob",
            "ray.io/rayservice",
            "ray.io/raycluster",
            "jobset.x-k8s.io/jobset",
            "workload.codeflare.dev/appwrapper",
            "trainer.kubeflow.org/trainjob",
            "pod",
            "deployment",
            "statefulset",
            "leaderworkerset.x-k8s.io/leaderworkerset",
        ]
    },
}


def manager_config(variables: Mapping[str, Any]) -> dict[str, Any]:
    """The manager's Configuration: upstream's default for the pinned chart with the role's keys over it
    (the integrations and manageJobsWithoutQueueName), merged, never replaced."""
    config = json.loads(json.dumps(UPSTREAM_MANAGER_CONFIG))
    config["manageJobsWithoutQueueName"] = bool(variables.get("kueue_manage_jobs_without_queue_name", False))
    config["integrations"] = {
        **config["integrations"],
        "frameworks": list(variables.get("kueue_integrations") or ["batch/job"]),
    }
    return config


def chart_values(variables: Mapping[str, Any]) -> dict[str, Any]:
    """The chart values the role sets: the manager's Configuration (:func:`manager_config`) and the image pinned to
    the chart's version (upstream's values name a staging image with pullPolicy Always)."""
    version = str(variables.get("kueue_chart_version") or "")
    config = manager_config(variables)
    return {
        "controllerManager": {"manager": {"image": {**IMAGE, "tag": f"v{version}"}}},
        # a JSON document is a YAML document: the chart reads it with fromYaml
        "managerConfig": {"controllerManagerConfigYaml": json.dumps(config, indent=2, sort_keys=True)},
    }


def input_findings(variables: Mapping[str, Any]) -> list[Finding]:
    """The checks that need no cluster (integrations); the rest are in :func:`build`."""
    out = []
    unknown = [f for f in variables.get("kueue_integrations") or [] if f not in FRAMEWORKS]
    if unknown:
        out.append(
            _kueue_quota.finding(
                "kueue-integration-unknown",
                "error",
                {"kind": "Configuration", "name": "kueue_integrations"},
                [f"unknown: {', '.join(map(str, unknown))}"],
                f"Kueue {variables.get('kueue_chart_version')} knows {', '.join(FRAMEWORKS)}",
                "remove or correct them",
            )
        )
    return out


def build(variables: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], check_mode: bool = False) -> dict[str, Any]:
    """Everything the role applies, and the findings. ``nodes``: the cluster's Node objects. In ``check_mode`` on a
    cluster whose nodes carry no GPU product label yet (the GPU Operator's feature discovery has not run: site.yml
    --check on a new cluster), a quota on a GPU product is a warning, and its team is left out of the plan."""
    findings = input_findings(variables)
    flavors, flavor_findings = _kueue_quota.flavor_catalog(variables, nodes)
    findings += flavor_findings
    cqs: list[Obj] = []
    lqs: list[Obj] = []
    seen_teams: set[str] = set()
    claimed: dict[tuple[str, str], str] = {}
    for ti, team in enumerate(variables.get("kueue_teams") or []):
        name = (team or {}).get("name") if isinstance(team, Mapping) else None
        if name in seen_teams:
            findings.append(
                _kueue_quota.finding(
                    "kueue-team-duplicate",
                    "error",
                    {"kind": "ClusterQueue", "name": str(name)},
                    [f"kueue_teams[{ti}].name: {name}"],
                    "two teams with one name would be one ClusterQueue",
                    "rename one of them",
                )
            )
            continue
        seen_teams.add(str(name))
        built = _team(team, ti, flavors, findings, bool(variables.get("kueue_gpu_flavors", True)), check_mode)
        if built is None:
            continue
        cq, team_lqs = built
        clash = [
            f"{lq['metadata']['namespace']}/{lq['metadata']['name']} "
            f"(also {claimed[(lq['metadata']['namespace'], lq['metadata']['name'])]})"
            for lq in team_lqs
            if (lq["metadata"]["namespace"], lq["metadata"]["name"]) in claimed
        ]
        if clash:
            findings.append(
                _kueue_quota.finding(
                    "kueue-local-queue-claimed",
                    "error",
                    {"kind": "ClusterQueue", "name": str(name)},
                    [f"LocalQueue {c}" for c in clash],
                    "one LocalQueue points at one ClusterQueue: two teams cannot share a LocalQueue name in a "
                    "namespace",
                    "set local_queue on one of the teams",
                )
            )
            continue
        for lq in team_lqs:
            claimed[(lq["metadata"]["namespace"], lq["metadata"]["name"])] = str(name)
        cqs.append(cq)
        lqs += team_lqs
    used = {fl["name"] for cq in cqs for g in cq["spec"].get("resourceGroups") or [] for fl in g["flavors"]}
    rfs = []
    for flavor in flavors:
        spec: dict[str, Any] = {"nodeLabels": dict(flavor["node_labels"])}
        if flavor.get("node_taints"):
            spec["nodeTaints"] = plain(flavor["node_taints"])
        if flavor.get("tolerations"):
            spec["tolerations"] = plain(flavor["tolerations"])
        rfs.append(
            _owned_obj(
                {
                    "apiVersion": API_VERSION,
                    "kind": "ResourceFlavor",
                    "metadata": {"name": flavor["name"]},
                    "spec": spec,
                }
            )
        )
    findings += _kueue_quota.capacity_findings(cqs, flavors, nodes)
    return {
        "chart_values": chart_values(variables),
        "resource_flavors": rfs,
        "cluster_queues": cqs,
        "local_queues": lqs,
        # what the role applies (and its landing check reads back), in apply order: flavors, ClusterQueues, LocalQueues
        "objects": rfs + cqs + lqs,
        "namespaces": sorted({lq["metadata"]["namespace"] for lq in lqs}),
        "flavors": flavors,
        "flavors_used": sorted(used),
        "owner_selector": OWNER_SELECTOR,
        # k8s_apply's prune: the role's queues and flavors the variables dropped, LocalQueues first
        "prune": _owned.prune_spec(OWNER_LABELS, [(API_VERSION, kind, None) for kind in KINDS]),
        # what validate waits for: every ClusterQueue and LocalQueue active
        "wait_objects": [{"kind": "ClusterQueue", "name": cq["metadata"]["name"]} for cq in cqs]
        + [
            {"kind": "LocalQueue", "name": lq["metadata"]["name"], "namespace": lq["metadata"]["namespace"]}
            for lq in lqs
        ],
        "findings": findings,
    }


# The kueue role's plan in one call (action gpuops.platform.role_plan): what it reads, then everything it builds and
# judges from that before a change.
PLAN_QUERIES = (
    {"key": "nodes", "kind": "Node"},
    {
        "key": "crds",
        "api_version": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata_only": True,
    },
    {"key": "namespaces", "kind": "Namespace", "metadata_only": True},
)


def plan_queries(variables: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The reads of the role's plan: the nodes (their GPU products make the flavors), the CRDs' names (an old KAI
    Scheduler next to Kueue is an error; the queues' CRDs say whether the role's objects can be read yet) and the
    namespaces' names (the role creates the team namespaces that do not exist)."""
    return [dict(q) for q in PLAN_QUERIES]


def plan(
    variables: Mapping[str, Any], objects: Mapping[str, Sequence[Mapping[str, Any]]], planning: bool
) -> dict[str, Any]:
    """``build`` from the plan's reads (``objects``: the resources of each query key), with the coexistence rule,
    ``crds_present`` (Kueue's queue CRDs are served) and ``missing_namespaces`` (the team namespaces the cluster does
    not have: the role creates them). With kueue_state absent nothing is judged: no findings."""
    crd_names = [str((c.get("metadata") or {}).get("name")) for c in objects.get("crds") or []]
    built = build(variables, list(objects.get("nodes") or []), planning)
    if variables.get("kueue_state", "present") == "present":
        built["findings"] = coexistence_findings(crd_names) + built["findings"]
    else:
        built["findings"] = []
    built["crds_present"] = "clusterqueues.kueue.x-k8s.io" in crd_names
    live = {str((n.get("metadata") or {}).get("name")) for n in objects.get("namespaces") or []}
    built["missing_namespaces"] = [ns for ns in built["namespaces"] if ns not in live]
    return built
