# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: helm_release_findings
short_description: Findings on a Helm release's name, namespace and values, before any change
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - Checks the release name (Helm's rule, DNS-1123 subdomain syntax, 53 characters at most), the namespace
    (a DNS-1123 label) and, when O(schema) is given, the user values against the chart's C(values.schema.json)
    (types, enums, required keys, keys the schema closes, minimum and maximum).
  - Returns findings C({id, severity, object, evidence, cause, fix}); the role fails on them before it changes
    anything, instead of Helm or the API server rejecting the release after the CRDs were applied.
positional: _input
options:
  _input:
    description: The user values (the part the user set).
    type: dict
    required: true
  name:
    description: Release name.
    type: str
  namespace:
    description: Release namespace.
    type: str
  schema:
    description: The chart's parsed C(values.schema.json); omit or null when the chart ships none.
    type: dict
  chart:
    description: Chart name and version, for the messages.
    type: str
    default: the chart
  variables:
    description: Names of the user's variables for the messages, keys C(name), C(namespace) and C(values).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Fail on a bad release name before any change
  ansible.builtin.assert:
    that: _findings | length == 0
    fail_msg: "{{ _findings | map(attribute='evidence') | flatten | join('; ') }}"
  vars:
    _findings: "{{ {} | gpuops.platform.helm_release_findings(name=release, namespace=ns) }}"
"""

RETURN = r"""
_value:
  description: The findings, empty when everything is valid.
  type: list
  elements: dict
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402 - after the documentation, as ansible-test expects
from ansible_collections.gpuops.platform.plugins.module_utils.inputs import _inputs  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.release import _helm_release  # noqa: E402


def helm_release_findings(
    values: Any,
    name: Any = None,
    namespace: Any = None,
    schema: Any = None,
    chart: str = "the chart",
    variables: Any = None,
) -> list[dict[str, Any]]:
    if values is not None and not isinstance(values, dict):
        raise AnsibleFilterError(
            f"helm_release_findings expects the user values as a mapping, got {type(values).__name__}"
        )
    var = {"name": "helm_release_name", "namespace": "helm_release_namespace", "values": "helm_release_user_values"}
    var.update(variables or {})
    findings = []
    if name is not None:
        findings += _inputs.release_name(var["name"], name)
    if namespace is not None:
        findings += _inputs.dns1123_label(var["namespace"], namespace)
    if schema:
        findings += _helm_release.schema_findings(var["values"], values or {}, schema, chart)
    return findings


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"helm_release_findings": helm_release_findings}
