"""site.yml's tags, one per layer (docs/operations.md): `--tags X` runs the plays of layer X and nothing that
changes another layer (the inputs checks are tagged always). Read with `ansible-playbook --list-tasks`."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAY = re.compile(r"^  play #\d+ \([^)]*\): (.*)\tTAGS: \[.*\]$")
TASK = re.compile(r"^      (.*)\tTAGS: \[(.*)\]$")


def plays_that_act(tag: str) -> set[str]:
    """The plays with at least one task that runs under --tags TAG and is not an always-run input check. A role the
    play includes ("Apply <role>": include_role, tagged always so that any --tags reaches it) acts when the play's tags,
    which its tasks inherit, have TAG."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    r = subprocess.run(
        ["ansible-playbook", "site.yml", "-i", "inventories/local", "--list-tasks", "--tags", tag],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    acting, play = set(), None
    for line in r.stdout.splitlines():
        if m := PLAY.match(line):
            play = m.group(1).split(" (")[0]
        elif (m := TASK.match(line)) and play:
            tags = [t.strip() for t in m.group(2).split(",")]
            if "always" not in tags or (m.group(1).startswith("Apply ") and tag in tags):
                acting.add(play)
    return acting


@pytest.mark.parametrize(
    ("tag", "want"),
    [
        ("hosts", {"Prepare GPU hosts"}),
        # the sharing fields land through the GPU Operator's release: both layers run both plays
        ("sharing", {"GPU sharing per node pool", "NVIDIA GPU Operator", "GPU sharing validation"}),
        ("network", {"NVIDIA Network Operator", "SR-IOV Network Operator"}),
        ("schedulers", {"Batch layer - queues and quotas as code"}),
        ("batch", {"Batch layer - queues and quotas as code"}),  # the earlier name, kept as an alias
        ("monitoring", {"Monitoring - GPU metrics, alerts and dashboards"}),
        (
            "operators",
            {
                "Node Feature Discovery",
                "GPU sharing per node pool",
                "NVIDIA GPU Operator",
                "AMD GPU Operator",
                "GPU nodes of every vendor together, after all roles",
                "Cluster plane - list the nodes",
            },
        ),
    ],
)
def test_one_tag_per_layer(tag, want):
    assert plays_that_act(tag) == want


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        ("dgx-h100-0", True),  # a GPU host alone: its host plane only, and the run says so
        ("cluster_controller,dgx-h100-0", False),
    ],
)
def test_a_limit_without_the_controller_is_said(limit, said, tmp_path):
    """--limit that leaves out cluster_controller runs the host plane only; the run names what it leaves out. Only the
    always-tagged plays run here (--tags of no layer), so nothing is changed or even connected to. The inputs check
    wants a kubeconfig file, not a cluster: a file of our own, so the test never depends on a lab being up."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        "clusters: [{name: lab, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: lab, context: {cluster: lab, user: lab}}]\nusers: [{name: lab, user: {}}]\n"
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    r = subprocess.run(
        [
            "ansible-playbook",
            "site.yml",
            "-i",
            "inventories/local",
            "--limit",
            limit,
            "--tags",
            "no-such-layer",
            "-e",
            f"gpuops_kubeconfig={kubeconfig}",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    out = re.sub(r"\s+", " ", r.stdout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    # the message's own words (the task's name, shown when it is skipped, says "leaves out the cluster controller")
    assert ("only the host plane of dgx-h100-0 runs" in out) is said, out[-3000:]
    if said:
        assert "--limit dgx-h100-0 leaves out the cluster controller (localhost)" in out, out[-3000:]
        assert "playbooks/onboard_node.yml" in out
