"""Merging SUT events into a history by time."""

from __future__ import annotations

import pytest

from histories import Operation, OperationError
from histories.merge import merge_events


def _history() -> list[Operation]:
    return [
        Operation(0, 10, 0, "invoke", "poll", [["poll"]]),
        Operation(1, 20, "nemesis", "info", "kill", {"n1": "killed"}),
        Operation(2, 20, 1, "invoke", "poll", [["poll"]]),
        Operation(3, 25, 0, "ok", "poll", [["poll", {}]]),
        Operation(4, 40, 1, "fail", "poll", [["poll"]]),
    ]


def test_events_are_placed_by_time_and_reindexed() -> None:
    events = [
        {"time": 30, "f": "isr-change", "key": "t-0", "isr": [2], "leader": 2, "node": "n2"},
        {"time": 5, "f": "leader-election", "value": {"key": "t-0", "leader": 1,
         "leader_epoch": 0, "isr": [1, 2], "previous_leader": None, "unclean": False}},
        {"time": 20, "f": "isr-change", "key": "t-1", "isr": [1], "leader": 1},
        {"time": 99, "f": "leader-election", "key": "t-0", "leader": 2, "unclean": True},
        {"time": 30, "f": "isr-change", "key": "t-1", "isr": [1, 3], "leader": 1},
    ]  # fmt: skip
    merged = merge_events(_history(), events)
    assert [op.index for op in merged] == list(range(10))
    assert [(op.process, op.time) for op in merged] == [
        ("sut", 5), (0, 10), ("nemesis", 20), (1, 20), ("sut", 20), (0, 25),
        ("sut", 30), ("sut", 30), (1, 40), ("sut", 99)]  # fmt: skip
    isr_30 = [op for op in merged if op.time == 30]
    assert [op.value["key"] for op in isr_30] == ["t-0", "t-1"]  # equal times: input order
    assert isr_30[0].node == "n2" and isr_30[0].value == {"key": "t-0", "isr": [2], "leader": 2}
    assert all(op.type == "info" for op in merged if op.process == "sut")
    # history operations are unchanged but for their index
    originals = [op for op in merged if op.process != "sut"]
    assert [op.with_index(0) for op in originals] == [op.with_index(0) for op in _history()]


def test_no_events_keeps_the_history() -> None:
    assert merge_events(_history(), []) == _history()
    assert [op.index for op in merge_events([], [{"time": 1, "f": "isr-change", "key": "a",
                                                  "isr": [1]}])] == [0]  # fmt: skip


def test_bad_events_are_refused() -> None:
    with pytest.raises(OperationError, match="has no 'time' field"):
        merge_events(_history(), [{"f": "isr-change", "key": "t-0"}])
    with pytest.raises(OperationError, match="'isr' is 'n1'"):
        merge_events(_history(), [{"time": 1, "f": "isr-change", "key": "t-0", "isr": "n1"}])
