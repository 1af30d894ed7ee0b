# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Pending steps that survive a failed or interrupted run.

A module that changes something and then has a follow-up step (regenerate the initramfs after the blacklist
file, reload systemd after the unit file, restart a service after its package) records the follow-up here
*before* the first change and clears it only when the follow-up succeeded. The next run sees the record and
finishes the job, even though the first change is already in place and would otherwise look done. A host
without a record has nothing pending, so hosts set up before these records existed are not disturbed.
"""

from __future__ import annotations

from typing import Protocol

STATE_DIR = "/var/lib/gpuops-platform/pending"


class _FS(Protocol):
    def read_text(self, p: str) -> str | None: ...

    def write_file(self, p: str, text: str, mode: int = 0o644) -> None: ...

    def remove(self, p: str) -> None: ...


def path(name: str) -> str:
    return f"{STATE_DIR}/{name}"


def is_pending(fs: _FS, name: str) -> bool:
    return fs.read_text(path(name)) is not None


def detail(fs: _FS, name: str) -> str | None:
    """What the record says (why the step is pending), or None when nothing is pending."""
    text = fs.read_text(path(name))
    return None if text is None else text.strip()


def mark(fs: _FS, name: str, why: str) -> None:
    """Record ``name`` as pending (callers skip this in check mode, like every write)."""
    fs.write_file(path(name), why.rstrip("\n") + "\n", 0o600)


def clear(fs: _FS, name: str) -> None:
    fs.remove(path(name))
