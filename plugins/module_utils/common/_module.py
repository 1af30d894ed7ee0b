# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""A small facade over AnsibleModule: builds the host file system and runner, runs one action and turns
typed errors into fail_json at the top."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError
from ansible_collections.gpuops.platform.plugins.module_utils.common._fs import HostFS
from ansible_collections.gpuops.platform.plugins.module_utils.common._runner import Runner


class Context:
    """What an action gets: params, check/diff flags, the host file system, the runner, warn(), and did()
    to record each change as it is made (so that a failure after a change reports ``changed: true``)."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.params = module.params
        self.check_mode = module.check_mode
        self.diff_mode = module._diff
        self.fs = HostFS(atomic_move=module.atomic_move)
        self.runner = Runner(module, check_mode=module.check_mode)
        self.done: list[str] = []

    @property
    def changed(self) -> bool:
        return bool(self.done)

    def did(self, what: str) -> None:
        """Record a change that has been made on the host (nothing is recorded in check mode)."""
        if not self.check_mode:
            self.done.append(what)

    def warn(self, msg: str) -> None:
        self.module.warn(msg)


def failure_message(msg: str, done: list[str]) -> str:
    """The error, plus what this run had already changed and that the next run finishes the job."""
    if not done:
        return msg
    return "{} (changed before the failure: {}; the next run finishes the job)".format(msg, "; ".join(done))


def run_module(
    action: Callable[[Context], dict[str, Any]], module_class: Any = AnsibleModule, **module_kwargs: Any
) -> None:
    """Create the module, run ``action(ctx) -> result dict``, exit (or fail when the result says failed)."""
    module = module_class(**module_kwargs)
    ctx = Context(module)
    try:
        result = action(ctx)
    except GpuOpsError as exc:
        details = {k: v for k, v in exc.details.items() if k not in ("msg", "failed", "exception", "changed")}
        module.fail_json(
            msg=failure_message(str(exc), ctx.done), changed=ctx.changed, exception=traceback.format_exc(), **details
        )
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        module.fail_json(
            msg=failure_message(f"host I/O error: {exc.strerror or exc}{where}", ctx.done),
            changed=ctx.changed,
            exception=traceback.format_exc(),
        )
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)
