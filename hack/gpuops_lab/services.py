"""The lab's Service network: how the API server reaches an in-cluster Service.

A real API server calls an admission webhook, a CRD conversion webhook or an aggregated API that names a Service at
the Service's ClusterIP (the default service resolver), through the dialer of its egress selector's `cluster` network
context when one is configured (k8s.io/apiserver v0.34.4 `pkg/util/webhook/authentication.go`,
`pkg/server/egressselector`). The lab has no kube-proxy and no pod network, so it configures that context
(:func:`egress_selector_config`: `HTTPConnect` over a Unix socket, :func:`socket_path`; a `tcp` transport needs a client
certificate: `getTLSConfig` reads one whatever the URL's scheme) and runs this module as the proxy
(`python -m gpuops_lab.services`, component `service-proxy`, started before the API server):

- `CONNECT <ClusterIP>:<port>`: the Service holding that ClusterIP is looked up (a list of Services, cached, listed
  again on a miss) and its port is sent to the loopback address a route names (:func:`add_route`, kept in
  `<state>/service-routes.json`; the lab's controllers run out of cluster on loopback ports). A Service with no route
  answers 503, as a Service with no ready endpoints fails the call;
- `CONNECT 127.0.0.1:<port>` (or localhost: a webhook registered by URL on loopback, a kwok node's kubelet address) is
  connected as asked;
- anything else is refused (502): the lab reaches nothing outside this machine.

Each answer is one line in the proxy's log (`.state/lab/logs/service-proxy.log`)."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import select
import signal
import socket
import socketserver
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .config import LabConfig

SERVICE_CIDR = "10.96.0.0/16"  # the API server's --service-cluster-ip-range (cluster.py)
ROUTES_FILE = "service-routes.json"
EGRESS_FILE = "egress-selector.yaml"
LOOPBACK_NAMES = frozenset({"localhost"})


SOCKET_FILE = "service-proxy.sock"
SUN_PATH_MAX = 107  # sockaddr_un.sun_path is 108 bytes on Linux, the last one the terminating NUL


def socket_path(cfg: LabConfig) -> Path:
    """The proxy's Unix socket: in the state directory, or under /tmp (named by the state directory's hash) when that
    path is too long for a socket address."""
    path = cfg.state / SOCKET_FILE
    if len(str(path).encode()) <= SUN_PATH_MAX:
        return path
    digest = hashlib.sha256(str(cfg.state.resolve()).encode()).hexdigest()[:16]
    return Path("/tmp") / f"gpuops-lab-{digest}.sock"  # noqa: S108 - a socket, made by this user, removed at down


def routes_path(cfg: LabConfig) -> Path:
    return cfg.state / ROUTES_FILE


def egress_path(cfg: LabConfig) -> Path:
    return cfg.state / EGRESS_FILE


def egress_selector_config(cfg: LabConfig) -> dict[str, Any]:
    """The API server's EgressSelectorConfiguration: the `cluster` context through this proxy, the others direct."""
    return {
        "apiVersion": "apiserver.k8s.io/v1beta1",
        "kind": "EgressSelectorConfiguration",
        "egressSelections": [
            {
                "name": "cluster",
                "connection": {
                    "proxyProtocol": "HTTPConnect",
                    "transport": {"uds": {"udsName": str(socket_path(cfg))}},
                },
            }
        ],
    }


def write_egress_config(cfg: LabConfig) -> Path:
    path = egress_path(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(egress_selector_config(cfg), indent=1) + "\n")  # JSON is YAML
    return path


def _key(namespace: str, name: str, port: int) -> str:
    return f"{namespace}/{name}:{port}"


def read_routes(cfg: LabConfig) -> dict[str, str]:
    try:
        data = json.loads(routes_path(cfg).read_text())
    except FileNotFoundError:
        return {}
    return {str(k): str(v) for k, v in data.items()}


@contextlib.contextmanager
def _routes_locked(cfg: LabConfig) -> Iterator[None]:
    """An exclusive lock on the routes file across processes (the kubelet and a test both add routes): a
    read-modify-write under it loses no other writer's route."""
    lock = routes_path(cfg).with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def add_route(cfg: LabConfig, namespace: str, name: str, port: int, target_port: int) -> str:
    """Send the Service `namespace/name`'s `port` to 127.0.0.1:`target_port`. Returns the route's key."""
    key = _key(namespace, name, port)
    with _routes_locked(cfg):
        routes = read_routes(cfg)
        routes[key] = f"127.0.0.1:{int(target_port)}"
        _write_routes(cfg, routes)
    return key


def remove_route(cfg: LabConfig, namespace: str, name: str, port: int) -> bool:
    key = _key(namespace, name, port)
    with _routes_locked(cfg):
        routes = read_routes(cfg)
        if routes.pop(key, None) is None:
            return False
        _write_routes(cfg, routes)
    return True


def _write_routes(cfg: LabConfig, routes: dict[str, str]) -> None:
    path = routes_path(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(routes, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)  # the proxy reads the file on each call: never half written


def parse_connect(head: bytes) -> tuple[str, int]:
    """The host and port of an HTTP CONNECT request head; ValueError for anything else."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split()
    if len(parts) != 3 or parts[0] != "CONNECT" or not parts[2].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP CONNECT request: {line!r}")
    host, sep, port = parts[1].rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"CONNECT target without a port: {parts[1]!r}")
    return host.strip("[]"), int(port)


class Resolver:
    """ClusterIP -> (namespace, name) of the Service holding it, from a list of Services (listed again on a miss)."""

    def __init__(self, cfg: LabConfig) -> None:
        self.cfg = cfg
        self._ips: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        self._api: Any = None

    def _list(self) -> dict[str, tuple[str, str]]:
        if self._api is None:
            from kubernetes import client, config

            self._api = client.CoreV1Api(config.new_client_from_config(str(self.cfg.kubeconfig)))
        out = {}
        for svc in self._api.list_service_for_all_namespaces(_request_timeout=10).items:
            for ip in svc.spec.cluster_ips or [svc.spec.cluster_ip]:
                if ip and ip != "None":
                    out[ip] = (svc.metadata.namespace, svc.metadata.name)
        return out

    def service(self, ip: str) -> tuple[str, str] | None:
        with self._lock:
            if ip not in self._ips:
                self._ips = self._list()
            return self._ips.get(ip)


def decide(cfg: LabConfig, resolver: Resolver, host: str, port: int) -> tuple[tuple[str, int] | None, str, int]:
    """Where a CONNECT goes: ((address, port), why, 200) or (None, the refusal's reason, its HTTP status: 502 for an
    address outside the lab, 503 for a Service the lab has no endpoint for)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if host in LOOPBACK_NAMES:
            return ("127.0.0.1", port), "loopback", 200
        return None, f"{host}: not an address of this machine or the Service network {SERVICE_CIDR}", 502
    if ip.is_loopback:
        return (str(ip), port), "loopback", 200
    if ip not in ipaddress.ip_network(SERVICE_CIDR):
        return None, f"{host}: outside the lab (loopback and the Service network {SERVICE_CIDR} only)", 502
    svc = resolver.service(str(ip))
    if svc is None:
        return None, f"{host}: no Service holds this ClusterIP", 503
    key = _key(svc[0], svc[1], port)
    target = read_routes(cfg).get(key)
    if target is None:
        return None, f"Service {svc[0]}/{svc[1]} port {port}: no endpoint in the lab (no route in {ROUTES_FILE})", 503
    addr, tport = target.rsplit(":", 1)
    return (addr, int(tport)), f"Service {key}", 200


def _pump(a: socket.socket, b: socket.socket) -> None:
    socks = [a, b]
    try:
        while True:
            readable, _writable, broken = select.select(socks, [], socks, 300)
            if broken or not readable:
                return
            for s in readable:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        return


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(10)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < 8192:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            host, port = parse_connect(head)
        except (OSError, ValueError) as exc:
            self._answer(conn, 400, str(exc))
            return
        try:
            target, why, code = decide(self.server.cfg, self.server.resolver, host, port)
        except Exception as exc:  # noqa: BLE001 - the Service list failed: the caller gets a 503 naming it
            target, why, code = None, f"Service lookup failed: {exc}", 503
        if target is None:
            self._answer(conn, code, why, f"{host}:{port}")
            return
        try:
            upstream = socket.create_connection(target, timeout=10)
        except OSError as exc:
            self._answer(conn, 503, f"{why}: {target[0]}:{target[1]} refused the connection ({exc})", f"{host}:{port}")
            return
        self.server.log(f"CONNECT {host}:{port} -> {target[0]}:{target[1]} ({why})")
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        conn.settimeout(None)
        upstream.settimeout(None)
        with upstream:
            _pump(conn, upstream)

    def _answer(self, conn: socket.socket, code: int, why: str, what: str = "") -> None:
        self.server.log(f"CONNECT {what or '?'}: {code} {why}")
        reason = {400: "Bad Request", 502: "Bad Gateway", 503: "Service Unavailable"}[code]
        body = (why + "\n").encode()
        try:
            conn.sendall(
                f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n".encode()
                + body
            )
        except OSError:
            pass


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, cfg: LabConfig) -> None:
        self.cfg = cfg
        self.resolver = Resolver(cfg)
        self._log_lock = threading.Lock()
        path = socket_path(cfg)
        path.unlink(missing_ok=True)  # left by a proxy that was killed
        super().__init__(str(path), _Handler)
        path.chmod(0o600)

    def log(self, line: str) -> None:
        with self._log_lock:
            print(line, flush=True)


def serve(cfg: LabConfig) -> None:
    with _Server(cfg) as server:
        print(f"service-proxy ready on {socket_path(cfg)} (routes {routes_path(cfg)})", flush=True)
        try:
            server.serve_forever()
        finally:
            socket_path(cfg).unlink(missing_ok=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gpuops_lab.services", description=__doc__.split("\n\n", maxsplit=1)[0])
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the socket is removed on the way out
    serve(LabConfig.load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
