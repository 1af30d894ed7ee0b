# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The one command runner: argv lists only, binary resolved with get_bin_path, C locale, exact argv kept
for errors, mutating calls skipped in check mode."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import CommandFailed, ToolNotFound

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
SBIN_DIRS = ["/usr/local/sbin", "/usr/sbin", "/sbin"]

# What to install when a tool is missing (Debian/Ubuntu package / RHEL package).
TOOL_HINTS = {
    "modprobe": "install kmod",
    "modinfo": "install kmod",
    "update-initramfs": "install initramfs-tools",
    "dracut": "install dracut",
    "setpci": "install pciutils",
    "systemctl": "the host must run systemd",
    "dpkg-query": "a Debian/Ubuntu host has dpkg",
    "apt-get": "a Debian/Ubuntu host has apt",
    "rpm": "an RPM host has rpm",
    "dnf": "install dnf",
    "ofed_info": "installed with MLNX_OFED or DOCA-OFED",
}


class CmdResult:
    def __init__(self, argv: Iterable[str], rc: int, out: str, err: str, skipped: bool = False) -> None:
        self.argv = list(argv)
        self.rc = rc
        self.out = out
        self.err = err
        self.skipped = skipped

    @property
    def ok(self) -> bool:
        return self.rc == 0


class Runner:
    """Runs host binaries for one module invocation.

    ``check_mode``: mutating calls are recorded in ``skipped`` and not run. ``history`` keeps every argv
    run, for results and tests. After :meth:`remember_reads`, a read (a call that is not mutating) run again with
    the same argv and environment answers from the first run (also in the runners :meth:`checking` makes from it).
    """

    def __init__(self, module: Any, check_mode: bool = False) -> None:
        self._module = module
        self.check_mode = check_mode
        self._paths: dict[str, str | None] = {}
        self.history: list[list[str]] = []
        self.skipped: list[list[str]] = []
        self._reads: dict[Any, tuple[int, str, str]] | None = None
        # called with each command's Popen as it starts (the Lease keeper stops a dead run's helm)
        self.on_popen: Callable[..., Any] | None = None

    def remember_reads(self) -> None:
        """Answer repeated reads from the first run, for the rest of this module run. Only for a module that
        changes nothing on the host (gpu_host_preflight: its fix probes run in check mode and read what its fact
        gathering read a moment before), so a second read could only see what the first saw."""
        if self._reads is None:
            self._reads = {}

    def checking(self) -> Runner:
        """A runner for the same module that does not run mutating calls (a check-mode probe of another action)."""
        probe = Runner(self._module, check_mode=True)
        probe._paths = self._paths
        probe._reads = self._reads
        return probe

    # Seams for tests: resolve a binary, execute an argv.
    def _resolve(self, tool: str) -> str | None:
        return self._module.get_bin_path(tool, required=False, opt_dirs=SBIN_DIRS)

    def _exec(self, argv: list[str], env: Mapping[str, str], data: bytes | str | None = None) -> tuple[int, str, str]:
        # the callback and the input only where set: every other command runs exactly as before
        extra: dict[str, Any] = {"before_communicate_callback": self.on_popen} if self.on_popen is not None else {}
        if data is not None:
            extra.update(data=data, binary_data=True)  # as given: no newline added
        return self._module.run_command(argv, environ_update=env, check_rc=False, **extra)

    def which(self, tool: str) -> str | None:
        """Absolute path of ``tool`` or None."""
        if tool not in self._paths:
            self._paths[tool] = self._resolve(tool)
        return self._paths[tool]

    def require(self, tool: str) -> str:
        path = self.which(tool)
        if not path:
            hint = TOOL_HINTS.get(tool, "install it")
            raise ToolNotFound(
                "required command {} not found in PATH or {} ({})".format(tool, ":".join(SBIN_DIRS), hint)
            )
        return path

    def run(
        self,
        tool: str,
        args: Iterable[Any],
        mutating: bool = False,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        data: bytes | str | None = None,
    ) -> CmdResult:
        """Run ``tool`` with the argv tail ``args`` (``data``: text for its standard input). Raises CommandFailed
        (exact argv, rc, output) when ``check`` and rc != 0. In check mode a mutating call is not run and reports
        rc 0, skipped."""
        argv = [self.require(tool)] + [str(a) for a in args]
        if mutating and self.check_mode:
            self.skipped.append(argv)
            return CmdResult(argv, 0, "", "", skipped=True)
        environ = dict(C_LOCALE)
        environ.update(env or {})
        key = (tuple(argv), tuple(sorted(environ.items())))
        if not mutating and self._reads is not None and key in self._reads:
            rc, out, err = self._reads[key]
        else:
            self.history.append(argv)
            rc, out, err = self._exec(argv, environ) if data is None else self._exec(argv, environ, data)
            if not mutating and self._reads is not None:
                self._reads[key] = (rc, out, err)
        if check and rc != 0:
            how = f"was killed by signal {-rc}" if rc < 0 else f"failed (rc={rc})"
            output = (err or out).strip()[-2000:] or "no output"
            raise CommandFailed(
                f"command {how}: {' '.join(argv)}: {output}",
                argv,
                rc,
                out,
                err,
            )
        return CmdResult(argv, rc, out, err)
