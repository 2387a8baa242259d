"""`stale-isr-member` (checkers.stale_isr) on hand-written events: it fires on a follower
whose broker was killed and that its leader kept in the ISR past the lag time and grace,
and not when the ISR shrank in time, the leader or ZooKeeper was also faulted, a partition
was in force, the fault ended before the deadline, the leader changed, the kill did not
take, or test.json gives no broker mapping; and end to end, in results.json."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from checkers.catalogue import describe_case
from checkers.config import TestSettings
from checkers.events import NemesisEvent
from checkers.key_log import ReplicationEvent
from checkers.stale_isr import fault_spans, stale_isr_members
from tests.unit.checkers.history_builder import HistoryBuilder

S = 1_000_000_000
MS = 1_000_000
LAG_MS = 10_000
TOLERANCE = 100 * MS
WAIT = LAG_MS * MS + TOLERANCE + LAG_MS * MS // 2 + 2 * S
"""How long after the fault the follower may still be in the ISR: 17.1 s."""
BROKERS = {"n1": 1, "n2": 2, "n3": 3}
SETTINGS = TestSettings(
    replica_lag_time_max_ms=LAG_MS, clock_tolerance_ns=TOLERANCE, brokers=BROKERS
)
KEY = "squall-queue-0"


class Events:
    """Nemesis and SUT events of one key, numbered in the order written."""

    def __init__(self) -> None:
        self.nemesis: list[NemesisEvent] = []
        self.sut: list[ReplicationEvent] = []
        self.index = 0

    def _next(self) -> int:
        self.index += 1
        return self.index

    def fault(self, at: float, f: str, targets: Sequence[str], **value: Any) -> int:
        index = self._next()
        self.nemesis.append((index, int(at * S), f, json.dumps({"targets": targets, **value})))
        return index

    def elect(self, at: float, leader: int, isr: Sequence[int], epoch: int) -> int:
        index = self._next()
        self.sut.append(
            ReplicationEvent(
                index, int(at * S), "leader-election", leader, epoch, tuple(isr), -1, False
            )
        )
        return index

    def isr(self, at: float, leader: int, isr: Sequence[int], epoch: int) -> int:
        index = self._next()
        self.sut.append(
            ReplicationEvent(
                index, int(at * S), "isr-change", leader, epoch, tuple(isr), None, False
            )
        )
        return index

    def found(self, settings: TestSettings = SETTINGS) -> list[dict[str, Any]]:
        rows = stale_isr_members(self.nemesis, {KEY: self.sut}, settings, "conformance")
        assert all(r.anomaly == "stale-isr-member" and r.key == KEY for r in rows)
        return [dict(r.detail) for r in rows]


def killed_follower(heal_at: float = 40) -> Events:
    """Broker 1 leads [1, 2, 3]; n2 is killed at 10 s and started at `heal_at`."""
    e = Events()
    e.elect(1, 1, [1, 2, 3], 1)
    e.fault(10, "kill", ["n2"], outcome={"n2": "killed"})
    e.fault(heal_at, "start", ["n2"], outcome={"n2": "started"})
    return e


def test_fires_on_a_killed_follower_kept_in_the_isr() -> None:
    e = killed_follower()
    [case] = e.found()
    assert case["follower"] == 2 and case["node"] == "n2" and case["leader"] == 1
    assert (case["fault"], case["healed"], case["event"]) == (2, 3, 1)
    assert case["fault_f"] == "kill" and case["isr"] == [1, 2, 3]
    assert case["deadline"] == 10 * S + WAIT and case["healed_time"] == 40 * S
    assert case["replica_lag_time_max_ms"] == LAG_MS


def test_fires_on_a_paused_follower_and_on_a_frozen_node() -> None:
    for stop, start, word in (("pause", "resume", "paused"), ("freeze", "unfreeze", "frozen")):
        e = Events()
        e.elect(1, 1, [1, 2, 3], 1)
        e.fault(10, stop, ["n3"], outcome={"n3": word})
        e.fault(40, start, [])  # a heal without targets heals every node
        assert [c["follower"] for c in e.found()] == [3], stop


def test_not_when_the_isr_shrank_in_time() -> None:
    e = killed_follower()
    e.isr(10 + LAG_MS / 1000 + 1, 1, [1, 3], 1)
    assert e.found() == []


def test_not_when_the_controller_removed_it_in_a_new_epoch() -> None:
    e = killed_follower()
    e.isr(16, 1, [1, 3], 2)
    assert e.found() == []


def test_a_late_shrink_still_fires() -> None:
    """Removed after the deadline, but before the fault ended: it was stale until then."""
    e = killed_follower()
    e.isr(10 + WAIT / S + 3, 1, [1, 3], 1)
    assert len(e.found()) == 1


def test_not_when_the_leader_was_also_faulted() -> None:
    for f, heal in (("pause", "resume"), ("start-slow", "stop-slow"), ("kill", "start")):
        e = killed_follower()
        e.fault(12, f, ["n1"])
        e.fault(13, heal, ["n1"])
        assert e.found() == [], f


def test_fires_for_each_of_two_stopped_followers() -> None:
    e = killed_follower()
    e.fault(11, "pause", ["n3"], outcome={"n3": "paused"})
    e.fault(39, "resume", ["n3"])
    assert sorted(c["follower"] for c in e.found()) == [2, 3]


def test_not_when_zookeeper_was_faulted() -> None:
    e = killed_follower()
    e.fault(20, "pause", ["zk1"])
    e.fault(21, "resume", ["zk1"])
    assert e.found() == []


def test_not_when_a_partition_or_netem_was_in_force() -> None:
    for start, stop in (("start-partition", "stop-partition"), ("start-netem", "stop-netem")):
        e = killed_follower()
        e.fault(5, start, ["n3"])
        e.fault(15, stop, [])
        assert e.found() == [], start


def test_not_within_the_lag_time_after_a_partition_healed() -> None:
    for healed, fires in ((25, False), (19.5, True)):
        e = Events()
        e.elect(1, 1, [1, 2, 3], 1)
        e.fault(2, "start-partition", [])
        e.fault(healed, "stop-partition", [])
        e.fault(30, "kill", ["n2"], outcome={"n2": "killed"})
        e.fault(60, "start", ["n2"])
        assert len(e.found()) == fires, healed


def test_not_when_the_fault_ended_before_the_deadline() -> None:
    assert killed_follower(heal_at=10 + WAIT / S - 0.05).found() == []
    assert len(killed_follower(heal_at=10 + WAIT / S + 0.5).found()) == 1


def test_not_when_the_fault_never_ended() -> None:
    e = Events()
    e.elect(1, 1, [1, 2, 3], 1)
    e.fault(10, "kill", ["n2"], outcome={"n2": "killed"})
    assert e.found() == []


def test_not_when_the_leader_changed_before_the_deadline() -> None:
    e = killed_follower()
    e.elect(20, 3, [3, 2], 2)
    assert e.found() == []


def test_a_new_epoch_of_the_same_leader_starts_the_count_again() -> None:
    e = killed_follower(heal_at=10 + WAIT / S + 5)
    e.isr(15, 1, [1, 2], 2)  # n3 left in a new epoch: the leader may restart its clocks
    assert e.found() == []


def test_not_when_the_kill_did_not_take() -> None:
    e = Events()
    e.elect(1, 1, [1, 2, 3], 1)
    e.fault(10, "kill", ["n2"], outcome={"n2": "not-running"})
    e.fault(40, "start", ["n2"])
    assert e.found() == []


def test_not_judged_without_the_broker_mapping_or_the_lag_time() -> None:
    e = killed_follower()
    assert e.found(TestSettings(replica_lag_time_max_ms=LAG_MS)) == []
    assert e.found(TestSettings(brokers=BROKERS)) == []


def test_fault_spans_pair_each_fault_with_its_heal() -> None:
    e = Events()
    e.fault(1, "kill", ["n1", "n2"])
    e.fault(2, "start", ["n1"])
    e.fault(3, "start-partition", [])
    e.fault(4, "stop-partition", ["n1", "n2", "n3", "zk1"])
    spans = {(s.f, s.node): (s.start // S, s.end) for s in fault_spans(e.nemesis)}
    assert spans[("kill", "n1")] == (1, 2 * S)
    assert spans[("kill", "n2")] == (1, float("inf"))
    assert spans[("start-partition", None)] == (3, 4 * S)


@pytest.fixture(scope="module")
def results(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root: Path = tmp_path_factory.mktemp("stale-isr")
    b = HistoryBuilder(
        root,
        test_json={
            "topic": {"replication_factor": 3, "min_insync_replicas": 2},
            "broker_in_force": {"replica.lag.time.max.ms": str(LAG_MS)},
            "brokers": BROKERS,
            "clock": {"tolerance_ns": TOLERANCE},
        },
    )
    p = b.process()
    b.send1(p, KEY, "a", 0)
    b.writer.event(
        "leader-election",
        {"key": KEY, "leader": 1, "leader_epoch": 1, "isr": [1, 2, 3], "previous_leader": -1},
        process="sut",
        time=b.tick(S),
    )
    b.writer.event("kill", {"targets": ["n2"], "outcome": {"n2": "killed"}}, time=b.tick(10 * S))
    b.send1(p, KEY, "b", 1)
    b.writer.event("start", {"targets": ["n2"], "outcome": {"n2": "started"}}, time=b.tick(30 * S))
    b.poll(b.process(), {KEY: [(0, "a"), (1, "b")]})
    return check_history(b.close(), config=CheckConfig(sample=10))


def test_end_to_end(results: dict[str, Any]) -> None:
    section = results["checkers"]["conformance"]
    assert section["counts"]["stale-isr-member"] == 1
    [case] = section["anomalies"]["stale-isr-member"]
    assert case["follower"] == 2 and case["leader"] == 1 and case["node"] == "n2"
    assert results["valid"] is False
    text = describe_case("stale-isr-member", case)["text"]
    assert "broker 2 (node n2)" in text and "leader 1's ISR [1, 2, 3]" in text
