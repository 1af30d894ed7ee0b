"""WorkQueue: deduplication, re-queue while processing, delays and retry backoff (fake clock)."""

from __future__ import annotations

import time

import pytest
from gpuops_lab.simulator.framework import WorkQueue, backoff_delay


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def drain(q: WorkQueue) -> list:
    out = []
    while (item := q.get(timeout=0)) is not None:
        out.append(item)
        q.done(item)
    return out


@pytest.mark.parametrize(
    ("adds", "expected"),
    [
        (["a"], ["a"]),
        (["a", "a", "a"], ["a"]),
        (["a", "b", "a", "c", "b"], ["a", "b", "c"]),
        ([("H", "x"), ("H", "x"), ("G", "x")], [("H", "x"), ("G", "x")]),
        ([], []),
    ],
)
def test_dedupe(adds, expected):
    q = WorkQueue(FakeClock())
    for item in adds:
        q.add(item)
    assert len(q) == len(expected)
    assert drain(q) == expected


def test_add_while_processing_is_queued_again_after_done():
    q = WorkQueue(FakeClock())
    q.add("a")
    item = q.get(timeout=0)
    assert item == "a"
    q.add("a")
    q.add("a")
    assert q.get(timeout=0) is None  # not handed out twice concurrently
    q.done("a")
    assert drain(q) == ["a"]


def test_add_after_waits_for_the_clock():
    clock = FakeClock()
    q = WorkQueue(clock)
    q.add_after("late", 5.0)
    q.add_after("later", 10.0)
    q.add_after("late", 7.0)  # a later schedule of a waiting item does not postpone it
    assert drain(q) == []
    clock.now += 5.0
    assert drain(q) == ["late"]
    clock.now += 5.0
    assert drain(q) == ["later"]
    q.add_after("now", 0)
    assert drain(q) == ["now"]


def test_add_after_earlier_schedule_wins():
    clock = FakeClock()
    q = WorkQueue(clock)
    q.add_after("x", 10.0)
    q.add_after("x", 2.0)
    clock.now += 2.0
    assert drain(q) == ["x"]
    clock.now += 10.0
    assert drain(q) == []


@pytest.mark.parametrize(("attempt", "delay"), [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (8, 60.0), (30, 60.0)])
def test_backoff_delay(attempt, delay):
    assert backoff_delay(attempt, 0.5, 60.0) == delay


def test_rate_limited_retries_back_off_until_forget():
    clock = FakeClock()
    q = WorkQueue(clock, retry_base=0.5, retry_cap=2.0)
    delays = [q.add_rate_limited("k") for _i in range(4)]
    assert delays == [0.5, 1.0, 2.0, 2.0]
    assert q.failures("k") == 4
    q.forget("k")
    assert q.failures("k") == 0
    assert q.add_rate_limited("k") == 0.5


def test_get_blocks_at_most_the_timeout_and_wakes_for_due_items():
    q = WorkQueue()
    t0 = time.monotonic()
    assert q.get(timeout=0.05) is None
    assert 0.04 <= time.monotonic() - t0 < 2.0  # generous upper bound: the suite runs on 2 busy cores
    q.add_after("soon", 0.05)
    assert q.get(timeout=2.0) == "soon"  # returns as soon as it is due (0.05 s), not after the timeout


def test_shutdown_ignores_adds():
    q = WorkQueue(FakeClock())
    q.shutdown()
    q.add("a")
    assert q.get(timeout=0.1) is None
