# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Is a pinned chart version published? The versions a repository serves for a chart, read the way the release path
reads them later (an ``http(s)://`` repository's ``index.yaml``; an ``oci://`` registry's tag list, with the
anonymous token a public registry asks for), and the input finding when the pinned version is not among them. The
run's inputs preflight asks this before the first change (``role_inputs`` option ``chart``), so a version that does
not exist stops the run before any layer changed the cluster."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ansible.module_utils.urls import open_url
from ansible_collections.gpuops.platform.plugins.module_utils.release import _helm_oci

Finding = dict[str, Any]
Fetch = Callable[[str, "str | None", int, "dict[str, str] | None"], bytes]
FetchJson = Callable[[str, "str | None", int, "dict[str, str] | None"], Any]


class RepoUnreadable(Exception):
    """The repository could not be read (the reason is the message)."""


def fetch(url: str, ca_file: str | None, timeout: int, headers: dict[str, str] | None = None) -> bytes:
    """GET ``url``; raises what open_url raises."""
    with open_url(url, headers=headers or {}, ca_path=ca_file, timeout=timeout, follow_redirects="safe") as r:
        data: bytes = r.read()
        return data


def get_json(url: str, ca_file: str | None, timeout: int, headers: dict[str, str] | None = None) -> Any:
    """GET ``url`` as JSON ({} for an empty body); raises what open_url raises."""
    return json.loads(fetch(url, ca_file, timeout, headers) or b"{}")


def oci_tags(ref: str, ca_file: str | None, timeout: int, get: FetchJson = get_json) -> list[str]:
    """The registry's tags of ``ref`` (anonymous bearer token when it asks for one); raises on any failure. Also
    helm_chart_pull's, to name the versions a registry has when the pinned one is missing."""
    url, name = _helm_oci.tags_url(ref)
    try:
        return list(get(url, ca_file, timeout, None).get("tags") or [])
    except Exception as exc:  # pylint: disable=broad-exception-caught
        code = getattr(exc, "code", None)
        headers = getattr(exc, "headers", None)
        header = headers.get("WWW-Authenticate", "") if code == 401 and headers is not None else ""
        challenge = _helm_oci.bearer_challenge(header)
        if not challenge.get("realm"):
            raise
    query = f"service={challenge.get('service', '')}&scope=repository:{name}:pull"
    token = get(f"{challenge['realm']}?{query}", ca_file, timeout, None)
    bearer = token.get("token") or token.get("access_token") or ""
    return list(get(url, ca_file, timeout, {"Authorization": f"Bearer {bearer}"}).get("tags") or [])


def index_versions(repo_url: str, chart: str, ca_file: str | None, timeout: int, get: Fetch = fetch) -> list[str]:
    """The versions of ``chart`` in an http(s) repository's ``index.yaml``; raises RepoUnreadable with the reason."""
    import yaml  # the kubernetes client, which every cluster module needs, brings PyYAML

    url = repo_url.rstrip("/") + "/index.yaml"
    try:
        doc = yaml.safe_load(get(url, ca_file, timeout, None) or b"{}") or {}
    except yaml.YAMLError as exc:
        raise RepoUnreadable(f"answered, but {url} is not a chart repository index ({exc.__class__.__name__})") from exc
    except Exception as exc:  # pylint: disable=broad-exception-caught
        code = getattr(exc, "code", None)
        if isinstance(code, int):
            raise RepoUnreadable(f"answered HTTP {code} for {url}") from exc
        raise RepoUnreadable(f"did not answer within {timeout}s ({exc})") from exc
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, dict):
        raise RepoUnreadable(f"answered, but {url} is not a chart repository index (no entries)")
    return [str(e.get("version")) for e in entries.get(chart) or [] if isinstance(e, dict)]


def published_finding(
    var: str,
    chart: str,
    version: str,
    repo_url: str,
    ca_file: str | None = None,
    timeout: int = 30,
    get: Fetch = fetch,
    get_oci: FetchJson = get_json,
) -> Finding | None:
    """The finding when ``version`` of ``chart`` is not served by ``repo_url`` (None when it is). An http(s)
    repository that cannot be read is an error (the release path would stop on it, after earlier layers changed
    the cluster); an OCI registry whose tag list cannot be read is a warning (helm's own registry login may still
    pull it)."""
    repo = repo_url.rstrip("/")
    if _helm_oci.is_oci(repo):
        try:
            ref = _helm_oci.chart_ref(repo, chart)
            tags = oci_tags(ref, ca_file, timeout, get_oci)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            return _finding(
                "chart-version-unchecked",
                "warning",
                var,
                version,
                f"The tag list of {repo}/{chart} could not be read before the run ({exc}), so the version was not "
                "checked; the release step pulls it with helm's own registry login.",
                f"make sure {repo}/{chart} has version {version}",
            )
        if _helm_oci.version_tag(version) in tags:
            return None
        return _missing(var, chart, version, repo, tags)
    try:
        versions = index_versions(repo, chart, ca_file, timeout, get)
    except RepoUnreadable as exc:
        return _finding(
            "chart-repo-unreadable",
            "error",
            var,
            version,
            f"The chart repository {repo} {exc}.",
            "check the URL, the network or the mirror (gpuops_chart_repo_mirror), and a private CA "
            "(gpuops_chart_repo_ca_file)",
        )
    return None if version in versions else _missing(var, chart, version, repo, versions)


def _missing(var: str, chart: str, version: str, repo: str, versions: list[str]) -> Finding:
    have = ", ".join(versions[:12]) + (" ..." if len(versions) > 12 else "") if versions else "no such chart"
    return _finding(
        "chart-version-not-published",
        "error",
        var,
        version,
        f"Chart {chart} {version} is not in {repo} (it has: {have}).",
        f"set {var} to a version the repository has, or publish {chart} {version} to it (or to the mirror)",
    )


def _finding(fid: str, severity: str, var: str, version: str, cause: str, fix: str) -> Finding:
    return {
        "id": fid,
        "severity": severity,
        "object": {"kind": "variable", "name": var},
        "evidence": [f"{var}: {json.dumps(version)}"],
        "cause": cause,
        "fix": fix,
    }
