# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The monitoring role's plan in one call (action gpuops.platform.role_plan): what it reads, then ``_monitoring.build``
from that. Two phases: ``preflight`` (before any change: the role's namespace, the Prometheus objects to attach to,
the ClusterPolicy, the Network Operator's namespace, the Alertmanager and its AlertmanagerConfig CRD for an attached
remediation route) and ``release`` (after the kube-prometheus-stack release, in install mode: the release's live
Prometheus - the objects are rebuilt from its selectors; otherwise the preflight's plan stands)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _alertmanager, _monitoring

Objects = Mapping[str, Sequence[Mapping[str, Any]]]


def _flag(variables: Mapping[str, Any], name: str) -> bool:
    return boolean(variables.get(name, False), strict=False)


def preflight_queries(variables: Mapping[str, Any]) -> list[dict[str, Any]]:
    namespace = str(variables.get("monitoring_namespace") or "")
    attach = str(variables.get("monitoring_mode") or "install") == "attach"
    no_attached_route = _alertmanager.route_mode(variables) != "attach"
    return [
        {"key": "namespace", "kind": "Namespace", "name": namespace},
        {
            "key": "prometheuses",
            "api_version": "monitoring.coreos.com/v1",
            "kind": "Prometheus",
            "namespace": str(variables.get("monitoring_prometheus_namespace") or namespace),
            "skip": not attach,
        },
        {
            "key": "cluster_policy",
            "api_version": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "skip": not _flag(variables, "monitoring_nvidia"),
        },
        # the DOCA Telemetry Service's Service goes there
        {
            "key": "network_namespace",
            "kind": "Namespace",
            "name": str(variables.get("monitoring_network_namespace") or ""),
            "skip": not _flag(variables, "monitoring_network"),
        },
        # attach with the remediation route: the Alertmanager its AlertmanagerConfig goes to, and that CRD
        {
            "key": "alertmanagers",
            "api_version": "monitoring.coreos.com/v1",
            "kind": "Alertmanager",
            "namespace": str(variables.get("monitoring_alertmanager_namespace") or ""),
            "skip": no_attached_route,
        },
        {
            "key": "alertmanagerconfigs_crd",
            "api_version": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "name": "alertmanagerconfigs.monitoring.coreos.com",
            "skip": no_attached_route,
        },
    ]


def release_queries(variables: Mapping[str, Any]) -> list[dict[str, Any]]:
    """After the release: its live Prometheus (install mode only) and, to rebuild from it, what the preflight read."""
    install = str(variables.get("monitoring_mode") or "install") == "install"
    reads = [
        q for q in preflight_queries(variables) if q["key"] in ("namespace", "cluster_policy", "network_namespace")
    ]
    return [
        *reads,
        {
            "key": "prometheuses",
            "api_version": "monitoring.coreos.com/v1",
            "kind": "Prometheus",
            "namespace": str(variables.get("monitoring_namespace") or ""),
            "skip": not install,
        },
    ]


def _build(variables: Mapping[str, Any], objects: Objects, planning: bool, with_route: bool) -> dict[str, Any]:
    namespace = list(objects.get("namespace") or [])
    policy = list(objects.get("cluster_policy") or [])
    network = None if not _flag(variables, "monitoring_network") else bool(objects.get("network_namespace"))
    return _monitoring.build(
        variables,
        list(objects.get("prometheuses") or []),
        dict((namespace[0].get("metadata") or {}).get("labels") or {}) if namespace else {},
        policy[0] if policy else None,
        network_namespace_found=network,
        check_mode=planning,
        alertmanagers=list(objects.get("alertmanagers") or []) if with_route else [],
        alertmanager_config_crd=bool(objects.get("alertmanagerconfigs_crd")) if with_route else False,
    )


def landing_findings(wanted: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``monitoring-object-not-landed`` per applied object whose spec or labels are not the live object's."""
    return _owned.landing_findings(
        wanted,
        live,
        "monitoring-object-not-landed",
        "install the Prometheus Operator's CRDs of a version that has these fields, or find the other writer "
        "(kubectl get --show-managed-fields)",
    )


def preflight_plan(variables: Mapping[str, Any], objects: Objects, planning: bool) -> dict[str, Any]:
    """Everything the role applies and its findings, before any change; with monitoring_state absent none is judged."""
    built = _build(variables, objects, planning, with_route=True)
    if str(variables.get("monitoring_state") or "present") != "present":
        built["findings"] = []
    return built


def release_plan(
    variables: Mapping[str, Any], objects: Objects, planning: bool, previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Install mode with the release's Prometheus there: rebuilt from its live selectors (the findings judged again).
    Otherwise - attach mode, or a first install in check mode, before the Prometheus exists - ``previous`` (the
    preflight's plan) stands, and nothing is judged again."""
    install = str(variables.get("monitoring_mode") or "install") == "install"
    if install and objects.get("prometheuses"):
        return {**_build(variables, objects, planning, with_route=False), "rebuilt": True}
    return {**dict(previous or {}), "findings": [], "rebuilt": False}
