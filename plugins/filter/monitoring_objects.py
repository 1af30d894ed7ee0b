# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: monitoring_objects
short_description: What the monitoring role applies (ServiceMonitors, PrometheusRule, dashboards) and its findings
version_added: 0.4.0
author: gpuops.platform maintainers
description:
  - The monitoring role's rules (the collection's private module_utils C(_monitoring), C(_gpu_alerts) and
    C(_dashboards)) - from the role's variables and what it read from the cluster, the objects to apply, labelled as
    the Prometheus object's selectors want them, and the findings (no Prometheus to attach to, a selector no label set
    satisfies or a null one, the role's namespace outside the Prometheus's namespace selectors, bad alert thresholds,
    the GPU Operator's own ServiceMonitor scraping the exporter a second time).
positional: prometheuses, namespace_labels, cluster_policy, network_namespace_found, check_mode, alertmanagers,
  alertmanager_config_crd
options:
  _input:
    description: The role's variables (C(monitoring_*)).
    type: dict
    required: true
  prometheuses:
    description:
      - The Prometheus objects (C(monitoring.coreos.com/v1)) of the namespace the role attaches in. install - the
        chart's (predicted from the chart values while the release does not exist); attach - the one named
        C(monitoring_prometheus_name), or the only one.
    type: list
    elements: dict
    default: []
  namespace_labels:
    description: The labels of the role's namespace (C(monitoring_namespace)); empty when it does not exist yet.
    type: dict
    default: {}
  cluster_policy:
    description: The GPU Operator's ClusterPolicy, when there is one.
    type: dict
  network_namespace_found:
    description:
      - Whether the Network Operator's namespace (C(monitoring_network_namespace)) exists; null when it was not read.
      - With C(monitoring_network) and V(false), the finding C(monitoring-network-namespace-missing) - an error, a
        warning with O(check_mode) - and C(telemetry_namespace_ready) is false.
    type: bool
  check_mode:
    description: The run is in check mode, where an earlier role of the same run may still create what is missing.
    type: bool
    default: false
  alertmanagers:
    description:
      - attach with C(monitoring_remediation_webhook_url) - the Alertmanager objects (C(monitoring.coreos.com/v1)) of
        the Alertmanager's namespace; the AlertmanagerConfig routing the GPU alerts to the webhook gets the labels
        their C(alertmanagerConfigSelector) selects.
    type: list
    elements: dict
    default: []
  alertmanager_config_crd:
    description: Whether the cluster serves the AlertmanagerConfig CRD (C(monitoring.coreos.com/v1alpha1)).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Build what the role applies
  ansible.builtin.set_fact:
    _built: "{{ _variables | gpuops.platform.monitoring_objects(_prometheuses, _ns_labels, _cluster_policy) }}"
"""

RETURN = r"""
_value:
  description:
    - C(objects) (ServiceMonitors, the PrometheusRule and the dashboard ConfigMaps, owner-labelled), C(labels) (the
      labels the ServiceMonitors and the rule carry, by C(servicemonitor)/C(rule)), C(findings), C(owner_selector),
      C(exporter_job), C(up_query) and C(gpu_series_query) (the health check's queries), C(chart_values) (install),
      C(prometheus) (the name and namespace of the Prometheus attached to), C(wait_objects) (install),
      C(telemetry_namespace_ready) (false while the namespace of the NIC telemetry Service is missing - the objects
      cannot be dry-run then), C(alertmanager_values) (install - the remediation route's chart values, which outrank
      the user's), C(alertmanager_secret) (install - the Secret the chart renders the Alertmanager configuration in),
      C(alertmanager_namespace) (where the route's AlertmanagerConfig goes in attach mode).
  type: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import (  # noqa: E402
    _monitoring,
    _monitoring_health,
)


def monitoring_objects(
    variables: Any,
    prometheuses: Any = None,
    namespace_labels: Any = None,
    cluster_policy: Any = None,
    network_namespace_found: Any = None,
    check_mode: bool = False,
    alertmanagers: Any = None,
    alertmanager_config_crd: bool = False,
) -> dict[str, Any]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("monitoring_objects expects the role's variables as a dict")
    prometheuses = prometheuses or []
    if not isinstance(prometheuses, list) or not all(isinstance(p, Mapping) for p in prometheuses):
        raise AnsibleFilterError("monitoring_objects expects prometheuses as a list of objects")
    if cluster_policy is not None and not isinstance(cluster_policy, Mapping):
        raise AnsibleFilterError("monitoring_objects expects cluster_policy as an object or null")
    if network_namespace_found is not None and not isinstance(network_namespace_found, bool):
        raise AnsibleFilterError("monitoring_objects expects network_namespace_found as true, false or null")
    alertmanagers = alertmanagers or []
    if not isinstance(alertmanagers, list) or not all(isinstance(a, Mapping) for a in alertmanagers):
        raise AnsibleFilterError("monitoring_objects expects alertmanagers as a list of objects")
    built = _monitoring.build(
        variables,
        prometheuses,
        namespace_labels or {},
        cluster_policy or None,
        network_namespace_found=network_namespace_found,
        check_mode=bool(check_mode),
        alertmanagers=alertmanagers,
        alertmanager_config_crd=bool(alertmanager_config_crd),
    )
    return {**built, "up_query": _monitoring_health.UP_QUERY, "gpu_series_query": _monitoring_health.GPU_SERIES_QUERY}


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"monitoring_objects": monitoring_objects}
