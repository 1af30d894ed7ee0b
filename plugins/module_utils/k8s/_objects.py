# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Reads of any objects by API version and kind, several in one module call (``cluster_objects_info``).

A role that reads five kinds with ``kubernetes.core.k8s_info`` pays five module runs (each a new Python that
imports the whole kubernetes client); the same reads here cost one run and one GET per kind, plus one discovery
GET per API group version (the kind's plural and scope, as ``k8s_info`` finds them). The answer per read has
``k8s_info``'s shape (``resources``, ``api_found``), so a task that looped ``k8s_info`` keeps its consumers."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError

QUERY_SPEC = {
    "key": {"type": "str", "no_log": False},
    "api_version": {"type": "str", "default": "v1"},
    "kind": {"type": "str", "required": True},
    "namespace": {"type": "str"},
    "name": {"type": "str"},
    "label_selectors": {"type": "list", "elements": "str", "default": []},
    "field_selectors": {"type": "list", "elements": "str", "default": []},
    "metadata_only": {"type": "bool", "default": False},
    "skip": {"type": "bool", "default": False},
}


class QueryError(GpuOpsError):
    pass


def _base(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def discover(reader: Any, api_version: str) -> dict[str, tuple[str, bool]] | None:
    """{kind: (plural, namespaced)} of the resources ``api_version`` serves (subresources left out); None when the
    API server does not serve that group version (its CRD is not installed)."""
    got = reader.get_optional(f"the API resources of {api_version}", _base(api_version))
    if got is None:
        return None
    return {
        r["kind"]: (r["name"], bool(r.get("namespaced")))
        for r in got.get("resources") or []
        if "/" not in r.get("name", "/")
    }


def path(
    api_version: str,
    plural: str,
    namespaced: bool,
    namespace: str | None = None,
    name: str | None = None,
    label_selectors: Iterable[str] = (),
    field_selectors: Iterable[str] = (),
) -> str:
    """The GET path of a list (or, with ``name``, of one object); ``namespace`` only for a namespaced kind."""
    out = _base(api_version)
    if namespaced and namespace:
        out += f"/namespaces/{urllib.parse.quote(namespace, safe='')}"
    out += f"/{plural}"
    if name:
        return out + f"/{urllib.parse.quote(name, safe='')}"
    selectors = (("labelSelector", label_selectors), ("fieldSelector", field_selectors))
    params = [(k, ",".join(v)) for k, v in selectors if v]
    return out + ("?" + urllib.parse.urlencode(params) if params else "")


def describe(query: Mapping[str, Any]) -> str:
    """The read in words, for errors: ``ConfigMap gpu-operator/x (v1)``, ``Service [a=b] (v1)``."""
    where = "/".join(x for x in (query.get("namespace"), query.get("name")) if x)
    sel = ", ".join([*(query.get("label_selectors") or []), *(query.get("field_selectors") or [])])
    return " ".join(
        x for x in (query["kind"], where, f"[{sel}]" if sel else "", f"({query.get('api_version') or 'v1'})") if x
    )


def read(reader: Any, queries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per query, in order: ``{query, resources, api_found, skipped}`` (``k8s_info``'s ``resources`` and
    ``api_found``). A kind the cluster does not serve gives ``api_found: false`` and no resources; a named object
    that does not exist gives no resources; any other error of the API server raises, naming the read."""
    served: dict[str, dict | None] = {}
    out = []
    for query in queries:
        entry: dict[str, Any] = {
            "query": query,
            "resources": [],
            "api_found": False,
            "skipped": bool(query.get("skip")),
        }
        out.append(entry)
        if entry["skipped"]:
            continue
        api_version = query.get("api_version") or "v1"
        if api_version not in served:
            served[api_version] = discover(reader, api_version)
        kinds = served[api_version]
        if kinds is None or query["kind"] not in kinds:
            continue
        entry["api_found"] = True
        plural, namespaced = kinds[query["kind"]]
        got = reader.get_optional(
            describe(query),
            path(
                api_version,
                plural,
                namespaced,
                query.get("namespace"),
                query.get("name"),
                query.get("label_selectors") or (),
                query.get("field_selectors") or (),
            ),
            metadata_only=bool(query.get("metadata_only")),
            one=bool(query.get("name")),
        )
        if got is None:
            continue
        entry["resources"] = [got] if query.get("name") else got.get("items") or []
        if not query.get("name") and not query.get("metadata_only"):
            kind = query["kind"]
            for item in entry["resources"]:  # a list's items carry no apiVersion and kind; k8s_info's do
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
    return out


def check_keys(queries: Iterable[Mapping[str, Any]]) -> None:
    """The ``key`` of each query names one result: a repeated key is an error naming it."""
    seen = set()
    for query in queries:
        key = query.get("key")
        if key is None:
            continue
        if key in seen:
            raise QueryError(
                f"queries: the key {key!r} names two reads; give each read its own key (or none) and read the "
                "results by that key from `objects`"
            )
        seen.add(key)
