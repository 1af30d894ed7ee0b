"""Benchmark of the network_operator role on the demo cluster (issue 8): per round, uninstall
(network_operator_state=absent, not timed), converge, then an idempotent re-run, each timed as a whole
`ansible-playbook benchmarks/network.yml -i inventories/local` process (the role alone, with the inventory's
variables: rdma_shared over the DGX nodes' ConnectX-7 ports, host MOFED). The lab must be up with the demo
converged (`make demo`, or `up --inventory-nodes` and site.yml), so NFD labels the NIC nodes.

Usage: PYTHONPATH=hack .venv/bin/python benchmarks/network.py [--runs 3]
Writes benchmarks/results/network-<UTC date>.json and prints it."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import time

from gpuops_lab.config import REPO

RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def play(env: dict[str, str], *extra: str) -> tuple[float, int]:
    t0 = time.monotonic()
    proc = subprocess.run(
        ["ansible-playbook", "benchmarks/network.yml", "-i", "inventories/local", *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(
            f"network.yml {extra} failed (rc {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
        )
    return took, sum(int(m.group(3)) for m in RECAP.finditer(proc.stdout))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3, help="uninstall + converge + re-run rounds")
    args = ap.parse_args()
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PY_COLORS": "0", "ANSIBLE_FORCE_COLOR": "0"}
    rounds = []
    for _round in range(args.runs):
        play(env, "-e", "network_operator_state=absent")
        converge, changed_converge = play(env)
        rerun, changed_rerun = play(env)
        rounds.append(
            {
                "converge_s": round(converge, 1),
                "rerun_s": round(rerun, 1),
                "changed_converge": changed_converge,
                "changed_rerun": changed_rerun,
            }
        )
        print(json.dumps(rounds[-1]), flush=True)
    out = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_avg_at_end": os.getloadavg(),
        "rounds": rounds,
        "median_converge_s": statistics.median(r["converge_s"] for r in rounds),
        "median_rerun_s": statistics.median(r["rerun_s"] for r in rounds),
        "target": "changed=0 on the rerun",
    }
    (REPO / "benchmarks" / "results").mkdir(exist_ok=True)
    path = REPO / "benchmarks" / "results" / f"network-{time.strftime('%Y%m%d', time.gmtime())}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
