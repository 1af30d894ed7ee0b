"""gpuops.platform.report: the text printed verbatim (columns kept), in check mode too, and bad input refused."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ansible_collections.gpuops.platform.plugins.action.report import report_lines

REPO = Path(__file__).resolve().parents[4]
TABLE = "NODE        READY  SHARING\ngpu-0       True   time_slicing ts x4: nvidia.com/gpu=16   \ncpu-0       True   -"


@pytest.mark.parametrize(
    ("text", "title", "want"),
    [
        ("a  b \nc", None, ["a  b", "c"]),
        ("a", "T", ["T", "a"]),
        ("", None, []),
        ("\n\nx\n", None, ["", "", "x"]),
    ],
)
def test_report_lines(text, title, want):
    assert report_lines(text, title) == want


def _play(tmp_path, args, *extra):
    book = tmp_path / "play.yml"
    book.write_text(
        json.dumps(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [{"name": "Report", "gpuops.platform.report": args, "register": "out"}],
                }
            ]
        )
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local", str(book), *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )


@pytest.mark.parametrize("check", [False, True])
def test_prints_the_table_verbatim(tmp_path, check):
    r = _play(tmp_path, {"text": TABLE, "title": "GPU nodes"}, *(["--check"] if check else []))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout.splitlines()
    start = out.index("GPU nodes")
    assert out[start + 1 : start + 4] == [line.rstrip() for line in TABLE.splitlines()]
    assert "changed=0" in r.stdout


def test_bad_input_is_refused(tmp_path):
    r = _play(tmp_path, {"txt": TABLE})
    assert r.returncode != 0
    assert "text" in r.stdout + r.stderr


def test_the_remediation_report_through_the_action(tmp_path):
    remediation = {
        "mode": "dry_run",
        "node": "gpu-1",
        "steps": [{"msg": "would cordon gpu-1"}, {"skipped": True}, {}],
        "drain_plan": [{"pod": "train-0", "decision": "evict", "why": "owned by a Job"}],
    }
    r = _play(tmp_path, {"remediation": remediation})
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout.splitlines()
    start = out.index("gpuops remediation (dry_run: nothing was changed but Events)")
    assert out[start + 1 : start + 5] == [
        "- would cordon gpu-1",
        "drain plan of gpu-1:",
        "POD      DECISION  WHY",
        "train-0  evict     owned by a Job",
    ]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"text": "x", "remediation": {"mode": "act", "node": "n"}}, ["mutually exclusive", "text", "remediation"]),
        ({"remediation": {"mode": "fix", "node": "n"}}, ["mode", "dry_run", "act"]),
        ({"title": "t"}, ["one of the following is required", "text", "remediation"]),
    ],
)
def test_bad_remediation_input_is_refused(tmp_path, args, words):
    r = _play(tmp_path, args)
    assert r.returncode != 0
    assert all(w in r.stdout + r.stderr for w in words), r.stdout + r.stderr
