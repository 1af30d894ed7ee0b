# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Charts from OCI registries (``oci://`` repositories): the chart reference, the ``helm pull`` argv, what a
failed pull means (reason and fix, from helm's output) and the registry's tag list URL and token challenge
(to name the versions a registry has when the pinned one is missing)."""

from __future__ import annotations

import re

# rc of coreutils timeout(1) when it stopped the command
TIMEOUT_RC = 124

_REF = re.compile(r"^oci://(?P<host>[A-Za-z0-9.-]+(?::[0-9]{1,5})?)(?P<path>(?:/[a-z0-9][a-z0-9._/-]*)?)\Z")
_CHART = re.compile(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?\Z")

# (reason id, output patterns (lower case), reason text, fix); the first row that matches wins
_REASONS = (
    ("timeout", (), "the registry did not answer within {timeout}s", "check the network, a proxy or the mirror"),
    (
        "tls",
        ("x509:", "certificate signed by unknown authority", "tls: failed to verify", "certificate is not valid"),
        "the registry's TLS certificate is not trusted",
        "give the registry's CA bundle in gpuops_chart_repo_ca_file",
    ),
    (
        "plain_http",
        ("server gave http response to https client",),
        "the registry answers plain HTTP, not HTTPS",
        "serve the registry over HTTPS (a private CA goes in gpuops_chart_repo_ca_file)",
    ),
    (
        "auth",
        ("unauthorized", "401", "403", "denied", "authentication required", "forbidden"),
        "the registry refused access (authentication or authorization)",
        "log in on this host with `helm registry login <host>` (helm's registry config) or use a mirror that "
        "allows anonymous pulls",
    ),
    (
        "unreachable",
        (
            "connection refused",
            "no such host",
            "network is unreachable",
            "i/o timeout",
            "context deadline exceeded",
            "connection reset",
            "no route to host",
            "dial tcp",
        ),
        "the registry is unreachable",
        "check the URL, DNS, the network or the mirror (gpuops_chart_repo_mirror)",
    ),
    (
        "not_found",
        ("not found", "manifest unknown", "name unknown", "name_unknown", "manifest_unknown"),
        "the registry has no such chart version",
        "pin a version the registry has or push the chart to the mirror",
    ),
)


def chart_ref(repo_url: str, chart_name: str) -> str:
    """``oci://<host>[/<path>]/<chart>`` from an ``oci://`` repository URL and a chart name; ValueError names
    what is wrong."""
    repo = (repo_url or "").strip().rstrip("/")
    if not _REF.match(repo):
        raise ValueError(
            f"'{repo_url}' is not an oci:// repository URL (expected oci://<host>[:<port>][/<path>], "
            "for example oci://ghcr.io/k8snetworkplumbingwg)"
        )
    if not _CHART.match(chart_name or ""):
        raise ValueError(f"'{chart_name}' is not a chart name (lower case letters, digits, '.', '_', '-')")
    return f"{repo}/{chart_name}"


def is_oci(url: str) -> bool:
    return (url or "").strip().lower().startswith("oci://")


def pull_argv(ref: str, version: str, destination: str, ca_file: str | None = None) -> list[str]:
    """The argv tail of ``helm pull`` for one pinned version, unpacked into ``destination``."""
    argv = ["pull", ref, "--version", version, "--untar", "--destination", destination]
    if ca_file:
        argv += ["--ca-file", ca_file]
    return argv


def classify(rc: int, output: str, timeout: int = 0) -> tuple[str, str, str]:
    """(reason id, reason, fix) of a failed ``helm pull`` from its rc and output."""
    text = (output or "").lower()
    for rid, patterns, reason, fix in _REASONS:
        if (rid == "timeout" and rc == TIMEOUT_RC) or any(p in text for p in patterns):
            return rid, reason.format(timeout=timeout), fix
    return "helm_failed", "helm pull failed", "read helm's output below and check the reference and the registry"


def tags_url(ref: str) -> tuple[str, str]:
    """(URL of the registry's tag list of ``ref``, repository name) per the OCI distribution spec."""
    m = _REF.match(ref)
    if not m:
        raise ValueError(f"'{ref}' is not an oci:// chart reference")
    name = m.group("path").lstrip("/")
    return f"https://{m.group('host')}/v2/{name}/tags/list", name


def bearer_challenge(header: str) -> dict[str, str]:
    """The parameters of a ``WWW-Authenticate: Bearer realm=...,service=...,scope=...`` header; {} for another
    scheme."""
    scheme, _sep, rest = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return {}
    return {k.lower(): v for k, v in re.findall(r'([A-Za-z]+)="([^"]*)"', rest)}


def version_tag(version: str) -> str:
    """The tag a chart version is stored under (OCI tags cannot hold '+': helm writes '_')."""
    return version.replace("+", "_")


def failure_message(caller: str, ref: str, version: str, reason: str, fix: str, detail: str = "") -> str:
    who = f"{caller}: " if caller else ""
    more = f" ({detail})" if detail else ""
    return f"{who}cannot pull chart {ref} version {version}: {reason}{more}. Fix: {fix}. Nothing was changed."
