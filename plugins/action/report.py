# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of gpuops.platform.report: print a text verbatim on the controller (see the module's docs)."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _report

display = Display()

ARGUMENT_SPEC = {
    "text": {"type": "str"},
    "title": {"type": "str"},
    "remediation": {
        "type": "dict",
        "options": {
            "mode": {"type": "str", "required": True, "choices": ["dry_run", "act"]},
            "node": {"type": "str", "required": True},
            "steps": {"type": "list", "elements": "raw", "default": []},
            "drain_plan": {"type": "list", "elements": "dict", "default": []},
            "repair": {"type": "dict"},
        },
    },
}
MUTUALLY_EXCLUSIVE = [["text", "remediation"]]
REQUIRED_ONE_OF = [["text", "remediation"]]


def report_lines(text: str | None, title: str | None = None) -> list[str]:
    """The lines to print: the title, then each line of ``text`` without trailing whitespace."""
    lines = [title] if title else []
    lines += [line.rstrip() for line in (text or "").splitlines()]
    return lines


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC, mutually_exclusive=MUTUALLY_EXCLUSIVE, required_one_of=REQUIRED_ONE_OF
        )[1]
        text = args["text"]
        if args.get("remediation"):
            r = args["remediation"]
            text = _report.remediation_text(r["mode"], r["node"], r["steps"], r["drain_plan"], r.get("repair"))
        lines = report_lines(text, args.get("title"))
        if lines:
            display.display("\n".join(lines))
        result.update(changed=False, lines=lines)
        return result
