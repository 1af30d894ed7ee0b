"""The network kinds of the wait option: rows of _readiness.KINDS whose predicates are _network's."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.status import _network_ready, _readiness


def test_network_kinds_use_the_network_predicates():
    ncp = _readiness.KINDS["NicClusterPolicy"]
    assert (ncp.group, ncp.version, ncp.plural, ncp.namespaced) == (
        "mellanox.com",
        "v1alpha1",
        "nicclusterpolicies",
        False,
    )
    assert ncp.ready is _network_ready.nic_cluster_policy_ready
    for kind in ("MacvlanNetwork", "HostDeviceNetwork", "IPoIBNetwork"):
        k = _readiness.KINDS[kind]
        assert (k.group, k.plural, k.namespaced, k.ready) == (
            "mellanox.com",
            kind.lower() + "s",
            False,
            _network_ready.network_ready,
        )


@pytest.mark.parametrize(
    ("status", "ready"),
    [
        ({"state": "ready", "appliedStates": [{"name": "state-multus-cni", "state": "ready"}]}, True),
        ({"state": "notReady", "appliedStates": [{"name": "state-multus-cni", "state": "notReady"}]}, False),
        ({"state": "ready", "appliedStates": []}, False),  # the section has no status yet
    ],
)
def test_judge_a_nic_cluster_policy(status, ready):
    obj = {
        "metadata": {"name": "nic-cluster-policy"},
        "spec": {"secondaryNetwork": {"multus": {"image": "multus-cni"}}},
        "status": status,
    }
    found = _readiness.judge("NicClusterPolicy", obj)
    assert (found is None) is ready
    if found is not None:
        assert found.kind == "NicClusterPolicy" and found.name == "nic-cluster-policy"
