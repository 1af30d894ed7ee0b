"""The aligned_columns filter (_table.aligned): each column as wide as its longest cell, two spaces between columns,
the last column unpadded."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.aligned_columns import aligned_columns

NODE40 = "n" * 40


@pytest.mark.parametrize(
    "rows, expected",
    [
        ([], ""),
        ([["NODE", "GPUS"]], "NODE  GPUS"),
        ([["NODE", "GPUS"], ["g1", 8]], "NODE  GPUS\ng1    8"),
        (
            [["NODE", "READY", "LAST"], [NODE40, True, "x"], ["g1", False, ""]],
            f"NODE{' ' * 38}READY  LAST\n{NODE40}  True   x\ng1{' ' * 40}False",
        ),
        ([["A", "B"], ["a-long-cell", None]], "A            B\na-long-cell  None"),
    ],
    ids=["empty", "header-only", "short", "40-character-cell", "none-cell"],
)
def test_aligned(rows, expected):
    assert aligned_columns(rows) == expected


@pytest.mark.parametrize("rows", ["text", [["a"], "b"], [["a", "b"], ["c"]]], ids=["not-a-list", "row", "ragged"])
def test_aligned_rejects(rows):
    with pytest.raises(AnsibleFilterError):
        aligned_columns(rows)
