#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: prometheus_query
short_description: Run instant PromQL queries against a Prometheus, directly or through the Kubernetes API
version_added: 0.4.0
description:
  - Sends each query of O(queries) to Prometheus's HTTP API (C(/api/v1/query)) and returns the instant vectors.
    Read-only.
  - Reaches Prometheus at O(url), or inside the cluster through the Kubernetes API server's service proxy
    (O(service)), with the kubeconfig alone - no port-forward, no Ingress.
  - With O(unreachable=report), a Prometheus that cannot be reached is reported (RV(reachable) false, RV(error))
    instead of failing - for diagnosis that adds metrics when it can. A query Prometheus refuses always fails,
    naming the query and Prometheus's error.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._k8s_auth
  - gpuops.platform._attributes.info_module
options:
  queries:
    description: Name to PromQL expression; each result is returned under its name.
    type: dict
    default: {}
  gpu_health:
    description:
      - The GPU scrape health check of the monitoring role - per GPU node of O(gpu_health.nodes) (its hardware's GPU
        count is GPU Feature Discovery's C(nvidia.com/gpu.count) label), an up dcgm-exporter target (target label
        C(node)) and every GPU reporting (distinct C(UUID)s of C(DCGM_FI_DEV_GPU_TEMP) by C(Hostname); not
        C(DCGM_FI_DEV_GPU_UTIL), which MIG-enabled GPUs do not report). Returned as RV(health).
      - Asked again every O(gpu_health.interval) seconds until no node differs or O(gpu_health.timeout) has passed
        (a ServiceMonitor just applied is scraped only after the operator's reload and one scrape interval).
    type: dict
    suboptions:
      nodes:
        description:
          - The cluster's Node objects. Omitted, the module reads them itself through the API server (the connection
            options), also when Prometheus is asked at O(url).
        type: list
        elements: dict
      timeout:
        description: Seconds to keep asking while a node differs; 0 asks once.
        type: int
        default: 0
      interval:
        description: Seconds between two rounds.
        type: int
        default: 5
      counters:
        description:
          - Alert name to the exporter counters its rule reads beyond the exporter's default list (the
            C(gpu_alert_rules) filter's C(non_default_counters)). An alert whose counters no exporter reports gets a
            warning finding C(monitoring-counters-not-exported) (it can never fire); asked once, after the wait.
        type: dict
        default: {}
      gpus:
        description:
          - Check the GPU exporters (dcgm-exporter targets and GPU series); V(false) with O(gpu_health.telemetry)
            alone.
        type: bool
        default: true
      telemetry:
        description:
          - Also check the NIC telemetry - an up DOCA Telemetry Service target (job C(gpuops-doca-telemetry), target
            label C(node)) on every node of O(gpu_health.nodes) labelled
            C(feature.node.kubernetes.io/pci-15b3.present=true). Returned as C(telemetry_rows) in RV(health), with
            C(monitoring-telemetry-not-scraped) findings.
        type: bool
        default: false
  gpu_overview:
    description:
      - Also ask, per node, for the GPUs reporting metrics (distinct C(UUID)s of C(DCGM_FI_DEV_GPU_TEMP)) and the
        firing GPU alerts (C(ALERTS) of the collection's C(GPU*) alerts); returned as RV(gpu_overview) (the
        diagnosis table's REPORTING and FIRING GPU ALERTS columns).
    type: bool
    default: false
  url:
    description: Prometheus's base URL, for example V(http://127.0.0.1:9090). Mutually exclusive with O(service).
    type: str
  service:
    description: The Prometheus Service, reached through the API server's service proxy. Mutually exclusive with O(url).
    type: dict
    suboptions:
      namespace:
        description: The Service's namespace.
        type: str
        required: true
      name:
        description: The Service's name (kube-prometheus-stack - C(<release>-prometheus)).
        type: str
        required: true
      port:
        description: The port's name or number (kube-prometheus-stack - C(http-web)).
        type: str
        default: http-web
  url_validate_certs:
    description: Verify the TLS certificate of O(url).
    type: bool
    default: true
  unreachable:
    description: What a Prometheus that cannot be reached does - V(fail), or V(report) it in the result.
    type: str
    choices: [fail, report]
    default: fail
  timeout:
    description: Seconds per query.
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: GPUs reporting per node, through the API server's service proxy
  gpuops.platform.prometheus_query:
    kubeconfig: "{{ gpuops_kubeconfig }}"
    service: {namespace: monitoring, name: kube-prometheus-stack-prometheus}
    queries:
      gpus: count by (Hostname) (count by (Hostname, UUID) (DCGM_FI_DEV_GPU_TEMP))
  register: _prom

- name: Firing GPU alerts, if Prometheus answers
  gpuops.platform.prometheus_query:
    url: http://prometheus.example:9090
    queries:
      alerts: ALERTS{alertstate="firing", Hostname!=""}
    unreachable: report
  register: _alerts
"""

RETURN = r"""
results:
  description: 'Query name to its instant vector (C([{metric, value - [time, "value"]}])); empty when unreachable.'
  returned: always
  type: dict
reachable:
  description: Whether Prometheus answered.
  returned: always
  type: bool
error:
  description: Why Prometheus could not be reached (O(unreachable=report)).
  returned: when not reachable
  type: str
via:
  description: V(url) or V(service proxy).
  returned: always
  type: str
gpu_overview:
  description: With O(gpu_overview), node name to C({alerts - [Alert or Alert(gpu N)], reporting - GPUs}).
  returned: when O(gpu_overview) is true and Prometheus answered
  type: dict
health:
  description:
    - With O(gpu_health), C(rows) (per GPU node - C(node), C(gpus), C(exporter_up), C(gpu_series)), C(telemetry_rows)
      (with O(gpu_health.telemetry), per node with NVIDIA NICs - C(node), C(telemetry_up)) and C(findings)
      (C(monitoring-exporter-not-scraped), C(monitoring-gpu-series-mismatch) and C(monitoring-telemetry-not-scraped)
      errors, from the last round, and C(monitoring-counters-not-exported) warnings for O(gpu_health.counters) - each
      with the severity, object, evidence, cause and fix) and C(summary) (the rows in one line).
  returned: when O(gpu_health) is given and Prometheus answered
  type: dict
"""

import json  # noqa: E402 - after the documentation, as ansible-test expects
import urllib.error  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.urls import open_url  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import (  # noqa: E402
    _monitoring,
    _monitoring_health,
    _prometheus,
    _scrape_objects,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status import _readiness  # noqa: E402

ARGUMENT_SPEC = dict(
    _k8s.auth_argument_spec(),
    queries={"type": "dict", "default": {}},
    gpu_overview={"type": "bool", "default": False},
    gpu_health={
        "type": "dict",
        "options": {
            "nodes": {"type": "list", "elements": "dict"},
            "timeout": {"type": "int", "default": 0},
            "interval": {"type": "int", "default": 5},
            "counters": {"type": "dict", "default": {}},
            "gpus": {"type": "bool", "default": True},
            "telemetry": {"type": "bool", "default": False},
        },
    },
    url={"type": "str"},
    service={
        "type": "dict",
        "options": {
            "namespace": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "port": {"type": "str", "default": "http-web"},
        },
    },
    url_validate_certs={"type": "bool", "default": True},
    unreachable={"type": "str", "choices": ["fail", "report"], "default": "fail"},
    timeout={"type": "int", "default": 30},
)


class _Unreachable(Exception):
    pass


def _by_url(params: Mapping[str, Any], name: str, query: str) -> Any:
    url = params["url"].rstrip("/") + _prometheus.query_path(query)
    try:
        resp = open_url(url, timeout=params["timeout"], validate_certs=params["url_validate_certs"])
        return _prometheus.parse(name, query, resp.getcode(), resp.read())
    except urllib.error.HTTPError as exc:  # Prometheus answers a bad query with 400 and a JSON error
        return _prometheus.parse(name, query, exc.code, exc.read())
    except (urllib.error.URLError, OSError) as exc:
        raise _Unreachable(f"Prometheus at {params['url']} cannot be reached: {exc}") from exc


def _by_service(reader: Any, params: Mapping[str, Any], name: str, query: str) -> Any:
    svc = params["service"]
    prefix = _prometheus.proxy_prefix(svc["namespace"], svc["name"], svc["port"])
    what = f"Prometheus service {svc['namespace']}/{svc['name']}:{svc['port']} (query {name})"
    try:
        doc = reader.get(what, _prometheus.query_path(query, prefix), verb="query")
    except _k8s.ClusterAccessError as exc:
        if exc.details.get("status") == 400:  # a bad query: Prometheus's own error is in the message
            raise _prometheus.QueryError(f"query {name} ({query}): {exc}") from exc
        raise _Unreachable(str(exc)) from exc
    return _prometheus.parse(name, query, 200, json.dumps(doc))


def _ask(reader: Any, p: Mapping[str, Any], queries: Mapping[str, str]) -> dict[str, Any]:
    out = {}
    for name, query in queries.items():
        if p["url"]:
            out[name] = _by_url(p, name, str(query))
        else:
            out[name] = _by_service(reader, p, name, str(query))
    return out


def _health(reader: Any, p: Mapping[str, Any]) -> tuple[Any, Any]:
    """The health check, asked again (the collection's readiness Waiter) until no node differs or the timeout. Without
    O(gpu_health.nodes) the cluster's Nodes are read here (through the API server, also when Prometheus is asked at
    O(url))."""
    spec = dict(p["gpu_health"])
    if spec["nodes"] is None:
        spec["nodes"] = (reader or _k8s.new_reader(p)).nodes()
    expected = _scrape_objects.expected_gpus(spec["nodes"]) if spec["gpus"] else {}
    queries = (
        {"up": _monitoring_health.UP_QUERY, "gpu_series": _monitoring_health.GPU_SERIES_QUERY} if spec["gpus"] else {}
    )
    if spec["telemetry"]:
        queries["telemetry_up"] = _monitoring_health.TELEMETRY_UP_QUERY

    def probe() -> tuple[tuple[Any, Any], list[_readiness.NotReady]]:
        got = _ask(reader, p, queries)
        health = _monitoring_health.health_findings(expected, got.get("up", []), got.get("gpu_series", []))
        if spec["telemetry"]:
            telemetry = _monitoring_health.telemetry_findings(spec["nodes"], got["telemetry_up"])
            health = {
                **health,
                "telemetry_rows": telemetry["rows"],
                "findings": health["findings"] + telemetry["findings"],
            }
        unmet = [_readiness.NotReady("Node", None, f["object"]["name"], f["id"]) for f in health["findings"]]
        return (got, health), unmet

    outcome = _readiness.Waiter(timeout=max(spec["timeout"], 0), interval=max(spec["interval"], 1)).wait(probe)
    got, health = outcome.snapshot
    query = _monitoring_health.counters_query(spec["counters"] or {})
    if query and any(row["exporter_up"] for row in health["rows"]):
        present = _ask(reader, p, {"counters": query})["counters"]
        got = {**got, "counters": present}
        health = {
            **health,
            "findings": health["findings"] + _monitoring_health.counter_findings(spec["counters"], present),
        }
    return got, {**health, "summary": _monitoring_health.summary(health)}


def run(ctx: Any) -> dict[str, Any]:
    p = ctx.params
    via = "url" if p["url"] else "service proxy"
    if not p["queries"] and not p["gpu_health"] and not p["gpu_overview"]:
        return {"failed": True, "msg": "prometheus_query: give queries, gpu_health or gpu_overview", "changed": False}
    result = {"changed": False, "via": via}
    try:
        reader = None if p["url"] else _k8s.new_reader(p)
        results = _ask(reader, p, p["queries"])
        if p["gpu_health"]:
            got, result["health"] = _health(reader, p)
            results.update({f"gpu_health_{k}": v for k, v in got.items()})
        if p["gpu_overview"]:
            got = _ask(
                reader, p, {"firing": _monitoring_health.FIRING_QUERY, "reporting": _monitoring_health.GPU_SERIES_QUERY}
            )
            result["gpu_overview"] = _monitoring.metrics_by_node(got["firing"], got["reporting"])
    except _Unreachable as exc:
        if p["unreachable"] == "fail":
            return {**result, "failed": True, "msg": str(exc), "results": {}, "reachable": False}
        return {**result, "results": {}, "reachable": False, "error": str(exc)}
    return {**result, "results": results, "reachable": True}


def main() -> None:
    run_module(
        run,
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
        mutually_exclusive=[("url", "service")],
        required_one_of=[("url", "service")],
    )


if __name__ == "__main__":
    main()
