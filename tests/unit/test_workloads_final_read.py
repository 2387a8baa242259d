"""FinalRead against a fake consumer: complete reads, retries, and logs that end short."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import workloads.squall_client
from histories import HistoryWriter, pair_operations, read_history
from system_under_test.client import ConsumedRecord, RequestTimeoutError
from workloads import (
    AcknowledgedSends,
    FinalRead,
    FinalReadResult,
    OperationRecorder,
    SquallClientFactory,
    WorkloadSpec,
)
from workloads.client import OperationError

TopicPartition = tuple[str, int]
LOGS: dict[int, list[int]] = {}
FAILURES: list[int] = []
END_FAILURES: list[int] = []


class FakeConsumer:
    """Reads LOGS from where it was put; each poll returns at most three records per key."""

    def __init__(self, bootstrap: str, *, config: Mapping[str, object], client_id: str) -> None:
        assert "group.id" not in config  # the final read is outside the group
        self.positions: dict[TopicPartition, int] = {}

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self.positions = dict.fromkeys(partitions, 0)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self.positions[(topic, partition)] = offset

    def seek_to_beginning(self, topic: str, partition: int) -> None:
        self.positions[(topic, partition)] = 0

    def position(self, topic: str, partition: int) -> int:
        return self.positions[(topic, partition)]

    def poll(self, timeout_ms: int) -> list[ConsumedRecord]:
        out: list[ConsumedRecord] = []
        for (topic, partition), start in sorted(self.positions.items()):
            log = LOGS[partition]
            for offset in range(start, min(start + 3, len(log))):
                out.append(ConsumedRecord(topic, partition, offset, 0, None, b"%d" % log[offset]))
                self.positions[(topic, partition)] = offset + 1
        if FAILURES:
            FAILURES.pop()
            raise RequestTimeoutError("the leader did not answer")
        return out

    def close(self) -> None:
        pass


class EndsAtLogs(FinalRead):
    """The log end is the fake log's length (instead of asking brokers)."""

    def _end_offsets(self) -> dict[TopicPartition, int]:
        if END_FAILURES:
            END_FAILURES.pop()
            raise OperationError("REQUEST_TIMED_OUT", "no leader answered ListOffsets")
        return {tp: len(LOGS[tp[1]]) for tp in self.partitions}


@pytest.fixture(autouse=True)
def fake_consumer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workloads.squall_client, "Consumer", FakeConsumer)
    LOGS.clear()
    FAILURES.clear()
    END_FAILURES.clear()


def final_read(tmp_path: Path, acknowledged: AcknowledgedSends) -> tuple[FinalReadResult, Path]:
    spec = WorkloadSpec(topic="t", partitions=2, poll_timeout_ms=0)
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        recorder = OperationRecorder(writer, final=True)
        result = EndsAtLogs(
            spec,
            "127.0.0.1:9092",
            recorder,
            acknowledged,
            client_factory=SquallClientFactory(),
            deadline_s=5.0,
            settle_s=0.3,
        ).run()
    return result, path


def test_reads_every_key_to_its_end_and_marks_everything_final(tmp_path: Path) -> None:
    LOGS.update({0: [10, 11, 12, 13, 14, 15, 16], 1: [20, 21]})
    acknowledged = AcknowledgedSends()
    acknowledged.add("t-0", 5, 15)
    acknowledged.add("t-1", 1, 21)
    FAILURES.append(1)  # one failed poll on the way: retried from where the read was
    result, path = final_read(tmp_path, acknowledged)
    assert result.complete and result.missing == {}
    assert result.reached == {"t-0": 7, "t-1": 2}
    assert result.log_ends == {"t-0": 7, "t-1": 2}
    ops = read_history(path)
    pair_operations(ops, strict=True)
    assert all(op.final for op in ops)
    read = [
        (key, offset)
        for op in ops
        if op.f == "poll" and op.type == "ok"
        for key, records in op.value[0][1].items()
        for offset, _ in records
    ]
    assert sorted(read) == [("t-0", o) for o in range(7)] + [("t-1", 0), ("t-1", 1)]
    assert [op.type for op in ops if op.f == "poll" and op.type != "invoke"].count("fail") == 1
    # The ok assign says where the read starts: each log's beginning.
    (opened,) = [op for op in ops if op.f == "assign" and op.type == "ok"]
    assert opened.extra["positions"] == {"t-0": 0, "t-1": 0}
    # The read ended where the brokers said the logs end, and recorded what they said.
    ends = [op for op in ops if op.f == "log-ends" and op.type != "invoke"]
    assert ends and ends[-1].type == "ok" and ends[-1].value == {"t-0": 7, "t-1": 2}
    assert all(
        op.value == ["t-0", "t-1"] for op in ops if op.f == "log-ends" and op.type == "invoke"
    )


def test_logs_that_end_short_of_acknowledged_offsets_stop_after_settling(
    tmp_path: Path,
) -> None:
    LOGS.update({0: [10, 11], 1: []})
    acknowledged = AcknowledgedSends()
    acknowledged.add("t-0", 1, 11)
    acknowledged.add("t-0", 4, 99)  # acknowledged, then lost
    END_FAILURES.append(1)  # the first question of the log ends goes unanswered
    result, path = final_read(tmp_path, acknowledged)
    assert not result.complete
    assert result.missing == {"t-0": [4]}
    assert "did not grow" in result.reason
    assert result.elapsed_s < 4.0
    # The log ends it recorded are the ends it read to: offset 4 lies beyond t-0's end.
    assert result.log_ends == {"t-0": 2, "t-1": 0}
    ops = read_history(path)
    ends = [op for op in ops if op.f == "log-ends" and op.type != "invoke"]
    assert [op.type for op in ends][:1] == ["fail"] and "REQUEST_TIMED_OUT" in ends[0].error
    assert ends[-1].type == "ok" and ends[-1].value == {"t-0": 2, "t-1": 0}
    assert all(op.final for op in ops)
