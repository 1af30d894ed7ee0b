"""_k8s's standard-library path: which connection settings it takes (the rest go to the kubernetes client),
and the reader over it (bearer token, 404 of a missing CRD, errors in the client path's words, request count)
against a local HTTP server. TLS with client certificates is what every lab test uses (the lab's kubeconfig)."""

from __future__ import annotations

import base64
import http.server
import json
import threading

import pytest
import yaml
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s


def _params(**kw):
    base = dict.fromkeys(_k8s.AUTH_ARG_SPEC)
    base.update(kw)
    return base


def _kubeconfig(tmp_path, cluster=None, user=None, context="c"):
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "k", "cluster": cluster or {"server": "https://k:6443"}}],
                "users": [{"name": "u", "user": user if user is not None else {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "current-context": context,
            }
        )
    )
    return str(path)


B64 = base64.b64encode(b"pem").decode()


@pytest.mark.parametrize(
    ("cluster", "user", "want"),
    [
        # client certificate files, relative to the kubeconfig's directory, and the CA
        (
            {"server": "https://k:6443", "certificate-authority": "ca.crt"},
            {"client-certificate": "a.crt", "client-key": "/abs/a.key"},
            {"ca_file": "{d}/ca.crt", "cert_file": "{d}/a.crt", "key_file": "/abs/a.key", "token": None},
        ),
        # embedded data and a token; insecure-skip-tls-verify turns verification off
        (
            {"server": "https://k:6443", "certificate-authority-data": B64, "insecure-skip-tls-verify": True},
            {"client-certificate-data": B64, "client-key-data": B64, "token": "t"},
            {"ca_data": B64, "cert_data": B64, "key_data": B64, "token": "t", "verify": False},
        ),
        # what only the kubernetes client does: exec and auth-provider plugins, basic auth, proxies, SNI
        ({"server": "https://k:6443"}, {"exec": {"command": "aws"}}, None),
        ({"server": "https://k:6443"}, {"auth-provider": {"name": "oidc"}}, None),
        ({"server": "https://k:6443"}, {"username": "a", "password": "b"}, None),
        ({"server": "https://k:6443", "proxy-url": "http://p:3128"}, {"token": "t"}, None),
        ({"server": "https://k:6443", "tls-server-name": "api"}, {"token": "t"}, None),
        ({"certificate-authority": "ca.crt"}, {"token": "t"}, None),  # no server
    ],
)
def test_which_kubeconfigs_take_the_standard_library_path(tmp_path, cluster, user, want):
    got = _k8s.simple_settings(_params(kubeconfig=_kubeconfig(tmp_path, cluster, user)))
    if want is None:
        assert got is None
        return
    expected = {k: (v.format(d=tmp_path) if isinstance(v, str) else v) for k, v in want.items()}
    expected.setdefault("verify", True)
    assert {k: got.get(k) for k in expected} == expected
    assert got["server"] == "https://k:6443"


def test_unknown_context_missing_file_and_several_files_go_to_the_client(tmp_path, monkeypatch):
    kc = _kubeconfig(tmp_path)
    assert _k8s.simple_settings(_params(kubeconfig=kc, context="other")) is None
    assert _k8s.simple_settings(_params(kubeconfig=str(tmp_path / "missing"))) is None
    monkeypatch.setenv("KUBECONFIG", f"{kc}:{kc}")
    assert _k8s.simple_settings(_params()) is None
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    assert _k8s.simple_settings(_params()) is None  # nothing given: in-cluster config is the client's


def test_explicit_options_override_the_kubeconfig(tmp_path, monkeypatch):
    kc = _kubeconfig(tmp_path, user={"client-certificate-data": B64, "client-key-data": B64})
    got = _k8s.simple_settings(
        _params(kubeconfig=kc, host="https://h:1", api_key="k", client_cert="/c", client_key="/k", validate_certs=False)
    )
    assert (got["server"], got["token"], got["cert_file"], got["key_file"], got["verify"]) == (
        "https://h:1",
        "k",
        "/c",
        "/k",
        False,
    )
    assert "cert_data" not in got and "key_data" not in got
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    assert _k8s.simple_settings(_params(host="http://h:2", api_key="k"))["server"] == "http://h:2"


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict = {}
    seen: list = []

    def do_GET(self):  # noqa: N802 - the http.server API
        self.seen.append((self.path, self.headers.get("Authorization")))
        self._answer(*self.routes.get(self.path, (404, {"message": "the server could not find the resource"})))

    def _answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _write(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append(
            (self.command, self.path, self.headers.get("Content-Type"), json.loads(self.rfile.read(length)))
        )
        self._answer(*self.routes.get((self.command, self.path), (201, {"kind": "Status"})))

    do_PATCH = do_POST = do_PUT = _write  # noqa: N815 - the http.server API

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Handler.routes, _Handler.seen = {}, []
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", _Handler
    srv.shutdown()
    srv.server_close()


def test_reader_over_the_standard_library(server, tmp_path, monkeypatch):
    url, handler = server
    handler.routes = {
        "/api/v1/nodes": (200, {"items": [{"metadata": {"name": "n1"}}]}),
        "/api/v1/namespaces/gpu": (200, {"metadata": {"name": "gpu", "labels": {"a": "b"}}}),
        "/api/v1/namespaces/x/pods": (403, {"message": 'pods is forbidden: User "dev" cannot list'}),
    }
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    reader = _k8s.new_reader(_params(host=url, api_key="tok"))
    assert reader.http is not None
    assert [n["metadata"]["name"] for n in reader.nodes()] == ["n1"]
    assert reader.namespace("gpu")["metadata"]["labels"] == {"a": "b"}
    assert reader.namespace("gone") is None
    assert reader.cluster_custom("nvidia.com", "v1", "clusterpolicies") is None  # CRD not installed
    with pytest.raises(
        _k8s.ClusterAccessError, match=r"cannot list pods in namespace x: HTTP 403 pods is forbidden.*RBAC"
    ):
        reader.pods("x")
    with pytest.raises(_k8s.ClusterAccessError, match="daemonsets in namespace y: HTTP 404"):
        reader.daemonsets("y")  # a 404 of a built-in list is an error, not "missing"
    assert reader.requests == 6
    assert {auth for path, auth in handler.seen} == {"Bearer tok"}


@pytest.mark.parametrize("path", ["standard library", "kubernetes client"])
def test_send_writes_json_with_its_content_type_and_hands_back_the_status(server, tmp_path, monkeypatch, path):
    """A JSON merge patch stays one on both paths (the client turns a dict it is given without a content type into a
    strategic merge patch); a refused write comes back as its status, not raised."""
    url, handler = server
    handler.routes = {("POST", "/api/v1/namespaces/default/events"): (409, {"message": "already exists"})}
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    params = _params(host=url, api_key="tok")
    reader = _k8s.new_reader(params) if path == "standard library" else _k8s.Reader(_k8s.new_api_client(params))
    assert (reader.http is not None) == (path == "standard library")
    patch = {"metadata": {"resourceVersion": "7"}, "spec": {"unschedulable": True, "taints": []}}
    status, _reason, _body = reader.send("PATCH", "/api/v1/nodes/n1", patch, "application/merge-patch+json")
    assert status == 201
    status, _reason, body = reader.send("POST", "/api/v1/namespaces/default/events", {"kind": "Event"})
    assert status == 409 and json.loads(body)["message"] == "already exists"
    assert handler.seen == [
        ("PATCH", "/api/v1/nodes/n1", "application/merge-patch+json", patch),
        ("POST", "/api/v1/namespaces/default/events", "application/json", {"kind": "Event"}),
    ]
    assert reader.requests == 2


def test_send_to_an_unreachable_server_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    with pytest.raises(_k8s.ClusterAccessError, match="cannot PATCH /api/v1/nodes/n1: .*API server is reachable"):
        _k8s.new_reader(_params(host="http://127.0.0.1:9")).send("PATCH", "/api/v1/nodes/n1", {})


def test_unreachable_server_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    with pytest.raises(_k8s.ClusterAccessError, match="API server is reachable"):
        _k8s.new_reader(_params(host="http://127.0.0.1:9")).nodes()


class _Busy(_Handler):
    """Answers 429 ("storage is (re)initializing", a CRD created a moment ago) a number of times, then the list."""

    busy = 0

    def do_GET(self):  # noqa: N802 - the http.server API
        if _Busy.busy > 0:
            _Busy.busy -= 1
            self.routes = {self.path: (429, {"message": "storage is (re)initializing"})}
        else:
            self.routes = {self.path: (200, {"items": [{"metadata": {"name": "pool"}}]})}
        super().do_GET()


@pytest.mark.parametrize(("busy", "ok"), [(0, True), (3, True), (_k8s.Reader.RETRIES_429, True), (99, False)])
def test_429_is_retried_every_second_then_named(tmp_path, monkeypatch, busy, ok):
    _Busy.busy, _Busy.seen = busy, []
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Busy)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
        reader = _k8s.new_reader(_params(host=f"http://127.0.0.1:{srv.server_address[1]}", api_key="t"))
        slept = []
        reader.sleep = slept.append
        if ok:
            got = reader.objects("nv-ipam.nvidia.com", "v1alpha1", "ippools")
            assert [o["metadata"]["name"] for o in got] == ["pool"]
            assert slept == [1] * busy and reader.requests == busy + 1
        else:
            with pytest.raises(_k8s.ClusterAccessError, match=r"ippools.*HTTP 429 storage is \(re\)initializing"):
                reader.objects("nv-ipam.nvidia.com", "v1alpha1", "ippools")
            assert len(slept) == _k8s.Reader.RETRIES_429
    finally:
        srv.shutdown()
        srv.server_close()
