# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Cluster-plane rules that decide before a role changes anything, as findings
``{id, severity, object, evidence, cause, fix}``. Readiness and diagnosis rules live in ``_readiness`` and
``_diag_*``; host rules in ``_host_rules``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Finding = dict[str, Any]


def second_nfd(workers: Sequence[Mapping[str, Any]], namespace: str) -> list[Finding]:
    """Never two NFDs: an NFD worker DaemonSet outside ``namespace`` (the nfd role's) means another NFD runs,
    most likely one bundled with a GPU or network operator; both would write the same node labels."""
    out: list[Finding] = []
    for ds in workers:
        meta = ds.get("metadata") or {}
        ns = meta.get("namespace") or ""
        if ns == namespace:
            continue
        release = (meta.get("labels") or {}).get("app.kubernetes.io/instance") or "unknown"
        out.append(
            {
                "id": "nfd-second-instance",
                "severity": "error",
                "object": {"kind": "DaemonSet", "namespace": ns, "name": meta.get("name") or ""},
                "evidence": [f"NFD worker DaemonSet {ns}/{meta.get('name')} of release {release}"],
                "cause": "an NFD already runs, most likely bundled with a GPU or network operator; two NFDs "
                "fight over the same node labels",
                "fix": "either drop the nfd role (gpuops_nfd_managed: false), or turn the bundled one off "
                "(gpu_operator_nfd_enabled: false, amd_gpu_operator_nfd_enabled: false)",
            }
        )
    return out


def nfd_plan_queries(variables: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The read of the nfd role's plan: NFD workers anywhere in the cluster (none with nfd_state absent)."""
    return [
        {
            "key": "workers",
            "api_version": "apps/v1",
            "kind": "DaemonSet",
            "label_selectors": ["app.kubernetes.io/name=node-feature-discovery", "role=worker"],
            "skip": variables.get("nfd_state", "present") != "present",
        }
    ]


def nfd_plan(
    variables: Mapping[str, Any], objects: Mapping[str, Sequence[Mapping[str, Any]]], planning: bool
) -> dict[str, Any]:
    """The nfd role's plan: never two NFDs (``second_nfd`` against the role's namespace); nothing with nfd_state
    absent. ``planning`` changes nothing here: the rule reads only what runs now."""
    if variables.get("nfd_state", "present") != "present":
        return {"findings": []}
    return {"findings": second_nfd(list(objects.get("workers") or []), str(variables.get("nfd_namespace", "")))}
