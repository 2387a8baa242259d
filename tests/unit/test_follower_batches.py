"""A follower's side of RecordBatch v2: truncation points inside a batch, and a leader's batch
that holds the follower's log end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from system_under_test.log import LogConfig
from system_under_test.log.log import Log
from system_under_test.log.record import decode_records, encode_records, iter_batches
from system_under_test.replication.partition import Partition


class Events:
    """Collects what the partition would write to the broker's event log."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def truncation(self, **fields: Any) -> dict[str, Any]:
        self.lines.append(fields)
        return fields


def _records(values: list[bytes], base: int) -> bytes:
    return encode_records([(None, v, 1000) for v in values], base_offset=base)


def _follower(tmp_path: Path, events: Events | None = None) -> Partition:
    log = Log.open(tmp_path / "t-0", LogConfig(), recovery_point=0, clean_shutdown=True)
    partition = Partition("t", 0, log, local_broker_id=2, replicas=[1, 2])
    partition.events = events  # type: ignore[assignment]
    partition.make_follower(leader=1, leader_epoch=3, isr=[1, 2], replicas=[1, 2], zk_version=0)
    return partition


def test_a_truncation_inside_a_batch_removes_the_batch_and_says_where_it_was_asked(
    tmp_path: Path,
) -> None:
    events = Events()
    partition = _follower(tmp_path, events)
    partition.append_as_follower(_records([b"a", b"b"], 0) + _records([b"c", b"d", b"e"], 2), 0, [])
    partition.truncate_to(3, reason="leader-epoch")
    assert partition.log_end_offset == 2
    assert [r.value for r in decode_records(partition.log.read(0, 10_000).records)] == [b"a", b"b"]
    (event,) = events.lines
    assert (event["from_offset"], event["to_offset"], event["requested_offset"]) == (5, 2, 3)


def test_a_leaders_batch_holding_the_follower_log_end_is_kept_from_there(tmp_path: Path) -> None:
    partition = _follower(tmp_path)
    partition.append_as_follower(_records([b"a", b"b", b"c"], 0), 0, [])
    # The leader's log has its own batch boundaries: offsets 1-4 in one batch.
    leader_sends = _records([b"b", b"c", b"x", b"y"], 1) + _records([b"z"], 5)
    end = partition.append_as_follower(leader_sends, 5, [(3, 1)])
    assert end == 6
    records = partition.log.read(0, 10_000).records
    assert [r.value for r in decode_records(records)] == [b"a", b"b", b"c", b"x", b"y", b"z"]
    assert [(b.base_offset, b.last_offset) for b in iter_batches(records)] == [
        (0, 2),
        (3, 4),
        (5, 5),
    ]
