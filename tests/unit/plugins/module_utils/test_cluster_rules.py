from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _cluster_rules


def _ds(ns, name="nfd-worker", release="nfd"):
    return {"metadata": {"namespace": ns, "name": name, "labels": {"app.kubernetes.io/instance": release}}}


SECOND_NFD = [
    # (workers, the role's namespace, expected (id, namespace/name) pairs)
    ([], "node-feature-discovery", []),
    ([_ds("node-feature-discovery")], "node-feature-discovery", []),
    (
        [_ds("node-feature-discovery"), _ds("gpu-operator", "gpu-operator-node-feature-discovery-worker", "gpu-op")],
        "node-feature-discovery",
        [("nfd-second-instance", "gpu-operator/gpu-operator-node-feature-discovery-worker")],
    ),
    # the role's NFD not installed yet, a bundled one present
    (
        [_ds("nvidia-network-operator")],
        "node-feature-discovery",
        [("nfd-second-instance", "nvidia-network-operator/nfd-worker")],
    ),
    # a worker without metadata labels still counts
    (
        [{"metadata": {"namespace": "other", "name": "w"}}],
        "node-feature-discovery",
        [("nfd-second-instance", "other/w")],
    ),
]


@pytest.mark.parametrize(("workers", "namespace", "expected"), SECOND_NFD)
def test_second_nfd(workers, namespace, expected):
    found = _cluster_rules.second_nfd(workers, namespace)
    assert [(f["id"], f"{f['object']['namespace']}/{f['object']['name']}") for f in found] == expected
    for f in found:
        assert f["severity"] == "error" and f["fix"] and f["cause"] and f["evidence"]


def test_second_nfd_names_the_release():
    (f,) = _cluster_rules.second_nfd([_ds("gpu-operator", release="gpu-operator-1")], "nfd")
    assert "release gpu-operator-1" in f["evidence"][0]
