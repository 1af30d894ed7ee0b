"""The lab's Service network (gpuops_lab.services): the API server's egress configuration, the routes, the decision
for each CONNECT target, and a tunnel through the proxy itself (a fake Service list, a loopback echo server)."""

from __future__ import annotations

import json
import socket
import threading

import pytest
from gpuops_lab import services
from gpuops_lab.config import LabConfig


def _cfg(tmp_path, port=30290):
    return LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path / "lab"), "GPUOPS_LAB_NFD_MASTER_PORT": str(port)})


class _Resolver:
    def __init__(self, ips):
        self.ips = ips
        self.calls = 0

    def service(self, ip):
        self.calls += 1
        return self.ips.get(ip)


def test_egress_is_the_cluster_context_over_the_proxys_socket(tmp_path):
    cfg = _cfg(tmp_path)
    path = services.write_egress_config(cfg)
    conf = json.loads(path.read_text())
    assert conf["kind"] == "EgressSelectorConfiguration"
    (sel,) = conf["egressSelections"]
    sock = str(tmp_path / "lab" / "service-proxy.sock")
    assert sel == {
        "name": "cluster",
        "connection": {"proxyProtocol": "HTTPConnect", "transport": {"uds": {"udsName": sock}}},
    }


def test_socket_under_tmp_when_the_state_path_is_too_long(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    cfg = LabConfig.load({"GPUOPS_LAB_STATE": str(deep)})
    path = services.socket_path(cfg)
    assert path.parent == services.Path("/tmp") and path.name.startswith("gpuops-lab-")
    assert len(str(path)) <= services.SUN_PATH_MAX
    assert services.socket_path(LabConfig.load({"GPUOPS_LAB_STATE": str(deep / "x")})) != path


def test_routes_added_and_removed(tmp_path):
    cfg = _cfg(tmp_path)
    assert services.read_routes(cfg) == {}
    assert services.add_route(cfg, "kueue-system", "kueue-webhook-service", 443, 30293) == (
        "kueue-system/kueue-webhook-service:443"
    )
    services.add_route(cfg, "ns", "other", 8443, 31000)
    assert services.read_routes(cfg) == {
        "kueue-system/kueue-webhook-service:443": "127.0.0.1:30293",
        "ns/other:8443": "127.0.0.1:31000",
    }
    assert services.remove_route(cfg, "ns", "other", 8443) is True
    assert services.remove_route(cfg, "ns", "other", 8443) is False
    assert list(services.read_routes(cfg)) == ["kueue-system/kueue-webhook-service:443"]


@pytest.mark.parametrize(
    ("head", "want"),
    [
        (b"CONNECT 10.96.0.12:443 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", ("10.96.0.12", 443)),
        (b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", ("::1", 8443)),
        (b"CONNECT localhost:20293 HTTP/1.0\r\n\r\n", ("localhost", 20293)),
    ],
)
def test_parse_connect(head, want):
    assert services.parse_connect(head) == want


@pytest.mark.parametrize(
    "head",
    [b"GET / HTTP/1.1\r\n\r\n", b"CONNECT 10.96.0.12 HTTP/1.1\r\n\r\n", b"CONNECT a:b HTTP/1.1\r\n\r\n", b"\r\n\r\n"],
)
def test_parse_connect_refuses_other_requests(head):
    with pytest.raises(ValueError, match="CONNECT"):
        services.parse_connect(head)


def test_decide(tmp_path):
    cfg = _cfg(tmp_path)
    services.add_route(cfg, "kueue-system", "kueue-webhook-service", 443, 30293)
    res = _Resolver({"10.96.0.12": ("kueue-system", "kueue-webhook-service"), "10.96.0.13": ("ns", "bare")})
    assert services.decide(cfg, res, "10.96.0.12", 443) == (
        ("127.0.0.1", 30293),
        "Service kueue-system/kueue-webhook-service:443",
        200,
    )
    # a routed Service on another port, a Service with no route, an unknown ClusterIP: 503 (no endpoint)
    target, why, code = services.decide(cfg, res, "10.96.0.12", 8443)
    assert (target, code) == (None, 503) and "kueue-system/kueue-webhook-service port 8443" in why
    target, why, code = services.decide(cfg, res, "10.96.0.13", 443)
    assert (target, code) == (None, 503) and "ns/bare" in why
    target, why, code = services.decide(cfg, res, "10.96.0.99", 443)
    assert (target, code) == (None, 503) and "no Service holds" in why
    # loopback as asked, without a Service lookup; other addresses refused
    calls = res.calls
    assert services.decide(cfg, res, "127.0.0.1", 20293) == (("127.0.0.1", 20293), "loopback", 200)
    assert services.decide(cfg, res, "localhost", 20293) == (("127.0.0.1", 20293), "loopback", 200)
    assert res.calls == calls
    assert services.decide(cfg, res, "192.0.2.1", 443)[2] == 502
    assert services.decide(cfg, res, "example.com", 443)[2] == 502


def _connect(path, target):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(str(path))
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            break
        head += chunk
    return s, head


def test_proxy_tunnels_a_service_to_its_route_and_refuses_the_rest(tmp_path, monkeypatch):
    echo = socket.socket()
    echo.bind(("127.0.0.1", 0))
    echo.listen()
    echo_port = echo.getsockname()[1]

    def serve_echo():
        conn, _addr = echo.accept()
        with conn:
            conn.sendall(conn.recv(100).upper())

    threading.Thread(target=serve_echo, daemon=True).start()
    cfg = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path / "lab")})
    services.add_route(cfg, "ns", "echo", 443, echo_port)
    monkeypatch.setattr(services, "Resolver", lambda _cfg: _Resolver({"10.96.1.1": ("ns", "echo")}))
    server = services._Server(cfg)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        s, head = _connect(services.socket_path(cfg), "10.96.1.1:443")
        with s:
            assert head == b"HTTP/1.1 200 Connection established\r\n\r\n"  # nothing more: the caller's TLS follows
            s.sendall(b"hello")
            assert s.recv(100) == b"HELLO"
        s, head = _connect(services.socket_path(cfg), "10.96.1.2:443")
        with s:
            assert head.startswith(b"HTTP/1.1 503 ")
            assert b"no Service holds this ClusterIP" in s.recv(200)
    finally:
        server.shutdown()
        server.server_close()
        echo.close()


def test_resolver_lists_services_by_every_cluster_ip(tmp_path):
    from kubernetes import client

    def svc(ns, name, ip, ips=None):
        return client.V1Service(
            metadata=client.V1ObjectMeta(namespace=ns, name=name),
            spec=client.V1ServiceSpec(cluster_ip=ip, cluster_ips=ips),
        )

    class Api:
        calls = 0

        def list_service_for_all_namespaces(self, **_):
            Api.calls += 1
            items = [svc("a", "one", "10.96.0.1", ["10.96.0.1", "fd00::1"]), svc("b", "headless", "None", ["None"])]
            return client.V1ServiceList(items=items)

    res = services.Resolver(_cfg(tmp_path))
    res._api = Api()
    assert res.service("10.96.0.1") == ("a", "one")
    assert res.service("fd00::1") == ("a", "one")
    assert Api.calls == 1  # cached
    assert res.service("10.96.0.2") is None  # a miss lists again
    assert Api.calls == 2
    assert "None" not in res._ips
