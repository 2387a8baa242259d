"""The rate kept during faults on keys whose leader is alive: the segments, and the figures
on a hand-written history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from checkers.key_log import ReplicationEvent
from checkers.live_rate import live_segments, merged
from histories import HistoryWriter

MS = 1_000_000
S = 1_000_000_000


def election(time: int, key: str, leader: int) -> ReplicationEvent:
    return ReplicationEvent(0, time, "leader-election", leader, 0, (leader,), None, False)


def test_spans_merge_when_they_overlap_or_touch() -> None:
    assert merged([(5, 7), (0, 2), (2, 3), (6, 9), (11, 11)]) == [(0, 3), (5, 9)]


def test_a_key_is_live_unless_its_leader_is_offline_or_its_node_down() -> None:
    replication = {
        "a": [election(0, "a", 1), election(3 * S, "a", 3)],
        "b": [election(0, "b", 2), election(5 * S, "b", -1)],
    }
    segments = live_segments(
        ["a", "b"], replication, faults=[(2 * S, 4 * S)], down={"n1": [(2 * S, 4 * S)]},
        span=(0, 6 * S),
    )  # fmt: skip
    assert segments == [
        ("a", 0, 2 * S, False, True),
        # 2-3 s: a's leader n1 is killed; from 3 s broker 3 leads it.
        ("a", 3 * S, 4 * S, True, True),
        ("a", 4 * S, 6 * S, False, True),
        ("b", 0, 2 * S, False, True),
        ("b", 2 * S, 4 * S, True, True),
        ("b", 4 * S, 5 * S, False, True),
        # from 5 s b is offline
    ]


def isr_change(time: int, isr: tuple[int, ...]) -> ReplicationEvent:
    return ReplicationEvent(0, time, "isr-change", 1, 0, isr, None, False)


def test_a_live_key_is_writable_while_its_isr_has_min_isr_members() -> None:
    replication = {
        "a": [election(0, "a", 1), isr_change(0, (1, 2, 3)), isr_change(2 * S, (1,)),
              isr_change(3 * S, (1, 2))],
        "b": [election(0, "b", 2)],
    }  # fmt: skip
    segments = live_segments(
        ["a", "b"], replication, faults=[(1 * S, 4 * S)], down={}, span=(0, 5 * S), min_isr=2
    )
    assert segments == [
        ("a", 0, 1 * S, False, True),
        ("a", 1 * S, 2 * S, True, True),
        # 2-3 s: the ISR is the leader alone, below min.insync.replicas=2.
        ("a", 2 * S, 3 * S, True, False),
        ("a", 3 * S, 4 * S, True, True),
        ("a", 4 * S, 5 * S, False, True),
        # b's ISR (a leader-election's: [2]) is below the minimum throughout.
        ("b", 0, 1 * S, False, False),
        ("b", 1 * S, 4 * S, True, False),
        ("b", 4 * S, 5 * S, False, False),
    ]
    unjudged = live_segments(["a"], replication, [(1 * S, 4 * S)], {}, (0, 5 * S))
    assert all(writable for *_, writable in unjudged)
    # n2 paused from 0.5 s to 1.5 s while still in a's ISR: no commit can be made then.
    paused = live_segments(
        ["a"], replication, [(1 * S, 4 * S)], {"n2": [(S // 2, 3 * S // 2)]}, (0, 5 * S), 2
    )
    assert paused[:3] == [
        ("a", 0, S // 2, False, True),
        ("a", S // 2, 1 * S, False, False),
        ("a", 1 * S, 3 * S // 2, True, False),
    ]
    assert paused[3] == ("a", 3 * S // 2, 2 * S, True, True)


def _history(
    path: Path, b_isr: tuple[int, ...] = (1, 2, 3), a_isr_after: tuple[int, ...] = (2, 3)
) -> None:
    """Keys a (led by broker 1) and b (broker 2); n1 killed from 2 s to 4 s, a's new leader
    elected at 3 s (ISR `a_isr_after`); sends once every 100 ms per key, polls every
    200 ms."""
    writer = HistoryWriter(path)
    for key, leader in (("a", 1), ("b", 2)):
        isr = [1, 2, 3] if key == "a" else list(b_isr)
        value = {"key": key, "leader": leader, "leader_epoch": 0, "isr": isr,
                 "previous_leader": -1, "unclean": False}  # fmt: skip
        writer.event("leader-election", value, process="sut", time=1 * MS)
    events = {
        2 * S: ("kill", {"targets": ["n1"]}, "nemesis"),
        3 * S: ("leader-election", {"key": "a", "leader": 3, "leader_epoch": 1,
                                    "isr": list(a_isr_after), "previous_leader": 1,
                                    "unclean": False}, "sut"),
        4 * S: ("start", {"targets": ["n1"]}, "nemesis"),
    }  # fmt: skip
    value = 0
    for tick in range(1, 60):
        at = tick * 100 * MS
        for t in [t for t in events if at - 100 * MS < t <= at]:
            f, event, process = events[t]
            writer.event(f, event, process=process, time=t)
        for process, key in ((1, "a"), (2, "b")):
            value += 1
            invoke = writer.write(
                process, "invoke", "send", [["send", key, value]], time=at, key=key, acks=-1
            )
            # a's sends fail while its leader is dead and none was elected yet (2-3 s).
            dead = key == "a" and 2 * S <= at < 3 * S
            done = "fail" if dead else "ok"
            result = [["send", key, value]] if dead else [["send", key, [tick, value]]]
            writer.complete(invoke, done, result, time=at + MS)
        if tick % 2 == 0:
            # Each poll reads one record of b, and one of a unless a has no leader.
            read = {"b": [[tick, 2 * tick]]}
            if not 2 * S <= at < 3 * S:
                read["a"] = [[tick, 2 * tick + 1]]
            invoke = writer.write(3, "invoke", "poll", [["poll"]], time=at)
            writer.complete(invoke, "ok", [["poll", read]], time=at + MS)
    writer.close()


@pytest.fixture(scope="module")
def live_rate(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = tmp_path_factory.mktemp("live-rate")
    _history(run / "history.jsonl")
    return check_history(run, config=CheckConfig())["stats"]["live_rate"]


def test_the_rate_on_live_keys_during_faults_and_outside_them(live_rate: dict[str, Any]) -> None:
    during, free = live_rate["during_faults"], live_rate["fault_free"]
    assert live_rate["keys"] == 2
    # The kill lasts 2 s: b live throughout, a for the last second only.
    assert during["seconds"] == 2.0 and during["live_keys"] == 1.5
    # ok sends completing in [2 s, 4 s): b's 20 and a's 10 after its election.
    assert during["send_ok"] == 30 and during["send_per_s_per_live_key"] == 10.0
    assert free["send_per_s_per_live_key"] == pytest.approx(10.0, rel=0.05)
    assert live_rate["kept"]["send"] == pytest.approx(1.0, rel=0.05)
    assert during["poll_ok"] == 10 and during["poll_per_s"] == 5.0
    assert live_rate["kept"]["poll"] == pytest.approx(1.0, rel=0.05)


def test_the_records_read_on_live_keys_during_faults_and_outside_them(
    live_rate: dict[str, Any],
) -> None:
    during, free = live_rate["during_faults"], live_rate["fault_free"]
    # Polls in [2 s, 4 s): 10 records of b, and 5 of a once its new leader leads (3-4 s).
    assert during["read_ok"] == 15 and during["read_per_s_per_live_key"] == 5.0
    # Outside: 19 polls of two records each over 3.8 s of two live keys.
    assert free["read_ok"] == 38
    assert free["read_per_s_per_live_key"] == pytest.approx(5.0, rel=0.05)
    assert live_rate["kept"]["read"] == pytest.approx(1.0, rel=0.05)


@pytest.fixture(scope="module")
def writable_rate(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same history under acks=-1 and min.insync.replicas=2, b's ISR [2, 3] (the killed
    n1 is not in it), a's ISR after its election at 3 s [3], below the minimum."""
    run = tmp_path_factory.mktemp("writable-rate")
    _history(run / "history.jsonl", b_isr=(2, 3), a_isr_after=(3,))
    test = {
        "topic": {"replication_factor": 3, "min_insync_replicas": 2,
                  "unclean_leader_election": False},
        "workload": {"acks": -1, "producer_retries": 0},
    }  # fmt: skip
    (run / "test.json").write_text(json.dumps(test))
    return check_history(run, config=CheckConfig())["stats"]["live_rate"]


def test_the_rate_on_writable_keys_leaves_out_keys_below_min_isr(
    writable_rate: dict[str, Any],
) -> None:
    during, free = writable_rate["during_faults"], writable_rate["fault_free"]
    assert writable_rate["min_isr"] == 2
    # During the kill only b is writable: a is dead, then led by an ISR of one.
    assert during["live_keys"] == 1.5 and during["writable_keys"] == 1.0
    assert during["writable_send_ok"] == 20 and during["send_per_s_per_writable_key"] == 10.0
    assert during["writable_read_ok"] == 10 and during["read_per_s_per_writable_key"] == 5.0
    # Outside it a stays below the minimum from 4 s: its sends there do not count.
    assert free["writable_send_ok"] == free["send_ok"] - 20
    assert free["send_per_s_per_writable_key"] == pytest.approx(10.0, rel=0.05)
    assert writable_rate["kept"]["send_writable"] == pytest.approx(1.0, rel=0.05)
    assert writable_rate["kept"]["read_writable"] == pytest.approx(1.0, rel=0.05)


def test_without_acks_all_no_key_is_judged_by_its_isr(live_rate: dict[str, Any]) -> None:
    assert "min_isr" not in live_rate
    assert "writable_keys" not in live_rate["during_faults"]
    assert "send_writable" not in live_rate["kept"]


def test_a_node_is_down_from_its_power_loss_or_crash_to_its_start() -> None:
    from checkers.fault_intervals import fault_intervals
    from checkers.live_rate import down_nodes

    events = [
        (0, 1 * S, "power-loss", '{"targets": ["n1", "n2"]}'),
        (1, 2 * S, "truncate-file", '{"targets": ["n3"]}'),
        (2, 3 * S, "start", '{"targets": ["n1", "n2"]}'),
        (3, 4 * S, "start", '{"targets": ["n3"]}'),
        (4, 5 * S, "corrupt-file", '{"targets": ["n1"], "crash": false}'),
    ]
    intervals, _ = fault_intervals(events)
    assert down_nodes(intervals, 10 * S) == {
        "n1": [(1 * S, 3 * S)],
        "n2": [(1 * S, 3 * S)],
        "n3": [(2 * S, 4 * S)],
    }
