# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: monitoring_owned
short_description: The monitoring role's objects - to prune, landed
version_added: 0.4.0
author: gpuops.platform maintainers
description:
  - With O(check=prune), the live ServiceMonitors, PrometheusRules and ConfigMaps carrying the role's labels that the
    wanted list no longer holds. Objects without the labels are never returned.
  - With O(check=landed), one finding per wanted object whose spec or labels are not the live object's.
positional: live, check
options:
  _input:
    description: The wanted objects.
    type: list
    elements: dict
    required: true
  live:
    description: The live objects.
    type: list
    elements: dict
    required: true
  check:
    description: What to compute.
    type: str
    default: prune
    choices: [prune, landed]
"""

EXAMPLES = r"""
- name: Delete the objects the role created and the variables dropped
  kubernetes.core.k8s:
    definition: "{{ item }}"
    state: absent
  loop: "{{ wanted | gpuops.platform.monitoring_owned(live) }}"
"""

RETURN = r"""
_value:
  description: The objects to delete (prune), or the findings (landed).
  type: list
  elements: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _monitoring_spec  # noqa: E402


def _objects(name: str, value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(o, Mapping) for o in value):
        raise AnsibleFilterError(f"monitoring_owned expects {name} as a list of objects")


def monitoring_owned(wanted: Any, live: Any, check: str = "prune") -> list[dict[str, Any]]:
    _objects("input", wanted)
    _objects("live", live)
    if check == "prune":
        return _owned.prune_objects(wanted, live, _monitoring_spec.OWNER_LABELS, _monitoring_spec.KINDS)
    if check == "landed":
        return _owned.landing_findings(
            wanted,
            live,
            "monitoring-object-not-landed",
            "install the Prometheus Operator's CRDs of a version that has these fields, or find the other writer "
            "(kubectl get --show-managed-fields)",
        )
    raise AnsibleFilterError(f"monitoring_owned: check must be prune or landed, not {check!r}")


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"monitoring_owned": monitoring_owned}
