"""site.yml's tags, one per layer (docs/operations.md): `--tags X` runs the plays and the cluster play's tasks of layer
X and nothing that changes another layer (the inputs checks are tagged always). Read with `ansible-playbook
--list-tasks`."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAY = re.compile(r"^  play #\d+ \([^)]*\): (.*)\tTAGS: \[.*\]$")
TASK = re.compile(r"^      (.*)\tTAGS: \[(.*)\]$")


CLUSTER_PLAY = "Cluster plane - every layer, in order"


def what_acts(tag: str) -> set[str]:
    """The plays with at least one task that runs under --tags TAG and is not an always-run input check; of the one
    cluster play (every layer, in order), its tasks that do. A role the cluster play includes ("Apply <role>":
    include_role, tagged always so that any --tags reaches it) acts when its include carries TAG (which `apply` gives
    the role's tasks: playbooks/tasks/operators.yml)."""
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
                acting.add(m.group(1) if play == CLUSTER_PLAY else play)
    return acting


GPU_OPERATOR = (
    "Apply gpu_operator with the sharing layer's device-plugin config, MIG strategy and MIG ConfigMap",
    "Apply gpu_operator (no sharing layer)",
)
BATCH = "Apply the batch schedulers - kueue, volcano, kai_scheduler"


@pytest.mark.parametrize(
    ("tag", "want"),
    [
        ("hosts", {"Prepare GPU hosts"}),
        # the sharing fields land through the GPU Operator's release: both layers run both roles
        ("sharing", {"Apply gpu_sharing", *GPU_OPERATOR, "Validate the sharing pools"}),
        ("network", {"Apply network_operator", "Apply sriov_network_operator"}),
        ("schedulers", {BATCH}),
        ("batch", {BATCH}),  # the earlier name, kept as an alias
        ("monitoring", {"Apply monitoring"}),
        ("smoke", {"Apply smoke_tests"}),
        (
            "operators",
            {
                "Apply nfd",
                "Apply gpu_sharing",
                *GPU_OPERATOR,
                "Apply amd_gpu_operator",
                "Judge the NVIDIA and AMD GPU nodes together",
                "List the nodes",
                "Require at least one node, and show the cluster and its nodes",
            },
        ),
    ],
)
def test_one_tag_per_layer(tag, want):
    assert what_acts(tag) == want


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
