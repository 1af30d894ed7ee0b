"""The kueue role's team namespaces (issue 27 §7): a team namespace that does not exist is created with the role's
labels, one a user made is used as it is; kueue_state=absent (playbooks/uninstall.yml) deletes the ones the role
created - --check first changes nothing - and keeps the user's. A CPU flavor (kueue_flavors), so no GPU Operator is
needed; the lab's real Kueue controller makes the queues active."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import yaml
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]
OWNER = {"app.kubernetes.io/managed-by": "gpuops.platform", "gpuops.platform/role": "kueue"}


def play(tmp: Path, cluster, *args: str, **hostvars) -> subprocess.CompletedProcess[str]:
    inv = tmp / f"inv-{uuid.uuid4().hex[:6]}.yml"
    base = {
        "ansible_connection": "local",
        "ansible_python_interpreter": str(REPO / ".venv/bin/python"),
        "gpuops_kubeconfig": cluster.kubeconfig,
        "gpuops_chart_repo_mirror": cluster.chart_repo_url,
    }
    inv.write_text(
        yaml.safe_dump({"all": {"children": {"cluster_controller": {"hosts": {"localhost": {**base, **hostvars}}}}}})
    )
    pb = tmp / "play.yml"
    pb.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "kueue",
                    "hosts": "cluster_controller",
                    "gather_facts": False,
                    "roles": ["gpuops.platform.kueue"],
                }
            ]
        )
    )
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    return subprocess.run(
        ["ansible-playbook", str(pb), "-i", str(inv), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_absent_deletes_the_team_namespaces_the_role_created_and_keeps_the_users(cluster, core, namespace, tmp_path):
    t = uuid.uuid4().hex[:6]
    made = f"kt-{t}-made"  # does not exist: the role creates it
    node = core.list_node().items[0].metadata.name
    variables = {
        "kueue_namespace": f"kt-{t}-kueue",
        "kueue_values": {"controllerManager": {"tolerations": KWOK}},
        "kueue_wait_timeout": 90,
        "kueue_flavors": [{"name": f"cpu-{t}", "node_labels": {"kubernetes.io/hostname": node}, "tolerations": KWOK}],
        "kueue_teams": [
            # `namespace` is the user's (the fixture made it)
            {
                "name": f"team-{t}",
                "namespaces": [namespace, made],
                "quotas": [{"flavor": f"cpu-{t}", "resources": {"cpu": 4}}],
            },
        ],
    }
    try:
        r = play(tmp_path, cluster, **variables)
        assert r.returncode == 0, r.stdout[-4000:]
        assert (core.read_namespace(made).metadata.labels or {}).items() >= OWNER.items()
        assert not (core.read_namespace(namespace).metadata.labels or {}).keys() & OWNER.keys()

        r = play(tmp_path, cluster, "--check", **variables, kueue_state="absent")
        assert r.returncode == 0, r.stdout[-4000:]
        assert core.read_namespace(made).status.phase == "Active", "check mode deleted a namespace"

        r = play(tmp_path, cluster, **variables, kueue_state="absent")
        assert r.returncode == 0, r.stdout[-4000:]
        names = {n.metadata.name for n in core.list_namespace().items}
        assert made not in names, "the team namespace the role created is left"
        assert namespace in names and core.read_namespace(namespace).status.phase == "Active", "the user's went"
    finally:
        for ns in (made, variables["kueue_namespace"]):
            try:
                core.delete_namespace(ns)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
