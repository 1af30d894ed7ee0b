"""DRA against the real kube-scheduler of the lab (Kubernetes 1.34: resource.k8s.io/v1 served and the scheduler's
DynamicResources plugin on by default, the kube-controller-manager's resourceclaim controller creating claims
from templates): the fixture chart dra-driver-nvidia-gpu 0.4.1 installs the DeviceClasses and the kubelet-plugin
DaemonSet, the simulator's kubelet plugin (an in-process instance for this test's node) publishes the node's
ResourceSlice, and the scheduler places the pods of every example the gpu_sharing role ships
(roles/gpu_sharing/files/examples/dra: one GPU, two GPUs, a GPU selected by its memory; 4 GPUs together, the
node's 4) and leaves one asking for more GPUs than any node has Pending."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from gpuops_lab.k8s import wait_for
from gpuops_lab.simulator.framework import RealClient, Simulator
from gpuops_lab.simulator.handlers.dra import DraKubeletPluginHandler, slice_name
from gpuops_lab.simulator.handlers.nvidia import INSTANCE_LABEL, KWOK_TOLERATION
from kubernetes import client

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "tests/fixtures/charts/dra-driver-nvidia-gpu/0.4.1"
EXAMPLES = sorted((REPO / "roles/gpu_sharing/files/examples/dra").glob("*.yaml"))
WAIT = 30.0


@pytest.fixture
def dra_sim(cluster, namespace) -> Iterator[Simulator]:
    sim = Simulator(
        RealClient.from_kubeconfig(cluster.kubeconfig),
        [DraKubeletPluginHandler(instance=namespace)],
        resync_period=2.0,
        watch_timeout=30,
    )
    sim.start()
    try:
        assert sim.wait_ready(30), "simulator watches not established within 30s"
        yield sim
    finally:
        sim.stop()


def _helm(cluster, *args: str, stdin: str | None = None) -> None:
    helm = str(cluster.cfg.binary("helm"))
    r = subprocess.run(  # noqa: S603
        [helm, "--kubeconfig", cluster.kubeconfig, *args], input=stdin, capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stderr or r.stdout


def _claim_pod(namespace: str, name: str, template: str, node_selector: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": node_selector,
            "tolerations": [KWOK_TOLERATION],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [{"name": "main", "image": "example.com/cuda:1", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def _template(namespace: str, name: str, count: int) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]
                }
            }
        },
    }


def test_real_scheduler_allocates_gpus_from_simulated_slices(cluster, namespace, core, add_nodes, dra_sim):
    (node,) = add_nodes("pcie-l40s", 1, labelled=False)
    core.patch_node(node, {"metadata": {"labels": {INSTANCE_LABEL: namespace}}})
    selector = {INSTANCE_LABEL: namespace}
    values = {
        "gpuResourcesEnabledOverride": True,
        "resources": {"computeDomains": {"enabled": False}},
        "kubeletPlugin": {"nodeSelector": selector, "tolerations": [KWOK_TOLERATION]},
    }
    release = f"dra-{namespace}"
    _helm(cluster, "install", release, str(CHART), "-n", namespace, "--values", "-", stdin=json.dumps(values))
    custom = client.CustomObjectsApi(cluster.api_client)
    try:
        assert wait_for(lambda: _slice(custom, node) is not None, WAIT), "no ResourceSlice for the DRA node"
        devices = _slice(custom, node)["spec"]["devices"]
        assert len(devices) == 4
        pods = [_apply_example(custom, core, namespace, path, selector) for path in EXAMPLES]
        assert len(pods) == 3, EXAMPLES
        custom.create_namespaced_custom_object(
            "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", _template(namespace, "five-gpus", 5)
        )
        core.create_namespaced_pod(namespace, _claim_pod(namespace, "too-big", "five-gpus", selector))
        for pod in pods:
            assert wait_for(lambda p=pod: core.read_namespaced_pod(p, namespace).spec.node_name == node, WAIT), pod
        claims = custom.list_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims")["items"]
        results = [
            r
            for c in claims
            if (c.get("status") or {}).get("allocation")
            for r in c["status"]["allocation"]["devices"]["results"]
        ]
        # 1 + 2 + 1: every GPU of the node, each once
        assert sorted(r["device"] for r in results) == sorted(d["name"] for d in devices)
        assert {(r["driver"], r["pool"]) for r in results} == {("gpu.nvidia.com", node)}

        def unschedulable() -> str | None:
            pod = core.read_namespaced_pod("too-big", namespace)
            cond = next((c for c in pod.status.conditions or () if c.type == "PodScheduled"), None)
            return cond.message if cond is not None and cond.reason == "Unschedulable" else None

        assert wait_for(lambda: unschedulable() is not None, WAIT)
        assert core.read_namespaced_pod("too-big", namespace).spec.node_name is None
        assert "cannot allocate all claims" in (unschedulable() or ""), unschedulable()
    finally:
        for pod in ("too-big", *(p.stem for p in EXAMPLES)):
            try:
                core.delete_namespaced_pod(pod, namespace, grace_period_seconds=0)
            except client.ApiException:
                pass
        _helm(cluster, "uninstall", release, "-n", namespace, "--wait")
    assert wait_for(lambda: _slice(custom, node) is None, WAIT), "ResourceSlice left after the uninstall"


def _apply_example(custom, core, namespace: str, path: Path, selector: dict[str, str]) -> str:
    """Create a shipped example's ResourceClaimTemplate and Pod in ``namespace`` (as ``kubectl apply -n``), the pod
    pinned to this test's node (the simulator instance) and tolerating kwok's taint; returns the pod's name."""
    pod_name = ""
    (listed,) = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))  # one document: a v1 List
    assert listed["kind"] == "List", path
    for doc in listed["items"]:
        if doc["kind"] == "ResourceClaimTemplate":
            custom.create_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaimtemplates", doc)
        else:
            assert doc["kind"] == "Pod", path
            doc["spec"]["nodeSelector"] = selector
            doc["spec"]["tolerations"] = [*doc["spec"].get("tolerations", []), KWOK_TOLERATION]
            core.create_namespaced_pod(namespace, doc)
            pod_name = doc["metadata"]["name"]
    assert pod_name == path.stem, f"{path}: the pod is named after the file"
    return pod_name


def _slice(custom: client.CustomObjectsApi, node: str) -> dict | None:
    try:
        return custom.get_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", slice_name(node))
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
