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
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible.module_utils.common.validation import (
    check_type_bool,
    check_type_dict,
    check_type_float,
    check_type_int,
    check_type_list,
    check_type_path,
    check_type_str,
)
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kai

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


# --- value rules: (var, value, **options) -> findings -----------------------------------------------------


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


def kubeconfig(
    var: str, value: Any, context: str | None = None, context_var: str = "gpuops_kubeconfig_context", **_: Any
) -> list[Finding]:
    """The kubeconfig file: it exists, is readable, is a kubeconfig (mapping with the clusters, contexts and
    users lists) and names the context asked for. Empty: the Kubernetes client's own default applies."""
    if value in ("", None):
        return []
    fix = f"set {var} to the path of a valid kubeconfig (for example ~/.kube/config)"
    if isinstance(value, Mapping):  # kubernetes.core also takes the kubeconfig's content
        return _kubeconfig_doc(var, value, value, context, context_var, fix)
    if not isinstance(value, str):
        cause = f"The value is {a(kind_of(value))}, not a path."
        return [variable_finding("kubeconfig-invalid", var, value, cause, fix + ".")]
    path = os.path.expanduser(value)
    if not os.path.exists(path):
        cause = "The file does not exist on the host that talks to the cluster."
        return [variable_finding("kubeconfig-missing", var, value, cause, fix + ".")]
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        return [variable_finding("kubeconfig-unreadable", var, value, f"The file cannot be read: {exc}.", fix + ".")]
    try:
        import yaml  # a dependency of the kubernetes client the roles need anyway
    except ImportError:  # pragma: no cover - the collection requires PyYAML through kubernetes
        return []
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        return [variable_finding("kubeconfig-malformed", var, value, f"The file is not YAML{line}.", fix + ".")]
    return _kubeconfig_doc(var, value, doc, context, context_var, fix)


def _kubeconfig_doc(var: str, value: Any, doc: Any, context: str | None, context_var: str, fix: str) -> list[Finding]:
    problems = _kubeconfig_problems(doc)
    if problems:
        return [
            variable_finding(
                "kubeconfig-malformed",
                var,
                value,
                "The file is not a kubeconfig: " + "; ".join(problems) + ".",
                fix + " (kubectl config view --kubeconfig <file> shows what a client reads).",
            )
        ]
    names = [c.get("name") for c in doc.get("contexts") or [] if isinstance(c, Mapping)]
    wanted = context or doc.get("current-context")
    if context and context not in names:
        where = value if isinstance(value, str) else "given"
        return [
            variable_finding(
                "kubeconfig-context-missing",
                context_var,
                context,
                f"The kubeconfig {where} ({var}) has no such context; it has: {', '.join(map(str, names)) or 'none'}.",
                f"set {context_var} to one of its contexts, or leave it empty for the current context.",
            )
        ]
    if not wanted:
        return [
            variable_finding(
                "kubeconfig-context-missing",
                var,
                value,
                "The file sets no current-context and no context is asked for.",
                f"set {context_var} to one of: {', '.join(map(str, names)) or '(the file has no contexts)'}.",
            )
        ]
    return []


def _kubeconfig_problems(doc: Any) -> list[str]:
    if not isinstance(doc, Mapping):
        return [f"its content is {a(kind_of(doc))} ({show(doc)[:40]}), not a mapping"]
    out = []
    for key in ("clusters", "contexts", "users"):
        entries = doc.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list) or not all(isinstance(e, Mapping) and "name" in e for e in entries):
            out.append(f"'{key}' is not a list of named entries")
    if not doc.get("clusters"):
        out.append("it has no clusters")
    return out


def readable_file(var: str, value: Any, allow_empty: bool = True, what: str = "a file", **_: Any) -> list[Finding]:
    """A path on the host running the roles that must name a readable file (a CA bundle): a missing one fails only
    at the first download, after earlier layers changed the cluster."""
    if allow_empty and value in ("", None):
        return []
    fix = f"set {var} to the path of {what} on the host that runs the roles"
    if not isinstance(value, str):
        return [
            variable_finding("file-invalid", var, value, f"The value is {a(kind_of(value))}, not a path.", fix + ".")
        ]
    path = os.path.expanduser(value)
    if not os.path.isfile(path):
        why = "is a directory" if os.path.isdir(path) else "does not exist"
        return [
            variable_finding("file-missing", var, value, f"The path {why} on the host that runs the roles.", fix + ".")
        ]
    if not os.access(path, os.R_OK):
        return [variable_finding("file-unreadable", var, value, "The file cannot be read by this user.", fix + ".")]
    return []


def nfd_sources(
    var: str,
    value: Any,
    gpu_operator: Any = None,
    gpu_operator_nfd: Any = None,
    amd_gpu_operator: Any = None,
    amd_gpu_operator_nfd: Any = None,
    network_operator: Any = None,
    network_operator_nfd_managed: Any = None,
    **_: Any,
) -> list[Finding]:
    """Never two Node Feature Discoveries: the nfd role (``gpuops_nfd_managed``, ``value``) and the NFD each operator
    chart bundles (on by default only when the nfd role is off). Two NFD workers label the same nodes and fight over
    the NodeFeature objects; refused before any change (the nfd role's preflight sees only what is already running).
    Unset operator options take their role's default (bundled NFD on when the nfd role is off)."""
    nfd_role = bool(value)
    sources = ["the nfd role (gpuops_nfd_managed: true)"] if nfd_role else []
    bundled = [
        (gpu_operator, gpu_operator_nfd, "gpu_operator_nfd_enabled: true (the GPU Operator chart's NFD)"),
        (
            amd_gpu_operator,
            amd_gpu_operator_nfd,
            "amd_gpu_operator_nfd_enabled: true (the AMD GPU Operator chart's NFD)",
        ),
        (
            network_operator,
            None if network_operator_nfd_managed is None else not network_operator_nfd_managed,
            "network_operator_nfd_managed: false (the Network Operator chart's NFD)",
        ),
    ]
    for managed, enabled, what in bundled:
        if managed and (not nfd_role if enabled is None else bool(enabled)):
            sources.append(what)
    if len(sources) < 2:
        return []
    return [
        variable_finding(
            "nfd-twice",
            var,
            value,
            f"Two Node Feature Discoveries would run: {' and '.join(sources)}. Their workers label the same nodes and "
            "overwrite each other's NodeFeature objects.",
            "keep one: leave gpuops_nfd_managed true and the operators' bundled NFD off (their defaults), or set "
            "gpuops_nfd_managed false and enable the NFD of one operator chart only.",
        )
    ]


# The batch schedulers the collection knows, and those it ships a role for in this release.
BATCH_SCHEDULERS = ("kueue", "volcano", "kai_scheduler")
BATCH_SCHEDULERS_SHIPPED = ("kueue", "volcano", "kai_scheduler")
# The scheduler name each answers to (pods' spec.schedulerName); Kueue admits, kube-scheduler places.
_SCHEDULER_NAMES = {"kueue": "default-scheduler", "kai_scheduler": "kai-scheduler"}


def batch_schedulers(
    var: str,
    value: Any,
    kai_version: Any = None,
    volcano_scheduler_name: Any = None,
    sharing_pools: Any = None,
    **_: Any,
) -> list[Finding]:
    """gpuops_batch_schedulers: known names, no duplicates, a role for each in this release; never two schedulers
    answering to one scheduler name (the default one included: Volcano renamed ``default-scheduler`` races
    kube-scheduler, and Volcano named ``kai-scheduler`` races KAI); never a KAI Scheduler version that watches
    kueue.x-k8s.io/v1alpha1 Topology (up to v0.10.x, the retracted v0.20.x) next to Kueue 0.19, whose CRD no longer
    serves it (``_kai.kueue_conflict``). ``kai_version``: kai_scheduler_chart_version; ``volcano_scheduler_name``:
    volcano_scheduler_name; ``sharing_pools``: gpu_sharing_pools (a ``kai_fraction`` pool needs KAI Scheduler)."""
    if not isinstance(value, list):
        return []  # the argument spec's type check reports it
    out = []
    fraction_pools = _kai.fraction_pools(sharing_pools)
    if fraction_pools and "kai_scheduler" not in value:
        out.append(
            variable_finding(
                "batch-scheduler-kai-missing",
                var,
                value,
                f"gpu_sharing_pools {', '.join(fraction_pools)} have model {_kai.SHARING_MODEL}: fractions of a GPU "
                "are given by KAI Scheduler (global.gpuSharing), which is not installed",
                f"add kai_scheduler to {var}, or give those pools another sharing model",
            )
        )
    unknown = [v for v in value if v not in BATCH_SCHEDULERS]
    if unknown:
        out.append(
            variable_finding(
                "batch-scheduler-unknown",
                var,
                value,
                f"{', '.join(map(show, unknown))} is not a batch scheduler the collection knows",
                f"list only {', '.join(BATCH_SCHEDULERS)} in {var}",
            )
        )
    missing = [v for v in value if v in BATCH_SCHEDULERS and v not in BATCH_SCHEDULERS_SHIPPED]
    if missing:
        out.append(
            variable_finding(
                "batch-scheduler-not-shipped",
                var,
                value,
                f"this release has no role for {', '.join(missing)} "
                f"(only {', '.join(BATCH_SCHEDULERS_SHIPPED)}; docs/schedulers.md)",
                f"remove {', '.join(missing)} from {var}",
            )
        )
    if "kueue" in value and "kai_scheduler" in value and _kai.kueue_conflict(str(kai_version or "")):
        out.append(
            variable_finding(
                "batch-scheduler-conflict",
                var,
                value,
                f"KAI Scheduler {kai_version} watches kueue.x-k8s.io/v1alpha1 Topology, which Kueue 0.19's CRD no "
                "longer serves: with both, KAI stalls",
                f"pin kai_scheduler_chart_version to v0.11.0 or later (v0.17.0 has its own Topology), or keep one of "
                f"kueue and kai_scheduler in {var}",
            )
        )
    names = dict(_SCHEDULER_NAMES, volcano=str(volcano_scheduler_name or "volcano"))
    claims: dict[str, list[str]] = {}
    for sched in dict.fromkeys(v for v in value if v in names):
        if sched != "kueue":
            claims.setdefault(names[sched], []).append(sched)
    for sched_name, who in sorted(claims.items()):
        if sched_name == "default-scheduler" or len(who) > 1:
            out.append(
                variable_finding(
                    "batch-scheduler-name-claimed",
                    var,
                    value,
                    f"{' and '.join(who + (['kube-scheduler'] if sched_name == 'default-scheduler' else []))} would "
                    f"all answer to schedulerName {sched_name}: two schedulers binding the same pods race and "
                    "double-book GPUs",
                    "give each scheduler its own name (volcano_scheduler_name: volcano; KAI answers to kai-scheduler), "
                    f"or keep one of them in {var}",
                )
            )
    if len(set(value)) != len(value):
        out.append(
            variable_finding(
                "batch-scheduler-duplicate", var, value, "a scheduler is listed twice", f"list each once in {var}"
            )
        )
    return out


RULES: dict[str, Callable[..., list[Finding]]] = {
    "batch_schedulers": batch_schedulers,
    "dns1123_label": dns1123_label,
    "release_name": release_name,
    "chart_version": chart_version,
    "nvidia_driver_version": nvidia_driver_version,
    "amd_driver_version": amd_driver_version,
    "url": url,
    "duration": duration,
    "non_empty_mapping": non_empty_mapping,
    "kubeconfig": kubeconfig,
    "readable_file": readable_file,
    "nfd_sources": nfd_sources,
}


# --- whole-role rules ---------------------------------------------------------------------------------------

_CONVERT: dict[str, Callable[[Any], Any]] = {
    "str": check_type_str,
    "bool": check_type_bool,
    "int": check_type_int,
    "float": check_type_float,
    "list": check_type_list,
    "dict": check_type_dict,
    "path": check_type_path,
}


def _converts(kind: str, value: Any) -> tuple[bool, Any]:
    conv = _CONVERT.get(kind)
    if conv is None:  # raw and unknown kinds accept anything
        return True, value
    if kind == "str" and (isinstance(value, bool) or not isinstance(value, (str, int, float))):
        return False, value
    if kind == "dict" and isinstance(value, str) and not value.lstrip().startswith("{"):
        return False, value  # Ansible would read "a=b" as {a: b}: for chart values that is always a mistake
    try:
        return True, conv(value)
    except (TypeError, ValueError):
        return False, value


def argument_types(options: Mapping[str, Mapping[str, Any]], variables: Mapping[str, Any]) -> list[Finding]:
    """Each variable against its argument-spec entry (type, elements, choices, and field by field the suboptions of
    a dict or of a list of dicts), converting as Ansible's role argument validation does, so what passes here passes
    there - but before the run changes anything. Stricter than Ansible in two ways: null passes only for an option
    that declares ``default: null`` (a documented "unset"), and a field a structured value's spec does not name is an
    error with the nearest field's name (a ``quotsa`` in a Kueue team would otherwise be ignored without a word)."""
    out = []
    for var, value in variables.items():
        opt = options.get(var)
        if opt is None:
            continue
        if value is None and "default" in opt and opt["default"] is None and not opt.get("required"):
            continue  # declared nullable (default: null): unset means "decide for me", as Ansible accepts it
        out += _option_findings(var, opt, value)
    return out


def _option_findings(var: str, opt: Mapping[str, Any], value: Any) -> list[Finding]:
    """One value against one argument-spec entry; ``var`` is the path shown (``kueue_teams[0].quotas``)."""
    kind = opt.get("type", "str")
    ok, converted = _converts(kind, value)
    if not ok:
        return [
            variable_finding(
                "variable-type",
                var,
                value,
                f"The value is {a(kind_of(value))}; the role needs {a(kind)}.",
                f"set {var} to {a(kind)} (see the role variables in docs/variables.md).",
            )
        ]
    if kind == "list" and opt.get("elements"):
        bad = [e for e in converted if not _converts(opt["elements"], e)[0]]
        if bad:
            return [
                variable_finding(
                    "variable-type",
                    var,
                    value,
                    f"Element(s) {', '.join(show(b) for b in bad)} are not {opt['elements']}s.",
                    f"make every element of {var} a {opt['elements']}.",
                )
            ]
    if kind == "int":
        out = _int_bounds(var, value, converted)
        if out:
            return out
    choices = opt.get("choices")
    if choices and converted not in choices:
        near = difflib.get_close_matches(str(converted), [str(c) for c in choices], n=1)
        return [
            variable_finding(
                "variable-choice",
                var,
                value,
                f"The value is not one of: {', '.join(map(str, choices))}.",
                f"set {var} to {near[0] if near else 'one of them'}.",
            )
        ]
    fields = opt.get("options")
    if not fields:
        return []
    if kind == "dict" and isinstance(converted, Mapping):
        return _fields_findings(var, fields, converted)
    if kind == "list" and opt.get("elements") == "dict":
        out = []
        for i, item in enumerate(converted):
            if isinstance(item, Mapping):
                out += _fields_findings(f"{var}[{i}]", fields, item)
        return out
    return []


# The bounds of int options and fields by their name, which the argument spec cannot say: (name pattern, lowest,
# highest, what the value is). A negative wait, count or port would reach a module, Helm or the API server as nonsense.
INT_BOUNDS: tuple[tuple[re.Pattern[str], int, int | None, str], ...] = (
    (re.compile(r".*_timeout\Z"), 1, None, "a number of seconds to wait"),
    (re.compile(r".*_port\Z"), 1, 65535, "a TCP port"),
    (re.compile(r"(maxParallelUpgrades|timeoutSeconds)\Z"), 0, None, "a count or number of seconds (0: no limit)"),
)


def _int_bounds(var: str, value: Any, number: int) -> list[Finding]:
    name = re.split(r"[.\]]", var)[-1]
    for pattern, low, high, what in INT_BOUNDS:
        if not pattern.match(name):
            continue
        if number < low or (high is not None and number > high):
            span = f"from {low} to {high}" if high is not None else f"{low} or more"
            return [
                variable_finding(
                    "variable-range",
                    var,
                    value,
                    f"The value is out of range: {name} is {what}, {span}.",
                    f"set {var} to a number {span}.",
                )
            ]
        return []
    return []


def _fields_findings(var: str, fields: Mapping[str, Mapping[str, Any]], item: Mapping[str, Any]) -> list[Finding]:
    """A structured value's fields against its suboptions: unknown fields (with the nearest known one), required
    fields that are missing, and each field's own type, choices and suboptions."""
    label = f"{var} ({item['name']})" if isinstance(item.get("name"), str) else var
    out = []
    for key in item:
        if key in fields:
            continue
        near = difflib.get_close_matches(str(key), sorted(fields), n=1)
        hint = f"did you mean {near[0]}? Rename it" if near else "remove it"
        out.append(
            {
                "id": "variable-field-unknown",
                "severity": "error",
                "object": {"kind": "variable", "name": f"{var}.{key}"},
                "evidence": [f"{label} has a field {key}: {show(item[key])}"],
                "cause": f"{var} has no field {key}; its value would be ignored. Its fields: {', '.join(fields)}.",
                "fix": f"{hint} (see the role variables in docs/variables.md).",
            }
        )
    for key, sub in fields.items():
        if key not in item:
            if sub.get("required"):
                out.append(
                    {
                        "id": "variable-field-missing",
                        "severity": "error",
                        "object": {"kind": "variable", "name": f"{var}.{key}"},
                        "evidence": [f"{label}: {show(item)}"],
                        "cause": f"The field {key} is required and missing.",
                        "fix": f"set {key} in {var}.",
                    }
                )
            continue
        if item[key] is None and not sub.get("required"):
            continue  # an unset field: the role's default applies
        out += _option_findings(f"{var}.{key}", sub, item[key])
    return out


def unknown_variables(
    prefix: str, known: Iterable[str], present: Iterable[str], removed: Mapping[str, str] | None = None
) -> list[Finding]:
    """Variables with the role's prefix that the role does not have: a typo or a removed variable, whose value
    would otherwise be ignored without a word."""
    known = set(known)
    removed = removed or {}
    out = []
    for var in sorted(set(present)):
        if not var.startswith(prefix) or var in known:
            continue
        if var in removed:
            cause, fix = "The role no longer has this variable; its value would be ignored.", removed[var]
        else:
            near = difflib.get_close_matches(var, sorted(known), n=1)
            cause = "The role has no such variable; its value would be ignored."
            fix = f"did you mean {near[0]}? Rename it, or remove it." if near else "remove it (see the role variables)."
        out.append(
            {
                "id": "variable-unknown",
                "severity": "error",
                "object": {"kind": "variable", "name": var},
                "evidence": [f"{var} is set"],
                "cause": cause,
                "fix": fix,
            }
        )
    return out


def _walk(role: Any, user: Any, path: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], Any, Any]]:
    if isinstance(role, Mapping) and isinstance(user, Mapping):
        for key, sub in user.items():
            if key in role:
                yield from _walk(role[key], sub, (*path, str(key)))
        return
    yield path, role, user


def _same_kind(role: Any, user: Any) -> bool:
    r, u = kind_of(role), kind_of(user)
    if r == "null" or u == "null":
        return True
    if {r, u} <= {"int", "float"}:
        return True
    return r == u


def known_value_types(var: str, role_values: Mapping[str, Any], user_values: Any) -> list[Finding]:
    """User chart values (``<role>_values``) against the values the role itself renders: a key the role knows
    must keep its kind (a bool stays a bool, a list a list), or the chart fails with a raw template error (or
    worse, takes "false" as true)."""
    if not isinstance(user_values, Mapping):
        return [
            variable_finding(
                "variable-type",
                var,
                user_values,
                f"The value is {a(kind_of(user_values))}; chart values are a mapping.",
                f"set {var} to a mapping of chart values, for example {{driver: {{enabled: false}}}}.",
            )
        ]
    out = []
    for path, want, got in _walk(role_values, user_values, ()):
        if not _same_kind(want, got):
            where = ".".join(path)
            out.append(
                variable_finding(
                    "value-type",
                    f"{var}.{where}",
                    got,
                    f"The role sets {where} as {a(kind_of(want))} ({show(want)}); this value is {a(kind_of(got))}.",
                    f"give {var}.{where} {a(kind_of(want))} value.",
                )
            )
    return out


MASK = "********"
# A chart value whose key names a credential: Helm stores every value in the release (``helm get values -a`` shows it
# to anyone who may read the release's Secret). Keys that name a Secret (existingSecret, secretName, ...Ref) are not.
_SECRET_KEY = re.compile(
    r".*(password|passwd|passphrase|token|api[-_]?key|secret[-_]?key|access[-_]?key|private[-_]?key)\Z", re.I
)


def secret_variables(options: Mapping[str, Mapping[str, Any]] | None) -> set[str]:
    """The variables an argument spec marks ``no_log``."""
    return {name for name, opt in (options or {}).items() if isinstance(opt, Mapping) and opt.get("no_log")}


def secret_strings(value: Any) -> list[str]:
    """The strings a secret value shows in a message: the value as shown, each string in it, longest first."""
    out = {show(value)} if value not in (None, "") else set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str) and v:
            out.add(v)
        elif isinstance(v, Mapping):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return sorted(out, key=len, reverse=True)


def masked(findings: list[Finding], secrets: Mapping[str, Any]) -> list[Finding]:
    """Findings with every secret value replaced by ``********``: the evidence of a finding about a secret
    variable says its kind, never its value, and no other text carries it either."""
    texts = [s for value in secrets.values() for s in secret_strings(value) if len(s) >= 3]
    out = []
    for f in findings:
        f = dict(f)
        name = str(f.get("object", {}).get("name", ""))
        base = re.split(r"[.\[]", name)[0]
        if base in secrets:
            f["evidence"] = [f"{name}: {MASK} ({a(kind_of(secrets[base]))}, not shown: the variable is a secret)"]
        for key in ("evidence", "cause", "fix"):
            for s in texts:
                if key == "evidence":
                    f[key] = [e.replace(s, MASK) for e in f[key]]
                else:
                    f[key] = str(f[key]).replace(s, MASK)
        out.append(f)
    return out


def secret_values(var: str, user_values: Any, instead: Mapping[str, str] | None = None) -> list[Finding]:
    """Warnings for user chart values whose key names a credential (``grafana.adminPassword``): the value is stored
    in the Helm release, readable with ``helm get values -a``. ``instead`` maps a dotted key to the variable that
    keeps it in a Kubernetes Secret."""
    out: list[Finding] = []
    stack: list[tuple[str, Any]] = [("", user_values)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, Mapping):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
            continue
        key = path.rsplit(".", 1)[-1]
        if not (_SECRET_KEY.match(key) and isinstance(value, str) and value):
            continue
        better = (instead or {}).get(path)
        fix = (
            f"remove {var}.{path} and set {better} (no_log: the role keeps it in a Secret and names that in the chart)"
            if better
            else f"keep the credential in a Kubernetes Secret and give the chart the Secret's name (most charts have "
            f"an existingSecret key for {key}), or vault the variable at least"
        )
        out.append(
            {
                "id": "value-secret-in-release",
                "severity": "warning",
                "object": {"kind": "variable", "name": f"{var}.{path}"},
                "evidence": [f"{var}.{path}: {MASK}"],
                "cause": "The key names a credential: Helm stores every value in the release, where anyone who may "
                "read the release (helm get values -a) reads it.",
                "fix": fix + ".",
            }
        )
    return sorted(out, key=lambda f: f["object"]["name"])


def check(
    checks: Iterable[Mapping[str, Any]],
    variables: Mapping[str, Any],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    prefix: str | None = None,
    removed: Mapping[str, str] | None = None,
    values: Iterable[Mapping[str, Any]] = (),
    outputs: Iterable[str] = (),
) -> list[Finding]:
    """Every input rule of one role: types and choices, unknown variables (``outputs``, the facts and results the
    role sets itself, are not unknown: a second run of the role in one play sees them), the value rules named in
    ``checks`` ({var, rule, value?, ...options}) and the user values' kinds (``values``: {var, role_values})."""
    out: list[Finding] = []
    if options is not None:
        out += argument_types(options, variables)
        if prefix:
            out += unknown_variables(prefix, [*options, *outputs], variables, removed)
    typed = {f["object"]["name"] for f in out}
    for item in checks:
        var = item["var"]
        if var in typed:
            continue  # one finding per variable: the type is wrong already
        rule = RULES[item["rule"]]
        extra = {k: v for k, v in item.items() if k not in ("var", "rule", "value")}
        value = item["value"] if "value" in item else variables.get(var)
        out += rule(var, value, **extra)
    for item in values:
        if item["var"] in typed:
            continue
        user = variables.get(item["var"], {})
        out += known_value_types(item["var"], item.get("role_values") or {}, user)
        if isinstance(user, Mapping):
            out += secret_values(item["var"], user, item.get("instead"))
    secrets = {v: variables[v] for v in secret_variables(options) if variables.get(v) not in (None, "")}
    return masked(out, secrets) if secrets else out
