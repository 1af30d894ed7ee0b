# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Queue validation, once for every scheduler role whose queues have parents (Volcano, KAI Scheduler): pure
functions. The roles' own files (``_volcano``, ``_kai``) say only what differs: their fields, units and objects.

- :func:`collect`: each queue of the role's list is a mapping with a DNS-1123 name, not a name the scheduler keeps for
  itself, not given twice; the role's function builds the object and its facts (``parent`` and the amounts).
- :func:`order_findings`: per queue and resource, one amount must not exceed another (Volcano: guarantee <= deserved
  <= capability; KAI: quota <= limit).
- :func:`unknown_findings`: keys a queue field does not know, with the nearest known one.
- :func:`tree_findings`: :func:`parent_findings`, :func:`sum_findings` and :func:`cap_findings` over the tree.
- :func:`capacity_findings`: the top queues' amounts summed above what the nodes have allocatable (a warning).
- :func:`parent_findings`: every parent is a queue of the list or one the scheduler makes itself; no cycle; no tree
  deeper than the scheduler allows.
- :func:`sum_findings`: per parent and resource, the children's amounts summed must not exceed the parent's. An
  amount is a ``Fraction`` or ``None`` for unlimited; a resource a parent does not name is ``missing`` (0 for
  Volcano, whose webhook reads an absent dimension as zero).
- :func:`cap_findings`: a child's cap must not exceed its nearest ancestor's cap of the same resource.

Findings are ``{id, severity, object, evidence, cause, fix}`` like every rule of the collection.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

from ansible_collections.gpuops.platform.plugins.module_utils.common import _quantity
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

Finding = dict[str, Any]
Obj = dict[str, Any]
Amounts = Mapping[str, Optional[Fraction]]  # noqa: UP045 - a module-level alias is evaluated at import (Python 3.9)
Unit = Callable[[str], str]
# one queue of the role's list -> (the object, its facts: parent and amounts per field), or None after findings
BuildOne = Callable[[Mapping[str, Any], str, str, list[Finding]], Optional[tuple[Obj, dict[str, Any]]]]  # noqa: UP045

NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


finding = _owned.finding  # the one finding shape (kept under this name: _kai, _volcano call it)


def show(value: Fraction | None, unit: str = "") -> str:
    return "unlimited" if value is None else _quantity.show(value) + unit


def _no_unit(_res: str) -> str:
    return ""


@dataclass(frozen=True)
class Tree:
    """One scheduler's queue list: ``prefix`` of the finding ids, ``var`` the role variable, ``example`` a queue
    written right (for the fix of a malformed entry), ``external`` the parents the scheduler makes itself,
    ``max_depth`` the deepest tree it accepts (a top queue is 1)."""

    prefix: str
    var: str
    example: str
    external: tuple[str, ...] = ()
    max_depth: int = 32
    kind: str = "Queue"


def collect(
    tree: Tree,
    queues: Any,
    one: BuildOne,
    reserved: Mapping[str, tuple[str, str]] | None = None,
    taken: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[list[Obj], dict[str, dict[str, Any]], list[Finding]]:
    """The objects, the facts per queue name and the findings of the role's queue list. ``one(q, name, where,
    findings)`` builds one queue. ``reserved``: names the role refuses before building (name -> cause, fix);
    ``taken``: names something else owns, refused as duplicates (name -> evidence line, fix suffix)."""
    findings: list[Finding] = []
    objs: list[Obj] = []
    facts: dict[str, dict[str, Any]] = {}
    for qi, q in enumerate(queues or []):
        where = f"{tree.var}[{qi}]"
        if not isinstance(q, Mapping) or not isinstance(q.get("name"), str):
            findings.append(
                finding(
                    f"{tree.prefix}-queue-invalid",
                    "error",
                    tree.kind,
                    where,
                    [f"{where}: {q!r}"],
                    "a queue is a mapping with a name",
                    f"write {where} as {tree.example}",
                )
            )
            continue
        name = q["name"]
        if not (len(name) <= 253 and NAME_RE.match(name)):
            findings.append(
                finding(
                    f"{tree.prefix}-queue-name-invalid",
                    "error",
                    tree.kind,
                    name,
                    [f"{where}.name: {name}"],
                    f"a {tree.kind}'s name is a DNS-1123 subdomain",
                    "use lower case letters, digits, '-' and '.'",
                )
            )
            continue
        if reserved and name in reserved:
            cause, fix = reserved[name]
            findings.append(
                finding(
                    f"{tree.prefix}-queue-reserved", "error", tree.kind, name, [f"{where}.name: {name}"], cause, fix
                )
            )
            continue
        built = one(q, name, where, findings)
        if built is None:
            continue
        if name in facts or (taken and name in taken):
            extra, fix = ("", "") if name in facts else (taken or {})[name]
            findings.append(
                finding(
                    f"{tree.prefix}-queue-duplicate",
                    "error",
                    tree.kind,
                    name,
                    [f"{where}.name: {name}"] + ([extra] if extra else []),
                    f"two queues with one name are one {tree.kind}: one owner would overwrite the other",
                    "rename it" + fix if extra else "rename one of them",
                )
            )
            continue
        objs.append(built[0])
        facts[name] = built[1]
    return objs, facts, findings


@dataclass(frozen=True)
class Order:
    """Per resource, the amount of field ``low`` must not exceed that of ``high`` (a finding ``fid``); ``fix`` may
    name ``{res}`` and ``{low}`` (the low amount). With ``unset`` (cause, fix), a resource ``high`` does not name is a
    finding too; without it, unlimited."""

    low: str
    high: str
    fid: str
    cause: str
    fix: str
    unset: tuple[str, str] | None = None


def order_findings(
    kind: str, name: str, amounts: Mapping[str, Amounts], orders: Sequence[Order], unit: Unit = _no_unit
) -> list[Finding]:
    """The :class:`Order` rules over one queue's ``amounts`` (field -> resource -> amount, None: unlimited), in
    order; a resource whose ``low`` amount one rule found above its ``high`` is not reported again for that field."""
    out = []
    fired: set[tuple[str, str]] = set()
    for o in orders:
        highs = amounts.get(o.high) or {}
        for res, low in sorted((amounts.get(o.low) or {}).items()):
            if (o.low, res) in fired:
                continue
            u = unit(res)
            if res not in highs:
                if o.unset is None:
                    continue
                evidence = f"{o.low}[{res}] {show(low, u)}; {o.high}[{res}] not set"
                cause, fix = o.unset
            else:
                high = highs[res]
                if high is None or (low is not None and low <= high):
                    continue
                fired.add((o.low, res))
                evidence = f"{o.low}[{res}] {show(low, u)} > {o.high}[{res}] {show(high, u)}"
                cause, fix = o.cause, o.fix
            out.append(finding(o.fid, "error", kind, name, [evidence], cause, fix.format(res=res, low=show(low, u))))
    return out


def unknown_findings(
    fid: str, kind: str, name: str, where: str, given: Any, known: Sequence[str], cause: str
) -> list[Finding]:
    """Keys of ``given`` (a mapping) that are not ``known`` (the nearest known key named), or ``given`` not a
    mapping."""
    if not isinstance(given, Mapping):
        return [finding(fid, "error", kind, name, [f"{where}: {given!r}"], cause, f"write {where} as a mapping")]
    unknown = [str(k) for k in given if k not in known]
    if not unknown:
        return []
    near = {k: difflib.get_close_matches(k, list(known), n=1) for k in unknown}
    hints = [f"{k}: did you mean {near[k][0]}?" for k in unknown if near[k]]
    return [
        finding(
            fid,
            "error",
            kind,
            name,
            [f"{where}: {', '.join(unknown)}"],
            cause,
            " ".join(hints + [f"use the keys {', '.join(known)}"]),
        )
    ]


def tree_findings(
    tree: Tree,
    facts: Mapping[str, Mapping[str, Any]],
    sums: Sequence[str],
    cap: str,
    missing: Fraction | None = Fraction(0),
    unit: Unit = _no_unit,
) -> list[Finding]:
    """The tree's rules: parents (:func:`parent_findings`), the children's ``sums`` fields summed within their
    parent's (:func:`sum_findings`), the ``cap`` field within the nearest ancestor's (:func:`cap_findings`)."""
    parents = {n: f["parent"] for n, f in facts.items()}
    out = parent_findings(tree.prefix, tree.var, tree.kind, parents, tree.external, tree.max_depth)
    for field in sums:
        out += sum_findings(
            tree.prefix, tree.kind, field, parents, {n: f[field] for n, f in facts.items()}, missing, unit
        )
    out += cap_findings(tree.prefix, tree.kind, cap, parents, {n: f[cap] for n, f in facts.items()}, unit)
    return out


def capacity_findings(
    fid: str,
    kind: str,
    field: str,
    parents: Mapping[str, str | None],
    amounts: Mapping[str, Amounts],
    have: Mapping[str, Fraction],
    nodes: int,
    unit: Unit = _no_unit,
) -> list[Finding]:
    """A warning per resource whose top queues' (no parent among ``parents``) ``field`` amounts sum above what the
    ``nodes`` have allocatable (``have``: resource -> amount); unlimited amounts are not counted."""
    totals: dict[str, list[tuple[str, Fraction]]] = {}
    for name in sorted(parents):
        if parents[name] and parents[name] in parents:
            continue
        for res, v in (amounts.get(name) or {}).items():
            if v is not None:
                totals.setdefault(res, []).append((name, v))
    out = []
    for res, parts in sorted(totals.items()):
        total = sum((v for _n, v in parts), Fraction(0))
        own = have.get(res, Fraction(0))
        if total <= own:
            continue
        u = unit(res)
        out.append(
            finding(
                fid,
                "warning",
                kind,
                ", ".join(n for n, _v in parts),
                [
                    f"{field}[{res}]: {', '.join(f'{n} {show(v, u)}' for n, v in parts)} sum to {show(total, u)}; "
                    f"the {nodes} node(s) have {show(own, u)} allocatable"
                ],
                f"a {field} the cluster cannot hold is a promise the scheduler cannot keep",
                f"lower the {field}s, or add nodes",
            )
        )
    return out


def parent_findings(
    prefix: str,
    var: str,
    kind: str,
    parents: Mapping[str, str | None],
    external: Sequence[str],
    max_depth: int,
) -> list[Finding]:
    """``parents``: queue name -> parent name (None or "" for a top queue). ``external``: parents the scheduler
    creates itself (Volcano's ``root``). ``max_depth``: the deepest tree the scheduler accepts (a top queue is 1)."""
    out = []
    for name, parent in sorted(parents.items()):
        if parent and parent not in parents and parent not in external:
            out.append(
                finding(
                    f"{prefix}-queue-parent-unknown",
                    "error",
                    kind,
                    name,
                    [f"{var}: {name}.parent is {parent}; the queues are {', '.join(sorted(parents))}"]
                    + ([f"the scheduler's own: {', '.join(external)}"] if external else []),
                    "a queue whose parent does not exist is refused (or never scheduled)",
                    f"add a queue {parent} to {var}, or set the parent to one of the queues",
                )
            )
    for name in sorted(parents):
        seen = [name]
        parent = parents.get(name)
        while parent and parent in parents:
            if parent in seen:
                out.append(
                    finding(
                        f"{prefix}-queue-cycle",
                        "error",
                        kind,
                        name,
                        [" -> ".join([*seen, parent])],
                        "the queue tree has a cycle: no queue in it has a root",
                        "break the cycle: one of these queues must be a top queue (no parent)",
                    )
                )
                break
            seen.append(parent)
            parent = parents.get(parent)
        else:
            depth = len(seen) + (1 if parent in external and parent not in ("", None, "root") else 0)
            if depth > max_depth:
                out.append(
                    finding(
                        f"{prefix}-queue-too-deep",
                        "error",
                        kind,
                        name,
                        [f"{' -> '.join(seen)}: depth {depth}"],
                        f"the scheduler accepts queue trees at most {max_depth} deep",
                        "flatten the tree",
                    )
                )
    # one cycle is reported once per member: keep the first
    cycles: set[frozenset[str]] = set()
    kept = []
    for f in out:
        if f["id"].endswith("-queue-cycle"):
            members = frozenset(f["evidence"][0].split(" -> "))
            if members in cycles:
                continue
            cycles.add(members)
        kept.append(f)
    return kept


def sum_findings(
    prefix: str,
    kind: str,
    field: str,
    parents: Mapping[str, str | None],
    amounts: Mapping[str, Amounts],
    missing: Fraction | None,
    unit: Callable[[str], str] = lambda _r: "",
) -> list[Finding]:
    """Per parent (a queue of ``parents``) and resource: the sum of its children's ``field`` must not exceed its own.
    ``amounts``: queue -> resource -> amount (None: unlimited). A resource the parent does not name counts as
    ``missing``."""
    out = []
    for parent in sorted(set(p for p in parents.values() if p and p in parents)):
        children = sorted(n for n, p in parents.items() if p == parent)
        resources = sorted({r for c in children for r in amounts.get(c, {})})
        for res in resources:
            own = amounts.get(parent, {}).get(res, missing) if res in amounts.get(parent, {}) else missing
            if own is None:
                continue  # unlimited
            parts = [(c, amounts.get(c, {}).get(res, Fraction(0))) for c in children if res in amounts.get(c, {})]
            if any(v is None for _c, v in parts):
                total: Fraction | None = None
            else:
                total = sum((v for _c, v in parts if v is not None), Fraction(0))
            if total is None or total > own:
                out.append(
                    finding(
                        f"{prefix}-queue-children-exceed-parent",
                        "error",
                        kind,
                        parent,
                        [
                            f"{field}[{res}]: children "
                            + ", ".join(f"{c} {show(v, unit(res))}" for c, v in parts)
                            + f" sum to {show(total, unit(res))}; {parent} has {show(own, unit(res))}"
                            + ("" if res in amounts.get(parent, {}) else " (not set)")
                        ],
                        f"a parent queue's {field} is shared by its children: they cannot be promised more than it "
                        "holds",
                        f"raise {parent}'s {field} for {res} to at least the children's sum, or lower the children's",
                    )
                )
    return out


def _nearest(parents: Mapping[str, str | None], caps: Mapping[str, Amounts], name: str, res: str) -> str | None:
    """The nearest ancestor of ``name`` (in ``parents``) that caps ``res``."""
    parent, seen = parents.get(name), {name}
    while parent and parent in parents and parent not in seen:
        if res in caps.get(parent, {}):
            return parent
        seen.add(parent)
        parent = parents.get(parent)
    return None


def cap_findings(
    prefix: str,
    kind: str,
    field: str,
    parents: Mapping[str, str | None],
    caps: Mapping[str, Amounts],
    unit: Callable[[str], str] = lambda _r: "",
) -> list[Finding]:
    """A child's ``field`` (a cap) above its nearest ancestor's cap of the same resource."""
    out = []
    for name in sorted(parents):
        for res, mine in sorted(caps.get(name, {}).items()):
            up_name = _nearest(parents, caps, name, res)
            up = caps[up_name][res] if up_name else None
            if up_name is None or up is None or (mine is not None and mine <= up):
                continue
            out.append(
                finding(
                    f"{prefix}-queue-cap-above-ancestor",
                    "error",
                    kind,
                    name,
                    [f"{field}[{res}] {show(mine, unit(res))}; ancestor {up_name} has {show(up, unit(res))}"],
                    f"a queue can never use more than its ancestors' {field}",
                    f"lower {name}'s {field} for {res} to at most {show(up, unit(res))}, or raise {up_name}'s",
                )
            )
    return out


def children_first(
    objs: Sequence[dict[str, Any]], live: Sequence[Mapping[str, Any]], parent_key: str
) -> list[dict[str, Any]]:
    """``objs`` (Queues) ordered so that a queue comes before its parent (both Volcano and KAI Scheduler refuse
    deleting a queue that has children); ``parent_key``: the spec field naming the parent."""
    parent = {str((o.get("metadata") or {}).get("name")): (o.get("spec") or {}).get(parent_key) or "" for o in live}

    def depth(name: str) -> int:
        d, seen = 0, {name}
        while parent.get(name) and parent[name] not in seen:
            name = parent[name]
            seen.add(name)
            d += 1
        return d

    return sorted(objs, key=lambda o: (-depth(o["metadata"]["name"]), o["metadata"]["name"]))


def held_findings(
    fid: str, held: Mapping[str, Sequence[str]], force: bool, what: str, cause: str, fix: str
) -> list[Finding]:
    """Removing queues that still hold workloads: one finding naming them (an error, a warning with ``force``);
    ``held``: queue -> the workloads it holds; ``object.names`` lists the queues."""
    if not held:
        return []
    listed = sorted(w for ws in held.values() for w in ws)
    f = finding(
        fid,
        "warning" if force else "error",
        "Queue",
        ", ".join(sorted(held)),
        [f"{len(listed)} {what}: {', '.join(listed)}"],
        cause,
        fix,
    )
    f["object"]["names"] = sorted(held)
    return [f]
