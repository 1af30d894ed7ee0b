# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The smoke_tests role's phases, once: pure functions (no I/O). Each test gets a ``phase`` (:func:`assign_phases`):
the role runs the phases one after the other, and no two tests of one phase ask a node for more than it has
(:func:`phase_findings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.smoke._smoke import Finding, _count, _finding, _meta

FIRST_PHASE = {"cuda": 1, "sharing": 1, "dra": 1, "rocm_smi": 1, "nccl": 2, "ib_write_bw": 2}


def pod_needs(pod: Mapping[str, Any]) -> dict[str, int]:
    """The countable resources a pod asks of its node (requests, else limits, of its containers)."""
    out: dict[str, int] = {}
    for container in (pod.get("spec") or {}).get("containers") or ():
        res = container.get("resources") or {}
        for key, value in (res.get("requests") or res.get("limits") or {}).items():
            if key in ("cpu", "memory", "ephemeral-storage"):
                continue
            out[key] = out.get(key, 0) + _count(value)
    return out


def _test_needs(entry: Mapping[str, Any], pods_by_name: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Node -> resource -> amount, for one test (its pods are on its nodes, in order)."""
    out: dict[str, dict[str, int]] = {}
    for i, name in enumerate(entry["pods"]):
        node = entry["nodes"][min(i, len(entry["nodes"]) - 1)]
        for key, amount in pod_needs(pods_by_name.get(name) or {}).items():
            per_node = out.setdefault(node, {})
            per_node[key] = per_node.get(key, 0) + amount
    return out


def assign_phases(
    entries: list[dict[str, Any]], pods: Sequence[Mapping[str, Any]], allocatable: Mapping[str, Mapping[str, int]]
) -> None:
    """Sets each test's ``phase`` (1, 2, ...): the test's first phase (:data:`FIRST_PHASE`), or a later one when the
    tests already there would leave one of its nodes short of a resource it asks for. Phases are numbered without
    gaps."""
    by_name = {str(_meta(p).get("name")): p for p in pods}
    used: dict[int, dict[str, dict[str, int]]] = {}
    for entry in entries:
        needs = _test_needs(entry, by_name)
        phase = FIRST_PHASE.get(entry["test"].split(".", 1)[0], 1)
        while True:
            taken = used.get(phase, {})
            short = any(
                taken.get(node, {}).get(key, 0) > 0
                and taken[node][key] + amount > (allocatable.get(node) or {}).get(key, 0)
                for node, want in needs.items()
                for key, amount in want.items()
            )
            if not short:
                break
            phase += 1
        entry["phase"] = phase
        for node, want in needs.items():
            per_node = used.setdefault(phase, {}).setdefault(node, {})
            for key, amount in want.items():
                per_node[key] = per_node.get(key, 0) + amount
    numbers = {n: i for i, n in enumerate(sorted({e["phase"] for e in entries}), start=1)}
    for entry in entries:
        entry["phase"] = numbers[entry["phase"]]


def phase_findings(
    entries: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    allocatable: Mapping[str, Mapping[str, int]],
) -> list[Finding]:
    """The rule: no two tests of one phase may ask a node for more of a resource than the node advertises (they would
    compete, and one would stay Pending). An error: the run stops before any change."""
    by_name = {str(_meta(p).get("name")): p for p in pods}
    sums: dict[tuple[int, str, str], list[tuple[str, int]]] = {}
    for entry in entries:
        for node, want in _test_needs(entry, by_name).items():
            for key, amount in want.items():
                sums.setdefault((int(entry.get("phase") or 1), node, key), []).append((entry["test"], amount))
    out: list[Finding] = []
    for (phase, node, key), asks in sorted(sums.items()):
        has = (allocatable.get(node) or {}).get(key, 0)
        if len(asks) >= 2 and sum(a for _t, a in asks) > has:
            out.append(
                _finding(
                    "smoke-phase-overcommit",
                    "error",
                    "Node",
                    node,
                    [f"phase {phase}: " + ", ".join(f"{t} {key}={a}" for t, a in asks) + f"; the node has {has}"],
                    "tests of one phase run at once: together they ask the node for more than it advertises, and "
                    "one would stay Pending (Insufficient " + key + ")",
                    "put the tests in different phases (_smoke.assign_phases), or run fewer tests (smoke_tests_tests)",
                )
            )
    return out


def by_phase(
    entries: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    services: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Per phase, in order: its number, tests and the objects the role creates for it (and deletes after it)."""
    out: list[dict[str, Any]] = []
    for number in sorted({int(e["phase"]) for e in entries}):
        mine = [e for e in entries if e["phase"] == number]
        names = {n for e in mine for n in e["pods"]}
        svc = {e.get("service") for e in mine}
        tpl = {e.get("claim_template") for e in mine}
        out.append(
            {
                "phase": number,
                "tests": [e["test"] for e in mine],
                "pods": [p for p in pods if p["metadata"]["name"] in names],
                "services": [s for s in services if s["metadata"]["name"] in svc],
                "claim_templates": [c for c in claims if c["metadata"]["name"] in tpl],
            }
        )
    return out


def _requests(pod: Mapping[str, Any]) -> str:
    """What a test pod asks for, in one cell of the table."""
    spec = pod["spec"]
    container = spec["containers"][0]
    asked = [f"{k}={v}" for k, v in sorted(((container.get("resources") or {}).get("limits") or {}).items())]
    asked += [f"claim {c['resourceClaimTemplateName']}" for c in spec.get("resourceClaims") or ()]
    if spec.get("schedulerName"):
        asked.append(f"scheduler {spec['schedulerName']} gpu-fraction {pod['metadata']['annotations']['gpu-fraction']}")
    return ", ".join(asked) or "nothing"


NCCL_WORKER = "exec /usr/sbin/sshd -D -e"


def nccl_script(variables: Mapping[str, Any], hosts: str, gpus: int) -> str:
    """Rank 0's command: mpirun over both pods (reached by their headless Service names), one rank per GPU."""
    args = variables.get("smoke_tests_nccl_args") or "-b 8 -e 8G -f 2 -g 1"
    hostlist = ",".join(f"{h}:{gpus}" for h in hosts.split(","))
    return (
        f"sleep 10; mpirun --allow-run-as-root -np {2 * gpus} -H {hostlist} -x NCCL_DEBUG=WARN all_reduce_perf {args}"
    )
