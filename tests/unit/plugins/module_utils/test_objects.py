"""_objects (module cluster_objects_info): the GET paths of each read, k8s_info's answer shape, discovery once per
group version, kinds not served, named objects missing, skipped reads, errors naming the read, unique keys."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s, _objects

CORE = {
    "resources": [
        {"name": "namespaces", "kind": "Namespace", "namespaced": False},
        {"name": "configmaps", "kind": "ConfigMap", "namespaced": True},
        {"name": "pods", "kind": "Pod", "namespaced": True},
        {"name": "pods/log", "kind": "Pod", "namespaced": True},  # a subresource: never the kind's plural
    ]
}
MON = {"resources": [{"name": "servicemonitors", "kind": "ServiceMonitor", "namespaced": True}]}


class FakeReader(_k8s.Reader):
    """The Reader over canned answers by path (404 for any path not given; an int answer is that HTTP status)."""

    def __init__(self, answers):
        super().__init__()
        self.answers, self.paths, self.accepts = answers, [], {}

    def _get(self, what, path, missing_ok=False, verb="list", accept=None):
        self.requests += 1
        self.paths.append(path)
        self.accepts[path] = accept
        got = self.answers.get(path, 404)
        if got == 404 and missing_ok:
            return None
        if isinstance(got, int):
            raise _k8s.ClusterAccessError(_k8s._http_message(what, got, "Forbidden", b"", verb), status=got)
        return got


def q(**kw):
    return {k: kw.get(k, v.get("default")) for k, v in _objects.QUERY_SPEC.items()} | {"kind": kw["kind"]}


@pytest.mark.parametrize(
    ("api_version", "plural", "namespaced", "kw", "want"),
    [
        ("v1", "namespaces", False, {"name": "gpu-operator"}, "/api/v1/namespaces/gpu-operator"),
        ("v1", "namespaces", False, {"namespace": "x"}, "/api/v1/namespaces"),  # cluster-scoped: namespace ignored
        ("v1", "configmaps", True, {"namespace": "mon"}, "/api/v1/namespaces/mon/configmaps"),
        ("v1", "configmaps", True, {}, "/api/v1/configmaps"),  # every namespace
        (
            "monitoring.coreos.com/v1",
            "servicemonitors",
            True,
            {"namespace": "mon", "label_selectors": ["a=b", "c in (d,e)"]},
            "/apis/monitoring.coreos.com/v1/namespaces/mon/servicemonitors?labelSelector=a%3Db%2Cc+in+%28d%2Ce%29",
        ),
        (
            "v1",
            "pods",
            True,
            {"label_selectors": ["a"], "field_selectors": ["spec.nodeName=n"]},
            "/api/v1/pods?labelSelector=a&fieldSelector=spec.nodeName%3Dn",
        ),
        (
            "v1",
            "configmaps",
            True,
            {"namespace": "m", "name": "x", "label_selectors": ["a"]},
            "/api/v1/namespaces/m/configmaps/x",
        ),
    ],
)
def test_paths(api_version, plural, namespaced, kw, want):
    assert _objects.path(api_version, plural, namespaced, **kw) == want


def test_reads_in_order_with_k8s_info_shape_and_one_discovery_per_group_version():
    reader = FakeReader(
        {
            "/api/v1": CORE,
            "/apis/monitoring.coreos.com/v1": MON,
            "/api/v1/namespaces/mon": {"metadata": {"name": "mon"}},
            "/api/v1/namespaces/mon/configmaps?labelSelector=o%3Dme": {"items": [{"metadata": {"name": "dash"}}]},
            "/apis/monitoring.coreos.com/v1/servicemonitors": {"items": [{"metadata": {"name": "sm"}}]},
        }
    )
    got = _objects.read(
        reader,
        [
            q(kind="Namespace", name="mon"),
            q(kind="Namespace", name="gone"),
            q(kind="ConfigMap", namespace="mon", label_selectors=["o=me"]),
            q(kind="ServiceMonitor", api_version="monitoring.coreos.com/v1"),
            q(kind="Prometheus", api_version="monitoring.coreos.com/v1"),  # the group is served, the kind is not
            q(kind="ClusterPolicy", api_version="nvidia.com/v1"),  # the group is not served
            q(kind="Pod", skip=True),
        ],
    )
    assert [(r["api_found"], r["skipped"], [o["metadata"]["name"] for o in r["resources"]]) for r in got] == [
        (True, False, ["mon"]),
        (True, False, []),
        (True, False, ["dash"]),
        (True, False, ["sm"]),
        (False, False, []),
        (False, False, []),
        (False, True, []),
    ]
    # a list's items get the apiVersion and kind that k8s_info's carry
    assert got[2]["resources"][0]["kind"] == "ConfigMap" and got[2]["resources"][0]["apiVersion"] == "v1"
    assert got[3]["resources"][0]["apiVersion"] == "monitoring.coreos.com/v1"
    # discovery once per group version; nothing read for a kind not served or a skipped read
    assert reader.paths.count("/api/v1") == 1 and reader.paths.count("/apis/monitoring.coreos.com/v1") == 1
    assert reader.requests == 7 and "/apis/nvidia.com/v1" in reader.paths


def test_metadata_only_asks_for_partial_object_metadata():
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    items = [{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": {"name": "a.b.io"}}]
    reader = FakeReader(
        {
            "/apis/apiextensions.k8s.io/v1": {
                "resources": [{"name": "customresourcedefinitions", "kind": "CustomResourceDefinition"}]
            },
            crds: {"items": items},
        }
    )
    got = _objects.read(
        reader, [q(kind="CustomResourceDefinition", api_version="apiextensions.k8s.io/v1", metadata_only=True)]
    )
    assert got[0]["resources"] == items  # as the server answers: no apiVersion or kind put on them
    assert reader.accepts[crds] == _k8s.METADATA_ACCEPT and reader.accepts["/apis/apiextensions.k8s.io/v1"] is None


def test_a_named_metadata_only_read_asks_for_one_partial_object():
    """Asked for a PartialObjectMetadataList first, the API server answers a named GET with 500 "content is not a
    list" (seen on kube-apiserver v1.34 for a cluster-scoped custom resource)."""
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b.io"
    one = {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": {"name": "a.b.io"}}
    reader = FakeReader(
        {
            "/apis/apiextensions.k8s.io/v1": {
                "resources": [{"name": "customresourcedefinitions", "kind": "CustomResourceDefinition"}]
            },
            crd: one,
        }
    )
    got = _objects.read(
        reader,
        [q(kind="CustomResourceDefinition", api_version="apiextensions.k8s.io/v1", name="a.b.io", metadata_only=True)],
    )
    assert got[0]["resources"] == [one]
    assert reader.accepts[crd] == _k8s.METADATA_ACCEPT_ONE and "PartialObjectMetadataList" not in reader.accepts[crd]


def test_an_error_names_the_read_and_the_grant():
    reader = FakeReader({"/api/v1": CORE, "/api/v1/namespaces/m/configmaps?labelSelector=a": 403})
    with pytest.raises(_k8s.ClusterAccessError) as err:
        _objects.read(reader, [q(kind="ConfigMap", namespace="m", label_selectors=["a"])])
    assert str(err.value).startswith("cannot read ConfigMap m [a] (v1): HTTP 403")
    assert "RBAC" in str(err.value)


def test_discovery_errors_other_than_404_fail():
    with pytest.raises(_k8s.ClusterAccessError, match="the API resources of v1: HTTP 403"):
        _objects.read(FakeReader({"/api/v1": 403}), [q(kind="Pod")])


@pytest.mark.parametrize(
    ("keys", "bad"),
    [(["a", "b", None, None], None), (["a", "a"], "a"), ([None, "x", "x"], "x")],
)
def test_keys_are_unique(keys, bad):
    queries = [q(kind="Pod", key=k) for k in keys]
    if bad is None:
        _objects.check_keys(queries)
        return
    with pytest.raises(_objects.QueryError, match=f"the key '{bad}' names two reads"):
        _objects.check_keys(queries)
