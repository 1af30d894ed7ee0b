# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Input rules: every check of a role's (or the collection's) variables, once. Pure functions (the kubeconfig
rule reads one file) that return findings ``{id, severity, object, evidence, cause, fix}`` whose object is the
variable, whose evidence shows the value, and whose fix says what to set.

The ``role_inputs`` module runs them for every role of a run before its first change (``playbooks/site.yml``
starts with that preflight), and each role runs them again for itself (``tasks/inputs.yml``).

Here: the finding and its wording, and the value rules of names, versions, URLs, durations and mappings. The rules
of the collection's choices (kubeconfig, files, NFD sources, batch schedulers) are in ``_inputs_choices``, the
whole-role rules and :func:`check` in ``_inputs_roles``, the secrets in ``_inputs_secrets``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

Finding = dict[str, Any]

# DNS-1123 label (namespaces, most object names): lower-case alphanumerics and '-', 63 characters at most.
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
# Helm release names: DNS-1123 subdomain syntax, 53 characters at most (Helm appends suffixes to fit 63).
_RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
# A pinned chart version: one exact SemVer 2 version, optional leading v (NGC and ROCm publish v-prefixed).
_CHART_VERSION = re.compile(
    r"^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?\Z"
)
# NVIDIA data-center driver versions: 595.91.07, 580.65 (the driver container tag is <version>-<os>).
_NVIDIA_DRIVER = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?\Z")
# ROCm/amdgpu driver versions the AMD GPU Operator builds through KMM: 30.20.1, 6.4.3, 7.0.
_AMD_DRIVER = re.compile(r"^[0-9]+(\.[0-9]+){1,3}\Z")
_URL = re.compile(r"^(https?|oci)://[^\s/$.?#][^\s]*\Z")
SHELL_METACHARACTERS = frozenset(";&|$`<>(){}[]*?!~'\"\\#\n\r\t ")


def show(value: Any) -> str:
    """A value as the user wrote it in YAML, not as a Python repr."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(value)


def kind_of(value: Any) -> str:
    """The YAML kind of a value: bool, int, float, str, list, dict, null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, Mapping):
        return "dict"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


def a(kind: str) -> str:
    """'an int', 'a str'."""
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def variable_finding(fid: str, var: str, value: Any, cause: str, fix: str, *evidence: str) -> Finding:
    return {
        "id": fid,
        "severity": "error",
        "object": {"kind": "variable", "name": var},
        "evidence": [f"{var}: {show(value)}", *[e for e in evidence if e]],
        "cause": cause,
        "fix": fix,
    }


def message(f: Finding) -> str:
    """One line: the variable, its value, why it is wrong and the fix."""
    return "{}. {} Fix: {}".format("; ".join(f["evidence"]), f["cause"], f["fix"])


def _metacharacters(value: str) -> str:
    """The shell metacharacters in a value, in order of appearance: ``';' 'space'``."""
    names = {" ": "space", "\t": "tab", "\n": "newline", "\r": "carriage return"}
    found = list(dict.fromkeys(c for c in value if c in SHELL_METACHARACTERS))
    return " ".join(names.get(c, f"'{c}'") for c in found)


def dns1123_label(var: str, value: Any, allow_empty: bool = False, **_: Any) -> list[Finding]:
    """Namespaces and object names: a DNS-1123 label (the API server rejects anything else, too late); with
    ``allow_empty``, empty means "the role's default"."""
    if allow_empty and value in ("", None):
        return []
    if isinstance(value, str) and len(value) <= 63 and _DNS1123_LABEL.match(value):
        return []
    why = "is longer than 63 characters" if isinstance(value, str) and len(value) > 63 else "is not a DNS-1123 label"
    return [
        variable_finding(
            "name-invalid",
            var,
            value,
            f"The value {why} (lower-case letters, digits and '-', starting and ending with a letter or digit).",
            f"set {var} to a name such as gpu-operator.",
        )
    ]


def release_name(var: str, value: Any, **_: Any) -> list[Finding]:
    """Helm release names: DNS-1123 subdomain syntax, at most 53 characters."""
    if isinstance(value, str) and len(value) <= 53 and _RELEASE_NAME.match(value):
        return []
    too_long = isinstance(value, str) and len(value) > 53
    why = "is longer than 53 characters" if too_long else "is not a valid Helm release name"
    return [
        variable_finding(
            "release-name-invalid",
            var,
            value,
            f"The value {why} (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit).",
            f"set {var} to a name such as gpu-operator.",
        )
    ]


def chart_version(var: str, value: Any, **_: Any) -> list[Finding]:
    """A pinned chart version: one exact version, never a range, 'latest' or empty."""
    if isinstance(value, str) and _CHART_VERSION.match(value):
        return []
    return [
        variable_finding(
            "chart-version-unpinned",
            var,
            value,
            "The value is not a pinned version: the collection installs exactly one chart version per run, so"
            " ranges, 'latest' and empty values are refused.",
            f"set {var} to an exact version such as v26.7.0 (see the role's defaults for the tested one).",
        )
    ]


def _driver_version(pattern: re.Pattern[str], example: str, var: str, value: Any, allow_empty: bool) -> list[Finding]:
    if allow_empty and value in ("", None):
        return []
    text = value if isinstance(value, str) else show(value)
    if isinstance(value, str) and pattern.match(value):
        return []
    bad = _metacharacters(text)
    cause = (
        f"The value contains shell metacharacter(s) {bad}; it becomes part of an image tag and a kernel module"
        " build, so only a version is accepted."
        if bad
        else f"The value is not a driver version such as {example}."
    )
    empty = " or leave it empty for the chart's default" if allow_empty else ""
    fix = f"set {var} to a version such as {example}{empty}."
    return [variable_finding("driver-version-invalid", var, value, cause, fix)]


def nvidia_driver_version(var: str, value: Any, allow_empty: bool = True, **_: Any) -> list[Finding]:
    return _driver_version(_NVIDIA_DRIVER, "595.91.07", var, value, allow_empty)


def amd_driver_version(var: str, value: Any, allow_empty: bool = False, **_: Any) -> list[Finding]:
    return _driver_version(_AMD_DRIVER, "30.20.1", var, value, allow_empty)


def url(
    var: str,
    value: Any,
    allow_empty: bool = True,
    what: str = "the chart repository URL",
    example: str = "https://charts.mirror.example.internal",
    schemes: Any = ("http", "https", "oci"),
    **_: Any,
) -> list[Finding]:
    """A URL of one of ``schemes`` (a chart repository: http(s):// or oci://; a Prometheus: http(s):// only); ``what``
    and ``example`` say what the variable points at in the fix."""
    if allow_empty and value in ("", None):
        return []
    if isinstance(value, str) and _URL.match(value) and value.split("://", 1)[0] in schemes:
        return []
    said = " or ".join(f"{s}://" for s in schemes)
    return [
        variable_finding(
            "url-invalid",
            var,
            value,
            f"The value is not a URL starting with {said}.",
            f"set {var} to {what}, for example {example}.",
        )
    ]


# A Prometheus duration (model.ParseDuration): units from the largest, each once, at least one: 30s, 1m30s, 1h.
_DURATION = re.compile(r"(?=\d)((\d+)y)?((\d+)w)?((\d+)d)?((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?\Z")


def duration(var: str, value: Any, allow_empty: bool = True, **_: Any) -> list[Finding]:
    """A Prometheus duration such as 30s or 1m; zero is refused (a scrape or evaluation interval of 0 stops it)."""
    if allow_empty and value in ("", None):
        return []
    if isinstance(value, str) and _DURATION.match(value) and any(c in "123456789" for c in value):
        return []
    return [
        variable_finding(
            "duration-invalid",
            var,
            value,
            "The value is not a Prometheus duration (a number and a unit: ms, s, m, h, d, w, y, largest first).",
            f"set {var} to a duration such as 30s or 1m.",
        )
    ]


def non_empty_mapping(var: str, value: Any, **_: Any) -> list[Finding]:
    if isinstance(value, Mapping) and value:
        return []
    return [
        variable_finding(
            "mapping-empty",
            var,
            value,
            f"The value is {a(kind_of(value))}; a non-empty mapping is needed.",
            f"set {var} to a mapping such as {{feature.node.kubernetes.io/amd-gpu: 'true'}}.",
        )
    ]
