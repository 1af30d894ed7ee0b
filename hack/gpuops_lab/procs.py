"""Start, watch and stop the lab's processes by PID. Each process has a PID file and a log file in the
state directory; a PID is only trusted when /proc/<pid>/cmdline still shows the program we started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import ComponentDied, LabError


@dataclass(frozen=True)
class Proc:
    name: str
    run: Path
    logs: Path

    @property
    def pidfile(self) -> Path:
        return self.run / f"{self.name}.pid"

    @property
    def log(self) -> Path:
        return self.logs / f"{self.name}.log"

    def pid(self) -> int | None:
        """The PID when the process we started is alive, else None (a stale PID file is removed)."""
        try:
            pid_s, marker = self.pidfile.read_text().split("\n", 1)
            pid = int(pid_s)
        except (FileNotFoundError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            cmdline, stat = "", ""
        zombie = stat.rsplit(")", 1)[-1].split()[:1] == ["Z"] if stat else False
        if not stat or zombie:
            return None
        # an empty cmdline is a process between fork and exec (or exiting): ours if we hold its handle
        popen = getattr(self, "_popen", None)
        if not cmdline.strip() and popen is not None and popen.pid == pid and popen.poll() is None:
            return pid
        if marker.strip() and marker.strip() in cmdline:
            return pid
        return None

    def alive(self) -> bool:
        return self.pid() is not None

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds the process (and the children it waited for) has used; None when not running."""
        pid = self.pid()
        if pid is None:
            return None
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            return None
        # after the command: state is field 3, utime 14, stime 15, cutime 16, cstime 17 (proc(5))
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log written)"

    def start(self, argv: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> int:
        self.run.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            log.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%S')} start: {' '.join(argv)}\n".encode())
            log.flush()
            p = subprocess.Popen(  # noqa: S603 - argv list, no shell
                list(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                cwd=cwd,
                close_fds=True,
            )
        self.pidfile.write_text(f"{p.pid}\n{argv[0]}\n")
        self._popen = p  # keeps a handle so a fast exit is seen with its code
        return p.pid

    def exit_code(self) -> int | None:
        p = getattr(self, "_popen", None)
        return p.poll() if p is not None else None

    def check(self) -> None:
        if not self.alive():
            raise ComponentDied(self.name, str(self.log), self.tail(), self.exit_code())

    def stop(self, timeout: float = 10.0) -> bool:
        pid = self.pid()
        if pid is None:
            self.pidfile.unlink(missing_ok=True)
            return False
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            except PermissionError:
                os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.pid() is not None:
                p = getattr(self, "_popen", None)
                if p is not None:
                    p.poll()
                time.sleep(0.1)
            if self.pid() is None:
                break
        self.pidfile.unlink(missing_ok=True)
        return True


# object.__setattr__ is needed on a frozen dataclass for the Popen handle
def _set_popen(self: Proc, name: str, value: object) -> None:
    object.__setattr__(self, name, value)


Proc.__setattr__ = _set_popen  # type: ignore[method-assign]


def wait_until(proc: Proc, ready: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ready() until it is true; fail at once, naming the log, when the process dies."""
    deadline = time.monotonic() + timeout
    while True:
        proc.check()
        try:
            if ready():
                return
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        if time.monotonic() > deadline:
            raise LabError(
                f"{proc.name} did not become ready ({what}) within {timeout:.0f}s; its log is {proc.log}. "
                f"Last lines:\n{proc.tail()}"
            )
        time.sleep(0.2)


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
