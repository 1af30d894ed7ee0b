# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: aligned_columns
short_description: Rows of cells as a text table whose columns are as wide as their longest cell
version_added: 0.3.0
author: gpuops.platform maintainers
description:
  - Prints rows (the header first) as lines; every column but the last is padded to its longest cell, with two
    spaces between columns and no trailing spaces. Nothing is cut. The tables of C(playbooks/diagnose.yml) are
    printed with it (the collection's private module_utils C(_table.aligned)).
options:
  _input:
    description: The rows, each a list of cells of the same length (printed as text).
    type: list
    elements: list
    required: true
"""

EXAMPLES = r"""
- name: Print a table
  ansible.builtin.debug:
    msg: >-
      {{ ([['NODE', 'GPUS']] + nodes | map(attribute='name') | zip(nodes | map(attribute='gpus')) | map('list') | list)
         | gpuops.platform.aligned_columns }}
"""

RETURN = r"""
_value:
  description: The table, one line per row, joined with newlines.
  type: str
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common import _table  # noqa: E402


def aligned_columns(rows: Any) -> str:
    if not isinstance(rows, list) or not all(isinstance(r, list | tuple) for r in rows):
        raise AnsibleFilterError("aligned_columns expects a list of rows, each a list of cells")
    try:
        return "\n".join(_table.aligned(rows))
    except ValueError as exc:
        raise AnsibleFilterError(f"aligned_columns: {exc}") from exc


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"aligned_columns": aligned_columns}
