# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_alert_rules
short_description: The GPU alerting rules as a PrometheusRule, from thresholds, with their findings
version_added: 0.3.0
author: gpuops.platform maintainers
description:
  - The GPU alert rules (the collection's private module_utils C(_gpu_alerts)) over dcgm-exporter and
    kube-state-metrics series - XID errors by class (memory/ECC, NVLink, fallen off the bus, GPU firmware/hardware
    are critical; application XIDs a warning), an uncorrectable ECC error or row remap failure, a GPU that stopped
    reporting while its exporter is up, thermal and power throttling, NVLink error and PCIe replay rates, a node
    advertising fewer C(nvidia.com/gpu) than its exporter reports, the exporter down or absent, a GPU a pod holds
    but leaves idle for hours.
  - Every rule has a C(for), a C(severity) label and C(summary), C(description) and C(runbook) (cause and fix)
    annotations. The thresholds override the defaults key by key; docs/observability.md lists them.
  - Returns the C(monitoring.coreos.com/v1) PrometheusRule, the same groups as a plain Prometheus rules file, the
    thresholds in effect, the counters the rules read that the exporter's default collectors CSV leaves out, the
    collectors CSV that adds them, and the findings C({id, severity, object, evidence, cause, fix}). With any error
    finding the rule, the rules file, the thresholds and the CSV are V(null).
positional: name, namespace, labels
options:
  _input:
    description:
      - >-
        The thresholds to override (a mapping; V({}) or V(null) for the defaults), for example
        V({idle_util_percent: 10, throttle_source: clock_events}).
    type: dict
    required: true
  name:
    description: The PrometheusRule's name.
    type: str
    default: gpuops-gpu-alerts
  namespace:
    description: The PrometheusRule's namespace (one Prometheus reads rules from).
    type: str
    default: monitoring
  labels:
    description: The PrometheusRule's labels (those the Prometheus object's C(ruleSelector) matches).
    type: dict
    default: {}
  variable:
    description: The name of the variable that holds the thresholds, for the findings' object and evidence.
    type: str
    default: thresholds
"""

EXAMPLES = r"""
- name: Build the GPU alert rules
  ansible.builtin.set_fact:
    _gpu_alerts: >-
      {{ monitoring_gpu_alert_thresholds | gpuops.platform.gpu_alert_rules('gpuops-gpu-alerts', 'monitoring',
         {'release': 'kube-prometheus-stack'}, variable='monitoring_gpu_alert_thresholds') }}

- name: Stop on bad thresholds
  ansible.builtin.assert:
    that: _gpu_alerts.findings | selectattr('severity', 'equalto', 'error') | list | length == 0
    fail_msg: "{{ _gpu_alerts.findings | map(attribute='cause') | join(' ') }}"

- name: Apply the PrometheusRule
  kubernetes.core.k8s:
    definition: "{{ _gpu_alerts.prometheus_rule }}"
    apply: true
"""

RETURN = r"""
_value:
  description:
    - C(prometheus_rule) (the PrometheusRule object), C(rules_file) (C({groups}), a plain Prometheus rules file),
      C(thresholds) (every threshold in effect), C(non_default_counters) (alert name to the dcgm-exporter counters it
      reads that the default collectors CSV leaves out), C(collectors_csv) (the exporter's collectors CSV - the
      default list and those counters - for the ClusterPolicy's C(dcgmExporter.config); the gpu_operator role's
      C(gpu_operator_dcgm_exporter_collectors)), C(findings).
  type: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils import _gpu_alerts  # noqa: E402


def gpu_alert_rules(
    thresholds: Any,
    name: str = "gpuops-gpu-alerts",
    namespace: str = "monitoring",
    labels: Any = None,
    variable: str = "thresholds",
) -> dict[str, Any]:
    if thresholds is not None and not isinstance(thresholds, Mapping):
        raise AnsibleFilterError("gpu_alert_rules expects the thresholds as a dict ({} for the defaults)")
    thresholds = dict(thresholds or {})
    findings = _gpu_alerts.threshold_findings(thresholds, variable) + _gpu_alerts.object_findings(
        name, namespace, labels
    )
    if any(f["severity"] == "error" for f in findings):
        return {
            "prometheus_rule": None,
            "rules_file": None,
            "thresholds": None,
            "non_default_counters": {},
            "collectors_csv": None,
            "findings": findings,
        }
    rule = _gpu_alerts.prometheus_rule(thresholds, name, namespace, labels)
    return {
        "prometheus_rule": rule,
        "rules_file": {"groups": rule["spec"]["groups"]},
        "thresholds": _gpu_alerts.merged_thresholds(thresholds),
        "non_default_counters": _gpu_alerts.non_default_counters(thresholds),
        "collectors_csv": _gpu_alerts.collectors_csv(thresholds),
        "findings": findings,
    }


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"gpu_alert_rules": gpu_alert_rules}
