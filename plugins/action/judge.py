# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of gpuops.platform.judge: a role's findings to its verdict on the controller (see the module's
docs; the message is module_utils.common._judge's)."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase
from ansible_collections.gpuops.platform.plugins.module_utils.common import _judge

ARGUMENT_SPEC = {
    "role": {"type": "str", "required": True},
    "findings": {"type": "list", "elements": "dict", "required": True},
    "fail_on": {"type": "str", "choices": ["error", "warning"], "default": "error"},
    "stop": {"type": "str", "default": "Nothing was changed."},
    "none": {"type": "str", "default": "no finding"},
    "quiet": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        out = _judge.verdict(args["role"], args["findings"], args["fail_on"], args["stop"], args["none"])
        result.update(changed=False, **out)
        if not out["failed"] and not args["quiet"] and args["findings"]:
            result["_ansible_verbose_always"] = True  # the findings that did not fail are shown, as assert shows them
        return result
