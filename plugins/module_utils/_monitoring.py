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
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils import (
    _dashboards,
    _gpu_alerts,
    _network,
    _owned,
)
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _status as _sharing_status

Finding = dict[str, Any]
Obj = dict[str, Any]

API_VERSION = "monitoring.coreos.com/v1"
OWNER_LABELS = _owned.owner_labels("monitoring")
OWNER_SELECTOR = _owned.selector(OWNER_LABELS)
KINDS = ("ServiceMonitor", "PrometheusRule", "ConfigMap", "Service")
MODES = ("install", "attach")
EXPORTER_JOB = "nvidia-dcgm-exporter"
NVIDIA_SERVICE_LABELS = {"app": "nvidia-dcgm-exporter"}  # the GPU Operator's Service (assets/state-dcgm-exporter)
NVIDIA_PORT = "gpu-metrics"
AMD_SERVICE_LABEL = "app.kubernetes.io/service"  # internal/metricsexporter svcLabel: <DeviceConfig>-metrics-exporter
AMD_PORT = "exporter-port"
EXISTS_VALUE = "gpuops"  # the value given to a label that a selector only needs to exist
RULE_NAME = "gpuops-gpu-alerts"
TELEMETRY_NAME = "gpuops-doca-telemetry"  # the Service, so the job, and the ServiceMonitor
TELEMETRY_JOB = TELEMETRY_NAME
TELEMETRY_PORT = "telemetry"
TELEMETRY_SERVICE_LABELS = {"gpuops.platform/scrape": "doca-telemetry"}  # what the ServiceMonitor selects


finding = _owned.finding


def _show(selector: Any) -> str:
    return "null" if selector is None else json.dumps(selector, sort_keys=True)


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, Any] | None) -> bool:
    """Kubernetes label selector semantics; ``None`` (a null selector) selects nothing, ``{}`` everything."""
    if selector is None:
        return False
    labels = labels or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), list(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def satisfying_labels(selector: Mapping[str, Any] | None) -> tuple[dict[str, str] | None, str]:
    """The fewest labels an object needs to be selected: (labels, "") or (None, why not)."""
    if selector is None:
        return None, "the selector is null, which selects nothing"
    out: dict[str, str] = {str(k): str(v) for k, v in (selector.get("matchLabels") or {}).items()}
    for expr in selector.get("matchExpressions") or []:
        key, op, values = str(expr.get("key")), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        if op == "In":
            if key in out and out[key] not in values:
                return None, f"{key} must be {out[key]} and one of {', '.join(values)}"
            out.setdefault(key, values[0] if values else "")
            if not values:
                return None, f"{key} In [] matches no value"
        elif op == "Exists":
            out.setdefault(key, EXISTS_VALUE)
        elif op == "NotIn" and key in out and out[key] in values:
            return None, f"{key} must be {out[key]} and not one of {', '.join(values)}"
        elif op == "DoesNotExist" and key in out:
            return None, f"{key} must be set and must not exist"
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return None, f"unknown operator {op}"
    # an Exists default value may collide with a NotIn of the same key
    if not selects(selector, out):
        return None, "no label set satisfies every expression"
    return out, ""


def namespace_selected(
    selector: Mapping[str, Any] | None, namespace: str, namespace_labels: Mapping[str, Any] | None, own: str
) -> bool:
    """A Prometheus namespace selector: null is the Prometheus's own namespace only; ``{}`` every namespace. The
    API server gives every namespace the label ``kubernetes.io/metadata.name``."""
    if selector is None:
        return namespace == own
    labels = {"kubernetes.io/metadata.name": namespace, **(namespace_labels or {})}
    return selects(selector, labels)


def placement(
    prometheus: Mapping[str, Any] | None, namespace: str, namespace_labels: Mapping[str, Any] | None, mode: str
) -> tuple[dict[str, dict[str, str]], list[Finding]]:
    """The labels the role's ServiceMonitors (``servicemonitor``) and PrometheusRule (``rule``) need, from the
    Prometheus object's selectors, and findings when the objects could not be selected where they would go."""
    if prometheus is None:
        return {}, [
            finding(
                "monitoring-prometheus-missing",
                "error",
                "Prometheus",
                "(none)",
                [f"monitoring_mode: {mode}; no Prometheus object found"],
                "the role attaches its ServiceMonitors and rules to a Prometheus Operator's Prometheus, read from "
                "its spec; there is none to read",
                "name the Prometheus (monitoring_prometheus_name, monitoring_prometheus_namespace), or set "
                "monitoring_mode: install",
            )
        ]
    meta = prometheus.get("metadata") or {}
    spec = prometheus.get("spec") or {}
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    own = str(meta.get("namespace") or "")
    out: dict[str, dict[str, str]] = {}
    findings: list[Finding] = []
    for what, sel_key, ns_key, kind in (
        ("servicemonitor", "serviceMonitorSelector", "serviceMonitorNamespaceSelector", "ServiceMonitors"),
        ("rule", "ruleSelector", "ruleNamespaceSelector", "PrometheusRules"),
    ):
        labels, why = satisfying_labels(spec.get(sel_key))
        if labels is None:
            findings.append(
                finding(
                    "monitoring-selector-unsatisfiable",
                    "error",
                    "Prometheus",
                    name,
                    [f"spec.{sel_key}: {_show(spec.get(sel_key))}", why],
                    f"Prometheus {name} would read none of the role's {kind}",
                    f"give the Prometheus a {sel_key} (kube-prometheus-stack: "
                    f"prometheus.prometheusSpec.{sel_key.replace('Selector', 'SelectorNilUsesHelmValues')}), or "
                    "attach to another Prometheus",
                )
            )
            continue
        out[what] = labels
        if not namespace_selected(spec.get(ns_key), namespace, namespace_labels, own):
            findings.append(
                finding(
                    "monitoring-namespace-not-selected",
                    "error",
                    "Prometheus",
                    name,
                    [
                        f"spec.{ns_key}: {_show(spec.get(ns_key))}",
                        f"monitoring_namespace: {namespace} (labels {_show(dict(namespace_labels or {}))})",
                    ],
                    f"Prometheus {name} reads {kind} only from "
                    + (
                        f"its own namespace {own}"
                        if spec.get(ns_key) is None
                        else "the namespaces its selector matches"
                    ),
                    f"set monitoring_namespace: {own}, or label namespace {namespace} to match spec.{ns_key}",
                )
            )
    return out, findings


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
) -> dict[str, Any]:
    """Everything the role applies and its findings, from its variables and what it read: the Prometheus objects of
    the namespace it attaches in, the labels of the role's namespace, the ClusterPolicy (None without the GPU
    Operator), whether the Network Operator's namespace exists (None: not read). ``check_mode``: a missing namespace
    is then a warning, since an earlier role of the same run (the Network Operator's) would create it."""
    namespace = str(variables.get("monitoring_namespace") or "monitoring")
    mode = str(variables.get("monitoring_mode") or "install")
    prometheus, findings = pick_prometheus(variables, prometheuses)
    values, value_findings = chart_values(variables)
    findings += value_findings
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
    meta = (prometheus or {}).get("metadata") or {}
    service = prometheus_service(variables, meta.get("namespace"))
    return {
        "prometheus_service": service,
        "objects": objects,
        "labels": labels,
        "chart_values": values,
        "prometheus": {"name": meta.get("name"), "namespace": meta.get("namespace")} if prometheus else None,
        "findings": findings,
        "owner_selector": OWNER_SELECTOR,
        "exporter_job": EXPORTER_JOB,
        # False while the telemetry Service's namespace is missing: the API server cannot dry-run the objects then
        "telemetry_namespace_ready": network_ready,
        # the counters the rules read beyond the exporter's default list, for the health check's warning
        "alert_counters": {} if threshold_errors else _gpu_alerts.non_default_counters(thresholds),
        "wait_objects": _wait_objects(variables, namespace) if mode == "install" else [],
    }


UP_QUERY = f'sum by (node) (up{{job="{EXPORTER_JOB}"}} == 1)'
# GPUs reporting per node: distinct UUIDs of a device field every GPU reports, MIG or not. Not DCGM_FI_DEV_GPU_UTIL,
# which a MIG-enabled GPU does not report (DCGM has no utilisation for MIG), so a MIG node would count 0.
GPU_SERIES_QUERY = "count by (Hostname) (count by (Hostname, UUID) (DCGM_FI_DEV_GPU_TEMP))"


def counters_query(counters: Mapping[str, Sequence[str]]) -> str | None:
    """The PromQL that lists which of these counters (alert -> counters its rule reads) have series, by name; None
    for none."""
    names = sorted({str(n) for names in counters.values() for n in names})
    if not names:
        return None
    return 'group by (__name__) ({__name__=~"' + "|".join(re.escape(n) for n in names) + '"})'


def counter_findings(counters: Mapping[str, Sequence[str]], present: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """One warning per alert whose rule reads a counter no exporter reports (``present``: the result of
    :func:`counters_query`). Cluster-wide, not per node: a counter the collectors CSV leaves out is missing on every
    node, while a node's hardware may leave one blank (NVLink counters on a GPU without NVLink)."""
    have = {str((series.get("metric") or {}).get("__name__", "")) for series in present}
    out = []
    for alert, names in sorted(counters.items()):
        missing = [str(n) for n in names if str(n) not in have]
        if missing:
            out.append(
                finding(
                    "monitoring-counters-not-exported",
                    "warning",
                    "Alert",
                    alert,
                    [f"no exporter reports {', '.join(missing)}"],
                    f"the exporter's collectors CSV leaves out what {alert} reads: the alert can never fire",
                    "with the GPU Operator managed here, set gpuops_monitoring_managed: true and run "
                    "playbooks/operators.yml (the gpu_operator role then writes the collectors CSV), or add the lines "
                    "to your own CSV (gpu_operator_dcgm_exporter_collectors; docs/observability.md, 'Counters the "
                    "exporter must export')",
                )
            )
    return out


TELEMETRY_UP_QUERY = f'sum by (node) (up{{job="{TELEMETRY_JOB}"}} == 1)'


def telemetry_nodes(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The nodes where the DOCA Telemetry Service runs: those with NVIDIA NICs (NFD's pci-15b3 label)."""
    out = []
    for node in nodes:
        meta = node.get("metadata") or {}
        if str((meta.get("labels") or {}).get(_network.NIC_LABEL)) == "true":
            out.append(str(meta.get("name")))
    return sorted(out)


def telemetry_findings(nodes: Sequence[Mapping[str, Any]], up: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per node with NVIDIA NICs: its up DOCA Telemetry Service targets (``up``: the result of
    :data:`TELEMETRY_UP_QUERY`). Returns a row per node and a finding per node without one; the cause names the
    driver's wait label when the driver container is not ready there (DTS waits for it)."""
    up_by = _count_by(up, "node")
    labels_of = {
        str((n.get("metadata") or {}).get("name")): (n.get("metadata") or {}).get("labels") or {} for n in nodes
    }
    rows, findings = [], []
    for node in telemetry_nodes(nodes):
        targets = up_by.get(node, 0)
        rows.append({"node": node, "telemetry_up": targets})
        if targets >= 1:
            continue
        waiting = str(labels_of[node].get(_network.MOFED_WAIT_LABEL)) == "true"
        cause = (
            f"the node's DOCA driver is not ready ({_network.MOFED_WAIT_LABEL}=true): the DOCA Telemetry Service "
            "starts only after it"
            if waiting
            else "Prometheus does not scrape the node's DOCA Telemetry Service: its NICs have no metrics"
        )
        findings.append(
            finding(
                "monitoring-telemetry-not-scraped",
                "error",
                "Node",
                node,
                [f"no target of job {TELEMETRY_JOB} with node={node} is up"],
                cause,
                "check the NicClusterPolicy's docaTelemetryService (network_operator_doca_telemetry_enabled), the "
                "doca-telemetry-service pod on the node (kubectl -n <network operator ns> get pods -l "
                "app.kubernetes.io/name=doca-telemetry -o wide), that its config's prometheus= line serves the port"
                f" the Service targets (monitoring_network_port), the Service and ServiceMonitor {TELEMETRY_NAME}"
                " and the Prometheus targets page",
            )
        )
    return {"rows": rows, "findings": findings}


FIRING_QUERY = 'ALERTS{alertstate="firing", alertname=~"GPU.*"}'  # the collection's GPU alerts that fire now
NODE_RELABELING = {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}


def _count_by(result: Sequence[Mapping[str, Any]], label: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for series in result:
        metric = series.get("metric") or {}
        value = series.get("value") or [0, "0"]
        name = str(metric.get(label, ""))
        out[name] = out.get(name, 0) + int(float(value[1]))
    return out


def health_findings(
    expected_gpus: Mapping[str, int],
    up: Sequence[Mapping[str, Any]],
    gpu_series: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Per GPU node (``expected_gpus``: node -> GPUs its hardware has): its exporter targets that are up (``up``: the
    result of :data:`UP_QUERY`, by the ``node`` target label the role's ServiceMonitor adds) and its GPU series
    (``gpu_series``: the result of :data:`GPU_SERIES_QUERY`, by dcgm-exporter's ``Hostname``, the node's name). Returns
    a row per node and findings naming the nodes that differ."""
    up_by = _count_by(up, "node")
    gpus_by = _count_by(gpu_series, "Hostname")
    rows, findings = [], []
    for node, want in sorted(expected_gpus.items()):
        targets, got = up_by.get(node, 0), gpus_by.get(node, 0)
        rows.append({"node": node, "gpus": want, "exporter_up": targets, "gpu_series": got})
        if targets < 1:
            findings.append(
                finding(
                    "monitoring-exporter-not-scraped",
                    "error",
                    "Node",
                    node,
                    [f"no target of job {EXPORTER_JOB} with node={node} is up"],
                    "Prometheus does not scrape this node's GPU exporter: its GPUs have no metrics and no alert can "
                    "fire for them",
                    "check the exporter pod on the node (kubectl -n <operator ns> get pods -l app=nvidia-dcgm-exporter "
                    "-o wide), the ServiceMonitor gpuops-nvidia-dcgm-exporter and the Prometheus targets page",
                )
            )
        elif got != want:
            findings.append(
                finding(
                    "monitoring-gpu-series-mismatch",
                    "error",
                    "Node",
                    node,
                    [f"{got} GPU(s) report DCGM_FI_DEV_GPU_TEMP (distinct UUIDs); the node's hardware has {want}"],
                    "the exporter reports a different number of GPUs than the node has: a GPU fell off the bus, or "
                    "the exporter runs with a device filter",
                    "run nvidia-smi on the node; see the GPUFallenOffBus alert and docs/observability.md",
                )
            )
    return {"rows": rows, "findings": findings}
