"""`ansible-playbook site.yml -i inventories/local --check` on a first install (issue 27 §3): every layer of the local
inventory enabled, in namespaces that do not exist yet (fresh names, so the session's lab serves as a fresh one: each
role's namespace is created in the same run, and check mode only plans it). The run passes, reports changes (an
object in a namespace the run creates is a would-create, with its diff), and changes nothing: every object of every
listable kind, and the nodes' labels and annotations, are the same before and after.

Before the fix it failed at gpu_sharing "Device-plugin ConfigMap": namespaces "gpu-operator" not found."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path

from gpuops_lab import nodes as lab_nodes
from gpuops_lab.testing import snapshot
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]


def test_site_check_on_a_first_install_passes_reports_changes_and_changes_nothing(cluster, tmp_path):
    lab_nodes.sync_inventory(lab_nodes.api(cluster.cfg), hosts_root=cluster.cfg.hosts)
    core = client.CoreV1Api(cluster.api_client)
    t = uuid.uuid4().hex[:6]
    fresh = {
        "nfd_namespace": f"chk-{t}-nfd",
        "gpu_operator_namespace": f"chk-{t}-gpu-operator",
        "gpu_sharing_namespace": f"chk-{t}-gpu-operator",
        "network_operator_namespace": f"chk-{t}-network-operator",
        "kueue_namespace": f"chk-{t}-kueue",
        "monitoring_namespace": f"chk-{t}-monitoring",
    }
    assert not set(fresh.values()) & {n.metadata.name for n in core.list_namespace().items}
    extra = {
        **fresh,
        # the local inventory's layers: NFD, GPU Operator, sharing, Network Operator, Kueue, monitoring
        # Kueue's teams in namespaces the run creates
        "kueue_teams": [
            {
                "name": "research",
                "namespaces": [f"chk-{t}-research"],
                "quotas": [{"flavor": "NVIDIA-H100-80GB-HBM3-SHARED", "resources": {"nvidia.com/gpu": 8}}],
            }
        ],
    }
    extra_file = tmp_path / "extra.json"
    extra_file.write_text(json.dumps(extra))
    env = {
        **os.environ,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "GPUOPS_LAB_STATE": str(cluster.cfg.state),
    }
    # an earlier test's namespace still terminating goes away during the run, by the namespace controller: not ours
    going = {n.metadata.name for n in core.list_namespace().items if n.metadata.deletion_timestamp is not None}
    before = snapshot(cluster.api_client)
    r = subprocess.run(
        ["ansible-playbook", "site.yml", "-i", "inventories/local", "--check", "--diff", "-e", f"@{extra_file}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    after = snapshot(cluster.api_client)
    out = r.stdout
    assert r.returncode == 0, out[-6000:]
    recap = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)", out)
    assert recap and int(recap.group(1)) > 0, out[-3000:]
    # the object of the issue: reported as a creation (its diff from nothing) in the namespace the run creates
    task = out.split("TASK [gpuops.platform.gpu_sharing : Device-plugin ConfigMap", 1)[1].split("TASK [", 1)[0]
    assert f"namespace: chk-{t}-gpu-operator" in task and "changed: [localhost]" in task, task
    changed = {
        k: (before.get(k), after.get(k))
        for k in before.keys() | after.keys()
        if before.get(k) != after.get(k) and not (k in before and k not in after and (k[1] or k[2]) in going)
    }
    assert changed == {}, changed
