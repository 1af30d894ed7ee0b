"""The Lease keeper as tables: renewed every interval while the run lives, a lost Lease and API errors recorded,
a dead run's helm stopped (SIGTERM) and renewal ended; the run's process found among this module's ancestors in
a fake /proc (pid reuse is another start time)."""

from __future__ import annotations

import signal

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.release import _lease


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Proc:
    def __init__(self):
        self.signals = []
        self.done = False

    def poll(self):
        return 0 if self.done else None

    def send_signal(self, sig):
        self.signals.append(sig)


def _boom():
    raise RuntimeError("HTTP 503 Service Unavailable\nbody")


@pytest.mark.parametrize(
    ("renew", "alive", "times", "renewals", "lost", "errors", "died"),
    [
        (lambda: True, True, [1, 14, 15, 20, 30, 31], 2, False, [], False),  # due at 15, then 15 s after that
        (lambda: False, True, [15], 0, True, [], False),  # another run holds it now
        (_boom, True, [15], 0, False, ["HTTP 503 Service Unavailable"], False),
        (lambda: True, False, [1, 15, 30], 0, False, [], True),  # the run is gone: no renewal
    ],
    ids=["renewed", "lost", "api-error", "run-died"],
)
def test_keeper_tick(renew, alive, times, renewals, lost, errors, died):
    clock = Clock()
    keeper = _lease.Keeper(renew, 15, run_alive=lambda: alive, poll=1, clock=clock)
    proc, finished = Proc(), Proc()
    finished.done = True
    keeper.track(proc)
    keeper.track(finished)
    due = 15.0
    for t in times:
        clock.t = t
        due = keeper.tick(due)
    assert (keeper.renewals, keeper.lost, keeper.errors, keeper.run_died) == (renewals, lost, errors, died)
    assert proc.signals == ([signal.SIGTERM] if died else []) and finished.signals == []


def test_a_command_started_after_the_run_died_is_stopped_at_once():
    keeper = _lease.Keeper(lambda: True, 15, run_alive=lambda: False, poll=1, clock=Clock())
    keeper.tick(15)
    proc = Proc()
    keeper.track(proc)
    assert proc.signals == [signal.SIGTERM]


def _proc(tmp_path, table):
    for pid, (ppid, ticks) in table.items():
        d = tmp_path / str(pid)
        d.mkdir(exist_ok=True)
        rest = ["S", str(ppid)] + ["0"] * 17 + [str(ticks)] + ["0"] * 5
        (d / "stat").write_text(f"{pid} (python3 (x)) " + " ".join(rest) + "\n")
    return str(tmp_path)


HOLDER = "gpuops.platform alice@bastion pid {} started 2026-11-27T10:00:00Z"


@pytest.mark.parametrize(
    ("holder", "watched"),
    [
        (HOLDER.format(100), True),  # the controller, grandparent of the module
        (HOLDER.format(555), False),  # not an ancestor: another host, or a remote target
        ("alice@bastion run 1a2b", False),  # a holder of another format
    ],
)
def test_run_alive_check(tmp_path, holder, watched):
    proc = _proc(tmp_path, {300: (200, 9), 200: (100, 8), 100: (1, 7), 555: (1, 5)})
    check = _lease.run_alive_check(holder, proc=proc, me=300)
    assert (check is not None) is watched
    if check is None:
        return
    assert check() is True
    _proc(tmp_path, {100: (1, 12345)})  # pid 100 reused by another process
    assert check() is False
    (tmp_path / "100" / "stat").unlink()  # gone
    assert check() is False
