"""Benchmarks of the host plane (issue 3).

1. gpu_host_facts and gpu_host_preflight on a simulated dgx-h100: each module run as Ansible runs it
   (a fresh Python process in the host's namespace, module arguments from a file), median of --runs;
   the same wrapper running `python -c pass` is the baseline (namespace + interpreter start-up).
2. host_prep converge and idempotent re-run over 1, 8 and 32 simulated dgx-h100 hosts (forks 8):
   wall time and the per-host marginal time between the largest and the smallest fleet.

Usage: PYTHONPATH=hack .venv/bin/python benchmarks/host_prep.py [--runs 15] [--sizes 1,8,32]
Writes benchmarks/results/host_prep-<UTC date>.json and prints it."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from gpuops_lab.hostsim.hosts import create_host

REPO = Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / ".state" / "collections"


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return time.monotonic() - t0


def module_runs(runs: int, root: Path) -> dict[str, object]:
    host = create_host("dgx-h100", "bench-dgx", root)
    wrapper = host["python"]
    env = {**os.environ, "PYTHONPATH": str(COLLECTIONS)}
    out: dict[str, object] = {}
    base = [timed([wrapper, "-c", "pass"], env) for _run in range(runs)]
    out["baseline_python_in_namespace_s"] = round(statistics.median(base), 3)
    for name, args in (
        ("gpu_host_facts", {}),
        ("gpu_host_preflight", {"nvidia_driver": "host", "gpudirect": True, "fail_on": "never"}),
    ):
        argfile = root / f"{name}.json"
        argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        mod = f"ansible_collections.gpuops.platform.plugins.modules.{name}"
        times = [timed([wrapper, "-m", mod, str(argfile)], env) for _run in range(runs)]
        med = statistics.median(times)
        out[name] = {
            "median_s": round(med, 3),
            "min_s": round(min(times), 3),
            "max_s": round(max(times), 3),
            "median_minus_baseline_s": round(med - statistics.median(base), 3),
            "runs": runs,
        }
    return out


def fleet(size: int, root: Path) -> dict[str, float]:
    hosts = {}
    for i in range(size):
        info = create_host("dgx-h100", f"h{i:02d}", root / f"fleet{size}")
        hv = dict(info["hostvars"])
        hv["host_prep_nvidia_driver"] = "host"
        hosts[f"h{i:02d}"] = hv
    inv = root / f"fleet{size}.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORKS": "8"}
    argv = ["ansible-playbook", str(REPO / "playbooks/prepare_hosts.yml"), "-i", str(inv)]
    converge = timed(argv, env)
    rerun = timed(argv, env)
    return {"hosts": size, "converge_s": round(converge, 2), "idempotent_rerun_s": round(rerun, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--sizes", default="1,8,32")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="gpuops-bench-") as tmp:
        root = Path(tmp)
        out: dict[str, object] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count()}
        out["modules_dgx_h100"] = module_runs(args.runs, root)
        rows = [fleet(n, root) for n in sizes]
        out["host_prep_fleet"] = rows
        lo, hi = rows[0], rows[-1]
        if hi["hosts"] > lo["hosts"]:
            span = hi["hosts"] - lo["hosts"]
            out["per_host_marginal_s"] = {
                "converge": round((hi["converge_s"] - lo["converge_s"]) / span, 3),
                "idempotent_rerun": round((hi["idempotent_rerun_s"] - lo["idempotent_rerun_s"]) / span, 3),
            }
    res = REPO / "benchmarks" / "results" / f"host_prep-{time.strftime('%Y%m%d', time.gmtime())}.json"
    res.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
