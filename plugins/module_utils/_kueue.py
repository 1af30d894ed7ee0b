# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The kueue role's rules, once: pure functions (no I/O). Facts checked against kubernetes-sigs/kueue v0.19.2
(apis/kueue/v1beta2, pkg/webhooks/clusterqueue_webhook.go, charts/kueue) and ../shared/reference/upstream-apis.md §8.

- :func:`gpu_flavors`: one ResourceFlavor per GPU product the cluster's nodes carry (``nvidia.com/gpu.product``
  from GPU Feature Discovery, ``amd.com/gpu.product-name`` from the AMD labeller), named after the product
  (``NVIDIA-H100-80GB-HBM3`` -> ``nvidia-h100-80gb-hbm3``), with the nodes it matches and their allocatable GPUs.
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

from ansible_collections.gpuops.platform.plugins.module_utils import _owned, _quantity
from ansible_collections.gpuops.platform.plugins.module_utils._plain import plain

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
# GPU product labels, by vendor: GFD's and the AMD labeller's
PRODUCT_LABELS = ("nvidia.com/gpu.product", "amd.com/gpu.product-name")
GPU_RESOURCE_RE = re.compile(r"^(nvidia\.com/(gpu|mig-.+)|amd\.com/gpu)\Z")
IMAGE = {"repository": "registry.k8s.io/kueue/kueue", "pullPolicy": "IfNotPresent"}
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
RECLAIM = ("Never", "LowerPriority", "Any")
WITHIN_CQ = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
BORROW_WITHIN = ("Never", "LowerPriority")
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
SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
MAX_FLAVORS = 64  # flavors of one resource group (CRD MaxItems)
MAX_RESOURCES = 64  # covered resources of one group


def _finding(fid: str, severity: str, obj: Mapping[str, Any], evidence: Sequence[str], cause: str, fix: str) -> Finding:
    return {
        "id": fid,
        "severity": severity,
        "object": dict(obj),
        "evidence": list(evidence),
        "cause": cause,
        "fix": fix,
    }


def _show(value: Any) -> str:
    """A value for a message: a string as it is, anything else as JSON (never a Python repr)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _subdomain(name: Any) -> bool:
    return isinstance(name, str) and 0 < len(name) <= 253 and bool(SUBDOMAIN_RE.match(name))


def _label(name: Any) -> bool:
    return isinstance(name, str) and 0 < len(name) <= 63 and bool(LABEL_RE.match(name))


def flavor_name(product: str) -> str:
    """A DNS-1123 subdomain from a GPU product label value: lower case, runs of other characters as one dash."""
    name = re.sub(r"[^a-z0-9.]+", "-", str(product).lower()).strip("-.")
    return re.sub(r"\.+", ".", name)[:253].strip("-.") or "gpu"


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
    finding = _finding(
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
        _finding(
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


def _matches(labels: Mapping[str, Any], selector: Mapping[str, Any]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _gpu_allocatable(node: Mapping[str, Any]) -> dict[str, Any]:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {k: _quantity.parse(v) for k, v in alloc.items() if GPU_RESOURCE_RE.match(k) and _quantity.parse(v)}


def _capacity(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for node in nodes:
        for res, qty in ((node.get("status") or {}).get("allocatable") or {}).items():
            value = _quantity.parse(qty)
            if value is not None:
                total[res] = total.get(res, 0) + value
    return total


def gpu_flavors(nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per GPU product among ``nodes``: ``{name, product, label, node_labels, nodes, gpus}`` (``gpus``:
    allocatable GPU resources summed over its nodes, as strings), by name."""
    by_product: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        for label in PRODUCT_LABELS:
            if labels.get(label):
                by_product.setdefault((label, str(labels[label])), []).append(node)
                break
    out = []
    for (label, product), members in by_product.items():
        gpus: dict[str, Any] = {}
        for node in members:
            for res, qty in _gpu_allocatable(node).items():
                gpus[res] = gpus.get(res, 0) + qty
        out.append(
            {
                "name": flavor_name(product),
                "product": product,
                "label": label,
                "node_labels": {label: product},
                "nodes": sorted(str((n.get("metadata") or {}).get("name")) for n in members),
                "gpus": {k: _quantity.show(v) for k, v in sorted(gpus.items())},
            }
        )
    return sorted(out, key=lambda f: f["name"])


def _flavor_catalog(
    variables: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[Finding]]:
    """The flavors the role manages: those of the GPU products (unless turned off) and the user's own."""
    findings: list[Finding] = []
    flavors = gpu_flavors(nodes) if variables.get("kueue_gpu_flavors", True) else []
    for flavor in flavors:
        flavor["source"] = "gpu-product"
    for i, user in enumerate(variables.get("kueue_flavors") or []):
        name = (user or {}).get("name")
        ref = {"kind": "ResourceFlavor", "name": str(name or f"kueue_flavors[{i}]")}
        if not _subdomain(name):
            findings.append(
                _finding(
                    "kueue-flavor-name-invalid",
                    "error",
                    ref,
                    [f"kueue_flavors[{i}].name: {_show(name)}"],
                    "a ResourceFlavor name must be a DNS-1123 subdomain (lower case letters, digits, '-' and '.')",
                    "rename the flavor",
                )
            )
            continue
        labels = dict((user or {}).get("node_labels") or {})
        members = [n for n in nodes if _matches((n.get("metadata") or {}).get("labels") or {}, labels)]
        if any(f["name"] == name for f in flavors):
            findings.append(
                _finding(
                    "kueue-flavor-duplicate",
                    "error",
                    ref,
                    [
                        f"kueue_flavors[{i}].name {name} is also "
                        + (
                            "the flavor of a GPU product the cluster has"
                            if any(f["name"] == name and f.get("source") == "gpu-product" for f in flavors)
                            else "an earlier entry"
                        )
                    ],
                    "two flavors with one name would overwrite each other",
                    "give the flavor another name",
                )
            )
            continue
        flavors.append(
            {
                "name": name,
                "product": None,
                "label": None,
                "node_labels": labels,
                "node_taints": list((user or {}).get("node_taints") or []),
                "tolerations": list((user or {}).get("tolerations") or []),
                "nodes": sorted(str((n.get("metadata") or {}).get("name")) for n in members),
                "gpus": {},
                "source": "kueue_flavors",
            }
        )
    return flavors, findings


def _resolve_flavor(ref: Any, flavors: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """A quota's flavor: by flavor name, or by GPU product (case-insensitive, also without the -SHARED/-MIG-
    suffix GFD appends under sharing when exactly one flavor has that base product)."""
    text = str(ref or "")
    for flavor in flavors:
        if flavor["name"] == text:
            return flavor
    low = text.lower()
    exact = [f for f in flavors if f.get("product") and str(f["product"]).lower() == low]
    if len(exact) == 1:
        return exact[0]
    base = [
        f
        for f in flavors
        if f.get("product") and re.split(r"-SHARED|-MIG-", str(f["product"]), maxsplit=1)[0].lower() == low
    ]
    return base[0] if len(base) == 1 else None


def _known(flavors: Sequence[Mapping[str, Any]], gpu_flavors: bool = True) -> str:
    if not flavors:
        why = (
            "no node carries a GPU product label (nvidia.com/gpu.product, amd.com/gpu.product-name)"
            if gpu_flavors
            else "kueue_gpu_flavors is false"
        )
        return f"none: {why} and kueue_flavors is empty"
    return ", ".join(
        f["name"] + (f" (GPU product {f['product']}, nodes {', '.join(f['nodes'])})" if f.get("product") else "")
        for f in flavors
    )


def _limit(spec: Any, key: str) -> Any:
    return spec.get(key) if isinstance(spec, Mapping) else None


def _quota_entries(
    team: Mapping[str, Any],
    ti: int,
    flavors: Sequence[Mapping[str, Any]],
    findings: list[Finding],
    gpu_flavors: bool = True,
    check_mode: bool = False,
) -> list[tuple[Mapping[str, Any], dict[str, dict[str, Any]]]]:
    """(flavor, {resource: {nominal, borrowing_limit, lending_limit}}) for each quota of a team; findings for the
    rest."""
    name = str(team.get("name"))
    ref = {"kind": "ClusterQueue", "name": name}
    cohort = team.get("cohort")
    out = []
    seen: set[str] = set()
    for qi, quota in enumerate(team.get("quotas") or []):
        where = f"kueue_teams[{ti}].quotas[{qi}]"
        flavor = _resolve_flavor((quota or {}).get("flavor"), flavors)
        if flavor is None:
            early = gpu_flavors and not any(f.get("source") == "gpu-product" for f in flavors) and check_mode
            findings.append(
                _finding(
                    "kueue-flavor-unknown",
                    "warning" if early else "error",
                    ref,
                    [f"{where}.flavor: {_show(quota.get('flavor'))}", f"flavors: {_known(flavors, bool(gpu_flavors))}"],
                    "no node carries a GPU product label yet (check mode before the GPU Operator's feature discovery "
                    "ran): the GPU flavors are known once it has; the real run checks the quota again"
                    if early
                    else "a quota can only cover a flavor that exists: a flavor of a GPU product the cluster's nodes "
                    "carry, or one of kueue_flavors",
                    "use one of the flavors listed (a flavor name or its GPU product), or add the flavor to "
                    "kueue_flavors",
                )
            )
            if not early:
                continue
        elif flavor["name"] in seen:
            findings.append(
                _finding(
                    "kueue-flavor-repeated",
                    "error",
                    ref,
                    [f"{where}.flavor: {flavor['name']} has an earlier quota in this team"],
                    "a flavor can appear once in a ClusterQueue's resource group",
                    "merge the two quotas",
                )
            )
            continue
        else:
            seen.add(flavor["name"])
        # a quota on a flavor not known yet (check mode or the run's plan, before the GPU Operator labelled the
        # nodes) is still judged for its quantities, limits and cohort; it is applied once the flavor is known
        resources = (quota or {}).get("resources")
        if not isinstance(resources, Mapping) or not resources:
            findings.append(
                _finding(
                    "kueue-quota-invalid",
                    "error",
                    ref,
                    [f"{where}.resources: {_show(resources)}"],
                    "a quota names at least one resource with its nominal quota",
                    "set resources, for example {nvidia.com/gpu: 8} or "
                    "{nvidia.com/gpu: {nominal: 8, borrowing_limit: 4}}",
                )
            )
            continue
        entry: dict[str, dict[str, Any]] = {}
        for res, spec in resources.items():
            spec = spec if isinstance(spec, Mapping) else {"nominal": spec}
            unknown = sorted(set(spec) - {"nominal", "borrowing_limit", "lending_limit"})
            values = {
                k: spec.get(k) for k in ("nominal", "borrowing_limit", "lending_limit") if spec.get(k) is not None
            }
            parsed = {k: _quantity.parse(v) for k, v in values.items()}
            bad = [k for k, p in parsed.items() if p is None or p < 0]
            if unknown or "nominal" not in values or bad:
                findings.append(
                    _finding(
                        "kueue-quota-invalid",
                        "error",
                        ref,
                        [f"{where}.resources[{res}]: {_show(dict(spec))}"]
                        + ([f"unknown keys: {', '.join(unknown)}"] if unknown else [])
                        + ([f"not a non-negative quantity: {', '.join(bad)}"] if bad else []),
                        "each resource needs a nominal quota, and limits, as non-negative Kubernetes quantities "
                        "(12, 500m, 64Gi)",
                        "write the resource as a number (its nominal quota) or as "
                        "{nominal, borrowing_limit, lending_limit}",
                    )
                )
                continue
            limits = [k for k in ("borrowing_limit", "lending_limit") if k in values]
            if limits and not cohort:
                findings.append(
                    _finding(
                        "kueue-limit-without-cohort",
                        "error",
                        ref,
                        [f"{where}.resources[{res}].{k}: {values[k]}" for k in limits]
                        + [f"kueue_teams[{ti}].cohort: not set"],
                        "Kueue refuses borrowingLimit and lendingLimit on a ClusterQueue without a cohort: there is "
                        "nobody to "
                        "borrow from or lend to",
                        f"set kueue_teams[{ti}].cohort, or remove the limits",
                    )
                )
                continue
            lend, nominal = parsed.get("lending_limit"), parsed.get("nominal")
            if lend is not None and nominal is not None and lend > nominal:
                findings.append(
                    _finding(
                        "kueue-lending-above-nominal",
                        "error",
                        ref,
                        [
                            f"{where}.resources[{res}]: lending_limit {values['lending_limit']} > "
                            f"nominal {values['nominal']}"
                        ],
                        "a ClusterQueue cannot lend more than its nominal quota (Kueue's webhook refuses it)",
                        "lower lending_limit to at most the nominal quota",
                    )
                )
                continue
            entry[str(res)] = values
        if entry and flavor is not None:
            out.append((flavor, entry))
    return out


def _preemption(team: Mapping[str, Any], ti: int, findings: list[Finding]) -> dict[str, Any] | None:
    pre = team.get("preemption")
    if not pre:
        return None
    ref = {"kind": "ClusterQueue", "name": str(team.get("name"))}
    out: dict[str, Any] = {}
    checks = (
        ("reclaim_within_cohort", "reclaimWithinCohort", RECLAIM),
        ("within_cluster_queue", "withinClusterQueue", WITHIN_CQ),
    )
    for key, field, choices in checks:
        if pre.get(key) is None:
            continue
        if pre[key] not in choices:
            findings.append(
                _finding(
                    "kueue-preemption-invalid",
                    "error",
                    ref,
                    [f"kueue_teams[{ti}].preemption.{key}: {_show(pre[key])}"],
                    f"{field} is one of {', '.join(choices)}",
                    f"set kueue_teams[{ti}].preemption.{key} to one of them",
                )
            )
            return None
        out[field] = pre[key]
    borrow = pre.get("borrow_within_cohort")
    if borrow is not None:
        policy = borrow.get("policy") if isinstance(borrow, Mapping) else borrow
        if policy not in BORROW_WITHIN:
            findings.append(
                _finding(
                    "kueue-preemption-invalid",
                    "error",
                    ref,
                    [f"kueue_teams[{ti}].preemption.borrow_within_cohort: {_show(borrow)}"],
                    f"borrowWithinCohort.policy is one of {', '.join(BORROW_WITHIN)}",
                    "fix the policy",
                )
            )
            return None
        out["borrowWithinCohort"] = {"policy": policy}
        if isinstance(borrow, Mapping) and borrow.get("max_priority_threshold") is not None:
            out["borrowWithinCohort"]["maxPriorityThreshold"] = borrow["max_priority_threshold"]
        if out.get("reclaimWithinCohort", "Never") == "Never" and policy != "Never":
            findings.append(
                _finding(
                    "kueue-preemption-invalid",
                    "error",
                    ref,
                    [f"kueue_teams[{ti}].preemption: borrow_within_cohort {policy} with reclaim_within_cohort Never"],
                    "Kueue refuses borrowWithinCohort other than Never when reclaimWithinCohort is Never",
                    "set reclaim_within_cohort to LowerPriority or Any, or borrow_within_cohort to Never",
                )
            )
            return None
    return out


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
            _finding(
                "kueue-team-invalid",
                "error",
                {"kind": "ClusterQueue", "name": f"kueue_teams[{ti}]"},
                [f"kueue_teams[{ti}]: {_show(team)}"],
                "a team is a mapping",
                "see the role's argument specs",
            )
        )
        return None
    name = team.get("name")
    ref = {"kind": "ClusterQueue", "name": str(name)}
    before = len(findings)
    if not _subdomain(name):
        findings.append(
            _finding(
                "kueue-team-name-invalid",
                "error",
                ref,
                [f"kueue_teams[{ti}].name: {_show(name)}"],
                "the team's name is its ClusterQueue's name: a DNS-1123 subdomain",
                "rename the team",
            )
        )
        return None
    cohort = team.get("cohort")
    if cohort is not None and not _subdomain(cohort):
        findings.append(
            _finding(
                "kueue-cohort-invalid",
                "error",
                ref,
                [f"kueue_teams[{ti}].cohort: {_show(cohort)}"],
                "a cohort name is a DNS-1123 subdomain",
                "rename the cohort",
            )
        )
    namespaces = list(team.get("namespaces") or [])
    all_ns = bool(team.get("all_namespaces"))
    bad_ns = [n for n in namespaces if not _label(n)]
    if bad_ns:
        findings.append(
            _finding(
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
            _finding(
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
            _finding(
                "kueue-queueing-strategy-invalid",
                "error",
                ref,
                [f"kueue_teams[{ti}].queueing_strategy: {_show(strategy)}"],
                f"queueingStrategy is one of {', '.join(QUEUEING_STRATEGIES)}",
                "fix it",
            )
        )
    quotas = _quota_entries(team, ti, flavors, findings, gpu_flavors, check_mode)
    preemption = _preemption(team, ti, findings)
    if any(f["severity"] == "error" for f in findings[before:]) or len(quotas) < len(team.get("quotas") or []):
        return None
    # sorted: the object does not depend on the order the variables list the resources in
    covered = sorted({r for _flavor, entry in quotas for r in entry})
    if len(covered) > MAX_RESOURCES or len(quotas) > MAX_FLAVORS:
        findings.append(
            _finding(
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


def capacity_findings(
    cqs: Sequence[Obj], flavors: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]
) -> list[Finding]:
    """A warning per flavor and resource whose nominal quotas, summed over the teams, exceed what the flavor's nodes
    have allocatable (jobs admitted within quota would then wait for nodes)."""
    by_name = {f["name"]: f for f in flavors}
    totals: dict[tuple[str, str], Any] = {}
    teams: dict[tuple[str, str], list[str]] = {}
    for cq in cqs:
        for group in cq["spec"].get("resourceGroups") or []:
            for fl in group["flavors"]:
                for res in fl["resources"]:
                    qty = _quantity.parse(res["nominalQuota"])
                    if qty:
                        totals[(fl["name"], res["name"])] = totals.get((fl["name"], res["name"]), 0) + qty
                        teams.setdefault((fl["name"], res["name"]), []).append(
                            f"{cq['metadata']['name']} {res['nominalQuota']}"
                        )
    out = []
    for (fname, res), total in sorted(totals.items()):
        flavor = by_name[fname]
        members = [n for n in nodes if str((n.get("metadata") or {}).get("name")) in flavor["nodes"]]
        have = _capacity(members).get(res, 0)
        if total > have:
            out.append(
                _finding(
                    "kueue-quota-above-capacity",
                    "warning",
                    {"kind": "ResourceFlavor", "name": fname},
                    [
                        f"{res}: nominal quotas sum to {_quantity.show(total)} ({'; '.join(teams[(fname, res)])}), "
                        "the flavor's "
                        f"{len(members)} node(s) have {_quantity.show(have)} allocatable"
                        + (f" ({', '.join(flavor['nodes'])})" if flavor["nodes"] else "")
                    ],
                    "jobs admitted within quota will wait for nodes: quota is a promise the cluster cannot keep",
                    "lower the quotas to the nodes' capacity, or add nodes of this flavor",
                )
            )
    return out


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
            _finding(
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
    flavors, flavor_findings = _flavor_catalog(variables, nodes)
    findings += flavor_findings
    cqs: list[Obj] = []
    lqs: list[Obj] = []
    seen_teams: set[str] = set()
    claimed: dict[tuple[str, str], str] = {}
    for ti, team in enumerate(variables.get("kueue_teams") or []):
        name = (team or {}).get("name") if isinstance(team, Mapping) else None
        if name in seen_teams:
            findings.append(
                _finding(
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
                _finding(
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
    findings += capacity_findings(cqs, flavors, nodes)
    return {
        "chart_values": chart_values(variables),
        "resource_flavors": rfs,
        "cluster_queues": cqs,
        "local_queues": lqs,
        "namespaces": sorted({lq["metadata"]["namespace"] for lq in lqs}),
        "flavors": flavors,
        "flavors_used": sorted(used),
        "owner_selector": OWNER_SELECTOR,
        # what validate waits for: every ClusterQueue and LocalQueue active
        "wait_objects": [{"kind": "ClusterQueue", "name": cq["metadata"]["name"]} for cq in cqs]
        + [
            {"kind": "LocalQueue", "name": lq["metadata"]["name"], "namespace": lq["metadata"]["namespace"]}
            for lq in lqs
        ],
        "findings": findings,
    }
