# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Text tables: the one place where a printed table's column widths are decided (from the cells)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

GAP = "  "


def aligned(rows: Sequence[Sequence[Any]], gap: str = GAP) -> list[str]:
    """The rows as lines: every column but the last padded to its longest cell, ``gap`` between columns, no
    trailing spaces. Cells are printed with ``str``. Raises ValueError when the rows do not have the same length."""
    cells = [[str(c) for c in row] for row in rows]
    if not cells:
        return []
    count = len(cells[0])
    if any(len(row) != count for row in cells):
        raise ValueError(f"every row must have {count} cells: {[len(r) for r in cells]}")
    widths = [max(len(row[i]) for row in cells) for i in range(count)]
    return [gap.join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
