"""The changed=0 re-run of `site.yml` on the running demo lab: how many tasks it runs on the controller and what it
costs in Ansible CPU seconds (ansible-playbook and every process it starts), for one or more checkouts of the
collection, one after the other on the same lab - the before/after measure of a change that trims tasks.

    PYTHONPATH=hack .venv/bin/python benchmarks/rerun_tasks.py [--tree LABEL=PATH ...] [--rounds 1]

Each tree runs `site.yml -i inventories/local` with its own ansible.cfg (Ansible's own strategy, as a user runs it);
the lab must be converged first (`make demo`, or one `site.yml` run), so every run is a re-run: a run that changes
something or fails ends the benchmark. Without --tree: this checkout. Results: results/rerun-tasks-<date>.json."""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

from _bench import RECAP, ansible_env, write_result
from gpuops_lab.config import REPO


def rerun(tree: Path) -> dict[str, Any]:
    env = ansible_env(ANSIBLE_CONFIG=str(tree / "ansible.cfg"), ANSIBLE_HOME=str(tree / ".state" / "ansible-home"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(
        ["ansible-playbook", "site.yml", "-i", "inventories/local"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    recap = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in RECAP.finditer(proc.stdout)}
    if proc.returncode != 0 or any(changed for _ok, changed in recap.values()):
        raise SystemExit(f"{tree}: not a changed=0 re-run (rc {proc.returncode}):\n{proc.stdout[-3000:]}")
    skipped = re.search(r"^localhost\s*:.*skipped=(\d+)", proc.stdout, re.M)
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
        "tasks": len(re.findall(r"^TASK \[", proc.stdout, re.M)),
        "controller_ok": recap["localhost"][0],
        "controller_skipped": int(skipped.group(1)) if skipped else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], help="LABEL=PATH of a checkout (repeatable)")
    ap.add_argument("--rounds", type=int, default=1, help="re-runs of each tree, interleaved")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree) or {"this": str(REPO)}
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for _round in range(args.rounds):
        for label, path in trees.items():
            runs[label].append(rerun(Path(path).resolve()))
    out = {"lab_state": os.environ.get("GPUOPS_LAB_STATE", ""), "trees": trees, "runs": runs}
    write_result("rerun-tasks", out, stamp="%Y%m%d-%H%M")


if __name__ == "__main__":
    main()
