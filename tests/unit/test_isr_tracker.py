from __future__ import annotations

from system_under_test.replication.isr import IsrTracker


def tracker(lag_messages: int = 0) -> IsrTracker:
    return IsrTracker(
        1, [1, 2, 3], [1, 2, 3], lag_time_max_ms=1000, lag_max_messages=lag_messages, now_ms=0
    )


def test_high_watermark_is_min_leo_over_isr() -> None:
    t = tracker()
    t.on_fetch(2, 7, 10, now_ms=100)
    t.on_fetch(3, 9, 10, now_ms=100)
    assert t.high_watermark(10) == 7
    t.isr = (1, 3)
    assert t.high_watermark(10) == 9


def test_follower_that_never_catches_up_leaves_after_lag_time() -> None:
    t = tracker()
    t.on_fetch(2, 10, 10, now_ms=500)  # caught up
    t.on_fetch(3, 4, 10, now_ms=500)  # behind; was caught up at 0 (in ISR at start)
    assert t.out_of_sync(10, now_ms=1200) == [3]
    assert t.out_of_sync(10, now_ms=1400) == [3]
    assert t.out_of_sync(10, now_ms=1600) == [2, 3]


def test_a_fetch_reaching_the_previous_leader_end_counts_as_caught_up() -> None:
    t = tracker()
    t.on_fetch(2, 10, 10, now_ms=900)
    # The leader moved on to 20, but the follower reached the end the leader had at its last fetch.
    t.on_fetch(2, 10, 20, now_ms=1500)
    assert t.followers[2].last_caught_up_ms == 900
    t.on_fetch(2, 20, 25, now_ms=1800)
    assert t.followers[2].last_caught_up_ms == 1500
    assert t.out_of_sync(25, now_ms=2400) == [3]


def test_legacy_lag_by_messages_removes_a_follower_under_a_burst() -> None:
    t = tracker(lag_messages=100)
    t.on_fetch(2, 1000, 1000, now_ms=10)
    t.on_fetch(3, 1000, 1000, now_ms=10)
    assert t.out_of_sync(1050, now_ms=20) == []
    assert t.out_of_sync(1200, now_ms=20) == [2, 3]
    t0 = tracker(lag_messages=0)
    t0.on_fetch(2, 1000, 1000, now_ms=10)
    t0.on_fetch(3, 1000, 1000, now_ms=10)
    assert t0.out_of_sync(1200, now_ms=20) == []  # time-based lag does not shuttle


def test_rejoin_needs_the_high_watermark_and_the_epoch_start() -> None:
    t = tracker()
    t.isr = (1, 2)
    t.on_fetch(3, 8, 10, now_ms=5)
    assert not t.ready_to_join(3, high_watermark=9, epoch_start_offset=0)
    t.on_fetch(3, 9, 10, now_ms=6)
    assert t.ready_to_join(3, high_watermark=9, epoch_start_offset=0)
    assert not t.ready_to_join(3, high_watermark=9, epoch_start_offset=10)
    assert not t.ready_to_join(2, high_watermark=0, epoch_start_offset=0)
