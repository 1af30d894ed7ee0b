"""What the network_operator role owns, as tables: the owner labels, pruning (only labelled objects of the prunable
kinds that the variables dropped, networks before pools) and the landing check (every wanted leaf, type included;
fields the live object adds are not differences)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network as net
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network_owned as own

CFG = {
    "namespace": "net",
    "ipoib_enabled": True,
    "ip_pools": [
        {"name": "pool-a", "subnet": "192.168.0.0/16", "perNodeBlockSize": 64, "gateway": "192.168.0.1"},
        {"name": "pool-b", "subnet": "10.10.0.0/16", "perNodeBlockSize": 32},
    ],
    "macvlan_networks": [{"name": "roce", "master": "ens1f0np0", "mtu": 9000, "ip_pool": "pool-a"}],
    "ipoib_networks": [{"name": "ib", "master": "ibp26s0", "ip_pool": "pool-b"}],
}
WANTED = [own.owned(o) for o in net.network_objects(CFG)]
POLICY = net.nic_cluster_policy({"tolerations": [{"key": "k", "operator": "Exists"}], "ofed_driver_enabled": False})


def live(obj: dict[str, Any], **meta: Any) -> dict[str, Any]:
    """As the API server returns it: server fields added."""
    out = copy.deepcopy(obj)
    out["metadata"].update({"uid": "u", "resourceVersion": "1", **meta})
    out["status"] = {"state": "ready"}
    return out


def ref(kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    api = "nv-ipam.nvidia.com/v1alpha1" if kind == "IPPool" else "mellanox.com/v1alpha1"
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": api, "kind": kind, "metadata": meta}


def test_owned_adds_the_labels_and_keeps_the_objects_own():
    obj = {"kind": "IPPool", "metadata": {"name": "p", "labels": {"team": "ml"}}}
    out = own.owned(obj)
    assert out["metadata"]["labels"] == {"team": "ml", **own.OWNER_LABELS}
    assert obj["metadata"]["labels"] == {"team": "ml"}  # input untouched
    assert own.OWNER_SELECTOR == "app.kubernetes.io/managed-by=gpuops.platform,gpuops.platform/role=network_operator"


HAND_MADE = {"apiVersion": "mellanox.com/v1alpha1", "kind": "MacvlanNetwork", "metadata": {"name": "by-hand"}}


def prune(wanted, cluster):
    """What k8s_apply's prune deletes with the role's option (PRUNE: its labels, its kinds in delete order)."""
    return _owned.prune_objects(wanted, cluster, own.PRUNE["labels"], [k["kind"] for k in own.PRUNE["kinds"]])


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        pytest.param(WANTED, [], id="all-wanted"),
        pytest.param(
            [o for o in WANTED if o["metadata"]["name"] != "ib"], [ref("IPoIBNetwork", "ib")], id="one-network-dropped"
        ),
        pytest.param(
            [o for o in WANTED if o["metadata"]["name"] not in ("pool-b", "ib")],
            [ref("IPoIBNetwork", "ib"), ref("IPPool", "pool-b", "net")],
            id="network-before-its-pool",
        ),
        pytest.param(
            [],
            [
                ref("MacvlanNetwork", "roce"),
                ref("IPoIBNetwork", "ib"),
                ref("IPPool", "pool-a", "net"),
                ref("IPPool", "pool-b", "net"),
            ],
            id="all-dropped",
        ),
        pytest.param(
            # the same pool wanted in another namespace: the old one goes
            [own.owned(net.ip_pool(CFG["ip_pools"][0], "other"))] + [o for o in WANTED if o["kind"] != "IPPool"],
            [ref("IPPool", "pool-a", "net"), ref("IPPool", "pool-b", "net")],
            id="namespace-moved",
        ),
    ],
)
def test_prune_deletes_only_what_the_role_made_and_dropped(wanted, expected):
    cluster = [live(o) for o in WANTED] + [live(HAND_MADE), live(own.owned(POLICY))]
    assert prune(wanted, cluster) == expected


def test_prune_ignores_unlabelled_and_foreign_objects():
    other_role = own.owned(HAND_MADE)
    other_role["metadata"]["labels"]["gpuops.platform/role"] = "sriov_network_operator"
    assert prune([], [live(HAND_MADE), live(other_role), live(own.owned(POLICY))]) == []


LANDED = [live(o) for o in [POLICY, *WANTED]]


def changed(kind: str, path: tuple[Any, ...], value: Any) -> list[dict[str, Any]]:
    """The live objects with one field of one kind's object set (None: deleted)."""
    out = copy.deepcopy(LANDED)
    obj = next(o for o in out if o["kind"] == kind)
    node = obj
    for k in path[:-1]:
        node = node[k]
    if value is None:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("cluster", "evidence"),
    [
        pytest.param(LANDED, [], id="all-landed"),
        pytest.param(
            changed("NicClusterPolicy", ("spec", "upgradePolicyDefaults"), {"x": 1}), [], id="live-extra-field-is-fine"
        ),
        pytest.param(
            changed("NicClusterPolicy", ("spec", "tolerations"), None),
            [
                'NicClusterPolicy nic-cluster-policy: spec.tolerations: wanted [{"key": "k", "operator": "Exists"}], '
                "live (absent)"
            ],
            id="pruned-by-the-crd",
        ),
        pytest.param(
            changed("NicClusterPolicy", ("spec", "nvIpam", "enableWebhook"), True),
            ["NicClusterPolicy nic-cluster-policy: spec.nvIpam.enableWebhook: wanted false, live true"],
            id="changed-by-another-writer",
        ),
        pytest.param(
            changed("IPPool", ("spec", "perNodeBlockSize"), "64"),
            ['IPPool pool-a: spec.perNodeBlockSize: wanted 64, live "64"'],
            id="type-counts",
        ),
        pytest.param(
            changed("MacvlanNetwork", ("spec", "mtu"), 1500),
            ["MacvlanNetwork roce: spec.mtu: wanted 9000, live 1500"],
            id="network-field",
        ),
        pytest.param(
            changed("MacvlanNetwork", ("metadata", "labels"), {}),
            [
                'MacvlanNetwork roce: metadata.labels.app.kubernetes.io/managed-by: wanted "gpuops.platform", live '
                "(absent)",
                'MacvlanNetwork roce: metadata.labels.gpuops.platform/role: wanted "network_operator", live (absent)',
            ],
            id="owner-labels",
        ),
        pytest.param(
            [o for o in LANDED if o["kind"] != "IPoIBNetwork"],
            ["IPoIBNetwork ib: IPoIBNetwork ib: not found after it was applied"],
            id="missing",
        ),
    ],
)
def test_landing_names_field_wanted_and_live(cluster, evidence):
    found = own.landing_findings([POLICY, *WANTED], cluster)
    assert [f"{f['object']['kind']} {f['object']['name']}: {e}" for f in found for e in f["evidence"]] == evidence
    assert all(f["id"] == "network-object-not-landed" and f["severity"] == "error" for f in found)


@pytest.mark.parametrize(
    ("want", "have", "diffs"),
    [
        ({"a": [1, 2]}, {"a": [1, 2, 3]}, [("a", [1, 2], [1, 2, 3])]),
        ({"a": [{"k": 1}]}, {"a": [{"k": 1, "default": True}]}, []),
        ({"a": True}, {"a": 1}, [("a", True, 1)]),
        ({"a": {"b": 1}}, {"a": "x"}, [("a", {"b": 1}, "x")]),
    ],
)
def test_differences(want, have, diffs):
    assert _owned.differences(want, have) == diffs
