# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The Grafana dashboards the monitoring role ships, as data: pure functions (no I/O).

Each panel names the question it answers, its PromQL and the metrics it reads. :data:`METRICS` says where every
metric comes from: dcgm-exporter's default collectors (``etc/dcp-metrics-included.csv``, which the GPU Operator
runs), kube-state-metrics (``kube_node_status_allocatable``, ``kube_pod_container_resource_requests``: resource
names with ``/`` and ``.`` become ``_``), node-exporter's infiniband collector (on by default), and Prometheus's own
``ALERTS`` series. Tests parse every query with the real ``promtool`` and check its metrics against this table.

The queries read the workload's pod and namespace as ``exported_pod``/``exported_namespace``: the role's
ServiceMonitor keeps ``honorLabels: false`` (the GPU Operator's default), so the exporter's own pod fills ``pod``.
Grafana's sidecar loads the ConfigMaps that carry its label (kube-prometheus-stack 88.5.3:
``grafana.sidecar.dashboards.label: grafana_dashboard``, ``labelValue: "1"``, ``searchNamespace: ALL``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]

# metric -> where it comes from
METRICS = {
    "DCGM_FI_DEV_GPU_UTIL": "dcgm-exporter",
    "DCGM_FI_DEV_FB_USED": "dcgm-exporter",
    "DCGM_FI_DEV_FB_FREE": "dcgm-exporter",
    "DCGM_FI_DEV_GPU_TEMP": "dcgm-exporter",
    "DCGM_FI_DEV_MEMORY_TEMP": "dcgm-exporter",
    "DCGM_FI_DEV_POWER_USAGE": "dcgm-exporter",
    "DCGM_FI_DEV_XID_ERRORS": "dcgm-exporter",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "dcgm-exporter",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "dcgm-exporter",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "dcgm-exporter",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "dcgm-exporter",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "dcgm-exporter",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "dcgm-exporter",
    "kube_node_status_allocatable": "kube-state-metrics",
    "kube_pod_container_resource_requests": "kube-state-metrics",
    "node_infiniband_port_data_transmitted_bytes_total": "node-exporter",
    "node_infiniband_port_data_received_bytes_total": "node-exporter",
    "ALERTS": "prometheus",
}

_GPU_REQ = 'kube_pod_container_resource_requests{resource="nvidia_com_gpu"}'
_GPU_ALLOC = 'kube_node_status_allocatable{resource="nvidia_com_gpu"}'
_HELD = 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}'

# uid, title, [(title, question, unit, expr, legend)]
DASHBOARDS: tuple[tuple[str, str, tuple[tuple[str, str, str, str, str], ...]], ...] = (
    (
        "gpuops-cluster",
        "GPU cluster overview",
        (
            (
                "GPUs allocatable",
                "How many GPUs can the cluster schedule?",
                "none",
                f"sum({_GPU_ALLOC})",
                "allocatable",
            ),
            ("GPUs requested", "How many of them do pods ask for?", "none", f"sum({_GPU_REQ})", "requested"),
            (
                "GPUs reporting by product",
                "Which GPU models report metrics, and how many?",
                "none",
                "count by (modelName) (DCGM_FI_DEV_GPU_UTIL)",
                "{{modelName}}",
            ),
            (
                "GPUs held by namespace",
                "Which namespaces hold GPUs now?",
                "none",
                f"count by (exported_namespace) ({_HELD})",
                "{{exported_namespace}}",
            ),
            (
                "Held but idle (1 h) by namespace",
                "Who holds GPUs that did nothing for an hour?",
                "none",
                f"count by (exported_namespace) (max_over_time({_HELD}[1h]) < 5)",
                "{{exported_namespace}}",
            ),
            (
                "Utilisation by product",
                "How busy is each GPU model on average?",
                "percent",
                "avg by (modelName) (DCGM_FI_DEV_GPU_UTIL)",
                "{{modelName}}",
            ),
        ),
    ),
    (
        "gpuops-node-health",
        "GPU node health",
        (
            (
                "GPUs reporting per node",
                "Does every node report all its GPUs?",
                "none",
                "count by (Hostname) (DCGM_FI_DEV_GPU_UTIL)",
                "{{Hostname}}",
            ),
            (
                "Firing GPU alerts per node",
                "Which nodes have a sick GPU?",
                "none",
                'count by (Hostname, alertname) (ALERTS{alertstate="firing", Hostname!=""})',
                "{{Hostname}} {{alertname}}",
            ),
            (
                "Last XID per GPU",
                "Which GPU reported which XID?",
                "none",
                "max by (Hostname, gpu, err_code) (DCGM_FI_DEV_XID_ERRORS) > 0",
                "{{Hostname}} GPU {{gpu}} XID {{err_code}}",
            ),
            (
                "GPU temperature",
                "Is a GPU running hot?",
                "celsius",
                "max by (Hostname, gpu) (DCGM_FI_DEV_GPU_TEMP)",
                "{{Hostname}} GPU {{gpu}}",
            ),
            (
                "Memory temperature",
                "Is a GPU's memory running hot?",
                "celsius",
                "max by (Hostname, gpu) (DCGM_FI_DEV_MEMORY_TEMP)",
                "{{Hostname}} GPU {{gpu}}",
            ),
            (
                "Power draw",
                "Which GPUs draw the most power?",
                "watt",
                "max by (Hostname, gpu) (DCGM_FI_DEV_POWER_USAGE)",
                "{{Hostname}} GPU {{gpu}}",
            ),
            (
                "Uncorrectable remapped rows (1 d)",
                "Did a GPU's memory fail to correct data?",
                "none",
                "max by (Hostname, gpu) (increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[1d]))",
                "{{Hostname}} GPU {{gpu}}",
            ),
            (
                "PCIe replays per second",
                "Is a GPU's PCIe link corrupting packets?",
                "ops",
                "max by (Hostname, gpu) (rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[5m]))",
                "{{Hostname}} GPU {{gpu}}",
            ),
        ),
    ),
    (
        "gpuops-pod-usage",
        "GPU usage per pod",
        (
            (
                "Utilisation per pod",
                "Is each pod using the GPUs it holds?",
                "percent",
                f"avg by (exported_namespace, exported_pod) ({_HELD})",
                "{{exported_namespace}}/{{exported_pod}}",
            ),
            (
                "Framebuffer used per pod",
                "How much GPU memory does each pod use?",
                "decmbytes",
                'sum by (exported_namespace, exported_pod) (DCGM_FI_DEV_FB_USED{exported_pod!=""})',
                "{{exported_namespace}}/{{exported_pod}}",
            ),
            (
                "Tensor core activity per pod",
                "Does the pod's work reach the tensor cores?",
                "percentunit",
                'avg by (exported_namespace, exported_pod) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{exported_pod!=""})',
                "{{exported_namespace}}/{{exported_pod}}",
            ),
            (
                "GPUs requested per namespace",
                "Which namespaces ask for GPUs?",
                "none",
                f"sum by (namespace) ({_GPU_REQ})",
                "{{namespace}}",
            ),
        ),
    ),
    (
        "gpuops-fabric",
        "GPU fabric (NVLink, PCIe, RDMA)",
        (
            (
                "NVLink throughput per node",
                "How much traffic crosses NVLink?",
                "Bps",
                "sum by (Hostname) (rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL[5m]))",
                "{{Hostname}}",
            ),
            (
                "PCIe transmit per GPU",
                "How much does each GPU send over PCIe?",
                "Bps",
                "max by (Hostname, gpu) (DCGM_FI_PROF_PCIE_TX_BYTES)",
                "{{Hostname}} GPU {{gpu}}",
            ),
            (
                "PCIe receive per GPU",
                "How much does each GPU receive over PCIe?",
                "Bps",
                "max by (Hostname, gpu) (DCGM_FI_PROF_PCIE_RX_BYTES)",
                "{{Hostname}} GPU {{gpu}}",
            ),
            (
                "RDMA transmit per port",
                "How much does each InfiniBand/RoCE port send?",
                "Bps",
                "sum by (instance, device, port) (rate(node_infiniband_port_data_transmitted_bytes_total[5m]))",
                "{{instance}} {{device}}/{{port}}",
            ),
            (
                "RDMA receive per port",
                "How much does each InfiniBand/RoCE port receive?",
                "Bps",
                "sum by (instance, device, port) (rate(node_infiniband_port_data_received_bytes_total[5m]))",
                "{{instance}} {{device}}/{{port}}",
            ),
        ),
    ),
)


def panels() -> list[dict[str, str]]:
    """Every panel: dashboard, title, question, unit, expr, legend."""
    return [
        {"dashboard": uid, "title": t, "question": q, "unit": u, "expr": e, "legend": lg}
        for uid, _title, items in DASHBOARDS
        for t, q, u, e, lg in items
    ]


def metrics_of(expr: str) -> set[str]:
    """The metric names an expression reads (the names of :data:`METRICS` found in it)."""
    return {m for m in METRICS if re.search(rf"\b{m}\b", expr)}


def dashboard(uid: str) -> dict[str, Any]:
    """The Grafana dashboard JSON model (schemaVersion 39) of ``uid``: one time-series panel per item, two per row,
    on the Prometheus data source."""
    for d_uid, title, items in DASHBOARDS:
        if d_uid != uid:
            continue
        out_panels = []
        for i, (ptitle, question, unit, expr, legend) in enumerate(items):
            out_panels.append(
                {
                    "id": i + 1,
                    "type": "timeseries",
                    "title": ptitle,
                    "description": question,
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                    "targets": [{"refId": "A", "expr": expr, "legendFormat": legend}],
                }
            )
        return {
            "uid": uid,
            "title": title,
            "tags": ["gpu", "gpuops"],
            "schemaVersion": 39,
            "time": {"from": "now-6h", "to": "now"},
            "templating": {
                "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"}]
            },
            "panels": out_panels,
        }
    raise KeyError(uid)


def config_maps(namespace: str, labels: Mapping[str, str]) -> list[Obj]:
    """One ConfigMap per dashboard, with Grafana's sidecar label(s) (``labels``)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{uid}-dashboard", "namespace": namespace, "labels": dict(labels)},
            "data": {f"{uid}.json": json.dumps(dashboard(uid), indent=1, sort_keys=True)},
        }
        for uid, _title, _items in DASHBOARDS
    ]
