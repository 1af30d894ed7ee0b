"""playbooks/remediate.yml before it reads the cluster: without an event, with an unknown mode or with a bad event it
fails naming what is wrong and that nothing was changed (no cluster is needed: nothing is read before)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
EVENT = {
    "node": "gpu-0",
    "alert": "GPUXidFallenOffBus",
    "fault_class": "bus",
    "action": "quarantine",
    "severity": "critical",
    "gpu": {"uuid": None, "pci_bus_id": None, "index": 3},
    "starts_at": "2026-11-28T08:00:00Z",
    "fingerprint": "a1b2c3d4e5f60718",
    "labels": {},
    "annotations": {},
    "status": "firing",
}


def _run(tmp_path: Path, extra: dict) -> tuple[int, str]:
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"cluster_controller": {"hosts": {"localhost": LOCAL}}}}}))
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    # a kubeconfig that does not exist: the run must stop before it would be read
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["K8S_AUTH_KUBECONFIG"] = str(tmp_path / "no-such-kubeconfig")
    env.pop("ANSIBLE_STRATEGY", None)
    r = subprocess.run(
        ["ansible-playbook", "playbooks/remediate.yml", "-i", str(inv), "-e", f"@{tmp_path / 'extra.json'}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    return r.returncode, re.sub(r"\s+", " ", r.stdout + r.stderr)


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({}, "No event: this playbook handles one GPU fault event"),
        ({"gpuops_remediation_event": EVENT, "gpuops_remediation_mode": "yolo"}, "gpuops_remediation_mode is yolo"),
        (
            {"gpuops_remediation_event": dict(EVENT, gpu={"index": -1}), "gpuops_remediation_mode": "act"},
            "gpuops_remediation_event.gpu.index: -1 is not valid",
        ),
    ],
    ids=["no-event", "bad-mode", "bad-event"],
)
def test_refused_before_the_cluster_is_read(tmp_path, extra, words):
    rc, out = _run(tmp_path, extra)
    assert rc != 0, out[-3000:]
    assert words in out, out[-3000:]
    assert "Nothing was changed" in out
    assert "no-such-kubeconfig" not in out  # stopped before any connection
