# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The monitoring role's scrape objects, once: the kube-prometheus-stack chart's Prometheus, the role's own
ServiceMonitors for the GPU exporters, the NIC telemetry Service and ServiceMonitor, the duplicate-scrape findings
and the choice of the Prometheus to attach to. Pure functions (no I/O); see ``_monitoring``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring._monitoring_spec import (
    AMD_PORT,
    AMD_SERVICE_LABEL,
    API_VERSION,
    NVIDIA_PORT,
    NVIDIA_SERVICE_LABELS,
    OWNER_LABELS,
    TELEMETRY_NAME,
    TELEMETRY_PORT,
    TELEMETRY_SERVICE_LABELS,
    Finding,
    Obj,
    finding,
)
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network
from ansible_collections.gpuops.platform.plugins.module_utils.status import _sharing_status

CHART = "kube-prometheus-stack"


def chart_fullname(release: str, values: Mapping[str, Any] | None = None) -> str:
    """kube-prometheus-stack's ``kube-prometheus-stack.fullname`` (templates/_helpers.tpl): fullnameOverride, else
    the release name when it contains the chart name, else ``<release>-<chart>``; truncated to 26 characters."""
    values = values or {}
    if values.get("fullnameOverride"):
        out = str(values["fullnameOverride"])
    else:
        name = str(values.get("nameOverride") or CHART)
        out = release if name in release else f"{release}-{name}"
    return out[:26].rstrip("-")


def chart_prometheus(release: str, namespace: str, values: Mapping[str, Any] | None = None) -> Obj:
    """The Prometheus object kube-prometheus-stack 88.5.3 renders (templates/prometheus/prometheus.yaml), as far as
    the role reads it: its name and the four selectors. A selector the values leave empty becomes
    ``matchLabels: {release: <release>}`` while ``*SelectorNilUsesHelmValues`` is true (the default); the namespace
    selectors default to ``{}``. Used before the release exists (a first run, --check); afterwards the role reads
    the live object."""
    values = values or {}
    spec_values = ((values.get("prometheus") or {}).get("prometheusSpec")) or {}
    full = chart_fullname(release, values)
    name = full if values.get("cleanPrometheusOperatorObjectNames") else f"{full}-prometheus"
    spec: dict[str, Any] = {}
    for sel in ("serviceMonitorSelector", "ruleSelector"):
        given = spec_values.get(sel)
        if given:
            spec[sel] = given
        elif spec_values.get(sel.replace("Selector", "SelectorNilUsesHelmValues"), True):
            spec[sel] = {"matchLabels": {"release": release}}
        elif sel == "ruleSelector" and sel in spec_values and given is None:
            spec[sel] = None  # upstream leaves the field out: null, which selects no rule
        else:
            spec[sel] = {}
    for sel in ("serviceMonitorNamespaceSelector", "ruleNamespaceSelector"):
        spec[sel] = spec_values.get(sel) or {}
    return {
        "apiVersion": API_VERSION,
        "kind": "Prometheus",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def expected_gpus(nodes: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """GPU node -> the GPUs its hardware has, from GPU Feature Discovery's labels (``_sharing_status.nvidia_gpus``):
    ``nvidia.com/gpu.count``, which under the MIG strategy ``single`` counts MIG devices (the product label then ends
    in ``-MIG-<profile>``), divided by the profile's devices per GPU. Time-slicing replicas do not change it."""
    out: dict[str, int] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        count = len(_sharing_status.nvidia_gpus(None, labels))
        if count > 0:
            out[str(meta.get("name"))] = count
    return out


def service_monitors(
    namespace: str,
    labels: Mapping[str, str],
    nvidia_namespace: str | None,
    amd_namespace: str | None,
    amd_device_config: str = "default",
    interval: str = "15s",
) -> list[Obj]:
    """The role's ServiceMonitors, one per vendor whose namespace is given."""
    out: list[Obj] = []
    if nvidia_namespace:
        out.append(
            _service_monitor(
                "gpuops-nvidia-dcgm-exporter",
                namespace,
                labels,
                dict(NVIDIA_SERVICE_LABELS),
                nvidia_namespace,
                NVIDIA_PORT,
                interval,
                job_label="app",
            )
        )
    if amd_namespace:
        out.append(
            _service_monitor(
                "gpuops-amd-metrics-exporter",
                namespace,
                labels,
                {AMD_SERVICE_LABEL: f"{amd_device_config}-metrics-exporter"},
                amd_namespace,
                AMD_PORT,
                interval,
            )
        )
    return out


def _service_monitor(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    target_namespace: str,
    port: str,
    interval: str,
    job_label: str | None = None,
) -> Obj:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": dict(selector)},
        "namespaceSelector": {"matchNames": [target_namespace]},
        # the node of the exporter pod as target label ``node``: the health check counts targets per node
        "endpoints": [{"port": port, "path": "/metrics", "interval": interval, "relabelings": [dict(NODE_RELABELING)]}],
    }
    if job_label:
        spec["jobLabel"] = job_label
    obj = {
        "apiVersion": API_VERSION,
        "kind": "ServiceMonitor",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": spec,
    }
    return _owned.owned(obj, OWNER_LABELS)


def telemetry_objects(
    namespace: str, labels: Mapping[str, str], network_namespace: str, port: int, interval: str = "15s"
) -> list[Obj]:
    """The DOCA Telemetry Service's headless Service in the Network Operator's namespace and the role's ServiceMonitor
    for it (see the module doc)."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": TELEMETRY_NAME, "namespace": network_namespace, "labels": dict(TELEMETRY_SERVICE_LABELS)},
        "spec": {
            "clusterIP": "None",
            "selector": dict(_network.DOCA_TELEMETRY_POD_LABELS),
            "ports": [{"name": TELEMETRY_PORT, "port": int(port), "targetPort": int(port), "protocol": "TCP"}],
        },
    }
    monitor = _service_monitor(
        TELEMETRY_NAME, namespace, labels, TELEMETRY_SERVICE_LABELS, network_namespace, TELEMETRY_PORT, interval
    )
    return [_owned.owned(service, OWNER_LABELS), monitor]


def duplicate_scrape_findings(cluster_policy: Mapping[str, Any] | None, nvidia: bool) -> list[Finding]:
    """The GPU Operator's own ServiceMonitor and the role's both scraping the exporter: every series twice."""
    if not nvidia or not cluster_policy:
        return []
    sm = ((cluster_policy.get("spec") or {}).get("dcgmExporter") or {}).get("serviceMonitor") or {}
    if not sm.get("enabled"):
        return []
    name = str((cluster_policy.get("metadata") or {}).get("name"))
    return [
        finding(
            "monitoring-exporter-scraped-twice",
            "warning",
            "ClusterPolicy",
            name,
            [
                "spec.dcgmExporter.serviceMonitor.enabled: true",
                "and the role's ServiceMonitor gpuops-nvidia-dcgm-exporter",
            ],
            "if the Prometheus selects both ServiceMonitors every GPU series is scraped twice: counts double and "
            "every alert fires twice",
            "set gpu_operator_dcgm_exporter_service_monitor: false (the monitoring role scrapes the exporter)",
        )
    ]


def pick_prometheus(
    variables: Mapping[str, Any], prometheuses: Sequence[Mapping[str, Any]]
) -> tuple[Mapping[str, Any] | None, list[Finding]]:
    """The Prometheus the role attaches to, among those read in its namespace: install - the chart's, live when given
    (after the release), else what the chart renders from the values (before the release: a first run, --check, or a
    values change about to reach the live object); attach - the one named, or the only one."""
    namespace = str(variables.get("monitoring_namespace") or "monitoring")
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in prometheuses}
    if str(variables.get("monitoring_mode") or "install") == "install":
        predicted = chart_prometheus(
            str(variables.get("monitoring_release_name") or CHART), namespace, variables.get("monitoring_values")
        )
        return by_name.get(predicted["metadata"]["name"], predicted), []
    name = str(variables.get("monitoring_prometheus_name") or "")
    if name:
        return by_name.get(name), []
    if len(by_name) > 1:
        where = str(variables.get("monitoring_prometheus_namespace") or namespace)
        return None, [
            finding(
                "monitoring-prometheus-ambiguous",
                "error",
                "Prometheus",
                where,
                [f"Prometheus objects in namespace {where}: {', '.join(sorted(by_name))}"],
                "the role attaches to one Prometheus and cannot tell which",
                "set monitoring_prometheus_name",
            )
        ]
    return next(iter(by_name.values()), None), []


NODE_RELABELING = {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}
