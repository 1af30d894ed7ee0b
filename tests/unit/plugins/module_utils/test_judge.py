"""module_utils._judge: a role's findings to its verdict and message, as tables; and gpuops.platform.judge in a play."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common import _judge

REPO = Path(__file__).resolve().parents[4]


def finding(fid, severity="error", kind="Node", name="n1", evidence=("x=1",), cause="it is bad.", fix="make it good"):
    return {
        "id": fid,
        "severity": severity,
        "object": {"kind": kind, "name": name},
        "evidence": list(evidence),
        "cause": cause,
        "fix": fix,
    }


@pytest.mark.parametrize(
    ("f", "want"),
    [
        (finding("a"), "[a] Node n1: x=1. Why: it is bad. Fix: make it good"),
        (finding("a", kind=None, evidence=()), "[a] n1: Why: it is bad. Fix: make it good"),
        (finding("a", evidence=("p", "q"), fix=""), "[a] Node n1: p; q. Why: it is bad."),
        ({"id": "bare", "cause": "c"}, "[bare]: Why: c."),
    ],
)
def test_line(f, want):
    assert _judge.line(f) == want


@pytest.mark.parametrize(
    ("findings", "fail_on", "failed", "msg"),
    [
        ([], "error", False, "no finding"),
        ([finding("w", "warning")], "error", False, "warning: [w] Node n1: x=1. Why: it is bad. Fix: make it good"),
        (
            [finding("e"), finding("w", "warning")],
            "error",
            True,
            "r: [e] Node n1: x=1. Why: it is bad. Fix: make it good || Nothing was changed.",
        ),
        (
            [finding("w", "warning"), finding("i", "info")],
            "warning",
            True,
            "r: [w] Node n1: x=1. Why: it is bad. Fix: make it good || Nothing was changed.",
        ),
    ],
)
def test_verdict(findings, fail_on, failed, msg):
    out = _judge.verdict("r", findings, fail_on)
    assert (out["failed"], out["msg"]) == (failed, msg)
    assert len(out["lines"]) == len(findings)
    assert sum(out["counts"].values()) == len(findings)


def test_verdict_stop_and_none():
    assert _judge.verdict("r", [finding("e")], stop="")["msg"].endswith("make it good")
    assert _judge.verdict("r", [], none="no finding on 3 host(s)")["msg"] == "no finding on 3 host(s)"


def _play(tmp_path, args):
    book = tmp_path / "play.yml"
    task = {"name": "Judge", "gpuops.platform.judge": args, "register": "out"}
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    cmd = ["ansible-playbook", "-i", "localhost,", "-c", "local", str(book)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=False)


def test_judge_in_a_play(tmp_path):
    ok = _play(tmp_path, {"role": "r", "findings": [finding("w", "warning")]})
    assert ok.returncode == 0 and "warning: [w] Node n1" in ok.stdout, ok.stdout
    bad = _play(tmp_path, {"role": "r", "findings": [finding("e")]})
    assert bad.returncode != 0 and "r: [e] Node n1: x=1. Why: it is bad." in bad.stdout, bad.stdout
    typo = _play(tmp_path, {"role": "r", "findings": [], "fial_on": "warning"})
    assert typo.returncode != 0 and "fial_on" in typo.stdout + typo.stderr
    missing = _play(tmp_path, {"role": "r"})
    assert missing.returncode != 0 and "findings" in missing.stdout
