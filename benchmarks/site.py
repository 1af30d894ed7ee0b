"""Benchmark of `site.yml` on the demo cluster (issue 7 budget): converge on a new lab, then an idempotent
re-run, each timed as a whole `ansible-playbook` process. Target: the re-run takes at most half the
converge time (an unchanged release is not upgraded).

Usage: PYTHONPATH=hack .venv/bin/python benchmarks/site.py [--runs 2] [--keep]
Every run starts from a new lab (`down`, `up --inventory-nodes`) unless --keep. Writes
benchmarks/results/site-<UTC date>.json and prints it."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

from _bench import ansible_env, playbook, write_result
from gpuops_lab.config import REPO

SITE = ["site.yml", "-i", "inventories/local"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2, help="converge + re-run pairs, each on a new lab")
    ap.add_argument("--keep", action="store_true", help="use the running lab as it is (one pair)")
    args = ap.parse_args()
    env = ansible_env()
    pairs = []
    for _pair in range(1 if args.keep else args.runs):
        if not args.keep:
            for cmd in (["down"], ["up", "--inventory-nodes"], ["monitoring", "up"]):  # as make demo
                subprocess.run([sys.executable, "-m", "gpuops_lab", *cmd], cwd=REPO, env=env, check=True)
        converge, changed_first = playbook(env, SITE)
        rerun, changed_second = playbook(env, SITE)
        pairs.append(
            {
                "converge_s": round(converge, 1),
                "rerun_s": round(rerun, 1),
                "ratio": round(rerun / converge, 2),
                "changed_converge": sum(changed_first.values()),
                "changed_rerun": changed_second,
            }
        )
    out = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_avg_at_end": os.getloadavg(),
        "pairs": pairs,
        "median_ratio": statistics.median(p["ratio"] for p in pairs),
        "target": "rerun <= 0.5 x converge, changed=0 on the rerun",
    }
    write_result("site", out)


if __name__ == "__main__":
    main()
