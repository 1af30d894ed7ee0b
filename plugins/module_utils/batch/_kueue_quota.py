# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The kueue role's flavor and quota rules: pure functions (no I/O), used by :mod:`_kueue` to build the objects.

- :func:`gpu_flavors`: one ResourceFlavor per GPU product the cluster's nodes carry (``nvidia.com/gpu.product``
  from GPU Feature Discovery, ``amd.com/gpu.product-name`` from the AMD labeller), named after the product
  (``NVIDIA-H100-80GB-HBM3`` -> ``nvidia-h100-80gb-hbm3``), with the nodes it matches and their allocatable GPUs.
- :func:`flavor_catalog`: the flavors the role manages (the GPU products' and the user's own).
- :func:`quota_entries`: one team's quotas per flavor and resource (unknown flavor or GPU product, a lending limit
  above the nominal quota, limits without a cohort); :func:`preemption`: its preemption policy.
- :func:`capacity_findings`: a flavor's nominal quotas summed over the teams above what its nodes have (a warning).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common import _quantity

Finding = dict[str, Any]
Obj = dict[str, Any]


# GPU product labels, by vendor: GFD's and the AMD labeller's
PRODUCT_LABELS = ("nvidia.com/gpu.product", "amd.com/gpu.product-name")


GPU_RESOURCE_RE = re.compile(r"^(nvidia\.com/(gpu|mig-.+)|amd\.com/gpu)\Z")


RECLAIM = ("Never", "LowerPriority", "Any")


WITHIN_CQ = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")


BORROW_WITHIN = ("Never", "LowerPriority")


SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def finding(fid: str, severity: str, obj: Mapping[str, Any], evidence: Sequence[str], cause: str, fix: str) -> Finding:
    return {
        "id": fid,
        "severity": severity,
        "object": dict(obj),
        "evidence": list(evidence),
        "cause": cause,
        "fix": fix,
    }


def show(value: Any) -> str:
    """A value for a message: a string as it is, anything else as JSON (never a Python repr)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def subdomain(name: Any) -> bool:
    return isinstance(name, str) and 0 < len(name) <= 253 and bool(SUBDOMAIN_RE.match(name))


def flavor_name(product: str) -> str:
    """A DNS-1123 subdomain from a GPU product label value: lower case, runs of other characters as one dash."""
    name = re.sub(r"[^a-z0-9.]+", "-", str(product).lower()).strip("-.")
    return re.sub(r"\.+", ".", name)[:253].strip("-.") or "gpu"


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


def flavor_catalog(
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
        if not subdomain(name):
            findings.append(
                finding(
                    "kueue-flavor-name-invalid",
                    "error",
                    ref,
                    [f"kueue_flavors[{i}].name: {show(name)}"],
                    "a ResourceFlavor name must be a DNS-1123 subdomain (lower case letters, digits, '-' and '.')",
                    "rename the flavor",
                )
            )
            continue
        labels = dict((user or {}).get("node_labels") or {})
        members = [n for n in nodes if _matches((n.get("metadata") or {}).get("labels") or {}, labels)]
        if any(f["name"] == name for f in flavors):
            findings.append(
                finding(
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


def quota_entries(
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
                finding(
                    "kueue-flavor-unknown",
                    "warning" if early else "error",
                    ref,
                    [f"{where}.flavor: {show(quota.get('flavor'))}", f"flavors: {_known(flavors, bool(gpu_flavors))}"],
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
                finding(
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
                finding(
                    "kueue-quota-invalid",
                    "error",
                    ref,
                    [f"{where}.resources: {show(resources)}"],
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
                    finding(
                        "kueue-quota-invalid",
                        "error",
                        ref,
                        [f"{where}.resources[{res}]: {show(dict(spec))}"]
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
                    finding(
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
                    finding(
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


def preemption(team: Mapping[str, Any], ti: int, findings: list[Finding]) -> dict[str, Any] | None:
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
                finding(
                    "kueue-preemption-invalid",
                    "error",
                    ref,
                    [f"kueue_teams[{ti}].preemption.{key}: {show(pre[key])}"],
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
                finding(
                    "kueue-preemption-invalid",
                    "error",
                    ref,
                    [f"kueue_teams[{ti}].preemption.borrow_within_cohort: {show(borrow)}"],
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
                finding(
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
                finding(
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
