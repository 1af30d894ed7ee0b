# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Difference tracking: (item, current, desired) records → changed, diff before/after."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class DifferenceTracker:
    def __init__(self) -> None:
        self._items: list[dict[str, Any]] = []

    def add(self, name: str, current: Any, desired: Any) -> None:
        self._items.append({"item": name, "current": current, "desired": desired, "active": current != desired})

    @property
    def has_differences(self) -> bool:
        return any(i["active"] for i in self._items)

    def differences(self) -> list[dict[str, Any]]:
        return [dict(i) for i in self._items if i["active"]]

    def before_after(self) -> tuple[dict[str, Any], dict[str, Any]]:
        before = {i["item"]: i["current"] for i in self._items}
        after = {i["item"]: i["desired"] for i in self._items}
        return before, after

    def diff(self, header: str | None = None) -> dict[str, Any]:
        """One Ansible diff entry with YAML-ish text of every tracked item (empty dict when nothing tracked)."""
        if not self._items:
            return {}
        before, after = self.before_after()
        entry = {"before": _render(before), "after": _render(after)}
        if header:
            entry["before_header"] = entry["after_header"] = header
        return entry


def _render(values: Mapping[str, Any]) -> str:
    return "".join("{}: {}\n".format(k, "null" if v is None else v) for k, v in values.items())


def file_diff(path: str, before: str | None, after: str | None) -> dict[str, Any]:
    """Ansible diff entry for a text file; None content means the file is absent."""
    return {
        "before_header": path if before is not None else f"{path} (absent)",
        "after_header": path if after is not None else f"{path} (absent)",
        "before": before or "",
        "after": after or "",
    }
