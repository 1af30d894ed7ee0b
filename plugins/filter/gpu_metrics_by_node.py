# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_metrics_by_node
short_description: Per node, the GPUs reporting metrics and the firing GPU alerts, from two Prometheus answers
version_added: 0.4.0
author: gpuops.platform maintainers
description:
  - From the instant vector of C(ALERTS{alertstate="firing"}) (or the entries of Prometheus's C(/api/v1/alerts)) and
    that of C(count by (Hostname) (count by (Hostname, UUID) (DCGM_FI_DEV_GPU_TEMP))), by node - the C(Hostname) label,
    else C(node) - the firing GPU alerts as C(Alert) or C(Alert(gpu N)), sorted, each once, and the GPUs reporting
    (the collection's private module_utils C(_monitoring)).
options:
  _input:
    description: The firing alerts (C([{metric, value}]) or C([{labels, state}])).
    type: list
    elements: dict
    required: true
  reporting:
    description: GPUs reporting per node (C([{metric - {Hostname}, value - [time, "count"]}])).
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Per node, GPUs reporting and firing GPU alerts
  ansible.builtin.set_fact:
    _by_node: "{{ _prom.results.firing | gpuops.platform.gpu_metrics_by_node(_prom.results.reporting) }}"
"""

RETURN = r"""
_value:
  description: Node name to C({alerts - [names], reporting - GPUs}).
  type: dict
"""

from collections.abc import Mapping  # noqa: E402 - after the documentation, as ansible-test expects

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils import _monitoring  # noqa: E402


def gpu_metrics_by_node(alerts, reporting=None):
    for name, value in (("alerts", alerts), ("reporting", reporting or [])):
        if not isinstance(value, list) or not all(isinstance(a, Mapping) for a in value):
            raise AnsibleFilterError(f"gpu_metrics_by_node expects {name} as a list of series")
    return _monitoring.metrics_by_node(alerts, reporting or [])


class FilterModule:
    def filters(self):
        return {"gpu_metrics_by_node": gpu_metrics_by_node}
