# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Host file system access under a root prefix.

Modules always act on the real paths (ROOT is "/"). Unit tests point ROOT, or the ``root`` argument,
at a temporary tree laid out like the host (``<root>/sys/bus/pci/devices/...``). Every path handed to
this class is a host path (absolute, as on the host); symlinks are resolved inside the root, so an
absolute link target such as ``/usr/src/linux-headers-X`` stays in the tree.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from typing import Any

ROOT = "/"


class HostFS:
    def __init__(self, root: str | None = None, atomic_move: Callable[[str, str], Any] | None = None) -> None:
        self.root = ROOT if root is None else root
        self._atomic_move = atomic_move

    def path(self, host_path: str) -> str:
        if self.root in ("/", ""):
            return host_path
        return os.path.join(self.root, host_path.lstrip("/"))

    # -- reading --------------------------------------------------------------------------------
    def exists(self, p: str) -> bool:
        return os.path.exists(self.path(p))

    def lexists(self, p: str) -> bool:
        return os.path.lexists(self.path(p))

    def isdir(self, p: str) -> bool:
        return os.path.isdir(self.path(p))

    def listdir(self, p: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(p)))
        except OSError:
            return []

    def read_bytes(self, p: str) -> bytes | None:
        """The file's bytes, or None when it does not exist or cannot be read."""
        try:
            with open(self.path(p), "rb") as f:
                return f.read()
        except OSError:
            return None

    def read_text(self, p: str) -> str | None:
        data = self.read_bytes(p)
        return None if data is None else data.decode("utf-8", "replace")

    def read_attr(self, p: str) -> str | None:
        """A sysfs attribute, stripped, or None."""
        text = self.read_text(p)
        return None if text is None else text.strip()

    def readlink(self, p: str) -> str | None:
        try:
            return os.readlink(self.path(p))
        except OSError:
            return None

    def link_name(self, p: str) -> str | None:
        """Base name of a symlink's target (sysfs ``driver``, ``iommu_group``), or None."""
        target = self.readlink(p)
        return os.path.basename(target.rstrip("/")) if target else None

    def realpath(self, p: str) -> str:
        """Resolve symlinks in host path ``p`` inside the root; returns a host path."""
        if self.root in ("/", ""):
            return os.path.realpath(p)
        pending = [c for c in p.split("/") if c]
        done: list[str] = []
        hops = 0
        while pending:
            comp = pending.pop(0)
            if comp == ".":
                continue
            if comp == "..":
                if done:
                    done.pop()
                continue
            full = self.path("/" + "/".join(done + [comp]))
            if os.path.islink(full):
                hops += 1
                if hops > 40:
                    raise OSError(errno.ELOOP, "too many levels of symbolic links", p)
                target = os.readlink(full)
                if target.startswith("/"):
                    done = []
                pending = [c for c in target.split("/") if c] + pending
            else:
                done.append(comp)
        return "/" + "/".join(done)

    def writable(self, p: str) -> bool:
        """Whether :meth:`write_file` can write host path ``p``, as far as access(2) tells (a read-only mount,
        permissions): the directory that holds it - or, when write_file would create that directory, its nearest
        existing ancestor - must be writable, since the file is written next to it and renamed into place."""
        directory = os.path.dirname(self.path(p))
        while not os.path.isdir(directory):
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        return os.access(directory, os.W_OK)

    # -- writing (callers guard these with check mode) -------------------------------------------
    def write_file(self, p: str, text: str, mode: int = 0o644) -> None:
        """Write a whole file atomically (temp file in the same directory, then rename). An error names ``p``, the
        file asked for, not the temporary file next to it."""
        dest = self.path(p)
        directory = os.path.dirname(dest)
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".gpuops-", dir=directory)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or str(exc), p) from exc
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.chmod(tmp, mode)
            if self._atomic_move is not None:
                self._atomic_move(tmp, dest)
            else:
                os.replace(tmp, dest)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or str(exc), p) from exc
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def remove(self, p: str) -> None:
        try:
            os.unlink(self.path(p))
        except FileNotFoundError:
            pass

    def write_attr(self, p: str, value: Any) -> None:
        """Write a sysfs attribute in one write() call, as the kernel expects."""
        with open(self.path(p), "w") as f:
            f.write(value)

    def pwrite(self, p: str, offset: int, data: bytes) -> None:
        """Write bytes at an offset without truncating (PCI config space)."""
        fd = os.open(self.path(p), os.O_WRONLY)
        try:
            written = os.pwrite(fd, data, offset)
        finally:
            os.close(fd)
        if written != len(data):
            raise OSError(errno.EIO, f"short write ({written} of {len(data)} bytes) at offset {offset:#x}", p)
