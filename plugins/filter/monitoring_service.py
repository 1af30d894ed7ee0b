# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: monitoring_service
short_description: The Service that reaches the monitoring role's Prometheus through the API server's proxy
version_added: 0.4.0
author: gpuops.platform maintainers
description:
  - From the monitoring role's variables (the collection's private module_utils C(_monitoring)) - install mode, the
    kube-prometheus-stack chart's C(<fullname>-prometheus) Service (port C(http-web)); attach mode, the Prometheus
    Operator's C(prometheus-operated) Service (port C(web)) in the Prometheus's namespace. For
    M(gpuops.platform.prometheus_query)'s O(gpuops.platform.prometheus_query#module:service).
options:
  _input:
    description: The monitoring role's variables (C(monitoring_*)); missing ones take the role's defaults.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Ask the role's Prometheus through the API server
  gpuops.platform.prometheus_query:
    service: "{{ {'monitoring_mode': 'install'} | gpuops.platform.monitoring_service }}"
    queries: {up: up}
"""

RETURN = r"""
_value:
  description: C({namespace, name, port}).
  type: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _monitoring  # noqa: E402


def monitoring_service(variables: Any) -> dict[str, str]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("monitoring_service expects the monitoring role's variables as a dict")
    return _monitoring.prometheus_service(variables)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"monitoring_service": monitoring_service}
