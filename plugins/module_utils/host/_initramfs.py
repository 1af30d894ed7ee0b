# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Initramfs regeneration with the host's own tool, for every installed kernel (a blacklist must hold
for the kernel that boots next, not only the running one)."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import ToolNotFound

# Debian/Ubuntu initramfs-tools first, then dracut (RHEL, SUSE, Fedora).
TOOLS = (
    ("update-initramfs", ["-u", "-k", "all"]),
    ("dracut", ["--force", "--regenerate-all"]),
)


def command(runner: Any) -> tuple[str, list[str]]:
    """(tool, args) for this host; ToolNotFound naming both candidates when neither is installed."""
    for tool, args in TOOLS:
        if runner.which(tool):
            return tool, list(args)
    raise ToolNotFound(
        "no initramfs tool found: neither update-initramfs (initramfs-tools) nor dracut is installed; "
        "install the one your distribution boots with"
    )


def regenerate(runner: Any, tool_and_args: tuple[str, list[str]]) -> Any:
    tool, args = tool_and_args
    return runner.run(tool, args, mutating=True)
