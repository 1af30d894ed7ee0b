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
import statistics
import time

from _bench import ansible_env, playbook, write_result


def play(env: dict[str, str], *extra: str) -> tuple[float, int]:
    took, changed = playbook(env, ["benchmarks/network.yml", "-i", "inventories/local", *extra])
    return took, sum(changed.values())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3, help="uninstall + converge + re-run rounds")
    args = ap.parse_args()
    env = ansible_env()
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
    write_result("network", out)


if __name__ == "__main__":
    main()
