"""_k8s: client construction from the connection options, and the raw list reader (one request per list,
404 = CRD not installed, API errors become ClusterAccessError naming what was listed). No network: the
ApiClient's REST layer is replaced by canned responses."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s


class FakeHTTP:
    """What urllib3 returns: status, reason, data, headers."""

    def __init__(self, status, body):
        self.status = status
        self.reason = {200: "OK", 403: "Forbidden", 404: "Not Found"}.get(status, "Error")
        self.data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.headers = {"content-type": "application/json"}


class FakeREST:
    def __init__(self, routes):
        self.routes = routes
        self.urls = []

    def request(self, method, url, headers=None, body=None, post_params=None, _request_timeout=None):
        from kubernetes.client.rest import RESTResponse

        path = url.split("://", 1)[-1].split("/", 1)[1].split("?")[0]
        self.urls.append(f"{method} /{path}")
        status, payload = self.routes.get(f"/{path}", (404, b"404 page not found"))
        return RESTResponse(FakeHTTP(status, payload))


def reader_with(routes):
    from kubernetes import client

    api = client.ApiClient(client.Configuration(host="https://api.example:6443"))
    fake = FakeREST(routes)
    api.rest_client = fake
    return _k8s.Reader(api), fake


def items(*names):
    return {"kind": "List", "items": [{"metadata": {"name": n}} for n in names]}


def test_lists_count_requests_and_crd_missing_is_none():
    reader, fake = reader_with(
        {
            "/api/v1/nodes": (200, items("n1", "n2")),
            "/api/v1/namespaces/gpu-operator/pods": (200, items("p1")),
            "/apis/apps/v1/namespaces/gpu-operator/daemonsets": (200, items()),
        }
    )
    assert [n["metadata"]["name"] for n in reader.nodes()] == ["n1", "n2"]
    assert len(reader.pods("gpu-operator")) == 1 and reader.daemonsets("gpu-operator") == []
    assert reader.cluster_custom("nvidia.com", "v1", "clusterpolicies") is None
    assert reader.namespaced_custom("amd.com", "v1alpha1", "kube-amd-gpu", "deviceconfigs") is None
    assert reader.requests == 5
    assert fake.urls[-2:] == [
        "GET /apis/nvidia.com/v1/clusterpolicies",
        "GET /apis/amd.com/v1alpha1/namespaces/kube-amd-gpu/deviceconfigs",
    ]


@pytest.mark.parametrize(
    "status, body, fragment",
    [
        (403, {"message": 'nodes is forbidden: User "dev" cannot list resource "nodes"'}, "RBAC: grant list"),
        (401, {"message": "Unauthorized"}, "credentials were refused"),
        (500, b"etcd down", "HTTP 500 etcd down"),
    ],
)
def test_api_errors_name_the_list(status, body, fragment):
    reader, fake = reader_with({"/api/v1/nodes": (status, body)})
    with pytest.raises(_k8s.ClusterAccessError, match="cannot list nodes") as exc:
        reader.nodes()
    assert fragment in str(exc.value) and exc.value.details["status"] == status


def test_pods_404_is_an_error_not_missing():
    reader, fake = reader_with({})
    with pytest.raises(_k8s.ClusterAccessError, match="pods in namespace x: HTTP 404"):
        reader.pods("x")


def test_unreachable_server():
    from kubernetes import client

    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    api.configuration.retries = False
    with pytest.raises(_k8s.ClusterAccessError, match="API server is reachable"):
        _k8s.Reader(api).nodes()


@pytest.fixture
def kubeconfig(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "a", "cluster": {"server": "https://a.example:6443", "insecure-skip-tls-verify": True}},
                    {"name": "b", "cluster": {"server": "https://b.example:6443"}},
                ],
                "users": [{"name": "u", "user": {"token": "tok-from-file"}}],
                "contexts": [
                    {"name": "ca", "context": {"cluster": "a", "user": "u"}},
                    {"name": "cb", "context": {"cluster": "b", "user": "u"}},
                ],
                "current-context": "ca",
            }
        )
    )
    return str(path)


def _bearer(cfg):
    return cfg.auth_settings()["BearerToken"]["value"]


def _params(**kw):
    base = dict.fromkeys(_k8s.AUTH_ARG_SPEC)
    base.update(kw)
    return base


def test_client_from_kubeconfig_and_context(kubeconfig):
    cfg = _k8s.new_api_client(_params(kubeconfig=kubeconfig)).configuration
    assert cfg.host == "https://a.example:6443" and cfg.verify_ssl is False
    assert _bearer(cfg) == "Bearer tok-from-file"
    cfg = _k8s.new_api_client(_params(kubeconfig=kubeconfig, context="cb")).configuration
    assert cfg.host == "https://b.example:6443" and cfg.verify_ssl is True


def test_explicit_options_override(kubeconfig, tmp_path):
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    cfg = _k8s.new_api_client(
        _params(kubeconfig=kubeconfig, host="https://c:6443", api_key="t2", validate_certs=True, ca_cert=str(ca))
    ).configuration
    assert (cfg.host, _bearer(cfg), cfg.verify_ssl, cfg.ssl_ca_cert) == (
        "https://c:6443",
        "Bearer t2",
        True,
        str(ca),
    )


def test_host_only_needs_no_kubeconfig(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    cfg = _k8s.new_api_client(_params(host="https://h:6443", api_key="t")).configuration
    assert cfg.host == "https://h:6443"


@pytest.mark.parametrize(
    "kw, fragment",
    [
        ({"kubeconfig": "/nonexistent/kubeconfig"}, "/nonexistent/kubeconfig"),
        ({"context": "nope"}, "context nope"),
    ],
)
def test_bad_settings(kubeconfig, kw, fragment):
    if "context" in kw:
        kw["kubeconfig"] = kubeconfig
    with pytest.raises(_k8s.KubeConfigError, match=fragment):
        _k8s.new_api_client(_params(**kw))


def test_nothing_given_and_no_default_is_a_config_error(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(_k8s.KubeConfigError, match="cannot load Kubernetes connection settings"):
        _k8s.new_api_client(_params())


def test_auth_spec_is_a_copy():
    spec = _k8s.auth_argument_spec()
    spec["host"]["type"] = "int"
    assert _k8s.AUTH_ARG_SPEC["host"]["type"] == "str"
