# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""nouveau_blacklist: read the file and module state once, compute the differences, act."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._diff import DifferenceTracker, file_diff
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import CommandFailed
from ansible_collections.gpuops.platform.plugins.module_utils.host import _initramfs, _kmod, _pending

CONF_PATH = "/etc/modprobe.d/blacklist-nouveau.conf"
CONTENT = (
    "# Managed by gpuops.platform.nouveau_blacklist: keeps nouveau off NVIDIA GPUs.\n"
    "blacklist nouveau\n"
    "options nouveau modeset=0\n"
)
# Recorded before the file changes and cleared once the initramfs is rebuilt: a run that fails (or is
# killed) in between leaves it, and the next run rebuilds the initramfs although the file is in place.
PENDING = "nouveau-blacklist-initramfs"


def read_state(fs: Any) -> dict[str, Any]:
    modules = _kmod.loaded_modules(fs)
    return {
        "file": fs.read_text(CONF_PATH),
        "module": _kmod.module_usage(fs, modules, "nouveau"),
        "initramfs_pending": _pending.is_pending(fs, PENDING),
    }


def plan(state_param: str, current: Mapping[str, Any]) -> dict[str, Any]:
    """Pure: desired file content, whether to regenerate the initramfs and unload, whether a reboot is needed."""
    desired = CONTENT if state_param == "present" else None
    usage = current["module"]
    file_changed = current["file"] != desired
    regenerate = file_changed or bool(current.get("initramfs_pending"))
    unload = state_param == "present" and usage["loaded"] and not usage["in_use"]
    reboot = (state_param == "present" and usage["in_use"]) or (state_param == "absent" and regenerate)
    return {
        "desired": desired,
        "file_changed": file_changed,
        "regenerate": regenerate,
        "unload": unload,
        "reboot_required": reboot,
    }


def run(ctx: Any) -> dict[str, Any]:
    fs, runner = ctx.fs, ctx.runner
    current = read_state(fs)
    p = plan(ctx.params["state"], current)
    tool: Any = _initramfs.command(runner) if p["regenerate"] else None  # resolve before any change

    tracker = DifferenceTracker()
    tracker.add("nouveau_loaded", current["module"]["loaded"], current["module"]["loaded"] and not p["unload"])
    actions = []
    reboot = p["reboot_required"]
    unloaded = False
    if p["file_changed"]:
        action = f"write {CONF_PATH}" if p["desired"] else f"remove {CONF_PATH}"
        actions.append(action)
        if not ctx.check_mode:
            _pending.mark(fs, PENDING, f"{action}: the initramfs must be regenerated")
            if p["desired"] is None:
                fs.remove(CONF_PATH)
            else:
                fs.write_file(CONF_PATH, p["desired"])
            ctx.did(action)
    elif p["regenerate"]:
        ctx.warn(
            f"the initramfs was not regenerated after {CONF_PATH} last changed (an earlier run failed or was "
            "interrupted): regenerating it now"
        )
    if p["regenerate"]:
        actions.append(" ".join([tool[0]] + tool[1]))
        _initramfs.regenerate(runner, tool)
        if not ctx.check_mode:
            _pending.clear(fs, PENDING)
            ctx.did(actions[-1])
    if p["unload"]:
        actions.append("modprobe -r nouveau")
        try:
            _kmod.unload(runner, "nouveau")
            unloaded = True
            ctx.did("modprobe -r nouveau")
        except CommandFailed as exc:
            ctx.warn(
                "nouveau could not be unloaded ({}); it stays loaded until the next boot".format(
                    exc.details["stderr"].strip() or f"rc={exc.details['rc']}"
                )
            )
            reboot = True

    result = {
        "changed": p["file_changed"] or p["regenerate"] or unloaded,
        "reboot_required": reboot,
        "path": CONF_PATH,
        "actions": actions,
        "nouveau": current["module"],
    }
    if ctx.diff_mode:
        result["diff"] = [file_diff(CONF_PATH, current["file"], p["desired"]), tracker.diff("nouveau module")]
    return result
