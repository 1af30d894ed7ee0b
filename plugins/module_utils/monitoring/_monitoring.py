# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The monitoring role's rules, once: pure functions (no I/O). Facts checked against prometheus-operator v0.93.1
(pkg/apis/monitoring/v1: prometheus_types.go, servicemonitor_types.go), kube-prometheus-stack 88.5.3
(templates/prometheus/prometheus.yaml, values.yaml), the NVIDIA GPU Operator v26.7.0 (assets/state-dcgm-exporter) and
the AMD GPU Operator v1.5.1 (internal/metricsexporter) - ../shared/reference/upstream-apis.md §1, §6, §11.

- **What the Prometheus selects, read from its spec, not assumed** (:func:`placement`): ``serviceMonitorSelector`` and
  ``ruleSelector`` - null selects nothing, ``{}`` everything, else matchLabels and matchExpressions (In, NotIn,
  Exists, DoesNotExist); ``serviceMonitorNamespaceSelector`` and ``ruleNamespaceSelector`` - null is the Prometheus's
  own namespace only, ``{}`` every namespace. The role's objects get the labels that satisfy the selectors
  (:func:`satisfying_labels`) in a namespace the namespace selectors select, or a finding says why they cannot.
- **Scrape objects** (:func:`service_monitors`): the role's own ServiceMonitors, in the role's namespace, selecting
  the exporters' Services across namespaces (``namespaceSelector.matchNames``): NVIDIA's ``nvidia-dcgm-exporter``
  (label ``app: nvidia-dcgm-exporter``, port ``gpu-metrics``; ``jobLabel: app`` as the GPU Operator's own, so the job
  is ``nvidia-dcgm-exporter``, what the alert rules read) and AMD's device-metrics exporter (label
  ``app.kubernetes.io/service: <DeviceConfig>-metrics-exporter``, port ``exporter-port``). Not the GPU Operator's
  ServiceMonitor (ClusterPolicy ``dcgmExporter.serviceMonitor``): it lands in the operator's namespace, which a
  Prometheus with a null ``serviceMonitorNamespaceSelector`` never reads, and its labels would have to be known before
  the Prometheus is read. Both at once scrape every GPU twice (:func:`duplicate_scrape_findings`).
- **NIC telemetry** (:func:`telemetry_objects`): the Network Operator's DOCA Telemetry Service (NicClusterPolicy
  ``docaTelemetryService``) serves Prometheus on port 9189 of every node with NVIDIA NICs (host network), but upstream
  ships no Service and no ServiceMonitor for it, and its container declares no port. The role adds a headless Service
  ``gpuops-doca-telemetry`` in the operator's namespace (selector ``app.kubernetes.io/name: doca-telemetry``, numeric
  targetPort: Endpoints need no declared container port, which a PodMonitor would) and a ServiceMonitor for it (job
  ``gpuops-doca-telemetry``). Health is the ``up`` target per NIC node only: DTS's metric names are not verified.
- **Dashboards** are ConfigMaps with Grafana's sidecar label (``_dashboards``).
- **Health** (:func:`health_findings`): Prometheus has an ``up`` target for every GPU node's exporter and one GPU
  reporting (distinct UUIDs of ``DCGM_FI_DEV_GPU_TEMP``) per GPU the node's hardware has; the nodes that differ are
  named. The counters the alert rules read beyond the exporter's default list have series (:func:`counter_findings`,
  warnings: the alert named can never fire).

Here: the chart values, the Prometheus Service, the alerts and metrics by node, and :func:`build`, the role's plan.
The names are in ``_monitoring_spec``, the placement in ``_placement``, the scrape objects in ``_scrape_objects``,
the health checks in ``_monitoring_health``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils import _gpu_alerts
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _alertmanager, _dashboards
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring._monitoring_spec import (
    EXPORTER_JOB,
    OWNER_LABELS,
    OWNER_SELECTOR,
    RULE_NAME,
    Finding,
    Obj,
    _count_by,
    finding,
)
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring._placement import placement
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring._scrape_objects import (
    CHART,
    chart_fullname,
    duplicate_scrape_findings,
    pick_prometheus,
    service_monitors,
    telemetry_objects,
)
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network

# Grafana's admin Secret (the grafana chart's admin.existingSecret, userKey, passwordKey defaults)
GRAFANA_ADMIN_SECRET = "gpuops-grafana-admin"
GRAFANA_ADMIN_KEYS = ("admin-user", "admin-password")


def chart_values(variables: Mapping[str, Any]) -> tuple[dict[str, Any], list[Finding]]:
    """install: the values the role sets - Grafana's dashboard sidecar on the role's dashboard label (so the
    dashboards land in the Grafana the release runs; the sidecar reads one label), and with an admin password the
    name of the Secret the role keeps it in (the password itself is never a chart value)."""
    labels = dict(variables.get("monitoring_dashboard_labels") or {})
    dashboards = bool(variables.get("monitoring_dashboards", True))
    if str(variables.get("monitoring_mode") or "install") != "install":
        return {}, []
    if dashboards and len(labels) != 1:
        return {}, [
            finding(
                "monitoring-dashboard-labels",
                "error",
                "variable",
                "monitoring_dashboard_labels",
                [f"monitoring_dashboard_labels: {json.dumps(labels, sort_keys=True)}"],
                "Grafana's dashboard sidecar (grafana.sidecar.dashboards.label/labelValue) selects one label",
                "give one label, for example {grafana_dashboard: '1'}",
            )
        ]
    sidecar: dict[str, Any] = {"enabled": dashboards}
    if dashboards:
        ((key, value),) = labels.items()
        sidecar.update(label=str(key), labelValue=str(value))
    grafana: dict[str, Any] = {"sidecar": {"dashboards": sidecar}}
    if variables.get("monitoring_grafana_admin_password"):
        # the role writes this Secret (tasks/admin_secret.yml); the chart gets its name, never the password
        grafana["admin"] = {
            "existingSecret": str(variables.get("monitoring_grafana_admin_secret") or GRAFANA_ADMIN_SECRET),
            "userKey": GRAFANA_ADMIN_KEYS[0],
            "passwordKey": GRAFANA_ADMIN_KEYS[1],
        }
    return {"grafana": grafana}, []


OPERATED_SERVICE = {"name": "prometheus-operated", "port": "web"}  # the Prometheus Operator's governing Service


def prometheus_service(variables: Mapping[str, Any], prometheus_namespace: str | None = None) -> dict[str, str]:
    """The Service that reaches the Prometheus through the API server's proxy: install - the chart's
    ``<fullname>-prometheus`` (port ``http-web``, templates/prometheus/service.yaml); attach - the operator's
    ``prometheus-operated`` (port ``web``) in the Prometheus's namespace."""
    namespace = str(variables.get("monitoring_namespace") or "monitoring")
    if str(variables.get("monitoring_mode") or "install") == "install":
        full = chart_fullname(
            str(variables.get("monitoring_release_name") or CHART), variables.get("monitoring_values")
        )
        return {"namespace": namespace, "name": f"{full}-prometheus", "port": "http-web"}
    where = prometheus_namespace or str(variables.get("monitoring_prometheus_namespace") or namespace)
    return {"namespace": where, **OPERATED_SERVICE}


def alerts_by_node(alerts: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Firing GPU alerts (the ``ALERTS`` series, or the API's /alerts entries) by node (``Hostname``, else ``node``):
    ``Alert`` or ``Alert(gpu N)``, sorted, each once."""
    out: dict[str, set[str]] = {}
    for a in alerts:
        labels = a.get("metric") or a.get("labels") or {}
        if labels.get("alertstate", a.get("state", "firing")) != "firing":
            continue
        node = labels.get("Hostname") or labels.get("node")
        if not node or not labels.get("alertname"):
            continue
        gpu = f"(gpu {labels['gpu']})" if labels.get("gpu") not in (None, "") else ""
        out.setdefault(str(node), set()).add(f"{labels['alertname']}{gpu}")
    return {node: sorted(names) for node, names in sorted(out.items())}


def metrics_by_node(
    alerts: Sequence[Mapping[str, Any]], reporting: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Node -> ``{alerts, reporting}``: its firing GPU alerts (:func:`alerts_by_node`) and the GPUs reporting metrics
    (``reporting``: an instant vector by ``Hostname``)."""
    firing = alerts_by_node(alerts)
    counts = _count_by(reporting, "Hostname")
    return {
        node: {"alerts": firing.get(node, []), "reporting": counts.get(node, 0)}
        for node in sorted(set(firing) | set(counts))
    }


def alertmanager_namespace(variables: Mapping[str, Any]) -> str:
    """attach: the Alertmanager's namespace - ``monitoring_alertmanager_namespace``, else the Prometheus's, else the
    role's; install: the release's (the role's)."""
    namespace = str(variables.get("monitoring_namespace") or "monitoring")
    if str(variables.get("monitoring_mode") or "install") == "install":
        return namespace
    return str(
        variables.get("monitoring_alertmanager_namespace")
        or variables.get("monitoring_prometheus_namespace")
        or namespace
    )


def _wait_objects(variables: Mapping[str, Any], namespace: str) -> list[dict[str, str]]:
    """The release's Deployments validation waits for: the Prometheus Operator's and Grafana's."""
    release = str(variables.get("monitoring_release_name") or CHART)
    full = chart_fullname(release, variables.get("monitoring_values"))
    out = [{"kind": "Deployment", "name": f"{full}-operator", "namespace": namespace}]
    grafana = ((variables.get("monitoring_values") or {}).get("grafana") or {}).get("enabled", True)
    if grafana:
        out.append({"kind": "Deployment", "name": f"{release}-grafana", "namespace": namespace})
    return out


def build(
    variables: Mapping[str, Any],
    prometheuses: Sequence[Mapping[str, Any]],
    namespace_labels: Mapping[str, Any] | None = None,
    cluster_policy: Mapping[str, Any] | None = None,
    network_namespace_found: bool | None = None,
    check_mode: bool = False,
    alertmanagers: Sequence[Mapping[str, Any]] | None = None,
    alertmanager_config_crd: bool = False,
) -> dict[str, Any]:
    """Everything the role applies and its findings, from its variables and what it read: the Prometheus objects of
    the namespace it attaches in, the labels of the role's namespace, the ClusterPolicy (None without the GPU
    Operator), whether the Network Operator's namespace exists (None: not read). ``check_mode``: a missing namespace
    is then a warning, since an earlier role of the same run (the Network Operator's) would create it. With
    ``monitoring_remediation_webhook_url``, the route to the remediation webhook (``_alertmanager``): install - chart
    values (``alertmanager_values``, which outrank the user's); attach - an AlertmanagerConfig in the Alertmanager's
    namespace, from the Alertmanager objects read there (``alertmanagers``) and whether the cluster serves the
    AlertmanagerConfig CRD (``alertmanager_config_crd``)."""
    namespace = str(variables.get("monitoring_namespace") or "monitoring")
    mode = str(variables.get("monitoring_mode") or "install")
    prometheus, findings = pick_prometheus(variables, prometheuses)
    values, value_findings = chart_values(variables)
    findings += value_findings
    findings += _alertmanager.key_findings(variables)
    am_values, am_findings = _alertmanager.chart_values(variables)
    findings += am_findings
    am_namespace = alertmanager_namespace(variables)
    am_labels, am_findings = _alertmanager.alertmanager_findings(
        variables, alertmanagers or [], am_namespace, alertmanager_config_crd
    )
    findings += am_findings
    labels: dict[str, dict[str, str]] = {}
    if not findings:
        labels, placed = placement(prometheus, namespace, namespace_labels, mode)
        findings += placed
    thresholds = variables.get("monitoring_alert_thresholds") or {}
    threshold_findings = _gpu_alerts.threshold_findings(thresholds, "monitoring_alert_thresholds")
    threshold_errors = [f for f in threshold_findings if f["severity"] == "error"]
    findings += threshold_findings
    nvidia = bool(variables.get("monitoring_nvidia"))
    findings += duplicate_scrape_findings(cluster_policy, nvidia)
    objects: list[Obj] = []
    if "servicemonitor" in labels:
        objects += service_monitors(
            namespace,
            labels["servicemonitor"],
            str(variables.get("monitoring_nvidia_namespace")) if nvidia else None,
            str(variables.get("monitoring_amd_namespace")) if variables.get("monitoring_amd") else None,
            interval=str(variables.get("monitoring_scrape_interval") or "15s"),
        )
    network = bool(variables.get("monitoring_network"))
    network_namespace = str(variables.get("monitoring_network_namespace") or "nvidia-network-operator")
    port = variables.get("monitoring_network_port", _network.DOCA_TELEMETRY_PORT)
    if network and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        findings.append(
            finding(
                "monitoring-network-port-invalid",
                "error",
                "variable",
                "monitoring_network_port",
                [f"monitoring_network_port is {port}"],
                "a TCP port is a number from 1 to 65535",
                f"set the port of the DOCA Telemetry Service's prometheus= line ({_network.DOCA_TELEMETRY_PORT} in the "
                "operator's default config)",
            )
        )
        network = False
    # the telemetry Service goes in the Network Operator's namespace: without it there is nothing to scrape yet
    network_ready = not network or network_namespace_found is not False
    if not network_ready:
        findings.append(
            finding(
                "monitoring-network-namespace-missing",
                "warning" if check_mode else "error",
                "Namespace",
                network_namespace,
                ["it does not exist"],
                "monitoring_network scrapes the Network Operator's DOCA Telemetry Service, whose Service goes in the "
                "operator's namespace, and no Network Operator runs there"
                + (" (yet: in --check an earlier role of the run may create it)" if check_mode else ""),
                "install the Network Operator first (gpuops_network_operator_managed: true, playbooks/operators.yml), "
                "set monitoring_network_namespace to its namespace, or set monitoring_network: false",
            )
        )
    if "servicemonitor" in labels and network:
        objects += telemetry_objects(
            namespace,
            labels["servicemonitor"],
            network_namespace,
            int(port),
            interval=str(variables.get("monitoring_scrape_interval") or "15s"),
        )
    if "rule" in labels and not any(f["severity"] == "error" for f in findings):
        rule = _gpu_alerts.prometheus_rule(thresholds, RULE_NAME, namespace, labels["rule"])
        objects.append(_owned.owned(rule, OWNER_LABELS))
    if variables.get("monitoring_dashboards", True):
        dash_labels = variables.get("monitoring_dashboard_labels") or {"grafana_dashboard": "1"}
        objects += [_owned.owned(cm, OWNER_LABELS) for cm in _dashboards.config_maps(namespace, dash_labels)]
    if am_labels is not None:
        objects.append(_alertmanager.config_object(variables, am_namespace, am_labels))
    meta = (prometheus or {}).get("metadata") or {}
    service = prometheus_service(variables, meta.get("namespace"))
    release = str(variables.get("monitoring_release_name") or CHART)
    am_secret = f"alertmanager-{chart_fullname(release, variables.get('monitoring_values'))}-alertmanager"
    return {
        "prometheus_service": service,
        "objects": objects,
        "labels": labels,
        "chart_values": {**values, **am_values},
        # install: the remediation route's whole lists, which outrank monitoring_values (Helm replaces lists)
        "alertmanager_values": am_values,
        # install: the Secret the chart renders the Alertmanager configuration in; attach: where the route's
        # AlertmanagerConfig goes (the role's objects are read there too)
        "alertmanager_secret": {"name": am_secret, "namespace": namespace},
        "alertmanager_namespace": am_namespace,
        # where the remediation route goes (install, attach, or "" without a webhook)
        "remediation_route": _alertmanager.route_mode(variables),
        "prometheus": {"name": meta.get("name"), "namespace": meta.get("namespace")} if prometheus else None,
        "findings": findings,
        "owner_selector": OWNER_SELECTOR,
        # k8s_apply's prune: the role's objects the variables dropped (the kinds where the role puts them)
        "prune": _owned.prune_spec(
            OWNER_LABELS,
            [
                ("monitoring.coreos.com/v1", "ServiceMonitor", namespace),
                ("monitoring.coreos.com/v1", "PrometheusRule", namespace),
                ("v1", "ConfigMap", namespace),
                ("v1", "Service", None),
                ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig", am_namespace),
            ],
        ),
        "exporter_job": EXPORTER_JOB,
        # False while the telemetry Service's namespace is missing: the API server cannot dry-run the objects then
        "telemetry_namespace_ready": network_ready,
        # the counters the rules read beyond the exporter's default list, for the health check's warning
        "alert_counters": {} if threshold_errors else _gpu_alerts.non_default_counters(thresholds),
        "wait_objects": _wait_objects(variables, namespace) if mode == "install" else [],
    }
