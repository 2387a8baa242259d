"""What a leader logs with an ISR change: the ISR it had, its high watermark and each
replica's log end as it knew them when it decided (the facts the conformance checker
judges, docs/history.md SUT events)."""

from __future__ import annotations

import json
from pathlib import Path

from system_under_test.event_log import EventLog
from system_under_test.replication.partition import Partition
from tests.unit.test_log import batch, make_log

LAG_MS = 10_000


def leader(tmp_path: Path) -> Partition:
    log = make_log(tmp_path / "t-0")
    log.append(batch(10))
    partition = Partition("t", 0, log, local_broker_id=1, replicas=[1, 2, 3], isr=[1, 2])
    partition.make_leader(
        leader_epoch=0,
        isr=[1, 2],
        replicas=[1, 2, 3],
        zk_version=0,
        lag_time_max_ms=LAG_MS,
        lag_max_messages=0,
        now_ms=0,
    )
    return partition


def test_an_expansion_carries_what_the_leader_knew(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    assert partition.on_follower_fetch(2, 10, now_ms=1) is None  # already in the ISR
    assert partition.high_watermark == 10
    assert partition.on_follower_fetch(3, 4, now_ms=2) is None  # behind the HW: stays out
    change = partition.on_follower_fetch(3, 10, now_ms=3)
    assert change is not None
    assert change.isr == (1, 2, 3)
    assert change.previous_isr == (1, 2)
    assert change.high_watermark == 10
    assert change.log_end_offsets == {1: 10, 2: 10, 3: 10}


def test_a_shrink_carries_them_too(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    partition.on_follower_fetch(2, 6, now_ms=1)
    change = partition.maybe_shrink_isr(now_ms=LAG_MS + 5)
    assert change is not None
    assert change.isr == (1,)
    assert change.previous_isr == (1, 2)
    assert change.high_watermark == 6
    assert change.log_end_offsets == {1: 10, 2: 6, 3: -1}


def test_the_event_carries_them(tmp_path: Path) -> None:
    events = EventLog(tmp_path / "events.jsonl", broker_id=1)
    partition = leader(tmp_path)
    change = partition.on_follower_fetch(3, 10, now_ms=3)
    assert change is not None
    written = events.isr_change(
        key="t-0",
        isr=change.isr,
        leader=1,
        leader_epoch=0,
        reason=change.reason,
        previous_isr=change.previous_isr,
        high_watermark=change.high_watermark,
        log_end_offsets=change.log_end_offsets,
    )
    events.close()
    line = json.loads((tmp_path / "events.jsonl").read_text())
    assert line == written
    assert line["previous_isr"] == [1, 2] and line["high_watermark"] == 0  # 2 never fetched
    assert line["log_end_offsets"] == {"1": 10, "2": -1, "3": 10}
