# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Typed errors raised below the modules; main() turns them into fail_json with the details."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class GpuOpsError(Exception):
    """Base error: a message that names the object, the evidence and the fix, plus result details."""

    def __init__(self, msg: str, **details: Any) -> None:
        super().__init__(msg)
        self.msg = msg
        self.details = details

    def __str__(self) -> str:
        return self.msg


class InvalidInput(GpuOpsError):
    """An option value that cannot be right (malformed address, unsafe name, negative count)."""


class NotFound(GpuOpsError):
    """The named device, interface or file does not exist on the host."""


class Unsupported(GpuOpsError):
    """The device or host lacks what the request needs (capability, firmware limit, driver)."""


class ToolNotFound(GpuOpsError):
    """A required binary is not installed."""


class CommandFailed(GpuOpsError):
    """A command returned non-zero; carries the exact argv, rc, stdout and stderr."""

    def __init__(self, msg: str, argv: Iterable[str], rc: int, out: str, err: str) -> None:
        super().__init__(msg, cmd=list(argv), rc=rc, stdout=out, stderr=err)


class HostStateError(GpuOpsError):
    """The host is in a state the module cannot act on safely (read-back mismatch, version skew)."""


class WaitTimeout(GpuOpsError):
    """A bounded wait ended before the expected state appeared."""


def for_option(option: str, exc: GpuOpsError) -> GpuOpsError:
    """``exc`` (a GpuOpsError about a value given in ``option``) with the option named first: ``pf: malformed PCI
    address ...``, ``devices[1]: PCI device ... not found``. The same type and details, so callers and tests that
    catch it see no difference but the message."""
    if exc.msg.startswith(option + ": "):
        return exc
    named = exc.__class__.__new__(exc.__class__)
    named.__dict__.update(exc.__dict__)
    named.msg = f"{option}: {exc.msg}"
    named.args = (named.msg,)
    return named
