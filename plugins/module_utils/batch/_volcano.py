# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The volcano role's rules, once: pure functions (no I/O). Facts checked against volcano-sh/volcano v1.15.1
(installer/helm/chart/volcano, pkg/webhooks/admission/queues/validate/validate_queue.go,
docs/user-guide/how_to_use_capacity_plugin.md) and ../shared/reference/upstream-apis.md §7.

- Queues (``scheduling.volcano.sh/v1beta1``, cluster scope): weight (>= 1), capability, deserved, guarantee,
  reclaimable, parent, priority. Volcano's webhook refuses, and the role refuses before any change:
  guarantee > deserved (or no deserved share for a guaranteed resource), deserved > capability (per resource), a
  child's capability above its nearest ancestor's, the children's guarantee or deserved summed above the parent's (an
  absent dimension of the parent counts as zero), a
  tree deeper than 5; the role also refuses an unknown parent, a cycle, and the names ``root`` and ``default`` (the
  scheduler creates those queues itself and the webhook refuses deleting them).
- The scheduler configuration: upstream's default (proportion plugin: weight, capability). A queue with a
  ``parent`` or ``deserved`` is read only by the capacity plugin, so then the role writes the capacity plugin with
  ``enableHierarchy`` (and the reclaim action) in place of proportion; a ``weight`` is then not read: an error.
- The chart values: the images pinned to the chart version, the scheduler name, the admissions and the component
  toggles (``custom.*``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.batch import _queue_tree
from ansible_collections.gpuops.platform.plugins.module_utils.common import _quantity
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

Finding = dict[str, Any]
Obj = dict[str, Any]

API_VERSION = "scheduling.volcano.sh/v1beta1"
QUEUE_CRD = "queues.scheduling.volcano.sh"
OWNER_LABELS = _owned.owner_labels("volcano")
OWNER_SELECTOR = _owned.selector(OWNER_LABELS)
KINDS = ("Queue",)
RESERVED = ("root", "default")
MAX_DEPTH = 5  # the webhook's --max-queue-depth default (cmd/webhook-manager/app/options)
ADMISSIONS = (
    "/jobs/mutate",
    "/jobs/validate",
    "/podgroups/mutate",
    "/podgroups/validate",
    "/queues/mutate",
    "/queues/validate",
    "/hypernodes/validate",
    "/cronjobs/validate",
    "/jobflows/validate",
    "/pods/mutate",
    "/pods/validate",
)
DEFAULT_SCHEDULER = "default-scheduler"

_PROPORTION_TIERS: list[dict[str, list[dict[str, Any]]]] = [
    {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
    {
        "plugins": [
            {"name": "overcommit"},
            {"name": "drf", "enablePreemptable": False},
            {"name": "predicates"},
            {"name": "proportion"},
            {"name": "nodeorder"},
            {"name": "binpack"},
        ]
    },
]


def _resources(value: Any, where: str, findings: list[Finding], name: str) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    if value in (None, {}):
        return out
    if not isinstance(value, Mapping):
        findings.append(
            _queue_tree.finding(
                "volcano-queue-resources-invalid",
                "error",
                "Queue",
                name,
                [f"{where}: {value!r}"],
                "resources are a mapping of resource name to quantity",
                f"write {where} as {{nvidia.com/gpu: 8, cpu: 64, memory: 256Gi}}",
            )
        )
        return out
    for res, qty in value.items():
        parsed = _quantity.parse(qty)
        if parsed is None or parsed < 0:
            findings.append(
                _queue_tree.finding(
                    "volcano-queue-resources-invalid",
                    "error",
                    "Queue",
                    name,
                    [f"{where}.{res}: {qty!r}"],
                    "a quantity is a non-negative Kubernetes quantity (8, 500m, 64Gi)",
                    f"correct {where}.{res}",
                )
            )
            continue
        out[str(res)] = parsed
    return out


def _canonical(resources: Mapping[str, Fraction]) -> dict[str, str]:
    return {r: str(_quantity.canonical(v)) for r, v in sorted(resources.items())}


def uses_capacity_plugin(queues: Sequence[Any]) -> bool:
    """The capacity plugin (hierarchy) is needed as soon as one queue has a parent or deserved resources."""
    return any(isinstance(q, Mapping) and (q.get("parent") or q.get("deserved")) for q in queues or [])


def scheduler_config(queues: Sequence[Any]) -> str:
    """The scheduler's configuration (volcano-scheduler.conf) as YAML text: upstream's default, or with the capacity
    plugin (hierarchy enabled) in place of proportion when a queue needs it."""
    capacity = uses_capacity_plugin(queues)
    lines = [f'actions: "enqueue, allocate, backfill{", reclaim" if capacity else ""}"', "tiers:"]
    for tier in _PROPORTION_TIERS:
        lines.append("- plugins:")
        for plugin in tier["plugins"]:
            if capacity and plugin["name"] == "proportion":
                lines += ["  - name: capacity", "    enableHierarchy: true"]
                continue
            lines.append(f"  - name: {plugin['name']}")
            if "enablePreemptable" in plugin:
                lines.append("    enablePreemptable: false")
    return "\n".join(lines) + "\n"


def chart_values(variables: Mapping[str, Any]) -> dict[str, Any]:
    """The chart values the role sets (``basic`` images pinned to the chart version, ``custom`` toggles)."""
    version = str(variables.get("volcano_chart_version") or "")
    queues = variables.get("volcano_queues") or []
    return {
        "basic": {"image_tag_version": f"v{version}"},
        "custom": {
            "scheduler_enable": bool(variables.get("volcano_scheduler_enable", True)),
            "controller_enable": bool(variables.get("volcano_controller_enable", True)),
            "admission_enable": bool(variables.get("volcano_admission_enable", True)),
            "enabled_admissions": ",".join(variables.get("volcano_enabled_admissions") or []),
            "scheduler_name": str(variables.get("volcano_scheduler_name") or "volcano"),
            "scheduler_config_override": scheduler_config(queues),
        },
    }


def deployments(variables: Mapping[str, Any]) -> list[str]:
    """The Deployments the chart makes for the enabled components: <release>-scheduler, -controllers, -admission."""
    release = str(variables.get("volcano_release_name") or "volcano")
    return [
        f"{release}-{component}"
        for component, var in (
            ("scheduler", "volcano_scheduler_enable"),
            ("controllers", "volcano_controller_enable"),
            ("admission", "volcano_admission_enable"),
        )
        if variables.get(var, True)
    ]


def input_findings(variables: Mapping[str, Any]) -> list[Finding]:
    out = []
    name = variables.get("volcano_scheduler_name")
    if name == DEFAULT_SCHEDULER:
        out.append(
            _queue_tree.finding(
                "volcano-claims-default-scheduler",
                "error",
                "Deployment",
                "volcano-scheduler",
                [f"volcano_scheduler_name: {name}"],
                "kube-scheduler already answers to default-scheduler: two schedulers binding the same pods race and "
                "double-book GPUs",
                "keep volcano_scheduler_name: volcano (pods opt in with schedulerName: volcano)",
            )
        )
    unknown = [a for a in variables.get("volcano_enabled_admissions") or [] if a not in ADMISSIONS]
    if unknown:
        out.append(
            _queue_tree.finding(
                "volcano-admission-unknown",
                "error",
                "Deployment",
                "volcano-admission",
                [f"volcano_enabled_admissions: unknown {', '.join(map(str, unknown))}"],
                f"Volcano {variables.get('volcano_chart_version')} serves {', '.join(ADMISSIONS)}",
                "remove or correct them",
            )
        )
    if not variables.get("volcano_scheduler_enable", True) and variables.get("volcano_queues"):
        out.append(
            _queue_tree.finding(
                "volcano-queues-without-scheduler",
                "warning",
                "Deployment",
                "volcano-scheduler",
                ["volcano_scheduler_enable: false with volcano_queues set"],
                "the queues are applied but nothing in this release schedules from them",
                "enable the scheduler, or make sure another Volcano scheduler serves these queues",
            )
        )
    return out


RESERVED_WHY = (
    "the scheduler creates the root and default queues itself; Volcano refuses deleting them, so the role cannot own "
    "them",
    "name the queue otherwise (jobs choose it with spec.queue)",
)
# guarantee <= deserved <= capability, per resource (Volcano's webhook, v1.15.1 validate_queue.go
# validateResourceQuantityOfQueue): a guaranteed resource needs a deserved share of at least it, whichever plugin
# schedules (the webhook refuses `deserved[cpu] must be >= guarantee[cpu]` when deserved does not name it)
ORDER = (
    _queue_tree.Order(
        "guarantee",
        "deserved",
        "volcano-queue-guarantee-above-deserved",
        "Volcano's webhook refuses a guarantee above the deserved share",
        "raise deserved[{res}] or lower guarantee[{res}]",
        unset=(
            "Volcano's webhook refuses a guarantee without a deserved share of at least it (deserved[res] >= "
            "guarantee[res]), with weights too; a deserved share is read by the capacity plugin, which the role then "
            "writes (weights are not read there)",
            "set deserved[{res}] to at least {low}, or drop guarantee[{res}] and keep weights",
        ),
    ),
    _queue_tree.Order(
        "guarantee",
        "capability",
        "volcano-queue-guarantee-above-capability",
        "a queue cannot be guaranteed more than its capability (guarantee <= deserved <= capability); Volcano's "
        "webhook refuses the Queue after the release is installed",
        "raise capability[{res}] or lower guarantee[{res}]",
    ),
    _queue_tree.Order(
        "deserved",
        "capability",
        "volcano-queue-deserved-above-capability",
        "Volcano's webhook refuses a deserved share above the queue's capability",
        "raise capability[{res}] or lower deserved[{res}]",
    ),
)


def _queue(
    q: Mapping[str, Any], name: str, where: str, capacity: bool, findings: list[Finding]
) -> tuple[Obj, dict[str, Any]] | None:
    cap = _resources(q.get("capability"), f"{where}.capability", findings, name)
    des = _resources(q.get("deserved"), f"{where}.deserved", findings, name)
    gua = _resources(q.get("guarantee"), f"{where}.guarantee", findings, name)
    amounts: dict[str, Mapping[str, Fraction | None]] = {"capability": cap, "deserved": des, "guarantee": gua}
    findings += _queue_tree.order_findings("Queue", name, amounts, ORDER)
    weight = q.get("weight")
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int) or weight < 1):
        findings.append(
            _queue_tree.finding(
                "volcano-queue-weight-invalid",
                "error",
                "Queue",
                name,
                [f"{where}.weight: {weight!r}"],
                "a Queue's weight is an integer >= 1",
                "set weight to 1 or more",
            )
        )
    elif weight is not None and capacity:
        findings.append(
            _queue_tree.finding(
                "volcano-queue-weight-ignored",
                "error",
                "Queue",
                name,
                [f"{where}.weight: {weight} while queues use parent/deserved (capacity plugin)"],
                "the capacity plugin divides by deserved, not weight: the weight would land nowhere",
                "drop weight and set deserved, or drop every parent and deserved to use weights (proportion plugin)",
            )
        )
    spec: dict[str, Any] = {"reclaimable": bool(q.get("reclaimable", True))}
    if weight is not None:
        spec["weight"] = weight
    if cap:
        spec["capability"] = _canonical(cap)
    if des:
        spec["deserved"] = _canonical(des)
    if gua:
        spec["guarantee"] = {"resource": _canonical(gua)}
    if q.get("parent"):
        spec["parent"] = str(q["parent"])
    if q.get("priority") is not None:
        spec["priority"] = q["priority"]
    obj = _owned.owned(
        {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec}, OWNER_LABELS
    )
    return obj, {"parent": q.get("parent") or None, "capability": cap, "deserved": des, "guarantee": gua}


def capacity_findings(queues: Mapping[str, Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """A warning per resource whose top-level queues' guarantees sum above what the nodes have allocatable."""
    have: dict[str, Fraction] = {}
    for node in nodes:
        for res, qty in ((node.get("status") or {}).get("allocatable") or {}).items():
            v = _quantity.parse(qty)
            if v is not None:
                have[res] = have.get(res, Fraction(0)) + v
    return _queue_tree.capacity_findings(
        "volcano-guarantee-above-capacity",
        "Queue",
        "guarantee",
        {n: q["parent"] for n, q in queues.items()},
        {n: q["guarantee"] for n, q in queues.items()},
        have,
        len(nodes),
    )


def build(
    variables: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], crd_names: Sequence[str] = ()
) -> dict[str, Any]:
    """Everything the role applies (chart values, Queues) and the findings. ``crd_names`` is not read (the same
    signature as the KAI Scheduler role's rules)."""
    findings = input_findings(variables)
    queues_in = variables.get("volcano_queues") or []
    capacity = uses_capacity_plugin(queues_in)
    tree = _queue_tree.Tree(
        "volcano",
        "volcano_queues",
        "{name: research, weight: 1, capability: {nvidia.com/gpu: 8}}",
        ("root",),
        MAX_DEPTH,
    )
    objs, facts, queue_findings = _queue_tree.collect(
        tree,
        queues_in,
        lambda q, name, where, found: _queue(q, name, where, capacity, found),
        reserved={n: RESERVED_WHY for n in RESERVED},
    )
    findings += queue_findings
    findings += _queue_tree.tree_findings(tree, facts, ("guarantee", "deserved"), "capability")
    findings += capacity_findings(facts, nodes)
    return {
        "scheduler": "volcano",
        # the Queues' API and CRD, and what holds a queue (its PodGroups): read by the shared task set
        "api_version": API_VERSION,
        "crd": QUEUE_CRD,
        "holders": {"api_version": API_VERSION, "kind": "PodGroup", "label_selectors": []},
        "chart_values": chart_values(variables),
        # parents before children: a webhook validating the hierarchy reads the parent
        "queues": _queue_tree.children_first(objs, objs, "parent")[::-1],
        "plugin": "capacity" if capacity else "proportion",
        # what validate waits for: the chart's Deployments (upstream labels them app: volcano-<component>, without
        # the release's instance label, so they are named)
        "wait_objects": [
            {"kind": "Deployment", "name": d, "namespace": str(variables.get("volcano_namespace") or "volcano-system")}
            for d in deployments(variables)
        ],
        "owner_selector": OWNER_SELECTOR,
        "findings": findings,
    }


def prune_objects(wanted: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]]) -> list[Obj]:
    """The live Queues the role labelled that ``wanted`` no longer holds, children before parents."""
    return _queue_tree.children_first(_owned.prune_objects(wanted, live, OWNER_LABELS, KINDS), live, "parent")


def landing_findings(wanted: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]]) -> list[Finding]:
    return _owned.landing_findings(
        wanted,
        live,
        "volcano-object-not-landed",
        "install Volcano's CRDs of the chart's version (volcano_chart_version), or find the other writer "
        "(kubectl get --show-managed-fields)",
    )


def admitted_findings(
    queues: Sequence[Mapping[str, Any]], podgroups: Sequence[Mapping[str, Any]], force: bool = False
) -> list[Finding]:
    """Removing Queues whose PodGroups are Running or Inqueue (resources held or reserved): an error naming them, a
    warning with ``force``. ``object.names`` lists the queues."""
    names = {str((q.get("metadata") or {}).get("name")) for q in queues}
    held: dict[str, list[str]] = {}
    for pg in podgroups:
        queue = (pg.get("spec") or {}).get("queue") or "default"
        phase = (pg.get("status") or {}).get("phase")
        if queue in names and phase in ("Running", "Inqueue"):
            meta = pg.get("metadata") or {}
            held.setdefault(queue, []).append(f"{meta.get('namespace')}/{meta.get('name')} ({phase}, Queue {queue})")
    return _queue_tree.held_findings(
        "volcano-workloads-admitted",
        held,
        force,
        "PodGroup(s) running or in queue",
        "removing their queues leaves running gangs without a queue: Volcano stops scheduling them",
        "let them finish or delete them, or set volcano_force: true to remove the queues anyway",
    )
