# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The monitoring role's names, once: the labels, ports, jobs and selectors of the exporters and of the role's own
objects, and the finding the role's rules return. Data and two small helpers (no I/O); see ``_monitoring``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

Finding = dict[str, Any]
Obj = dict[str, Any]

API_VERSION = "monitoring.coreos.com/v1"
OWNER_LABELS = _owned.owner_labels("monitoring")
OWNER_SELECTOR = _owned.selector(OWNER_LABELS)
KINDS = ("ServiceMonitor", "PrometheusRule", "ConfigMap", "Service", "AlertmanagerConfig")
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


def _count_by(result: Sequence[Mapping[str, Any]], label: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for series in result:
        metric = series.get("metric") or {}
        value = series.get("value") or [0, "0"]
        name = str(metric.get(label, ""))
        out[name] = out.get(name, 0) + int(float(value[1]))
    return out
