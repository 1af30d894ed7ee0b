# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Queue trees, once for every scheduler role whose queues have parents (Volcano, KAI Scheduler): pure functions.

- :func:`parent_findings`: every parent is a queue of the list or one the scheduler makes itself; no cycle; no tree
  deeper than the scheduler allows.
- :func:`sum_findings`: per parent and resource, the children's amounts summed must not exceed the parent's. An
  amount is a ``Fraction`` or ``None`` for unlimited; a resource a parent does not name is ``missing`` (0 for
  Volcano, whose webhook reads an absent dimension as zero).
- :func:`cap_findings`: a child's cap must not exceed its nearest ancestor's cap of the same resource.

Findings are ``{id, severity, object, evidence, cause, fix}`` like every rule of the collection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Optional

from ansible_collections.gpuops.platform.plugins.module_utils import _owned, _quantity

Finding = dict[str, Any]
Amounts = Mapping[str, Optional[Fraction]]  # noqa: UP045 - a module-level alias is evaluated at import (Python 3.9)


finding = _owned.finding  # the one finding shape (kept under this name: _kai, _volcano call it)


def show(value: Fraction | None, unit: str = "") -> str:
    return "unlimited" if value is None else _quantity.show(value) + unit


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
