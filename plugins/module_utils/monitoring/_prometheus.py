# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Prometheus HTTP API instant queries, as pure functions plus one small transport (no Kubernetes client here).

- :func:`query_path`: ``/api/v1/query?query=...`` (Prometheus's HTTP API), under a base URL or under the Kubernetes
  API server's service proxy (``/api/v1/namespaces/<ns>/services/<name>:<port>/proxy``), which reaches a
  Prometheus inside the cluster with the kubeconfig alone (no port-forward, no Ingress).
- :func:`parse`: the response's ``data.result`` (a vector) or a :class:`QueryError` that names the query, the HTTP
  status and Prometheus's own ``errorType``/``error``.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError


class QueryError(GpuOpsError):
    pass


def proxy_prefix(namespace: str, name: str, port: str) -> str:
    return f"/api/v1/namespaces/{namespace}/services/{name}:{port}/proxy"


def query_path(query: str, prefix: str = "") -> str:
    return prefix.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": query})


def parse(name: str, query: str, status: int, body: bytes | str) -> list[dict[str, Any]]:
    """The instant vector of a query response (``resultType`` vector; a scalar is returned as one sample)."""
    try:
        doc = json.loads(body)
    except (TypeError, ValueError):
        doc = None
    if not isinstance(doc, dict):
        text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
        raise QueryError(
            f"query {name} ({query}): HTTP {status}, not a Prometheus API answer: {text[:200]!s}. Check the URL or "
            "service: it must reach Prometheus's HTTP API (port 9090, path /api/v1/query)"
        )
    if doc.get("status") != "success":
        raise QueryError(
            f"query {name} ({query}): HTTP {status}, {doc.get('errorType', 'error')}: {doc.get('error', '')}. "
            "Fix the query (promtool check rules parses it) or the Prometheus it is sent to"
        )
    data = doc.get("data") or {}
    result = data.get("result")
    if data.get("resultType") == "scalar" and isinstance(result, list):
        return [{"metric": {}, "value": result}]
    if data.get("resultType") != "vector" or not isinstance(result, list):
        raise QueryError(f"query {name} ({query}): a {data.get('resultType')} answer, not an instant vector")
    return result
