"""RateLimiter (Jepsen-style staggered slots) and WorkloadCounters (live ops/s and types)."""

from __future__ import annotations

import itertools
import random
import threading

import pytest

from workloads import RateLimiter, WorkloadCounters


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_slots_average_the_target_rate() -> None:
    clock = FakeClock()
    limiter = RateLimiter(50.0, rng=random.Random(3), clock=clock)
    slots = [limiter.reserve() for _ in range(5000)]
    gaps = [b - a for a, b in itertools.pairwise(slots)]
    assert all(gap >= 0 for gap in gaps)
    assert sum(gaps) / len(gaps) == pytest.approx(1 / 50, rel=0.05)
    assert max(gaps) < 2 / 50


def test_a_late_caller_gets_no_burst() -> None:
    clock = FakeClock()
    limiter = RateLimiter(10.0, rng=random.Random(1), clock=clock)
    limiter.reserve()
    clock.now += 100.0  # nobody asked for a long time
    first = limiter.reserve()
    assert first == clock.now
    assert limiter.reserve() >= first


def test_unlimited_and_stopped() -> None:
    stop = threading.Event()
    assert RateLimiter(None).acquire(stop)
    stop.set()
    assert not RateLimiter(None).acquire(stop)
    assert not RateLimiter(0.001).acquire(stop)
    with pytest.raises(ValueError, match="rate is 0"):
        RateLimiter(0)


def test_counters_rate_over_the_recent_window_and_overall() -> None:
    clock = FakeClock()
    counters = WorkloadCounters(window_s=2.0, clock=clock)
    for second in range(10):
        per_second = 100 if second < 5 else 10
        for _ in range(per_second):
            counters.invoked("send")
            counters.completed("send", "ok")
        clock.now += 1.0
    snapshot = counters.snapshot()
    assert snapshot.elapsed_s == pytest.approx(10.0)
    assert snapshot.ok == snapshot.invoked == 550
    assert snapshot.ops_per_s == pytest.approx(10.0)
    assert snapshot.mean_ops_per_s == pytest.approx(55.0)


def test_counters_by_type_and_f() -> None:
    clock = FakeClock()
    counters = WorkloadCounters(clock=clock)
    for f, op_type in [("send", "ok"), ("send", "info"), ("poll", "fail"), ("crash", "info")]:
        counters.invoked(f)
        counters.completed(f, op_type)
    counters.invoked("poll")
    clock.now += 0.5
    snapshot = counters.snapshot()
    assert (snapshot.ok, snapshot.fail, snapshot.info, snapshot.in_flight) == (1, 1, 2, 1)
    assert snapshot.by_f["send"] == {"invoke": 2, "ok": 1, "fail": 0, "info": 1}
    assert snapshot.ops_per_s == pytest.approx(8.0)
    counters.restart_clock()
    assert counters.snapshot().ops_per_s == 0.0


def test_a_stopped_clock_keeps_the_runs_mean_rate() -> None:
    clock = FakeClock()
    counters = WorkloadCounters(clock=clock)
    for _ in range(200):
        counters.invoked("send")
        counters.completed("send", "ok")
    clock.now += 2.0
    counters.stop_clock()
    clock.now += 30.0  # healing, recovery, the final read
    counters.invoked("poll")
    counters.completed("poll", "ok")
    snapshot = counters.snapshot()
    assert snapshot.mean_ops_per_s == pytest.approx(100.0)
    assert snapshot.elapsed_s == pytest.approx(2.0)
    assert snapshot.ok == 201
    counters.restart_clock()  # a new run: its clock runs again
    clock.now += 1.0
    assert counters.snapshot().mean_ops_per_s == pytest.approx(201.0)
