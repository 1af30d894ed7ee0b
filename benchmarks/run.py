"""Benchmarks of the local lab (issue 2): warm start-to-ready, adding 100 simulated nodes, and the
`make test` stage split recorded by the last test run. `--cold` also times a cold build of every binary
into empty caches (GOCACHE, GOMODCACHE and the binary cache: 20-40 min on 2 cores).

Usage: PYTHONPATH=hack .venv/bin/python benchmarks/run.py [--cold] [--starts 3] [--nodes 100]
Writes benchmarks/results/lab-<UTC date>.json and prints it."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time

from gpuops_lab import nodes
from gpuops_lab.cluster import Lab
from gpuops_lab.config import BUILD_SCRIPT, REPO, LabConfig
from gpuops_lab.k8s import wait_for


def cold_build() -> float:
    with tempfile.TemporaryDirectory(prefix="gpuops-cold-") as tmp:
        env = {**os.environ, "GPUOPS_CACHE": f"{tmp}/cache", "GOCACHE": f"{tmp}/gocache", "GOMODCACHE": f"{tmp}/mod"}
        t0 = time.monotonic()
        subprocess.run(["bash", str(BUILD_SCRIPT), "all"], env=env, check=True)
        took = time.monotonic() - t0
        subprocess.run(["chmod", "-R", "u+w", tmp], check=False)  # the module cache is read-only
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=100)
    args = ap.parse_args()
    cfg = LabConfig.load()
    lab = Lab(cfg, say=lambda m: None)
    lab.build()
    out: dict[str, object] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "versions": cfg.versions,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if args.cold:
        out["cold_build_s"] = round(cold_build(), 1)
    starts = []
    for _run in range(args.starts):
        lab.down()
        t0 = time.monotonic()
        lab.up()
        starts.append(time.monotonic() - t0)
    out["warm_start_to_ready_s"] = {
        "runs": [round(s, 2) for s in starts],
        "median": round(statistics.median(starts), 2),
    }
    core = nodes.api(cfg)
    t0 = time.monotonic()
    made = nodes.add(core, "dgx-h100", args.nodes, prefix="bench")
    created = time.monotonic() - t0

    def all_ready() -> bool:
        got = {
            n.metadata.name
            for n in core.list_node(label_selector="gpuops.io/hardware-profile=dgx-h100").items
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        }
        return set(made) <= got

    ok = wait_for(all_ready, 300, 1.0)
    ready = time.monotonic() - t0
    out[f"add_{args.nodes}_nodes_s"] = {"created": round(created, 2), "all_ready": round(ready, 2), "ok": ok}
    nodes.remove(core, made)
    timings = REPO / ".state" / "test-timings.json"
    if timings.is_file():
        out["make_test_stages_s"] = json.loads(timings.read_text())
    res = REPO / "benchmarks" / "results" / f"lab-{time.strftime('%Y%m%d', time.gmtime())}.json"
    res.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
