"""squall.replica_reads: a dump-log output turned into `replica-read` values (no services)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from squall.replica_reads import (
    CHUNK_RECORDS,
    PartitionEnd,
    ReplicaLog,
    parse_dump,
    replica_read_values,
)
from system_under_test.log import Log, LogConfig
from system_under_test.log.dump import dump_lines
from system_under_test.log.record import encode_records
from workloads.values import encode_value


def write(log_dir: Path, topic: str, partition: int, values: list[int]) -> None:
    log = Log.open(
        log_dir / f"{topic}-{partition}",
        LogConfig(segment_bytes=1024, index_interval_bytes=100),
        recovery_point=0,
        clean_shutdown=True,
    )
    for v in values:
        log.append(bytearray(encode_records([(None, encode_value(v, 20), 5)])))
    log.close()


def test_a_dump_becomes_each_partitions_replica_log(tmp_path: Path) -> None:
    write(tmp_path, "squall-queue", 0, [7, 8, 9])
    write(tmp_path, "squall-queue", 1, list(range(100, 160)))
    segment = max((tmp_path / "squall-queue-1").glob("*.log"))  # the active segment
    data = bytearray(segment.read_bytes())
    data[-2] ^= 0x01  # the last record's last value byte (before its header count): its CRC fails
    segment.write_bytes(bytes(data))
    text = [json.dumps(line) for line in dump_lines(tmp_path)]

    logs = parse_dump(text)

    assert sorted(logs) == ["squall-queue-0", "squall-queue-1"]
    first = logs["squall-queue-0"]
    assert first.records == [(0, 7), (1, 8), (2, 9)]
    assert (first.log_start_offset, first.log_end_offset) == (0, 3)
    second = logs["squall-queue-1"]
    assert [v for _, v in second.records[:-1]] == list(range(100, 159))
    assert second.invalid_offsets == [59]
    assert second.recovery_stop is not None and second.recovery_stop["offset"] == 59


def test_values_are_chunked_and_carry_the_partition_state() -> None:
    replica = ReplicaLog("t", 0, records=[(o, o * 2) for o in range(CHUNK_RECORDS + 5)])
    replica.log_start_offset, replica.log_end_offset = 0, CHUNK_RECORDS + 5
    end = PartitionEnd(leader=2, leader_epoch=4, replicas=(1, 2, 3), isr=(2, 3), high_watermark=9)

    values = list(replica_read_values("t-0", 1, end, replica))

    assert [(v["chunk"], v["chunks"], len(v["records"])) for v in values] == [
        (0, 2, CHUNK_RECORDS),
        (1, 2, 5),
    ]
    assert values[1]["first_offset"] == CHUNK_RECORDS and values[1]["records"][0] == [
        CHUNK_RECORDS,
        CHUNK_RECORDS * 2,
    ]
    assert all(v["isr"] == [2, 3] and v["high_watermark"] == 9 for v in values)
    assert values[0]["record_count"] == CHUNK_RECORDS + 5
    (empty,) = replica_read_values("t-0", 1, end, ReplicaLog("t", 0))
    assert empty["records"] == [] and empty["first_offset"] is None
    (failed,) = replica_read_values("t-0", 3, end, None, error="ssh: refused")
    assert failed["error"] == "ssh: refused" and "records" not in failed


def test_a_line_that_is_not_a_dump_is_refused() -> None:
    with pytest.raises(ValueError, match="line 1"):
        parse_dump(['{"type": "record", "offset": 1}'])
