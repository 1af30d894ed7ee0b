# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Kubernetes API access for the cluster-plane modules: the shared connection options (paired with the
``gpuops.platform._k8s_auth`` doc fragment), client construction, and a reader that lists objects as plain
dicts (raw JSON, no model deserialisation) and counts the HTTP requests it makes."""

from __future__ import annotations

import copy
import json
import os
import traceback

from ansible.module_utils.basic import env_fallback, missing_required_lib
from ansible_collections.gpuops.platform.plugins.module_utils._errors import GpuOpsError

K8S_IMPORT_ERROR: str | None
try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
except ImportError:
    HAS_KUBERNETES = False
    K8S_IMPORT_ERROR = traceback.format_exc()

    class ApiException(Exception):  # type: ignore[no-redef]  # noqa: N818 - stands in for the client's class
        status = None

    class ConfigException(Exception):  # type: ignore[no-redef]  # noqa: N818
        pass
else:
    HAS_KUBERNETES = True
    K8S_IMPORT_ERROR = None

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


def require_client(module) -> None:
    """Fail the module, naming the missing library, when the kubernetes client is not installed."""
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)


def auth_argument_spec():
    return copy.deepcopy(AUTH_ARG_SPEC)


class ClusterAccessError(GpuOpsError):
    """The API server could not be reached, refused the credentials, or answered an error."""


class KubeConfigError(GpuOpsError):
    """No usable connection settings (kubeconfig missing or invalid, unknown context)."""


def new_api_client(params):
    """An ApiClient from the connection options: kubeconfig (file, context) unless only ``host`` is given,
    in-cluster config when nothing is given and there is no default kubeconfig, then the explicit options
    override what was loaded."""
    cfg = k8s_client.Configuration()
    kubeconfig = params.get("kubeconfig")
    default_kubeconfig = os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
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


class Reader:
    """Lists objects as plain dicts, one GET per list (no pagination: a list is one request whatever its
    size). ``requests`` counts every HTTP request made through the ApiClient since construction."""

    def __init__(self, api_client):
        self.api_client = api_client
        self.requests = 0
        inner = api_client.call_api

        def counted(*args, **kwargs):
            self.requests += 1
            return inner(*args, **kwargs)

        api_client.call_api = counted
        self._core = k8s_client.CoreV1Api(api_client)
        self._apps = k8s_client.AppsV1Api(api_client)
        self._custom = k8s_client.CustomObjectsApi(api_client)

    def _items(self, what, call, *args, missing_ok=False):
        try:
            resp = call(*args, _preload_content=False)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            raise ClusterAccessError(_api_message(what, exc), status=exc.status) from exc
        except Exception as exc:  # urllib3/ssl/socket errors: the server is not reachable
            raise ClusterAccessError(
                f"cannot list {what}: {exc} (check host, kubeconfig and that the API server is reachable)"
            ) from exc
        return json.loads(resp.data).get("items") or []

    def nodes(self):
        return self._items("nodes", self._core.list_node)

    def pods(self, namespace):
        return self._items(f"pods in namespace {namespace}", self._core.list_namespaced_pod, namespace)

    def daemonsets(self, namespace):
        return self._items(f"daemonsets in namespace {namespace}", self._apps.list_namespaced_daemon_set, namespace)

    def cluster_custom(self, group, version, plural):
        """Cluster-scoped custom objects, or None when the CRD is not installed (404)."""
        return self._items(
            f"{plural}.{group}/{version}",
            self._custom.list_cluster_custom_object,
            group,
            version,
            plural,
            missing_ok=True,
        )

    def namespaced_custom(self, group, version, namespace, plural):
        """Namespaced custom objects, or None when the CRD is not installed (404)."""
        return self._items(
            f"{plural}.{group}/{version} in namespace {namespace}",
            self._custom.list_namespaced_custom_object,
            group,
            version,
            namespace,
            plural,
            missing_ok=True,
        )

    def objects(self, group, version, plural, namespace=None):
        """Objects of any kind served under /apis/<group>/<version> (built-in groups such as apps included),
        cluster-wide or in ``namespace``; None when the kind is not served (CRD not installed)."""
        if namespace is None:
            return self.cluster_custom(group, version, plural)
        return self.namespaced_custom(group, version, namespace, plural)


def _api_message(what, exc):
    hint = {
        401: "the credentials were refused (check api_key, client certificate or kubeconfig user)",
        403: f"the user may not list {what} (RBAC: grant list on it)",
    }.get(exc.status, "")
    reason = exc.reason or ""
    if exc.body:
        try:
            reason = json.loads(exc.body).get("message") or reason
        except (ValueError, AttributeError):
            reason = str(exc.body)[:300]
    return f"cannot list {what}: HTTP {exc.status} {reason}" + (f"; {hint}" if hint else "")
