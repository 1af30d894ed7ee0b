# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""What playbooks/remediate.yml prints at its end: the mode, one line per step that ran (quarantine, drain, GPU reset,
break-fix ticket, return; each module's own ``msg``), the drain plan as a table, and the repair ladder's step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common import _table


def remediation_text(
    mode: str,
    node: str,
    steps: Sequence[Mapping[str, Any] | None],
    drain_plan: Sequence[Mapping[str, Any]] | None = None,
    repair: Mapping[str, Any] | None = None,
) -> str:
    """The report: ``steps`` are the results of the steps in their order (a step that did not run: None, {} or a
    result without ``msg``); ``drain_plan`` the drain's rows (pod, decision, why); ``repair`` the ladder's step (step,
    why, skipped: [[step, why], ...])."""
    lines = [f"gpuops remediation ({mode}{': nothing was changed but Events' if mode == 'dry_run' else ''})"]
    lines += [f"- {s['msg']}" for s in steps if s and s.get("msg") is not None]
    if drain_plan:
        lines.append(f"drain plan of {node}:")
        rows = [["POD", "DECISION", "WHY"]] + [[p.get("pod"), p.get("decision"), p.get("why")] for p in drain_plan]
        lines += _table.aligned(rows)
    if repair:
        skipped = repair.get("skipped") or []
        passed = "; passed over: " + ", ".join(": ".join(str(x) for x in s) for s in skipped) if skipped else ""
        lines.append(f"repair ladder: {repair.get('step')} ({repair.get('why')}{passed})")
    return "\n".join(lines)
