# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The kai_scheduler role's rules, once: pure functions (no I/O). Facts checked against kai-scheduler/KAI-Scheduler
v0.17.0 (pkg/apis/scheduling/v2, pkg/admission/webhook/queuehooks, deployments/kai-scheduler, docs/queues) and
../shared/reference/upstream-apis.md §9.

- Queues (``scheduling.run.ai/v2``, cluster scope): ``parentQueue``, ``priority``, ``resources.{gpu,cpu,memory}.
  {quota, limit, overQuotaWeight}`` in KAI's own units: GPUs (fractions allowed), CPU in millicores, memory in
  megabytes (10^6 bytes); ``-1`` is unlimited (quota) or no limit (limit); a limit of 0 allows nothing above the
  quota. The role takes a number as KAI's unit, or a Kubernetes quantity string for cpu and memory (``"64"`` CPUs,
  ``"256Gi"``) and converts it.
- Only leaf queues take workloads (pods name one with the ``kai.scheduler/queue`` label). KAI's webhook only warns
  (and only with ``--enable-quota-validation``) when children's quotas exceed their parent's; the role refuses it
  before any change, with the numbers, and a limit below the quota.
- KAI next to Kueue: KAI v0.10.x and the retracted v0.20.x watch ``kueue.x-k8s.io/v1alpha1`` Topology, which Kueue
  0.19 no longer serves; from v0.11.0 (the pinned v0.17.0 included) KAI has its own ``kai.scheduler/v1alpha1``
  Topology and only copies Kueue's Topologies (a pre-install hook). :func:`kueue_conflict` tells them apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.batch import _queue_tree
from ansible_collections.gpuops.platform.plugins.module_utils.common import _quantity
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

Finding = dict[str, Any]
Obj = dict[str, Any]

API_VERSION = "scheduling.run.ai/v2"
QUEUE_CRD = "queues.scheduling.run.ai"
OWNER_LABELS = _owned.owner_labels("kai_scheduler")
OWNER_SELECTOR = _owned.selector(OWNER_LABELS)
KINDS = ("Queue",)
QUEUE_LABEL = "kai.scheduler/queue"
SCHEDULER_NAME = "kai-scheduler"
REGISTRY = "ghcr.io/kai-scheduler/kai-scheduler"
RESOURCES = ("gpu", "cpu", "memory")
UNITS = {"gpu": " GPU", "cpu": "m CPU", "memory": " MB"}
DEFAULT_QUEUES = ("default-parent-queue", "default-queue")
MAX_DEPTH = 32
UNLIMITED = Fraction(-1)
_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def kueue_conflict(kai_version: str) -> bool:
    """True for KAI versions that watch kueue.x-k8s.io/v1alpha1 Topology (up to v0.10.x, and the retracted
    v0.20.x); Kueue 0.19's Topology CRD serves only v1beta1/v1beta2."""
    m = _VERSION_RE.match(str(kai_version))
    if not m:
        return False
    major, minor = int(m.group(1)), int(m.group(2))
    return major == 0 and (minor <= 10 or minor == 20)


def _amount(value: Any, res: str) -> Fraction | None:
    """A quota or limit in KAI's unit: numbers as they are, quantity strings converted (cpu to millicores, memory to
    megabytes). None when it is neither."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return Fraction(str(value)) if isinstance(value, float) else Fraction(value)
    parsed = _quantity.parse(value)
    if parsed is None:
        return None
    if res == "cpu":
        return parsed * 1000
    if res == "memory":
        return parsed / 10**6
    return parsed


def _number(value: Fraction) -> int | float:
    return int(value) if value.denominator == 1 else float(value)


LIMIT_ORDER = (
    _queue_tree.Order(
        "quota",
        "limit",
        "kai-queue-limit-below-quota",
        "the queue could never use its whole quota",
        "raise {res}.limit to at least the quota, or -1 for no limit",
    ),
)


def _queue(q: Mapping[str, Any], name: str, where: str, findings: list[Finding]) -> tuple[Obj, dict[str, Any]] | None:
    resources: dict[str, Any] = {}
    quotas: dict[str, Fraction | None] = {}
    limits: dict[str, Fraction | None] = {}
    given = q.get("resources") or {}
    unknown = _queue_tree.unknown_findings(
        "kai-queue-resource-unknown",
        "Queue",
        name,
        f"{where}.resources",
        given,
        RESOURCES,
        "a KAI Queue has quotas for gpu, cpu and memory only (other resources are not queued)",
    )
    if unknown:
        findings += unknown
        return None
    for res in RESOURCES:
        spec = given.get(res) or {}
        if not isinstance(spec, Mapping):
            spec = {"quota": spec}
        entry: dict[str, Any] = {}
        for key, out_key, default in (
            ("quota", "quota", 0),
            ("limit", "limit", -1),
            ("over_quota_weight", "overQuotaWeight", 1),
        ):
            raw = spec.get(key, default)
            value = _amount(raw, res) if key != "over_quota_weight" else _amount(raw, "gpu")
            if value is None or (value < 0 and value != UNLIMITED) or (key == "over_quota_weight" and value < 0):
                findings.append(
                    _queue_tree.finding(
                        "kai-queue-amount-invalid",
                        "error",
                        "Queue",
                        name,
                        [f"{where}.resources.{res}.{key}: {raw!r}"],
                        f"{key} is a number in KAI's unit ({UNITS[res].strip()}), a quantity string for cpu/memory, "
                        "or -1 for unlimited",
                        f"correct {where}.resources.{res}.{key}",
                    )
                )
                return None
            entry[out_key] = _number(value)
            if key == "quota":
                quotas[res] = None if value == UNLIMITED else value
            elif key == "limit":
                limits[res] = None if value == UNLIMITED else value
        resources[res] = entry
    findings += _queue_tree.order_findings(
        "Queue", name, {"quota": quotas, "limit": limits}, LIMIT_ORDER, UNITS.__getitem__
    )
    spec_out: dict[str, Any] = {"resources": resources}
    if q.get("display_name"):
        spec_out["displayName"] = str(q["display_name"])
    if q.get("parent"):
        spec_out["parentQueue"] = str(q["parent"])
    if q.get("priority") is not None:
        spec_out["priority"] = q["priority"]
    for key, out_key in (("preempt_min_runtime", "preemptMinRuntime"), ("reclaim_min_runtime", "reclaimMinRuntime")):
        if q.get(key):
            spec_out[out_key] = str(q[key])
    obj = _owned.owned(
        {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec_out}, OWNER_LABELS
    )
    return obj, {"parent": q.get("parent") or None, "quota": quotas, "limit": limits}


SHARING_MODEL = "kai_fraction"  # the gpu_sharing pool model whose GPUs KAI shares in fractions (_pools.MODELS)


def fraction_pools(sharing_pools: Any) -> list[str]:
    """The names of the gpu_sharing pools whose model is ``kai_fraction`` (malformed pools are the gpu_sharing
    role's findings, not these)."""
    if not isinstance(sharing_pools, list):
        return []
    return [str(p.get("name")) for p in sharing_pools if isinstance(p, Mapping) and p.get("model") == SHARING_MODEL]


def gpu_sharing(variables: Mapping[str, Any], sharing_pools: Any = None) -> bool:
    """Whether the chart's ``global.gpuSharing`` is on: ``kai_scheduler_gpu_sharing`` when set, else on exactly when
    a gpu_sharing pool's model is ``kai_fraction`` (the sharing role's model asks for it)."""
    given = variables.get("kai_scheduler_gpu_sharing")
    if given is None:
        return bool(fraction_pools(sharing_pools))
    return bool(given)


def sharing_findings(variables: Mapping[str, Any], sharing_pools: Any = None) -> list[Finding]:
    """A ``kai_fraction`` pool with ``kai_scheduler_gpu_sharing: false``: the pool's pods would ask for fractions
    that KAI, with GPU sharing off, never gives (they stay pending)."""
    pools = fraction_pools(sharing_pools)
    if not pools or variables.get("kai_scheduler_gpu_sharing") is None or gpu_sharing(variables, sharing_pools):
        return []
    return [
        _queue_tree.finding(
            "kai-gpu-sharing-off",
            "error",
            "variable",
            "kai_scheduler_gpu_sharing",
            [f"kai_scheduler_gpu_sharing: false; gpu_sharing_pools {', '.join(pools)} have model {SHARING_MODEL}"],
            "with global.gpuSharing off KAI schedules no gpu-fraction or gpu-memory pod: the pool's fractional "
            "pods stay pending",
            "unset kai_scheduler_gpu_sharing (it follows the pools), or give those pools another model",
        )
    ]


def chart_values(variables: Mapping[str, Any], sharing_pools: Any = None) -> dict[str, Any]:
    """The chart values the role sets: the release registry (upstream's values name a local one; the release
    workflow rewrites it), GPU sharing (:func:`gpu_sharing`), and whether the chart makes its default queues."""
    return {
        "global": {"registry": REGISTRY, "gpuSharing": gpu_sharing(variables, sharing_pools)},
        "defaultQueue": {"createDefaultQueue": bool(variables.get("kai_scheduler_default_queues", True))},
    }


KUEUE_CRDS = ("clusterqueues.kueue.x-k8s.io", "topologies.kueue.x-k8s.io")
OPERATOR = "kai-operator"  # the chart's one Deployment; the operator makes the scheduler, binder, pod grouper...


def kueue_findings(version: str, crd_names: Sequence[str]) -> list[Finding]:
    """An error when Kueue's CRDs are in the cluster and the pinned KAI version watches kueue.x-k8s.io/v1alpha1
    Topology (:func:`kueue_conflict`)."""
    kueue = sorted(c for c in crd_names if c in KUEUE_CRDS)
    if not kueue or not kueue_conflict(version):
        return []
    return [
        _queue_tree.finding(
            "kai-kueue-topology-conflict",
            "error",
            "CustomResourceDefinition",
            "topologies.kueue.x-k8s.io",
            [f"kai_scheduler_chart_version: {version}; Kueue's CRDs are installed: {', '.join(kueue)}"],
            f"KAI Scheduler {version} watches kueue.x-k8s.io/v1alpha1 Topology, which Kueue 0.19 no longer serves: "
            "KAI stalls",
            "pin kai_scheduler_chart_version to v0.11.0 or later (v0.17.0 has its own kai.scheduler Topology), or "
            "remove Kueue first",
        )
    ]


def build(
    variables: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    crd_names: Sequence[str] = (),
    sharing_pools: Any = None,
) -> dict[str, Any]:
    """``sharing_pools``: gpu_sharing_pools (a ``kai_fraction`` pool turns GPU sharing on)."""
    removing = variables.get("kai_scheduler_state") == "absent"  # removing KAI next to Kueue is no conflict
    findings = [] if removing else kueue_findings(str(variables.get("kai_scheduler_chart_version") or ""), crd_names)
    findings += sharing_findings(variables, sharing_pools)
    defaults = DEFAULT_QUEUES if variables.get("kai_scheduler_default_queues", True) else ()
    tree = _queue_tree.Tree(
        "kai",
        "kai_scheduler_queues",
        "{name: research, parent: ml, resources: {gpu: {quota: 8, limit: 16}}}",
        defaults,
        MAX_DEPTH,
    )
    taken = {
        n: ("the chart makes it (kai_scheduler_default_queues: true)", ", or set kai_scheduler_default_queues: false")
        for n in defaults
    }
    objs, facts, queue_findings = _queue_tree.collect(tree, variables.get("kai_scheduler_queues"), _queue, taken=taken)
    findings += queue_findings
    findings += _queue_tree.tree_findings(tree, facts, ("quota",), "limit", Fraction(0), UNITS.__getitem__)
    parents = {n: f["parent"] for n, f in facts.items()}
    leaves = sorted(n for n in facts if n not in {p for p in parents.values() if p})
    findings += capacity_findings(facts, nodes)
    return {
        "scheduler": "kai_scheduler",
        # the Queues' API and CRD, and what holds a queue (pods that name it): read by the shared task set
        "api_version": API_VERSION,
        "crd": QUEUE_CRD,
        "holders": {"api_version": "v1", "kind": "Pod", "label_selectors": [QUEUE_LABEL]},
        "chart_values": chart_values(variables, sharing_pools),
        # parents before children: a webhook validating the hierarchy reads the parent
        "queues": _queue_tree.children_first(objs, objs, "parentQueue")[::-1],
        "leaf_queues": leaves,
        "wait_objects": [
            {
                "kind": "Deployment",
                "name": OPERATOR,
                "namespace": str(variables.get("kai_scheduler_namespace") or "kai-scheduler"),
            }
        ],
        "owner_selector": OWNER_SELECTOR,
        "findings": findings,
    }


def capacity_findings(queues: Mapping[str, Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """A warning when the top queues' GPU quotas sum above the GPUs the nodes have allocatable."""
    have = Fraction(0)
    for node in nodes:
        for res, qty in ((node.get("status") or {}).get("allocatable") or {}).items():
            if res in ("nvidia.com/gpu", "amd.com/gpu"):
                have += _quantity.parse(qty) or 0
    return _queue_tree.capacity_findings(
        "kai-quota-above-capacity",
        "Queue",
        "quota",
        {n: q["parent"] for n, q in queues.items()},
        {n: {"gpu": q["quota"]["gpu"]} for n, q in queues.items()},
        {"gpu": have},
        len(nodes),
        lambda _res: " GPU(s)",
    )


def prune_objects(wanted: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]]) -> list[Obj]:
    """The live Queues the role labelled that ``wanted`` no longer holds, children before parents (KAI refuses
    deleting a queue that has children)."""
    return _queue_tree.children_first(_owned.prune_objects(wanted, live, OWNER_LABELS, KINDS), live, "parentQueue")


def landing_findings(wanted: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]]) -> list[Finding]:
    return _owned.landing_findings(
        wanted,
        live,
        "kai-object-not-landed",
        "install KAI Scheduler's CRDs of the chart's version (kai_scheduler_chart_version), or find the other writer "
        "(kubectl get --show-managed-fields)",
    )


def admitted_findings(
    queues: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], force: bool = False
) -> list[Finding]:
    """Removing Queues that unfinished pods name (label ``kai.scheduler/queue``): an error naming them, a warning
    with ``force``."""
    names = {str((q.get("metadata") or {}).get("name")) for q in queues}
    held: dict[str, list[str]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
        phase = (pod.get("status") or {}).get("phase")
        if queue in names and phase not in ("Succeeded", "Failed"):
            held.setdefault(queue, []).append(f"{meta.get('namespace')}/{meta.get('name')} ({phase}, Queue {queue})")
    return _queue_tree.held_findings(
        "kai-workloads-admitted",
        held,
        force,
        "unfinished pod(s)",
        "removing their queues leaves the pods without a queue: KAI stops scheduling them",
        "let them finish or delete them, or set kai_scheduler_force: true to remove the queues anyway",
    )
