# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The smoke_tests role's results, once: pure functions (no I/O).

- :func:`results` - from the plan and the live pods (and the logs of the pods that finished on real nodes): each
  test's result (``pass``, ``fail`` or ``not-measured``), the node labels and annotations that record it (with the
  pods' placement and requests, as the pods are deleted), and the table; for one phase or for all. A pod on a
  simulated node (kwok's annotation ``kwok.x-k8s.io/node: fake``) ran nothing: its result is ``not-measured:
  simulated node`` whatever it printed - never a number.
- :func:`parse` - one test's output against its threshold (nccl-tests' ``Avg bus bandwidth``, perftest's
  ``ib_write_bw`` average Gb/s, CUDA's ``Test PASSED``, ``nvidia-smi -L`` and ``rocm-smi`` GPU lines).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.smoke._smoke import (
    _BUSBW_RE,
    _IB_HEADER_RE,
    NOT_MEASURED,
    RESULT_PREFIX,
    RESULTS,
    Obj,
    _meta,
)


def parse(kind: str, text: str, threshold: Any) -> tuple[str, str, float | None]:
    """(result, detail, measured value) of one test's output. A bandwidth test without a threshold passes on its
    number alone and says so."""
    text = text or ""
    if kind == "cuda":
        gpus = len(re.findall(r"^GPU \d+: ", text, re.M))
        if "Test PASSED" in text and gpus >= 1:
            return "pass", f"vectorAdd Test PASSED; nvidia-smi lists {gpus} GPU(s)", None
        return "fail", "no 'Test PASSED'" if "Test PASSED" not in text else "nvidia-smi listed no GPU", None
    if kind == "rocm_smi":
        gpus = len(set(re.findall(r"^GPU\[(\d+)\]", text, re.M)))
        return ("pass", f"rocm-smi lists {gpus} GPU(s)", None) if gpus else ("fail", "rocm-smi listed no GPU", None)
    value: float | None = None
    unit = "GB/s" if kind == "nccl" else "Gb/s"
    if kind == "nccl":
        found = _BUSBW_RE.findall(text)
        value = float(found[-1]) if found else None
    elif kind == "ib_write_bw":
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if _IB_HEADER_RE.search(line):
                for row in lines[i + 1 :]:
                    cols = row.split()
                    if len(cols) >= 4 and cols[0].isdigit():
                        try:
                            value = float(cols[3])
                        except ValueError:
                            value = None
                        break
    if value is None:
        return "fail", f"no bandwidth in the output of {kind}", None
    if threshold is None:
        return "pass", f"{value:g} {unit} (no threshold set)", value
    if value >= float(threshold):
        return "pass", f"{value:g} {unit} >= {threshold} {unit}", value
    return "fail", f"{value:g} {unit} < {threshold} {unit}", value


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        term = (status.get("state") or {}).get("terminated")
        if term:
            return term
    return {}


def _unscheduled(pod: Mapping[str, Any]) -> str | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return cond.get("message") or cond.get("reason") or "not scheduled"
    return None


def pod_outcome(pod: Mapping[str, Any] | None, simulated: set[str], final: bool) -> dict[str, Any]:
    """One pod: ``done`` (nothing more will happen or nothing more is to be learnt), ``node``, and for a pod that
    cannot give a result ``result``/``detail``; ``logs`` true when its output must be read."""
    if pod is None:
        return {"done": final, "result": "fail", "detail": "pod not found", "node": None}
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    phase = (pod.get("status") or {}).get("phase")
    if node and node in simulated:
        return {"done": True, "result": "not-measured", "detail": NOT_MEASURED, "node": node}
    if phase == "Succeeded":
        return {"done": True, "node": node, "logs": True}
    if phase == "Failed":
        term = _terminated(pod)
        reason = term.get("reason") or (pod.get("status") or {}).get("reason") or "Failed"
        code = term.get("exitCode")
        return {
            "done": True,
            "node": node,
            "logs": bool(node),
            "result": "fail",
            "detail": f"{reason}" + (f", exit code {code}" if code is not None else ""),
        }
    if final:
        why = _unscheduled(pod)
        detail = f"not scheduled: {why}" if why else f"not finished within the timeout (phase {phase})"
        return {"done": True, "node": node, "result": "fail", "detail": detail}
    return {"done": False, "node": node}


def results(
    built: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    logs: Mapping[str, str] | None = None,
    final: bool = False,
    timestamp: str = "",
    phase: int | None = None,
) -> dict[str, Any]:
    """Each test's result from the live pods (``logs``: pod name -> its log, for the pods whose ``logs`` is true).
    ``done`` is true when every pod is done; with ``final`` a pod still waiting is a failure (the timeout).
    ``phase``: only the tests of that phase (the wait of one phase). ``pods`` may hold a pod more than once (what
    each phase read): the last one counts. ``holding``: the pods that exist and have not ended - they hold their
    node's resources until deleted."""
    by_name = {str(_meta(p).get("name")): p for p in pods}
    simulated = set(built.get("simulated") or ())
    logs = logs or {}
    rows: list[dict[str, Any]] = []
    to_read: list[str] = []
    holding: list[str] = []
    done = True
    for entry in built.get("tests") or ():
        if phase is not None and int(entry.get("phase") or 1) != int(phase):
            continue
        holding += [
            n
            for n in entry["pods"]
            if n in by_name and (by_name[n].get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        outcomes = {name: pod_outcome(by_name.get(name), simulated, final) for name in entry["pods"]}
        main = entry.get("result_pod") or entry["pods"][0]
        if outcomes[main]["done"] and "result" not in outcomes[main]:
            # rank 0 finished: the workers (sshd for mpirun) have served their purpose, running or not
            for name, o in outcomes.items():
                if name != main and o.get("result") == "fail" and "timeout" in o.get("detail", ""):
                    outcomes[name] = {"done": True, "node": o["node"]}
                elif name != main and not o["done"]:
                    outcomes[name] = {"done": True, "node": o["node"]}
        row_done = all(o["done"] for o in outcomes.values())
        done = done and row_done
        placed = [o["node"] for o in outcomes.values()]
        if any(o.get("result") == "not-measured" for o in outcomes.values()):
            result, detail, value = "not-measured", NOT_MEASURED, None
        elif any(o.get("result") == "fail" for o in outcomes.values()):
            bad = [f"{n}: {o['detail']}" for n, o in outcomes.items() if o.get("result") == "fail"]
            result, detail, value = "fail", "; ".join(bad), None
        else:
            pod = by_name.get(main) or {}
            text = logs.get(main) or _terminated(pod).get("message") or ""
            result, detail, value = parse(entry["kind"], text, entry.get("threshold"))
        to_read += [name for name, o in outcomes.items() if o.get("logs") and name == main]
        rows.append(
            {
                "test": entry["test"],
                "phase": entry.get("phase"),
                "key": entry["key"],
                "nodes": entry["nodes"],
                "placed_on": placed,
                "product": entry.get("product"),
                "pods": entry["pods"],
                "pod_records": [pod_record(name, by_name.get(name)) for name in entry["pods"]],
                "result": result if row_done else "waiting",
                "detail": detail if row_done else "",
                "value": value,
                "threshold": entry.get("threshold"),
            }
        )
    return {
        "done": done,
        "results": rows,
        "failed": [r["key"] for r in rows if r["result"] == "fail"],
        "verdict": verdict(rows),
        "read_logs": sorted(set(to_read)),
        "holding": holding,
        "nodes": node_records(rows, timestamp),
        "table": table(rows),
    }


def verdict(rows: Sequence[Mapping[str, Any]]) -> str:
    """The run's verdict in one line: each failed test with its nodes and why, or how many passed."""
    failed = [r for r in rows if r.get("result") == "fail"]
    if not failed:
        return f"{len(rows)} test(s), none failed"
    each = "".join(f"{r['test']} on {','.join(r['nodes'])}: {r['detail']} || " for r in failed)
    return f"{len(failed)} smoke test(s) failed: {each}- see the table above; the results are on the nodes."


def pod_record(name: str, pod: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the API said of one test pod when its phase ended: the node it was bound to, its image, what it asked
    for (requests, DRA claim templates, scheduler) and its node selector - kept in the result annotation, since the
    pods are deleted."""
    if not pod:
        return {"name": name, "node": None}
    spec = pod.get("spec") or {}
    container = (spec.get("containers") or [{}])[0]
    res = container.get("resources") or {}
    out: dict[str, Any] = {
        "name": name,
        "node": spec.get("nodeName"),
        "phase": (pod.get("status") or {}).get("phase"),
        "image": container.get("image"),
        "requests": dict(res.get("requests") or res.get("limits") or {}),
        "selector": dict(spec.get("nodeSelector") or {}),
    }
    claims = [c.get("resourceClaimTemplateName") for c in spec.get("resourceClaims") or ()]
    if claims:
        out["claims"] = claims
    if spec.get("schedulerName") not in (None, "default-scheduler"):
        out["scheduler"] = spec["schedulerName"]
    return out


def node_records(rows: Sequence[Mapping[str, Any]], timestamp: str) -> list[Obj]:
    """Per node, the Node object to apply (server-side, field manager ``gpuops-smoke-tests``): a label per test
    (``gpuops.platform/smoke.<test>: pass|fail|not-measured``, unchanged by a rerun with the same result) and an
    annotation with the time, the detail, the test's phase and its pods as the API had them (:func:`pod_record`;
    changed by every run: that is the record of the run)."""
    nodes: dict[str, dict[str, dict[str, str]]] = {}
    for row in rows:
        if row["result"] not in RESULTS:
            continue
        for node in row["nodes"]:
            rec = nodes.setdefault(node, {"labels": {}, "annotations": {}})
            rec["labels"][row["key"]] = row["result"]
            note = {
                "result": row["result"],
                "detail": row["detail"],
                "time": timestamp,
                "phase": row.get("phase"),
                "pods": row.get("pod_records") or [{"name": name} for name in row["pods"]],
            }
            if row.get("value") is not None:
                note["value"] = row["value"]
            rec["annotations"][row["key"]] = json.dumps(note, sort_keys=True)
    return [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, **rec}} for name, rec in sorted(nodes.items())
    ]


def recorded(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The results the last run recorded on ``nodes`` (their ``gpuops.platform/smoke.<test>`` labels, as
    :func:`node_records` writes them): ``rows`` ({node, test, result}, by node then test), ``failed`` (``"<node>
    <label>"`` of each result ``fail``) and ``text`` (NODE TEST RESULT lines, or a sentence when there is none)."""
    rows = [
        {"node": _meta(n).get("name", ""), "test": key[len(RESULT_PREFIX) :], "result": str(value)}
        for n in nodes
        for key, value in sorted((_meta(n).get("labels") or {}).items())
        if key.startswith(RESULT_PREFIX)
    ]
    rows.sort(key=lambda r: (r["node"], r["test"]))
    return {
        "rows": rows,
        "failed": [f"{r['node']} {RESULT_PREFIX}{r['test']}" for r in rows if r["result"] == "fail"],
        "text": "\n".join(f"{r['node']}  {r['test']}  {r['result']}" for r in rows) or "no smoke test result recorded",
    }


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    head = ("TEST", "PHASE", "NODE", "PRODUCT", "RESULT", "DETAIL")
    body = [
        (
            r["test"],
            str(r.get("phase") or "-"),
            ",".join(r["nodes"]),
            str(r.get("product") or "-"),
            str(r["result"]),
            str(r["detail"] or ""),
        )
        for r in rows
    ]
    if not body:
        return "no smoke test planned"
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head) - 1)]
    lines = [
        "  ".join(line[i].ljust(widths[i]) for i in range(len(widths))) + "  " + line[-1] for line in [head, *body]
    ]
    return "\n".join(line.rstrip() for line in lines)
