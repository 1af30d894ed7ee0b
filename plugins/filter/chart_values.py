# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: chart_values
short_description: The default values of an unpacked chart, its dependency charts' included
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - Reads the chart's C(values.yaml) and puts each dependency chart's defaults (from C(charts/<dependency>/), at
    any depth) under the dependency's name, as Helm merges them. Runs on the controller, where the chart was unpacked.
  - Adds every C(.Values) path the chart's templates read that C(values.yaml) leaves out, with a null value (a key
    upstream documents only as a comment, such as the GPU Operator's C(dcgmExporter.config), is a key of the chart).
  - Used to tell user value keys the chart does not have from keys of its subcharts.
options:
  _input:
    description: Directory of the unpacked chart.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Warn about unknown keys, subcharts' keys being known
  ansible.builtin.debug:
    msg: "{{ user_values | gpuops.platform.unknown_keys(chart_dir | gpuops.platform.chart_values) }}"
"""

RETURN = r"""
_value:
  description: The merged default values.
  type: dict
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402 - after the documentation, as ansible-test expects
from ansible_collections.gpuops.platform.plugins.module_utils.release._chart_refs import known_values  # noqa: E402


def chart_values(chart_dir: Any) -> dict[str, Any]:
    try:
        return known_values(str(chart_dir))
    except (OSError, ValueError) as exc:
        raise AnsibleFilterError(f"cannot read the values of chart {chart_dir}: {exc}") from exc


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"chart_values": chart_values}
