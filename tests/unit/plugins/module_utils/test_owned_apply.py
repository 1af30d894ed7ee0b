"""_owned's check-mode split (objects in a namespace the run only plans are would-create, issue 27 §3) and the labels
a field manager set (uninstall removes the guards' driver labels and only those, issue 27 §7)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.action.k8s_apply import definitions_of, merge_results
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned


def _cm(name, namespace=None):
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


@pytest.mark.parametrize(
    ("objs", "live", "default", "apply", "planned"),
    [
        # the namespace exists: dry-run by the API server
        ([_cm("a", "gpu-operator")], ["gpu-operator"], None, ["a"], []),
        # a fresh cluster: the run creates gpu-operator first, check mode only plans it
        ([_cm("a", "gpu-operator")], ["default"], None, [], ["a"]),
        # mixed: each object on its own
        ([_cm("a", "research"), _cm("b", "inference")], ["research"], None, ["a"], ["b"]),
        # the task's namespace for objects that name none
        ([_cm("a")], ["default"], "gpu-operator", [], ["a"]),
        ([_cm("a")], ["gpu-operator"], "gpu-operator", ["a"], []),
        # cluster-scoped (no namespace either way): applied
        ([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}], [], None, ["x"], []),
    ],
)
def test_split_on_missing_namespaces(objs, live, default, apply, planned):
    got_apply, got_planned = _owned.split_on_missing_namespaces(objs, live, default)
    assert [o["metadata"]["name"] for o in got_apply] == apply
    assert [o["metadata"]["name"] for o in got_planned] == planned


def test_planned_creation_is_a_change_with_the_object_as_diff():
    got = _owned.planned_creation(_cm("a"), "gpu-operator")
    want = {**_cm("a", "gpu-operator")}
    assert got["changed"] is True and got["method"] == "create"
    assert got["result"] == want and got["diff"] == {"before": {}, "after": want}
    assert "would create ConfigMap gpu-operator/a" in got["msg"] and "namespace does not exist yet" in got["msg"]


def test_merge_results_shapes_one_or_several_as_kubernetes_core_does():
    one = _owned.planned_creation(_cm("a", "x"))
    assert merge_results(None, [one], diff=True) == one
    assert "diff" not in merge_results(None, [one], diff=False)
    applied = {"changed": False, "method": "apply", "result": {"metadata": {"name": "b"}}, "diff": {}}
    got = merge_results(applied, [one], diff=True)
    assert got["changed"] is True
    assert [r.get("method") for r in got["result"]["results"]] == ["apply", "create"]
    assert got["diff"] == [one["diff"]]
    several = {"changed": True, "result": {"results": [{"changed": True}, {"changed": False}]}}
    assert len(merge_results(several, [one], diff=False)["result"]["results"]) == 3


@pytest.mark.parametrize(
    ("definition", "want"),
    [
        (None, None),
        (_cm("a"), 1),
        ([_cm("a"), _cm("b")], 2),
        ("kind: ConfigMap\nmetadata: {name: a}\n---\nkind: ConfigMap\nmetadata: {name: b}\n", 2),
    ],
)
def test_definitions_of(definition, want):
    got = definitions_of(definition)
    assert (None if got is None else len(got)) == want


def _node(labels, *entries):
    managed = [
        {"manager": m, "operation": op, "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in keys}}}}
        for m, op, keys in entries
    ]
    return {"metadata": {"name": "n", "labels": labels, "managedFields": managed}}


DRIVER = "nvidia.com/gpu.deploy.driver"
GUARDS = "gpuops-gpu-operator-guards"


@pytest.mark.parametrize(
    ("node", "want"),
    [
        # the guards set it: removed at uninstall
        (_node({DRIVER: "false"}, (GUARDS, "Apply", [DRIVER])), [DRIVER]),
        # a user had set it too (kubectl label): theirs as well, kept
        (_node({DRIVER: "false"}, (GUARDS, "Apply", [DRIVER]), ("kubectl-label", "Update", [DRIVER])), []),
        # set by someone else only: never touched
        (_node({DRIVER: "false"}, ("kubectl-label", "Update", [DRIVER])), []),
        # the guards' other labels are not asked for
        (_node({DRIVER: "false", "x": "1"}, (GUARDS, "Apply", [DRIVER, "x"])), [DRIVER]),
        # gone already (managedFields lag nothing, but be safe): nothing to remove
        (_node({}, (GUARDS, "Apply", [DRIVER])), []),
        ({"metadata": {"name": "n"}}, []),
    ],
)
def test_labels_set_by(node, want):
    assert _owned.labels_set_by(node, GUARDS, [DRIVER]) == want


def test_the_filter_gives_the_object_to_apply_that_releases_the_labels():
    from ansible_collections.gpuops.platform.plugins.filter.labels_set_by import labels_set_by

    mine = _node({DRIVER: "false"}, (GUARDS, "Apply", [DRIVER]))
    theirs = {**_node({DRIVER: "false"}, ("kubectl-label", "Update", [DRIVER])), "kind": "Node"}
    theirs["metadata"] = {**theirs["metadata"], "name": "m"}
    partial = {**mine, "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata"}  # a metadata-only read
    assert labels_set_by([partial, theirs], GUARDS, [DRIVER]) == [
        {"name": "n", "labels": [DRIVER], "release": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}}
    ]


def _obj(api_version, kind, name="x"):
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}


def test_custom_kinds_are_those_no_builtin_group_serves_in_first_seen_order():
    objs = [
        _obj("v1", "ConfigMap"),
        _obj("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
        _obj("apps/v1", "Deployment"),
        _obj("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
        _obj("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "y"),
        _obj("networking.k8s.io/v1", "NetworkPolicy"),
        _obj("rbac.authorization.k8s.io/v1", "Role"),
        _obj("monitoring.coreos.com/v1", "ServiceMonitor"),
    ]
    assert _owned.custom_kinds(objs) == [
        ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
        ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
        ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ]


def test_split_on_missing_kinds_plans_the_objects_whose_kind_is_not_served():
    objs = [
        _obj("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "a"),
        _obj("v1", "Namespace", "t"),
        _obj("kueue.x-k8s.io/v1beta2", "ClusterQueue", "q"),
    ]
    apply, planned = _owned.split_on_missing_kinds(objs, [("kueue.x-k8s.io/v1beta2", "ClusterQueue")])
    assert [o["metadata"]["name"] for o in apply] == ["a", "t"]
    assert [o["metadata"]["name"] for o in planned] == ["q"]
    assert _owned.split_on_missing_kinds(objs, []) == (objs, [])


def test_a_planned_creation_of_a_missing_kind_says_why():
    got = _owned.planned_creation(_obj("kueue.x-k8s.io/v1beta2", "ClusterQueue", "team-a"), missing="kind")
    assert got["changed"] is True and got["method"] == "create"
    assert got["msg"].startswith(
        "would create ClusterQueue team-a: the API server does not serve kueue.x-k8s.io/v1beta2"
    )
    assert "installs its CRD first" in got["msg"]
    ns = _owned.planned_creation({**_obj("kueue.x-k8s.io/v1beta2", "LocalQueue", "lq")}, "team-a", missing="kind")
    assert ns["result"]["metadata"]["namespace"] == "team-a" and "LocalQueue team-a/lq" in ns["msg"]
