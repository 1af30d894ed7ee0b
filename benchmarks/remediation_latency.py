"""Latency of the self-healing chain on the lab: an XID 79 injected on one GPU of a simulated GPU node (the lab's
dcgm-exporter) -> scraped by the real Prometheus -> GPUXidFallenOffBus fires -> the real Alertmanager -> the rulebook
extensions/eda/rulebooks/gpu_health.yml in the real ansible-rulebook -> playbooks/remediate.yml (act) cordons the node.

Per injection (different nodes and GPUs, in turn; each fault cleared after its node is cordoned, and the node
returned by the resolved run before the next injection, so that no other playbook run holds the rulebook's lock):

- injection -> cordon: from dcgm.inject() to the first poll (every 0.1 s) that reads the node unschedulable;
- firing -> cordon: from the alert's firing time (Alertmanager's startsAt, which Prometheus sets to the time the
  alert fired, after its `for`) to the cordon; and the parts before it: injection -> firing (the scrape and
  evaluation intervals and the rule's `for`) and firing -> the rulebook's playbook start are not separable from
  outside, the rest (Alertmanager's group_wait, the playbook's start and its tasks up to the cordon) is.

p50 and p99 of each, with the lab's scrape and evaluation intervals, the rule's `for`, Alertmanager's group_wait
and the load average stated. Targets: firing -> cordon <= 5 s p99; injection -> cordon <= 20 s p50 with a 5 s scrape
and evaluation interval.

    PYTHONPATH=hack python benchmarks/remediation_latency.py [--injections 20] [--nodes 4] [--xid-for 5s]

Starts the lab (and its monitoring) when they are not running; adds its own nodes and removes them. Results:
results/remediation-latency-<UTC date and time>.json.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _bench import write_result
from gpuops_lab import dcgm, eda, monitoring
from gpuops_lab.cluster import Lab
from gpuops_lab.config import LabConfig
from gpuops_lab.k8s import wait_for
from gpuops_lab.testing import Cluster, gpu_alerting

ALERT = "GPUXidFallenOffBus"


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by the nearest rank: p99 of 20 samples is the largest."""
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 2)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 2),
        "p99": pct(values, 0.99),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
    }


def starts_at(cfg: LabConfig, node: str, gpu: int) -> float | None:
    """Alertmanager's startsAt of the node's GPU alert, as a UNIX time."""
    for a in monitoring.alertmanager_alerts(cfg):
        labels = a["labels"]
        if (labels.get("alertname"), labels.get("Hostname"), labels.get("gpu")) == (ALERT, node, str(gpu)):
            return datetime.fromisoformat(a["startsAt"].replace("Z", "+00:00")).timestamp()
    return None


def one(cfg: LabConfig, core: Any, node: str, gpu: int, timeout: float) -> dict[str, Any]:
    load = os.getloadavg()[0]
    dcgm.inject(cfg.state, node, gpu, dcgm.PRESETS["xid79"])
    t_inject = time.time()
    try:
        if not wait_for(lambda: core.read_node(node).spec.unschedulable, timeout, 0.1):
            raise SystemExit(f"{node} not cordoned {timeout:.0f}s after XID 79 on GPU {gpu}")
        t_cordon = time.time()
        fired = starts_at(cfg, node, gpu)
    finally:
        dcgm.clear(cfg.state, node, gpu)
    # the resolved run returns the node; the next injection waits for it (no run holds the rulebook's lock)
    if not wait_for(lambda: not core.read_node(node).spec.unschedulable, timeout * 2, 0.5):
        raise SystemExit(f"{node} not returned {timeout * 2:.0f}s after its fault was cleared")
    row = {
        "node": node,
        "gpu": gpu,
        "load_1m": round(load, 2),
        "injection_to_cordon_s": round(t_cordon - t_inject, 2),
        "returned_after_s": round(time.time() - t_cordon, 2),
    }
    if fired is not None:
        row["injection_to_firing_s"] = round(fired - t_inject, 2)
        row["firing_to_cordon_s"] = round(t_cordon - fired, 2)
    print(row, file=sys.stderr, flush=True)
    return row


def report(rows: list[dict[str, Any]], xid_for: str, nodes: int, wanted: int) -> dict[str, Any]:
    fired = [r for r in rows if "firing_to_cordon_s" in r]
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "lab": {
            "scrape_interval": monitoring.SCRAPE_INTERVAL,
            "evaluation_interval": monitoring.EVALUATION_INTERVAL,
            "xid_for": xid_for,
            "alertmanager_group_wait": monitoring.ALERT_GROUP_WAIT,
            "alertmanager_group_interval": monitoring.ALERT_GROUP_INTERVAL,
            "nodes": nodes,
        },
        "injections": len(rows),
        "injections_asked": wanted,
        "targets": {"firing_to_cordon_p99_s": 5, "injection_to_cordon_p50_s": 20},
        "runs": rows,
    }
    if rows:
        out["injection_to_cordon_s"] = summary([r["injection_to_cordon_s"] for r in rows])
        out["load_1m"] = summary([r["load_1m"] for r in rows])
    if fired:
        out["firing_to_cordon_s"] = summary([r["firing_to_cordon_s"] for r in fired])
        out["injection_to_firing_s"] = summary([r["injection_to_firing_s"] for r in fired])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--injections", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=4, help="simulated pcie-l40s nodes (4 GPUs each) taking turns")
    ap.add_argument("--xid-for", default="5s", help="the `for` of the XID alerts (thresholds xid_for)")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument(
        "--rows-from",
        type=Path,
        help="no run: the report of the rows a stopped run printed (its standard error, one dict a line)",
    )
    args = ap.parse_args()
    if args.rows_from:
        import ast

        lines = args.rows_from.read_text().splitlines()
        rows = [ast.literal_eval(line) for line in lines if line.startswith("{'node'")]
        write_result("remediation-latency", report(rows, args.xid_for, args.nodes, args.injections), "%Y%m%d-%H%M")
        return
    from kubernetes import client, config

    cfg = LabConfig.load()
    lab = Lab(cfg, say=lambda m: print(m, file=sys.stderr))
    lab.up()
    api = config.new_client_from_config(str(cfg.kubeconfig))
    cluster = Cluster(lab, cfg, str(cfg.kubeconfig), api, cfg.chart_repo_url)
    rows: list[dict[str, Any]] = []
    with (
        gpu_alerting(cluster, (("pcie-l40s", args.nodes),), {"xid_for": args.xid_for}) as fleet,
        tempfile.TemporaryDirectory(prefix="gpuops-eda-") as tmp,
    ):
        controller = {
            "gpu_operator_namespace": fleet.namespace,
            "gpuops_remediation_namespace": fleet.namespace,
            "gpuops_remediation_breaker": {"max_nodes": args.nodes, "max_percent": 100, "max_actions": 0},
        }
        rulebook = eda.start(
            Path(tmp),
            monitoring.port(cfg, "eda-webhook"),
            mode="act",
            playbook=eda.REAL,
            inventory_doc=eda.inventory(cfg, controller),
        )
        core = client.CoreV1Api(api)
        try:
            for i in range(args.injections):
                # no run holds the rulebook's lock (before the first: an earlier lab run's alerts that Alertmanager
                # still delivers, resolved ones retried, are handled first)
                if not rulebook.settle(10 if i == 0 else 0, args.timeout):
                    raise SystemExit(f"the rulebook still runs a playbook after {args.timeout:.0f}s: {rulebook.log}")
                node = fleet.nodes[i % len(fleet.nodes)]
                rows.append(one(cfg, core, node, (i // len(fleet.nodes)) % 4, args.timeout))
        finally:
            rulebook.stop()
    write_result("remediation-latency", report(rows, args.xid_for, args.nodes, args.injections), "%Y%m%d-%H%M")


if __name__ == "__main__":
    main()
