"""What the playbook benchmarks share (site.py, network.py, day2.py): the environment a user's run has, a timed
`ansible-playbook` read from its recap, and the results file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from gpuops_lab.config import REPO

RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def ansible_env(**extra: str) -> dict[str, str]:
    """The caller's environment with the project's ansible.cfg and no colour, and Ansible's own strategy: the
    Mitogen strategy of hack/run-tests.sh is the tests' speed-up, not what a user runs."""
    env = {k: v for k, v in os.environ.items() if k not in ("ANSIBLE_STRATEGY", "ANSIBLE_STRATEGY_PLUGINS")}
    return env | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PY_COLORS": "0", "ANSIBLE_FORCE_COLOR": "0", **extra}


def playbook(env: dict[str, str], argv: list[str]) -> tuple[float, dict[str, int]]:
    """`ansible-playbook ARGV` from the repository: its wall time and the changed count per host of its recap; a
    failed run ends the benchmark with its output's tail."""
    t0 = time.monotonic()
    proc = subprocess.run(["ansible-playbook", *argv], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    took = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed (rc {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    return took, {m.group(1): int(m.group(3)) for m in RECAP.finditer(proc.stdout)}


def write_result(name: str, out: dict[str, Any], stamp: str = "%Y%m%d") -> Path:
    """benchmarks/results/<name>-<UTC date>.json (stamp: its strftime format), also printed."""
    path = REPO / "benchmarks" / "results" / f"{name}-{time.strftime(stamp, time.gmtime())}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return path
