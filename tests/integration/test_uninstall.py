"""playbooks/uninstall.yml against the real control plane: it refuses while a GPU workload runs (a pod requesting
nvidia.com/gpu, outside the operators' namespaces), naming it, before any role runs; gpuops_uninstall_force lets it
go on, and under --check it plans the removal of everything the switches say is managed without changing anything.
The full install -> uninstall path runs in molecule/site (cleanup is uninstall.yml)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]


def _play(inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    argv = ["ansible-playbook", str(REPO / "playbooks/uninstall.yml"), "-i", str(inventory), *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, check=False)


def _names(listed) -> list[str]:
    return sorted(i.metadata.name for i in listed.items)


def _live_namespaces(core, terminating: set[str] | None = None) -> list[str]:
    """The namespaces, without those an earlier test left terminating (their deletion may end during the run: not a
    change of the play's)."""
    items = core.list_namespace().items
    gone = (
        terminating if terminating is not None else {n.metadata.name for n in items if n.status.phase == "Terminating"}
    )
    return sorted(n.metadata.name for n in items if n.metadata.name not in gone)


@pytest.fixture
def inventory(cluster, tmp_path):
    controller = {
        "localhost": {"ansible_connection": "local", "ansible_python_interpreter": str(REPO / ".venv/bin/python")}
    }
    inv = {
        "all": {
            "vars": {
                "gpuops_kubeconfig": cluster.kubeconfig,
                "gpuops_chart_repo_mirror": cluster.chart_repo_url,
                # every role the playbook can remove; nothing of theirs is installed in these namespaces
                "gpuops_gpu_sharing_managed": True,
                "gpu_operator_namespace": "uninstall-test-gpu-operator",
                "nfd_namespace": "uninstall-test-nfd",
            },
            "children": {"cluster_controller": {"hosts": controller}},
        }
    }
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


def test_refuses_while_a_gpu_workload_runs_then_force_plans_the_removal(cluster, core, namespace, inventory):
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="trainer"),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.invalid/cuda:12",
                    resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": "8"}),
                )
            ],
            node_selector={"gpuops.test/none": "x"},  # stays Pending: a workload waiting for GPUs counts too
        ),
    )
    core.create_namespaced_pod(namespace, pod)

    refused = _play(inventory)
    out = re.sub(r"\s+", " ", refused.stdout)
    assert refused.returncode != 0, refused.stdout
    assert f"GPU workload(s) would lose their GPUs: {namespace}/trainer." in out
    assert "Nothing was changed" in out and "gpuops_uninstall_force=true" in out
    # the input checks ran (preflight), no removal play did
    assert "PLAY [GPU sharing" not in refused.stdout and "PLAY [NVIDIA GPU Operator]" not in refused.stdout

    ext = client.ApiextensionsV1Api(cluster.api_client)
    terminating = {n.metadata.name for n in core.list_namespace().items if n.status.phase == "Terminating"}
    before = (_names(ext.list_custom_resource_definition()), _live_namespaces(core, terminating))
    forced = _play(inventory, "--check", "-e", "gpuops_uninstall_force=true")
    assert forced.returncode == 0, forced.stdout[-3000:]
    for play in ("GPU sharing", "NVIDIA GPU Operator", "Node Feature Discovery"):
        assert f"PLAY [{play}" in forced.stdout
    # check mode plans (it reports the lab's own NFD CRDs as what NFD's purge would delete) and changes nothing
    assert (_names(ext.list_custom_resource_definition()), _live_namespaces(core, terminating)) == before
