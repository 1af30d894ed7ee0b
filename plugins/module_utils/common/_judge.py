# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How a role's findings become its verdict and its message, once for every role (gpuops.platform.judge): the
findings at or above the level that fails, each on one line naming the finding, the object, the evidence, why and
the fix, ended by what the run did not change; the others listed as information."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Finding = Mapping[str, Any]
SEVERITIES = ("error", "warning", "info")


def line(f: Finding) -> str:
    """``[id] Kind name: evidence; evidence. Why: cause. Fix: fix`` (the kind, the evidence or the fix left out
    where the finding has none)."""
    obj = f.get("object") or {}
    what = " ".join(str(x) for x in (obj.get("kind"), obj.get("name")) if x)
    evidence = "; ".join(str(e) for e in f.get("evidence") or [])
    head = f"[{f.get('id', 'finding')}] {what}".rstrip()
    text = f"{head}: {evidence}." if evidence else f"{head}:"
    text += f" Why: {str(f.get('cause', '')).rstrip('.')}."
    if f.get("fix"):
        text += f" Fix: {f['fix']}"
    return text


def verdict(
    role: str,
    findings: Sequence[Finding],
    fail_on: str = "error",
    stop: str = "Nothing was changed.",
    none: str = "no finding",
) -> dict[str, Any]:
    """``failed`` when a finding is at or above ``fail_on`` (error, or warning), ``msg`` (the failing ones, then
    ``stop``; else the others' lines, or ``none``), ``lines`` (every finding's line, severity first) and ``counts``
    per severity."""
    levels = ("error",) if fail_on == "error" else ("error", "warning")
    bad = [f for f in findings if f.get("severity", "error") in levels]
    rest = [f for f in findings if f.get("severity", "error") not in levels]
    counts = {s: sum(1 for f in findings if f.get("severity", "error") == s) for s in SEVERITIES}
    if bad:
        msg = f"{role}: " + " || ".join(line(f) for f in bad) + (f" || {stop}" if stop else "")
    else:
        msg = " || ".join(f"{f.get('severity', 'info')}: {line(f)}" for f in rest) or none
    return {
        "failed": bool(bad),
        "msg": msg,
        "lines": [f"{f.get('severity', 'error')}: {line(f)}" for f in findings],
        "counts": counts,
    }
