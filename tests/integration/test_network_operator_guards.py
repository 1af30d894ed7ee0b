"""The Network Operator's host guards (roles/network_operator/tasks/preflight.yml) on simulated hosts, without a
cluster: the hosts' NICs and MOFED are read with gpu_host_facts (no host_prep ran), the rules are _network's
(nic_selector_findings, mofed_findings through the network_host_findings filter), an error stops the run before
the first cluster-plane change and names the NICs the hosts have; an unreachable host stops it too."""

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


def flat(text: str) -> str:
    """The output with the callback's line wrapping undone."""
    return re.sub(r"\s+", " ", text)


@pytest.fixture
def site(tmp_path):
    """A DGX (8 ConnectX-7 InfiniBand, MLNX_OFED 24.10 on the host) and an L40S (2 ConnectX-6 Dx RoCE, inbox RDMA
    stack), a controller and a playbook that runs the role's preflight, then marks the first change."""
    _made, hv = dgx_and_l40s(tmp_path / "hosts")
    # MLNX_OFED ships /usr/bin/ofed_info, which gpu_host_facts reads: the simulated DGX has it from its profile's
    # host.ofed (hack/gpuops_lab/hostsim/packages.py ofed_info_tool), the L40S (inbox stack) has none
    assert (Path(hv["dgx"]["gpuops_hostsim_tree"]) / "usr/bin/ofed_info").is_file()
    assert not (Path(hv["l40s"]["gpuops_hostsim_tree"]) / "usr/bin/ofed_info").exists()
    controller = {
        "localhost": {"ansible_connection": "local", "ansible_python_interpreter": str(REPO / ".venv/bin/python")}
    }
    kubeconfig = tmp_path / "kubeconfig"  # well-formed for the input checks; no API server is reached
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
    return {"inv": inv, "dir": tmp_path}


def run(site: dict, variables: dict, *args: str) -> subprocess.CompletedProcess[str]:
    playbook = site["dir"] / "guards.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Network Operator guards",
                    "hosts": "cluster_controller",
                    "gather_facts": False,
                    "vars": variables,
                    "tasks": [
                        {
                            "name": "Run the network_operator preflight",
                            "ansible.builtin.include_role": {
                                "name": "gpuops.platform.network_operator",
                                "tasks_from": "preflight",
                            },
                        },
                        {"name": "Mark the first cluster-plane change", "ansible.builtin.debug": {"msg": AFTER}},
                    ],
                }
            ]
        )
    )
    inventory = site["dir"] / "inventory.yml"
    inventory.write_text(yaml.safe_dump(site["inv"]))
    return play(inventory, playbook, *args)


def test_driver_container_on_a_host_with_mofed_stops_the_run(site):
    r = run(site, {})
    out = flat(r.stdout)
    assert r.returncode != 0, r.stdout[-3000:]
    assert re.search(r"\[host-ofed-with-doca-driver\] \S+ dgx\b", out), r.stdout[-3000:]
    assert "l40s" not in out.split("[host-ofed-with-doca-driver]", 1)[1].split("||")[0]  # inbox stack: no finding
    assert "network_operator_allow_host_mofed: true" in out, r.stdout[-3000:]
    assert AFTER not in r.stdout


def test_selector_matching_no_nic_names_the_nics_the_hosts_have(site):
    variables = {
        "network_operator_allow_host_mofed": True,
        "network_operator_rdma_shared_resources": [{"name": "rdma_x", "rdmaHcaMax": 8, "deviceIDs": ["101b"]}],
    }
    r = run(site, variables)
    out = flat(r.stdout)
    assert r.returncode != 0, r.stdout[-3000:]
    assert "[network-selector-matches-no-nic] variable network_operator_rdma_shared_resources[0]" in out, out[-3000:]
    assert "the resource rdma_x selects no NIC of any inventory host" in out, r.stdout[-3000:]
    # the evidence: every NIC of every host, as gpu_host_facts reads it on the simulated hosts
    assert re.search(r"dgx: 0000:14:00\.0 15b3:1021 \S*.*?mlx5_core infiniband rdma mlx5_\d", out), out[-3000:]
    assert re.search(r"l40s: \S+ 15b3:101d .*?ether", out), out[-3000:]
    assert AFTER not in r.stdout


def test_matching_selectors_and_accepted_mofed_pass_with_a_warning(site):
    variables = {
        "network_operator_allow_host_mofed": True,
        "network_operator_rdma_shared_resources": [
            {"name": "rdma_ib", "rdmaHcaMax": 63, "vendors": ["15b3"], "linkTypes": ["infiniband"]}
        ],
    }
    r = run(site, variables)
    out = flat(r.stdout)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "warning: [host-ofed-with-doca-driver]" in out, out[-3000:]
    assert "accepted: network_operator_allow_host_mofed is true" in out, out[-3000:]
    assert AFTER in r.stdout
    # also in check mode: the facts are read (read-only), the same verdict
    assert run(site, variables, "--check").returncode == 0


def test_unreachable_host_stops_the_run(site):
    hosts = site["inv"]["all"]["children"]["gpu_nodes"]["hosts"]
    del hosts["dgx"]
    hosts["nic-gone"] = {
        "ansible_connection": "ssh",
        "ansible_host": "127.0.0.1",
        "ansible_port": 9,
        "ansible_ssh_common_args": "-o ConnectTimeout=3 -o StrictHostKeyChecking=no -o BatchMode=yes",
    }
    r = run(site, {})
    assert r.returncode != 0, r.stdout[-3000:]
    out = flat(r.stdout)
    assert "[network-host-unreachable] host nic-gone: gpu_host_facts could not reach nic-gone" in out, r.stdout[-3000:]
    assert "so its NICs and MOFED cannot be judged" in out and "remove it from the gpu_nodes group" in out
    assert AFTER not in r.stdout
