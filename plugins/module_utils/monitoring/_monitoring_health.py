# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The monitoring role's health checks, once: the PromQL queries it runs against the Prometheus (targets up, GPU
series, counters, NIC telemetry, firing alerts) and the findings from their answers. Pure functions (no I/O); see
``_monitoring``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.monitoring._monitoring_spec import (
    EXPORTER_JOB,
    TELEMETRY_JOB,
    TELEMETRY_NAME,
    Finding,
    _count_by,
    finding,
)
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network

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


def summary(health: Mapping[str, Any]) -> str:
    """The health in one line: per GPU node the GPUs reporting and the exporter targets up, per NIC node the telemetry
    targets up (what the role's validation prints when nothing is wrong)."""
    parts = [
        f"{r['node']}: {r['gpu_series']}/{r['gpus']} GPUs reporting, {r['exporter_up']} exporter target(s) up"
        for r in health.get("rows") or []
    ]
    telemetry = health.get("telemetry_rows") or []
    parts += [f"{r['node']}: {r['telemetry_up']} NIC telemetry target(s) up" for r in telemetry]
    return " || ".join(parts) or "no GPU or NIC node to check"


FIRING_QUERY = 'ALERTS{alertstate="firing", alertname=~"GPU.*"}'  # the collection's GPU alerts that fire now


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
