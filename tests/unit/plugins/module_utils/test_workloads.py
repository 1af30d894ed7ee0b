"""_workloads: the pods that hold or wait for GPUs (what uninstall.yml refuses to pull the GPU stack from under)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.status import _workloads


def _pod(ns, name, resources=None, phase="Running", node="n1", claims=None, init=False):
    container = {"name": "c", "resources": resources or {}}
    spec = {"initContainers" if init else "containers": [container], "nodeName": node}
    if claims:
        spec["resourceClaims"] = claims
    return {"metadata": {"namespace": ns, "name": name}, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        (_pod("ml", "a", {"limits": {"nvidia.com/gpu": "1"}}), ["nvidia.com/gpu"]),
        (_pod("ml", "b", {"requests": {"nvidia.com/gpu.shared": "1", "cpu": "1"}}), ["nvidia.com/gpu.shared"]),
        (_pod("ml", "c", {"limits": {"nvidia.com/mig-1g.10gb": "1"}}, init=True), ["nvidia.com/mig-1g.10gb"]),
        (_pod("ml", "d", {"limits": {"amd.com/gpu": "2"}}), ["amd.com/gpu"]),
        (_pod("ml", "e", claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]), ["resourceClaims"]),
        (_pod("ml", "f", {"limits": {"cpu": "2", "rdma/rdma_ib": "1"}}), []),
    ],
)
def test_gpu_resources(pod, want):
    assert _workloads.gpu_resources(pod) == want


def test_gpu_workloads_skip_operators_and_finished_pods():
    pods = [
        _pod("gpu-operator", "nvidia-cuda-validator", {"limits": {"nvidia.com/gpu": "1"}}),
        _pod("ml", "done", {"limits": {"nvidia.com/gpu": "1"}}, phase="Succeeded"),
        _pod("ml", "failed", {"limits": {"nvidia.com/gpu": "1"}}, phase="Failed"),
        _pod("ml", "waiting", {"limits": {"nvidia.com/gpu": "8"}}, phase="Pending", node=None),
        _pod("ai", "serve", {"limits": {"nvidia.com/gpu.shared": "1"}}),
        _pod("ml", "cpu-only", {"limits": {"cpu": "1"}}),
    ]
    got = _workloads.gpu_workloads(pods, {"gpu-operator"})
    assert got == [
        {"namespace": "ai", "name": "serve", "node": "n1", "phase": "Running", "resources": ["nvidia.com/gpu.shared"]},
        {"namespace": "ml", "name": "waiting", "node": None, "phase": "Pending", "resources": ["nvidia.com/gpu"]},
    ]
    assert _workloads.gpu_workloads(None) == []
