"""Path mapping and file helpers shared by the tree generator, the simulated kernel and the shims.

A `Host` names one simulated host tree. Outside its namespace (tests, the CLI) the host's paths are
read and written under the tree (`<tree>/sys/...`); inside the namespace (shims, the namespace's init)
they are the real paths (`/sys/...`), which the runner has pointed at the tree. Symlinks in the tree are
relative so that they resolve the same way in both views."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

META_DIR = ".hostsim"
SIM_RUN = "run/gpuops-sim"  # the simulation's own state and logs, inside the host's /run


class Host:
    def __init__(self, tree: str | os.PathLike[str], inside: bool = False) -> None:
        self.tree = Path(os.path.abspath(tree))
        self.inside = inside
        self.root = Path("/") if inside else self.tree
        self._meta: dict[str, Any] | None = None
        self._lock_depth = 0
        self._lock_fd = -1

    def p(self, path: str) -> Path:
        """The host path `path` (absolute, as on the simulated host) in this view."""
        return self.root / path.lstrip("/")

    def t(self, path: str) -> Path:
        """`path` under the tree itself (for the simulation's private files)."""
        return self.tree / path.lstrip("/")

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = json.loads(self.t(f"{META_DIR}/meta.json").read_text())
        return self._meta

    @property
    def release(self) -> str:
        return self.meta["host"]["kernel_release"]

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Serializes the simulated kernel's state changes (shims and the namespace init run concurrently).
        Re-entrant within one Host object."""
        if self._lock_depth == 0:
            self._lock_fd = os.open(self.t(f"{META_DIR}/lock"), os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        self._lock_depth += 1
        try:
            yield
        finally:
            self._lock_depth -= 1
            if self._lock_depth == 0:
                os.close(self._lock_fd)
                self._lock_fd = -1

    def reload_meta(self) -> None:
        self._meta = None

    def state(self) -> dict[str, Any]:
        f = self.t(f"{META_DIR}/state.json")
        return json.loads(f.read_text()) if f.exists() else {}

    def save_state(self, st: dict[str, Any]) -> None:
        write(self.t(f"{META_DIR}/state.json"), json.dumps(st, indent=1, sort_keys=True) + "\n")

    def kernel_log(self, msg: str) -> None:
        """A line of the simulated kernel's log (dmesg), /run/gpuops-sim/kernel.log on the host."""
        up = time.monotonic() % 100000
        with open(self.p(f"{SIM_RUN}/kernel.log"), "a") as fh:
            fh.write(f"[{up:12.6f}] {msg}\n")

    def call_log(self, tool: str, argv: list[str], rc: int, note: str = "") -> None:
        rec = {"time": round(time.time(), 3), "tool": tool, "argv": argv, "rc": rc}
        if note:
            rec["note"] = note
        with open(self.p(f"{SIM_RUN}/calls.log"), "a") as fh:
            fh.write(json.dumps(rec) + "\n")


def write(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Write in place (same inode, so bind-mounted files stay in sync); a file that already holds `data`
    is left alone (cheaper, and its mtime does not move)."""
    raw = data if isinstance(data, bytes) else data.encode()
    try:
        with open(path, "rb") as fh:
            if fh.read(len(raw) + 1) == raw:
                return
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (IsADirectoryError, PermissionError):
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else mode)
    try:
        os.write(fd, raw)
    finally:
        os.close(fd)
    if mode is not None:
        os.chmod(path, mode)


def read(path: Path, default: str = "") -> str:
    try:
        return path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return default


def link(path: Path, target: Path) -> None:
    """A relative symlink `path` -> `target` (both in the same view), replacing what is there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    rel = os.path.relpath(target, path.parent)
    if all(part == ".." for part in rel.split(os.sep)):  # an ancestor: ../../../<name>, as sysfs writes it
        rel = os.path.join(os.path.relpath(target.parent, path.parent), target.name)
    os.symlink(rel, path)


def link_abs(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    os.symlink(target, path)


def remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def clear_dir(path: Path) -> None:
    """Empty a directory, keeping the directory itself (it may be a mount point in a namespace)."""
    path.mkdir(parents=True, exist_ok=True)
    for child in path.iterdir():
        remove(child)
