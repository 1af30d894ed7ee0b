"""The GPU Operator's host guards (roles/gpu_operator/tasks/preflight.yml) on simulated hosts, without a
cluster: they gather the facts themselves (a host without facts is evaluated, not skipped), an unreachable GPU
host stops the cluster-plane change with its name, and `--check` over host prep + guards reports what host_prep
would fix as the plan instead of failing. The driver container stays off (gpu_operator_driver_enabled: false)
so no Node is labelled and no API server is needed; the labelling decision is unit-tested
(tests/unit/plugins/module_utils/test_preflight.py)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from gpuops_lab.testing import dgx_and_l40s

REPO = Path(__file__).resolve().parents[2]
AFTER = "CLUSTER-PLANE CHANGE WOULD START HERE"


def play(inventory: Path, playbook: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    argv = ["ansible-playbook", str(playbook), "-i", str(inventory), *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, check=False)


def guard_play() -> dict:
    return {
        "name": "GPU Operator guards",
        "hosts": "cluster_controller",
        "gather_facts": False,
        "vars": {"gpu_operator_driver_enabled": False},
        "tasks": [
            {
                "name": "Run the gpu_operator preflight",
                "ansible.builtin.include_role": {"name": "gpuops.platform.gpu_operator", "tasks_from": "preflight"},
            },
            {"name": "Mark the first cluster-plane change", "ansible.builtin.debug": {"msg": AFTER}},
        ],
    }


@pytest.fixture
def site(tmp_path):
    """A DGX (host driver 570.124.06 loaded, no fabricmanager) and an L40S, a controller, two playbooks."""
    made, hv = dgx_and_l40s(tmp_path / "hosts")
    controller = {
        "localhost": {"ansible_connection": "local", "ansible_python_interpreter": str(REPO / ".venv/bin/python")}
    }
    # a well-formed kubeconfig for the role's input checks; no test without the lab reaches the API server
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "none", "user": {"token": "unused"}}],
                "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
                "current-context": "none",
            }
        )
    )
    inv = {
        "all": {
            "vars": {"gpuops_kubeconfig": str(kubeconfig)},
            "children": {"gpu_nodes": {"hosts": hv}, "cluster_controller": {"hosts": controller}},
        }
    }
    operators = tmp_path / "operators.yml"
    operators.write_text(yaml.safe_dump([guard_play()]))
    whole = tmp_path / "site.yml"
    whole.write_text(
        yaml.safe_dump([{"ansible.builtin.import_playbook": str(REPO / "playbooks/prepare_hosts.yml")}, guard_play()])
    )
    return {"inv": inv, "dir": tmp_path, "operators": operators, "site": whole}


def write(site: dict, inv: dict) -> Path:
    path = site["dir"] / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


def test_guard_evaluates_a_host_without_facts(site):
    """operators.yml alone: no host_prep ran, so no host has gpuops_host facts. The guards used to skip such
    hosts and pass; now they gather the facts there and stop on the DGX's missing fabricmanager."""
    r = play(write(site, site["inv"]), site["operators"])
    assert r.returncode != 0, r.stdout[-3000:]
    assert "dgx: host preflight: 1 finding(s) at or above error: fabricmanager-missing" in r.stdout, r.stdout[-3000:]
    assert "NVIDIA driver 570.124.06" in r.stdout and "Fix: run host_prep" in r.stdout
    assert AFTER not in r.stdout


def test_unreachable_gpu_host_stops_the_cluster_plane_change(site):
    inv = site["inv"]
    hosts = inv["all"]["children"]["gpu_nodes"]["hosts"]
    del hosts["dgx"]  # the L40S passes the guards on its own
    hosts["gpu-gone"] = {
        "ansible_connection": "ssh",
        "ansible_host": "127.0.0.1",
        "ansible_port": 9,
        "ansible_ssh_common_args": "-o ConnectTimeout=3 -o StrictHostKeyChecking=no -o BatchMode=yes",
    }
    r = play(write(site, inv), site["operators"])
    assert r.returncode != 0, r.stdout[-3000:]
    assert "gpu-gone: GPU host unreachable, so its guards cannot be evaluated" in r.stdout, r.stdout[-3000:]
    assert AFTER not in r.stdout


def test_site_check_on_fresh_hosts_reports_the_plan(site):
    """site --check: host_prep would install fabricmanager on the DGX in this run, so the guard reports the
    missing fabricmanager as planned (a warning) instead of failing the cluster plane."""
    inv = write(site, site["inv"])
    r = play(inv, site["site"], "--check")
    assert r.returncode == 0, r.stdout[-5000:]
    # (the callback wraps long lines: match across whitespace)
    assert re.search(r"dgx:\s+warning:\s+fabricmanager-missing", r.stdout), r.stdout[-5000:]
    assert re.search(r"\[planned:\s+a\s+fix\s+in\s+this\s+run\s+addresses\s+it\]", r.stdout)
    assert AFTER in r.stdout
    # operators.yml alone, also in check mode, still stops: nothing in that run fixes it
    r = play(inv, site["operators"], "--check")
    assert r.returncode != 0 and "fabricmanager-missing" in r.stdout, r.stdout[-3000:]


def test_host_driver_node_is_labelled_from_the_guard_results(site, cluster, add_nodes, core):
    """A real run of host prep + the guards with the driver container and host-driver nodes excluded: the DGX
    (host driver loaded) gets nvidia.com/gpu.deploy.driver=false on its Kubernetes node, the L40S (no host
    driver) does not; the labels come from gpu_host_preflight's node_labels, not from Jinja over hostvars."""
    dgx_node, l40s_node = add_nodes("dgx-h100", 1)[0], add_nodes("pcie-l40s", 1)[0]
    inv = site["inv"]
    hosts = inv["all"]["children"]["gpu_nodes"]["hosts"]
    hosts["dgx"]["gpuops_node_name"] = dgx_node
    hosts["l40s"]["gpuops_node_name"] = l40s_node
    inv["all"]["vars"]["gpuops_kubeconfig"] = cluster.kubeconfig
    play_ = guard_play()
    play_["vars"] = {"gpu_operator_driver_enabled": True, "gpu_operator_exclude_host_driver_nodes": True}
    pb = site["dir"] / "site-driver-container.yml"
    pb.write_text(
        yaml.safe_dump([{"ansible.builtin.import_playbook": str(REPO / "playbooks/prepare_hosts.yml")}, play_])
    )
    r = play(write(site, inv), pb)
    assert r.returncode == 0, r.stdout[-5000:]
    assert re.search(re.escape(dgx_node) + r":\s+info:\s+host-driver-node-excluded", r.stdout), r.stdout[-5000:]
    labels = {n: core.read_node(n).metadata.labels or {} for n in (dgx_node, l40s_node)}
    assert labels[dgx_node].get("nvidia.com/gpu.deploy.driver") == "false", labels[dgx_node]
    assert (
        "nvidia.com/gpu.deploy.driver" not in labels[l40s_node]
        or labels[l40s_node]["nvidia.com/gpu.deploy.driver"] != "false"
    )


def test_uninstall_removes_the_driver_labels_the_guards_set_and_keeps_the_users(site, cluster, add_nodes, core):
    """Issue 27 §7: the guards label the DGX's node nvidia.com/gpu.deploy.driver=false (server-side apply, field
    manager gpuops-gpu-operator-guards); gpu_operator_state absent (uninstall.yml) removes that label - --check first
    changes nothing - and keeps the same label a user set by hand on another node."""
    dgx_node, users_node = add_nodes("dgx-h100", 2)
    inv = site["inv"]
    inv["all"]["children"]["gpu_nodes"]["hosts"]["dgx"]["gpuops_node_name"] = dgx_node
    inv["all"]["vars"]["gpuops_kubeconfig"] = cluster.kubeconfig
    del inv["all"]["children"]["gpu_nodes"]["hosts"]["l40s"]
    play_ = guard_play()
    play_["vars"] = {"gpu_operator_driver_enabled": True, "gpu_operator_exclude_host_driver_nodes": True}
    pb = site["dir"] / "site-driver-container.yml"
    pb.write_text(
        yaml.safe_dump([{"ansible.builtin.import_playbook": str(REPO / "playbooks/prepare_hosts.yml")}, play_])
    )
    r = play(write(site, inv), pb)
    assert r.returncode == 0, r.stdout[-5000:]
    label = "nvidia.com/gpu.deploy.driver"
    core.patch_node(users_node, {"metadata": {"labels": {label: "false"}}})  # by hand, as kubectl label does
    assert core.read_node(dgx_node).metadata.labels.get(label) == "false"

    absent = site["dir"] / "gpu-operator-absent.yml"
    absent.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "GPU Operator absent",
                    "hosts": "cluster_controller",
                    "gather_facts": False,
                    "roles": [
                        {
                            "role": "gpuops.platform.gpu_operator",
                            "vars": {
                                "gpu_operator_state": "absent",
                                "gpu_operator_namespace": f"guards-{dgx_node}"[:63],
                                "gpuops_chart_repo_mirror": cluster.chart_repo_url,
                            },
                        }
                    ],
                }
            ]
        )
    )
    r = play(write(site, inv), absent, "--check")
    assert r.returncode == 0, r.stdout[-5000:]
    assert core.read_node(dgx_node).metadata.labels.get(label) == "false", "check mode changed the node"
    r = play(write(site, inv), absent)
    assert r.returncode == 0, r.stdout[-5000:]
    assert label not in (core.read_node(dgx_node).metadata.labels or {}), "the guards' label is left"
    assert core.read_node(users_node).metadata.labels.get(label) == "false", "the user's label was removed"
