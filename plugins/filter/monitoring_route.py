# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: monitoring_route
short_description: Whether the Alertmanager route to the remediation webhook landed (install mode)
version_added: 0.5.0
author: gpuops.platform maintainers
description:
  - The monitoring role's landing check of C(monitoring_remediation_webhook_url) in install mode (the collection's
    private module_utils C(monitoring._alertmanager)) - the Alertmanager configuration Secret kube-prometheus-stack
    renders (key C(alertmanager.yaml)) holds the receiver C(gpuops-remediation) with the webhook URL and, first
    among the top-level routes, the route of the GPU alerts to it (C(continue) true), and the chart's C(null) receiver
    is kept. One finding C(monitoring-remediation-route-not-landed) when not; none when the route is off or in attach
    mode (the AlertmanagerConfig object is checked with the role's other objects).
positional: secret, name
options:
  _input:
    description: The role's variables (C(monitoring_*)).
    type: dict
    required: true
  secret:
    description: The Secret as read back; null when it does not exist.
    type: dict
  name:
    description: The Secret's name, for the finding.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Check that the route landed
  gpuops.platform.judge:
    role: monitoring
    findings: "{{ _variables | gpuops.platform.monitoring_route(_secret.resources | first | default(none), _name) }}"
"""

RETURN = r"""
_value:
  description: The findings (empty when the route landed).
  type: list
  elements: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _alertmanager  # noqa: E402


def monitoring_route(variables: Any, secret: Any, name: Any) -> list[dict[str, Any]]:
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("monitoring_route expects the role's variables as a dict")
    if secret is not None and not isinstance(secret, Mapping):
        raise AnsibleFilterError("monitoring_route expects secret as an object or null")
    return _alertmanager.route_findings(variables, secret, str(name))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"monitoring_route": monitoring_route}
