# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Input rules of the collection's choices, once: the kubeconfig (the one rule that reads a file), a readable file,
Node Feature Discovery's sources and the batch schedulers. Pure functions that return findings ``{id, severity,
object, evidence, cause, fix}`` whose object is the variable (see ``_inputs``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kai
from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs import (
    Finding,
    a,
    amd_driver_version,
    chart_version,
    dns1123_label,
    duration,
    kind_of,
    non_empty_mapping,
    nvidia_driver_version,
    release_name,
    show,
    url,
    variable_finding,
)


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
