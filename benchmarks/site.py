"""Benchmark of `site.yml` on the demo cluster (issue 7 budget): converge on a new lab, then an idempotent
re-run, each timed as a whole `ansible-playbook` process. Target: the re-run takes at most half the
converge time (an unchanged release is not upgraded).

Usage: PYTHONPATH=hack .venv/bin/python benchmarks/site.py [--runs 2] [--keep]
Every run starts from a new lab (`down`, `up --inventory-nodes`) unless --keep. Writes
benchmarks/results/site-<UTC date>.json and prints it."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

from gpuops_lab.config import REPO

RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def play(env: dict[str, str]) -> tuple[float, dict[str, int]]:
    t0 = time.monotonic()
    proc = subprocess.run(
        ["ansible-playbook", "site.yml", "-i", "inventories/local"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"site.yml failed (rc {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    changed = {m.group(1): int(m.group(3)) for m in RECAP.finditer(proc.stdout)}
    return took, changed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2, help="converge + re-run pairs, each on a new lab")
    ap.add_argument("--keep", action="store_true", help="use the running lab as it is (one pair)")
    args = ap.parse_args()
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PY_COLORS": "0", "ANSIBLE_FORCE_COLOR": "0"}
    pairs = []
    for _pair in range(1 if args.keep else args.runs):
        if not args.keep:
            for cmd in (["down"], ["up", "--inventory-nodes"], ["monitoring", "up"]):  # as make demo
                subprocess.run([sys.executable, "-m", "gpuops_lab", *cmd], cwd=REPO, env=env, check=True)
        converge, changed_first = play(env)
        rerun, changed_second = play(env)
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
    (REPO / "benchmarks" / "results").mkdir(exist_ok=True)
    path = REPO / "benchmarks" / "results" / f"site-{time.strftime('%Y%m%d', time.gmtime())}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
