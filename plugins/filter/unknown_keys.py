# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: unknown_keys
short_description: Value keys that a Helm chart does not have
version_added: 0.1.0
author: gpuops.platform maintainers
description:
  - Compares user values with a chart's default C(values.yaml) and returns the dotted paths of keys the chart does
    not define, so a misspelled key is reported instead of silently ignored by Helm.
  - "Recurses only where both sides are non-empty mappings; an empty mapping in the chart (for example an empty
    C(nodeSelector)) accepts any keys."
positional: chart_values
options:
  _input:
    description: The user values.
    type: dict
    required: true
  chart_values:
    description: The chart's default values.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Warn about value keys the chart does not have
  ansible.builtin.debug:
    msg: "unknown keys: {{ user_values | gpuops.platform.unknown_keys(chart_values) }}"
"""

RETURN = r"""
_value:
  description: Sorted dotted paths of the unknown keys, for example C(driver.rdma.enabeld).
  type: list
  elements: str
"""

from collections.abc import Callable, Mapping  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402 - after the documentation, as ansible-test expects


def _walk(user: Mapping[str, Any], chart: Mapping[str, Any], prefix: str, out: list[str]) -> list[str]:
    for key, value in user.items():
        path = f"{prefix}{key}"
        if key not in chart:
            out.append(path)
        elif isinstance(value, dict) and isinstance(chart[key], dict) and chart[key]:
            _walk(value, chart[key], f"{path}.", out)
    return out


def unknown_keys(user_values: Any, chart_values: Any) -> list[str]:
    if not isinstance(user_values, dict) or not isinstance(chart_values, dict):
        raise AnsibleFilterError("unknown_keys expects two mappings (user values, chart values)")
    return sorted(_walk(user_values, chart_values, "", []))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"unknown_keys": unknown_keys}
