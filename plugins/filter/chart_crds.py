# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: chart_crds
short_description: The CRD files of an unpacked chart and of its enabled dependency charts
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - Lists the files under the chart's C(crds/) and, at any depth, under C(charts/<dependency>/crds/) for every
    dependency whose C(condition) is enabled by the chart's default values merged with O(values) (Helm's rule;
    C(tags) are not evaluated). Runs on the controller, where the chart was unpacked.
positional: values
options:
  _input:
    description: Directory of the unpacked chart.
    type: path
    required: true
  values:
    description: The release values.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Apply the CRDs of the chart and its subcharts
  kubernetes.core.k8s:
    src: "{{ item }}"
  loop: "{{ chart_dir | gpuops.platform.chart_crds(values) }}"
"""

RETURN = r"""
_value:
  description: Paths of the CRD files, the parent chart's first.
  type: list
  elements: str
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402 - after the documentation, as ansible-test expects
from ansible_collections.gpuops.platform.plugins.module_utils.release._helm_release import chart_crd_files  # noqa: E402


def chart_crds(chart_dir: Any, values: Any = None) -> list[str]:
    try:
        return chart_crd_files(str(chart_dir), values or {})
    except (OSError, ValueError) as exc:
        raise AnsibleFilterError(f"cannot list the CRDs of chart {chart_dir}: {exc}") from exc


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"chart_crds": chart_crds}
