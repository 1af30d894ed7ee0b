"""The remediation's writes (_api.ClusterApi) over a reader's ``send``: what each write sends (a JSON merge patch for
the node, the Eviction API, the breaker's ConfigMap created or replaced with the resourceVersion read), and what each
answer becomes (409 a Conflict to read again, a budget's 429 a refusal to retry, 403 an error naming the RBAC fix)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _api

FORBIDDEN = (403, "Forbidden", json.dumps({"message": 'nodes "n1" is forbidden: User "eda" cannot patch'}).encode())


class Reader:
    def __init__(self, answer=(201, "Created", b"{}")):
        self.answer, self.sent = answer, []

    def send(self, method, path, body, content_type="application/json"):
        self.sent.append((method, path, content_type, json.loads(json.dumps(body))))
        return self.answer


def test_node_patch_is_a_json_merge_patch():
    reader = Reader((200, "OK", b"{}"))
    _api.ClusterApi(reader).patch_node("n1", {"metadata": {"resourceVersion": "3"}, "spec": {"taints": []}})
    assert reader.sent == [
        (
            "PATCH",
            "/api/v1/nodes/n1",
            "application/merge-patch+json",
            {"metadata": {"resourceVersion": "3"}, "spec": {"taints": []}},
        )
    ]


@pytest.mark.parametrize(
    ("answer", "raised", "match"),
    [
        ((409, "Conflict", b"{}"), _api.Conflict, "node n1 changed while it was being marked"),
        (
            FORBIDDEN,
            GpuOpsError,
            r"cannot patch node n1: HTTP 403 nodes \"n1\" is forbidden.*Fix: grant the user patch",
        ),
        (
            (500, "Internal Server Error", b"not json"),
            GpuOpsError,
            "cannot patch node n1: HTTP 500 Internal Server Error$",
        ),
    ],
)
def test_node_patch_refused(answer, raised, match):
    with pytest.raises(raised, match=match):
        _api.ClusterApi(Reader(answer)).patch_node("n1", {"metadata": {}})


@pytest.mark.parametrize(("answer", "created"), [((201, "Created", b"{}"), True), ((409, "Conflict", b"{}"), False)])
def test_event_on_the_node_once(answer, created):
    reader = Reader(answer)
    node = {"metadata": {"name": "n1"}}
    assert _api.ClusterApi(reader).record(node, "GpuopsQuarantined", "why", "k1", warning=True) is created
    method, path, content_type, body = reader.sent[0]
    assert (method, path, content_type) == ("POST", "/api/v1/namespaces/default/events", "application/json")
    assert body["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n1"}
    assert body["type"] == "Warning" and body["metadata"]["name"].startswith("n1.gpuops-")


def test_event_refused_names_rbac():
    with pytest.raises(GpuOpsError, match="cannot create events in namespace default: HTTP 403 .*RBAC"):
        _api.ClusterApi(Reader(FORBIDDEN)).record({"metadata": {"name": "n1"}}, "R", "m", "k")


STATE = {"status": "CLOSED", "reason": "", "active": {"n1": "t"}, "actions": []}


@pytest.mark.parametrize(
    ("rv", "method", "path"),
    [
        (None, "POST", "/api/v1/namespaces/ops/configmaps"),
        ("41", "PUT", "/api/v1/namespaces/ops/configmaps/gpuops-remediation-breaker"),
    ],
)
def test_breaker_created_or_replaced_with_the_version_read(rv, method, path):
    reader = Reader()
    _api.ClusterApi(reader).write_breaker("ops", STATE, rv)
    sent_method, sent_path, _ct, body = reader.sent[0]
    assert (sent_method, sent_path) == (method, path)
    assert body["metadata"].get("resourceVersion") == rv
    assert json.loads(body["data"]["active"]) == {"n1": "t"}


@pytest.mark.parametrize(
    ("answer", "raised", "match"),
    [
        ((409, "Conflict", b"{}"), _api.Conflict, "changed while it was being written"),
        ((404, "Not Found", b"{}"), GpuOpsError, "namespace ops does not exist. Fix: set gpuops_remediation_namespace"),
        (FORBIDDEN, GpuOpsError, "cannot create and update configmaps in namespace ops: HTTP 403"),
    ],
)
def test_breaker_write_refused(answer, raised, match):
    with pytest.raises(raised, match=match):
        _api.ClusterApi(Reader(answer)).write_breaker("ops", STATE, "41")


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        ((201, "Created", b"{}"), (201, "evicted")),
        (
            (429, "Too Many Requests", json.dumps({"message": "would violate the pod's disruption budget"}).encode()),
            (429, "would violate the pod's disruption budget"),
        ),
        ((404, "Not Found", b""), (404, "Not Found")),
    ],
)
def test_eviction(answer, want):
    reader = Reader(answer)
    assert _api.ClusterApi(reader).evict("team", "w-0") == want
    assert reader.sent[0][:2] == ("POST", "/api/v1/namespaces/team/pods/w-0/eviction")
    assert reader.sent[0][3]["kind"] == "Eviction"


def test_eviction_refused_names_rbac():
    with pytest.raises(GpuOpsError, match="cannot create pods/eviction of pod team/w-0: HTTP 403"):
        _api.ClusterApi(Reader(FORBIDDEN)).evict("team", "w-0")
