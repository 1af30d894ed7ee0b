# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Kubernetes API access for the cluster-plane modules: the shared connection options (paired with the
``gpuops.platform._k8s_auth`` doc fragment), client construction, and a reader that lists objects as plain
dicts (raw JSON, no model deserialisation) and counts the HTTP requests it makes.

Importing the ``kubernetes`` client costs 0.35-0.7 s of CPU (it loads every API and model class), more than the
requests themselves, and the remediation's modules sit on the path from a GPU alert to the cordon. So
``new_reader`` talks HTTP with the standard library (reads, and the plain writes of ``Reader.send``) when
the connection settings are ones it understands in full (a kubeconfig whose user has client certificates or a
token, or ``host`` with ``api_key``), and uses the kubernetes client for everything else (exec and auth-provider
plugins, in-cluster config, several kubeconfig files). Both paths give the same results and the same errors."""

from __future__ import annotations

import base64
import copy
import http.client
import importlib.util
import json
import os
import ssl
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from ansible.module_utils.basic import env_fallback, missing_required_lib
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

HAS_KUBERNETES = importlib.util.find_spec("kubernetes") is not None
K8S_IMPORT_ERROR: str | None = None if HAS_KUBERNETES else "No module named 'kubernetes'"


class _StandInApiException(Exception):  # noqa: N818 - stands in for the client's class when it is not installed
    status = None
    reason = None
    body = None


class _StandInConfigException(Exception):  # noqa: N818
    pass


def __getattr__(name: str) -> Any:
    """``ApiException`` and ``ConfigException`` of the kubernetes client, imported on first use (importing
    any part of the client loads all of it)."""
    if name not in ("ApiException", "ConfigException"):
        raise AttributeError(name)
    if not HAS_KUBERNETES:
        return _StandInApiException if name == "ApiException" else _StandInConfigException
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    return ApiException if name == "ApiException" else ConfigException


# Mirrors kubernetes.core's option names, aliases and environment variables (doc fragment _k8s_auth).
AUTH_ARG_SPEC = {
    "kubeconfig": {"type": "path", "fallback": (env_fallback, ["K8S_AUTH_KUBECONFIG"])},
    "context": {"type": "str", "fallback": (env_fallback, ["K8S_AUTH_CONTEXT"])},
    "host": {"type": "str", "fallback": (env_fallback, ["K8S_AUTH_HOST"])},
    "api_key": {"type": "str", "no_log": True, "fallback": (env_fallback, ["K8S_AUTH_API_KEY"])},
    "validate_certs": {"type": "bool", "aliases": ["verify_ssl"], "fallback": (env_fallback, ["K8S_AUTH_VERIFY_SSL"])},
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"], "fallback": (env_fallback, ["K8S_AUTH_SSL_CA_CERT"])},
    "client_cert": {"type": "path", "aliases": ["cert_file"], "fallback": (env_fallback, ["K8S_AUTH_CERT_FILE"])},
    "client_key": {
        "type": "path",
        "aliases": ["key_file"],
        "no_log": False,
        "fallback": (env_fallback, ["K8S_AUTH_KEY_FILE"]),
    },
}


def require_client(module: Any) -> None:
    """Fail the module, naming the missing library, when the kubernetes client is not installed."""
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)


def auth_argument_spec() -> dict[str, Any]:
    return copy.deepcopy(AUTH_ARG_SPEC)


class ClusterAccessError(GpuOpsError):
    """The API server could not be reached, refused the credentials, or answered an error."""


class KubeConfigError(GpuOpsError):
    """No usable connection settings (kubeconfig missing or invalid, unknown context)."""


def _default_kubeconfig() -> str:
    return os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])


def new_api_client(params: Mapping[str, Any]) -> Any:
    """An ApiClient from the connection options: kubeconfig (file, context) unless only ``host`` is given,
    in-cluster config when nothing is given and there is no default kubeconfig, then the explicit options
    override what was loaded."""
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.config.config_exception import ConfigException

    cfg = k8s_client.Configuration()
    kubeconfig = params.get("kubeconfig")
    default_kubeconfig = _default_kubeconfig()
    try:
        if kubeconfig or params.get("context") or (not params.get("host") and os.path.exists(default_kubeconfig)):
            k8s_config.load_kube_config(
                config_file=kubeconfig, context=params.get("context"), client_configuration=cfg, persist_config=False
            )
        elif not params.get("host"):
            k8s_config.load_incluster_config(client_configuration=cfg)
    except (ConfigException, OSError) as exc:
        raise KubeConfigError(
            f"cannot load Kubernetes connection settings (kubeconfig {kubeconfig or default_kubeconfig}, "
            f"context {params.get('context') or 'current'}): {exc}",
            kubeconfig=kubeconfig,
        ) from exc
    if params.get("host"):
        cfg.host = params["host"]
    if params.get("api_key"):
        # both names: older clients read "authorization", newer ones "BearerToken" (alias "authorization")
        cfg.api_key = {"authorization": f"Bearer {params['api_key']}", "BearerToken": f"Bearer {params['api_key']}"}
        cfg.api_key_prefix = {}
        cfg.refresh_api_key_hook = None  # the kubeconfig loader's hook would put the file's token back
    if params.get("validate_certs") is not None:
        cfg.verify_ssl = params["validate_certs"]
    if params.get("ca_cert"):
        cfg.ssl_ca_cert = params["ca_cert"]
    if params.get("client_cert"):
        cfg.cert_file = params["client_cert"]
    if params.get("client_key"):
        cfg.key_file = params["client_key"]
    return k8s_client.ApiClient(configuration=cfg)


# The kubeconfig keys the standard-library path understands in full; anything else (exec, auth-provider,
# username/password, impersonation, proxy-url, tls-server-name, ...) goes to the kubernetes client.
_CLUSTER_KEYS = {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify"}
_USER_KEYS = {"client-certificate", "client-certificate-data", "client-key", "client-key-data", "token"}


def _named(entries: Any, name: str) -> Any:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    return None


def simple_settings(params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The connection as plain settings {server, token, ca_file, ca_data, cert_file, cert_data, key_file,
    key_data, verify} when the standard-library path can make it exactly as the kubernetes client would;
    None otherwise (the caller then uses the client, which also reports every configuration error)."""
    kubeconfig = params.get("kubeconfig")
    out: dict[str, Any] = {"server": None, "token": None, "verify": True}
    if kubeconfig or params.get("context") or not params.get("host"):
        if not kubeconfig and os.pathsep in os.environ.get("KUBECONFIG", ""):
            return None  # several files are merged by the client
        path = kubeconfig or _default_kubeconfig()
        if yaml is None or not os.path.isfile(path):
            return None  # in-cluster config, or a missing file the client reports
        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
            ctx = _named(doc.get("contexts"), params.get("context") or doc.get("current-context"))["context"]
            cluster = _named(doc.get("clusters"), ctx["cluster"])["cluster"]
            user = (_named(doc.get("users"), ctx.get("user")) or {}).get("user") or {}
        except (OSError, ValueError, AttributeError, KeyError, TypeError, yaml.YAMLError):
            return None
        if set(cluster) - _CLUSTER_KEYS or set(user) - _USER_KEYS or not cluster.get("server"):
            return None
        base = os.path.dirname(os.path.abspath(path))

        def rel(value: str) -> str:
            return value if os.path.isabs(value) else os.path.join(base, value)

        out.update(
            server=cluster["server"],
            verify=not cluster.get("insecure-skip-tls-verify", False),
            ca_file=rel(cluster["certificate-authority"]) if cluster.get("certificate-authority") else None,
            ca_data=cluster.get("certificate-authority-data"),
            cert_file=rel(user["client-certificate"]) if user.get("client-certificate") else None,
            cert_data=user.get("client-certificate-data"),
            key_file=rel(user["client-key"]) if user.get("client-key") else None,
            key_data=user.get("client-key-data"),
            token=user.get("token"),
        )
    overrides = {
        "server": params.get("host"),
        "token": params.get("api_key"),
        "ca_file": params.get("ca_cert"),
        "cert_file": params.get("client_cert"),
        "key_file": params.get("client_key"),
    }
    for key, value in overrides.items():
        if value:
            out[key] = value
            if key.endswith("_file"):
                out.pop(key.replace("_file", "_data"), None)  # an explicit file wins over the kubeconfig's data
    if params.get("validate_certs") is not None:
        out["verify"] = params["validate_certs"]
    return out if out["server"] else None


class Http:
    """Requests with the standard library over the settings of ``simple_settings``."""

    def __init__(self, settings: Mapping[str, Any], timeout: int = 60) -> None:
        url = urllib.parse.urlsplit(settings["server"])
        self.https = url.scheme == "https"
        self.netloc, self.prefix, self.timeout = url.netloc, url.path.rstrip("/"), timeout
        self.headers = {"Accept": "application/json", "User-Agent": "gpuops.platform"}
        if settings.get("token"):
            self.headers["Authorization"] = f"Bearer {settings['token']}"
        self.context = _ssl_context(settings) if self.https else None

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str | None = None,
        accept: str | None = None,
    ) -> tuple[int, str, bytes]:
        """(status, reason, body) of ``method path`` (``accept``: another Accept header); socket and TLS errors are
        raised as they come."""
        if self.https:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.netloc, timeout=self.timeout, context=self.context
            )
        else:
            conn = http.client.HTTPConnection(self.netloc, timeout=self.timeout)
        try:
            headers = self.headers if accept is None else dict(self.headers, Accept=accept)
            if content_type is not None:
                headers = dict(headers, **{"Content-Type": content_type})
            conn.request(method, self.prefix + path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.reason, resp.read()
        finally:
            conn.close()

    def get(self, path: str, accept: str | None = None) -> tuple[int, str, bytes]:
        return self.request("GET", path, accept=accept)


def _ssl_context(settings: Any) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    if not settings["verify"]:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif settings.get("ca_data"):
        ctx.load_verify_locations(cadata=base64.b64decode(settings["ca_data"]).decode())
    elif settings.get("ca_file"):
        ctx.load_verify_locations(cafile=settings["ca_file"])
    cert, key = settings.get("cert_file"), settings.get("key_file")
    if settings.get("cert_data") or settings.get("key_data"):
        with tempfile.TemporaryDirectory(prefix="gpuops-k8s-") as tmp:  # load_cert_chain reads files only
            if settings.get("cert_data"):
                cert = os.path.join(tmp, "cert")
                with open(cert, "wb") as f:
                    f.write(base64.b64decode(settings["cert_data"]))
            if settings.get("key_data"):
                key = os.path.join(tmp, "key")
                with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                    f.write(base64.b64decode(settings["key_data"]))
            ctx.load_cert_chain(cert, key)
    elif cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def new_reader(params: Mapping[str, Any]) -> Reader:
    """A Reader over the standard library when the settings allow it (see the module docstring), else over
    the kubernetes client."""
    settings = simple_settings(params)
    if settings is not None:
        try:
            return Reader(http=Http(settings))
        except (OSError, ValueError, ssl.SSLError):
            pass  # unreadable certificate files and the like: the client reports them in its own words
    return Reader(new_api_client(params))


# The Accept header of a metadata-only read (the API server answers PartialObjectMetadata[List], meta.k8s.io/v1): a
# list's, and one object's (asked for as a list, the API server answers a named GET with 500 "content is not a list").
METADATA_ACCEPT = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
)
METADATA_ACCEPT_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

_UNREACHABLE = "(check host, kubeconfig and that the API server is reachable)"


class Reader:
    """Lists objects as plain dicts, one GET per list (no pagination: a list is one request whatever its
    size). ``requests`` counts every HTTP request made since construction. Over a kubernetes ApiClient
    (``api_client``) or the standard library (``http``, from ``new_reader``). ``send`` makes one write (POST, PUT,
    PATCH) and hands back its status for the caller to judge."""

    # HTTP 429 is the API server asking to come back: a list of a kind whose CRD was created a moment ago answers
    # "storage is (re)initializing" until its watch cache is ready (client-go retries it too). Retried every second,
    # at most this many times; then the 429 is the error.
    RETRIES_429 = 20

    def __init__(
        self, api_client: Any = None, http: Http | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.api_client, self.http, self.requests, self.sleep = api_client, http, 0, sleep

    def _get(
        self, what: str, path: str, missing_ok: bool = False, verb: str = "list", accept: str | None = None
    ) -> Any:
        for attempt in range(self.RETRIES_429 + 1):
            self.requests += 1
            try:
                if self.http is not None:
                    status, reason, body = self.http.get(path) if accept is None else self.http.get(path, accept)
                else:
                    status, reason, body = self._client_get(path, accept)
            except Exception as exc:  # socket/ssl/urllib3 errors: the server is not reachable
                raise ClusterAccessError(f"cannot {verb} {what}: {exc} {_UNREACHABLE}") from exc
            if status != 429 or attempt == self.RETRIES_429:
                break
            self.sleep(1)
        if status == 404 and missing_ok:
            return None
        if status >= 400:
            raise ClusterAccessError(_http_message(what, status, reason, body, verb), status=status)
        return json.loads(body)

    def _client_get(self, path: str, accept: str | None = None) -> tuple[int, str, Any]:
        return self._client_call("GET", path, {"Accept": accept or "application/json"})

    def _client_call(self, method: str, path: str, headers: dict[str, str], body: Any = None) -> tuple[int, str, Any]:
        """(status, reason, body) of one request through the kubernetes client; an error status comes back too."""
        exc_type: Any = __getattr__("ApiException")
        request = self.api_client.param_serialize(
            method, path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        try:
            resp = self.api_client.call_api(*request)
        except exc_type as exc:
            return exc.status, exc.reason or "", exc.body or b""
        return resp.status, resp.reason or "", resp.read()

    def send(
        self, method: str, path: str, body: Mapping[str, Any], content_type: str = "application/json"
    ) -> tuple[int, str, bytes]:
        """One write: (status, reason, body) of ``method path`` with ``body`` as JSON (``content_type``: for PATCH,
        ``application/merge-patch+json``). Any status comes back, for the caller to name; socket and TLS errors
        raise ClusterAccessError."""
        self.requests += 1
        try:
            if self.http is not None:
                return self.http.request(method, path, json.dumps(body).encode(), content_type)
            return self._client_call(
                method, path, {"Accept": "application/json", "Content-Type": content_type}, dict(body)
            )
        except Exception as exc:  # socket/ssl/urllib3 errors: the server is not reachable
            raise ClusterAccessError(f"cannot {method} {path}: {exc} {_UNREACHABLE}") from exc

    def get(self, what: str, path: str, verb: str = "read") -> Any:
        """Any GET under the API server as parsed JSON (for example a service proxy path); errors name ``what``."""
        return self._get(what, path, verb=verb)

    def get_optional(self, what: str, path: str, metadata_only: bool = False, one: bool = False) -> Any:
        """A GET as parsed JSON, or None when the server answers 404 (the object or the kind does not exist).
        ``metadata_only``: the objects' metadata only (PartialObjectMetadata, as ``kubectl get -o name`` asks);
        ``one``: the path names one object, not a list."""
        accept = (METADATA_ACCEPT_ONE if one else METADATA_ACCEPT) if metadata_only else None
        return self._get(what, path, missing_ok=True, verb="read", accept=accept)

    def _items(self, what: str, path: str, missing_ok: bool = False) -> Any:
        got = self._get(what, path, missing_ok)
        return None if got is None else got.get("items") or []

    def nodes(self) -> list[dict[str, Any]]:
        return self._items("nodes", "/api/v1/nodes")

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        return self._items(f"pods in namespace {namespace}", f"/api/v1/namespaces/{namespace}/pods")

    def daemonsets(self, namespace: str) -> list[dict[str, Any]]:
        return self._items(f"daemonsets in namespace {namespace}", f"/apis/apps/v1/namespaces/{namespace}/daemonsets")

    def core(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Objects of the core API group (``v1``), cluster-wide or in ``namespace``."""
        if namespace is None:
            return self._items(plural, f"/api/v1/{plural}")
        return self._items(f"{plural} in namespace {namespace}", f"/api/v1/namespaces/{namespace}/{plural}")

    def namespace(self, name: str) -> dict[str, Any] | None:
        """The Namespace object, or None when it does not exist."""
        return self._get(f"namespace {name}", f"/api/v1/namespaces/{name}", missing_ok=True, verb="read")

    def cluster_custom(self, group: str, version: str, plural: str) -> list[dict[str, Any]] | None:
        """Cluster-scoped custom objects, or None when the CRD is not installed (404)."""
        return self._items(f"{plural}.{group}/{version}", f"/apis/{group}/{version}/{plural}", missing_ok=True)

    def namespaced_custom(self, group: str, version: str, namespace: str, plural: str) -> list[dict[str, Any]] | None:
        """Namespaced custom objects, or None when the CRD is not installed (404)."""
        return self._items(
            f"{plural}.{group}/{version} in namespace {namespace}",
            f"/apis/{group}/{version}/namespaces/{namespace}/{plural}",
            missing_ok=True,
        )

    def objects(
        self, group: str, version: str, plural: str, namespace: str | None = None
    ) -> list[dict[str, Any]] | None:
        """Objects of any kind served under /apis/<group>/<version> (built-in groups such as apps included),
        cluster-wide or in ``namespace``; None when the kind is not served (CRD not installed)."""
        if namespace is None:
            return self.cluster_custom(group, version, plural)
        return self.namespaced_custom(group, version, namespace, plural)


def _http_message(what: str, status: int, reason: str, body: Any, verb: str = "list") -> str:
    hint = {
        401: "the credentials were refused (check api_key, client certificate or kubeconfig user)",
        403: f"the user may not {verb} {what} (RBAC: grant {verb} on it)",
    }.get(status, "")
    reason = reason or ""
    if body:
        try:
            reason = json.loads(body).get("message") or reason
        except (ValueError, AttributeError):
            reason = (body.decode(errors="replace") if isinstance(body, bytes) else str(body))[:300]
    return f"cannot {verb} {what}: HTTP {status} {reason}" + (f"; {hint}" if hint else "")


def _api_message(what: str, exc: Any) -> str:
    """The message of an ApiException of the kubernetes client (what ``_http_message`` says for a status)."""
    return _http_message(what, exc.status, exc.reason, exc.body)
