"""`ansible-playbook site.yml -i inventories/local --check` on a first install (issue 27 §3): every layer of the local
inventory enabled, in namespaces that do not exist yet (fresh names, so the session's lab serves as a fresh one: each
role's namespace is created in the same run, and check mode only plans it). The run passes, reports changes (an
object in a namespace the run creates is a would-create, with its diff), and changes nothing: every object of every
listable kind, and the nodes' labels and annotations, are the same before and after.

Before the fix it failed at gpu_sharing "Device-plugin ConfigMap": namespaces "gpu-operator" not found."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from gpuops_lab import nodes as lab_nodes
from gpuops_lab.testing import site_run
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
    r, changed = site_run(cluster, tmp_path, extra, "--check", "--diff")
    out = r.stdout
    assert r.returncode == 0, out[-6000:]
    recap = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)", out)
    assert recap and int(recap.group(1)) > 0, out[-3000:]
    # the object of the issue: reported as a creation (its diff from nothing) in the namespace the run creates
    task = out.split("TASK [gpuops.platform.gpu_sharing : The GPU Operator's namespace, the device-plugin ConfigMap", 1)
    task = task[1].split("TASK [", 1)[0]
    assert f"namespace: chk-{t}-gpu-operator" in task and "changed: [localhost]" in task, task
    assert "gpu-sharing-device-plugin" in task, task
    assert changed == {}, changed
