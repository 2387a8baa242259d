"""Log: appends, rolling, reads, time lookups, truncation, retention, flushing, reopen."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from system_under_test.config import BrokerConfig, ConfigError
from system_under_test.log import (
    CorruptRecordError,
    InvalidOffsetError,
    Log,
    LogConfig,
    NonMonotonicOffsetError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from system_under_test.log.record import Record, decode_records, encode_records

VALUE = b"v" * 32
RECORD_SIZE = len(encode_records([(None, VALUE, 1000)]))  # one record in a batch of its own
assert RECORD_SIZE == 100


class FakeClock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(count: int, *, timestamp: int = 1000, value: bytes = VALUE, base: int = 0) -> bytearray:
    """count batches of one record each (so every offset is a batch boundary)."""
    return bytearray(
        b"".join(
            encode_records([(None, value, timestamp + i)], base_offset=base + i)
            for i in range(count)
        )
    )


def make_log(path: Path, clock: FakeClock | None = None, **settings: Any) -> Log:
    return Log.open(
        path / "topic-0",
        LogConfig(**settings),
        recovery_point=0,
        clean_shutdown=True,
        clock=clock or FakeClock(),
    )


def read_all(log: Log, max_bytes: int = 10_000) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, max_bytes)
        records = decode_records(fetched.records)
        assert records and records[0].offset == offset
        out.extend(records)
        offset = records[-1].offset + 1
    return out


# -- appends -----------------------------------------------------------------------------------


def test_leader_append_assigns_offsets_from_the_log_end(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    first = log.append(batch(3, timestamp=50))
    second = log.append(batch(2, timestamp=10))
    assert (first.first_offset, first.last_offset, first.count, first.size) == (
        0,
        2,
        3,
        3 * RECORD_SIZE,
    )
    assert first.max_timestamp == 52
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    assert [r.offset for r in read_all(log)] == [0, 1, 2, 3, 4]


def test_leader_append_needs_a_mutable_batch(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    with pytest.raises(TypeError, match="bytearray"):
        log.append(bytes(batch(1)))


def test_corrupt_batch_writes_nothing(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append(batch(2))
    bad = batch(3)
    bad[-1] ^= 0xFF  # the CRC of the last record no longer matches
    with pytest.raises(CorruptRecordError):
        log.append(bad)
    assert log.log_end_offset == 2
    assert log.size == 2 * RECORD_SIZE


def test_record_above_max_message_bytes_writes_nothing(tmp_path: Path) -> None:
    log = make_log(tmp_path, max_message_bytes=150)
    log.append(batch(5))  # 500 bytes of 100-byte records: each record fits
    big = bytearray(encode_records([(None, b"a", 1), (None, b"b" * 200, 2)]))
    with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes=150"):
        log.append(big)
    assert log.log_end_offset == 5
    assert log.size == 5 * RECORD_SIZE


def test_follower_append_keeps_offsets_and_checks_them(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    info = log.append(batch(3, base=0), assign_offsets=False)
    assert (info.first_offset, info.last_offset) == (0, 2)
    with pytest.raises(InvalidOffsetError, match="log end offset is 3"):
        log.append(batch(2, base=7), assign_offsets=False)
    gap = bytearray(
        encode_records([(None, b"a", 1)], base_offset=3)
        + encode_records([(None, b"b", 1)], base_offset=5)
    )
    with pytest.raises(InvalidOffsetError, match="consecutive"):
        log.append(gap, assign_offsets=False)
    backwards = bytearray(
        encode_records([(None, b"a", 1)], base_offset=4)
        + encode_records([(None, b"b", 1)], base_offset=3)
    )
    with pytest.raises(NonMonotonicOffsetError):
        log.append(backwards, assign_offsets=False)
    assert log.log_end_offset == 3
    log.append(bytes(batch(2, base=3)), assign_offsets=False)  # immutable bytes are fine here
    assert log.log_end_offset == 5


# -- rolling -----------------------------------------------------------------------------------


def test_roll_by_size_never_splits_a_batch(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1000)
    for _ in range(7):
        log.append(batch(3))  # 300-byte batches: three fit in 1000 bytes
    assert [s.base_offset for s in log.segments] == [0, 9, 18]
    assert [s.size for s in log.segments] == [900, 900, 300]
    names = sorted(p.name for p in log.dir.iterdir())
    assert "00000000000000000009.log" in names
    assert "00000000000000000018.timeindex" in names
    assert [r.offset for r in read_all(log)] == list(range(21))


def test_batch_larger_than_segment_bytes_gets_a_segment_alone(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1000)
    log.append(batch(2))
    log.append(batch(15))
    log.append(batch(1))
    assert [(s.base_offset, s.size) for s in log.segments] == [(0, 200), (2, 1500), (17, 100)]


def test_roll_by_time_since_first_append(tmp_path: Path) -> None:
    clock = FakeClock()
    log = make_log(tmp_path, clock, segment_ms=1000)
    log.append(batch(1))
    clock.now += 1000
    log.append(batch(1))
    assert len(log.segments) == 1
    clock.now += 1
    log.append(batch(1))
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.active_segment.rolling_base_ms == clock.now


def test_roll_when_an_index_is_full(tmp_path: Path) -> None:
    # 48 bytes: 6 offset entries, 4 time index entries of which one is kept for the final entry.
    log = make_log(tmp_path, segment_index_bytes=48, index_interval_bytes=0)
    for i in range(8):
        log.append(batch(1, timestamp=100 + i))
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    first = log.segments[0]
    assert first.time_index.entries == 3
    assert first.time_index.path.stat().st_size <= 48


def test_roll_fsyncs_the_old_segment_and_advances_the_recovery_point(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=250)
    log.append(batch(2))
    assert log.recovery_point == 0
    log.append(batch(2))
    assert log.recovery_point == 2


# -- reads -------------------------------------------------------------------------------------


@pytest.fixture
def three_segments(tmp_path: Path) -> Log:
    """Offsets 0..29 in segments at 0, 10, 20; 100-byte records; timestamp 1000 + offset."""
    log = make_log(tmp_path, segment_bytes=1000, index_interval_bytes=250)
    for b in range(15):
        log.append(batch(2, timestamp=1000 + 2 * b))
    assert [s.base_offset for s in log.segments] == [0, 10, 20]
    return log


def offsets(data: bytes) -> list[int]:
    return [r.offset for r in decode_records(data)]


def test_read_every_offset_returns_whole_records_from_it(three_segments: Log) -> None:
    for offset in range(30):
        fetched = three_segments.read(offset, 350)
        expected = list(range(offset, min(offset + 3, (offset // 10 + 1) * 10)))
        assert fetched.first_offset == offset
        assert offsets(fetched.records) == expected  # stops at the segment end


def test_read_max_offset_bounds_the_result(three_segments: Log) -> None:
    assert offsets(three_segments.read(5, 10_000, max_offset=8).records) == [5, 6, 7]
    assert offsets(three_segments.read(12, 10_000, max_offset=25).records) == list(range(12, 20))
    assert three_segments.read(8, 10_000, max_offset=8).records == b""
    assert three_segments.read(10, 10_000, max_offset=10).records == b""


def test_read_min_one_record(three_segments: Log) -> None:
    assert offsets(three_segments.read(13, 1).records) == [13]
    assert offsets(three_segments.read(13, 0).records) == [13]
    assert three_segments.read(13, 99, min_one_record=False).records == b""
    assert three_segments.read(13, 1, max_offset=13).records == b""


def test_read_at_log_end_is_empty_and_beyond_is_out_of_range(three_segments: Log) -> None:
    fetched = three_segments.read(30, 1000)
    assert (fetched.records, fetched.first_offset) == (b"", 30)
    with pytest.raises(OffsetOutOfRangeError, match=r"offsets 0 to 29") as err:
        three_segments.read(31, 1000)
    assert (err.value.log_start_offset, err.value.log_end_offset) == (0, 30)
    with pytest.raises(OffsetOutOfRangeError):
        three_segments.read(-1, 1000)


def test_read_data_equals_what_was_appended(three_segments: Log) -> None:
    records = read_all(three_segments, max_bytes=1)
    assert [r.offset for r in records] == list(range(30))
    assert [r.timestamp for r in records] == [1000 + 2 * (o // 2) + o % 2 for o in range(30)]
    assert all(r.value == VALUE and r.key is None for r in records)


def test_offset_for_timestamp(three_segments: Log) -> None:
    assert three_segments.offset_for_timestamp(0) == 0
    assert three_segments.offset_for_timestamp(1000) == 0
    assert three_segments.offset_for_timestamp(1013) == 13
    assert three_segments.offset_for_timestamp(1029) == 29
    assert three_segments.offset_for_timestamp(1030) is None


def test_offset_for_timestamp_with_unordered_timestamps(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=300, index_interval_bytes=0)
    timestamps = [500, 100, 300, 900, 200, 400, 950, 50]
    for ts in timestamps:
        log.append(batch(1, timestamp=ts))
    for target in range(0, 1000, 25):
        expected = next((o for o, ts in enumerate(timestamps) if ts >= target), None)
        assert log.offset_for_timestamp(target) == expected, target


# -- truncation --------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [0, 5, 10, 11, 19, 20, 29])
def test_truncate_to_removes_everything_from_offset(three_segments: Log, cut: int) -> None:
    log = three_segments
    log.truncate_to(cut)
    assert log.log_end_offset == cut
    assert [s.base_offset for s in log.segments] == [b for b in (0, 10, 20) if b <= cut]
    assert [r.offset for r in read_all(log)] == list(range(cut))
    assert log.recovery_point <= cut
    assert sorted(p.name for p in log.dir.glob("*.log")) == [
        f"{b:020d}.log" for b in (0, 10, 20) if b <= cut
    ]
    info = log.append(batch(2))
    assert info.first_offset == cut
    assert [r.offset for r in read_all(log)] == list(range(cut + 2))


def test_truncate_into_an_older_segment_keeps_rolling_by_time(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    log = make_log(tmp_path, clock, segment_bytes=1000, segment_ms=10_000)
    for _ in range(5):
        log.append(batch(5, timestamp=995_000))  # segments at 0, 10, 20
    log.close()
    log = Log.open(log.dir, log.config, recovery_point=25, clean_shutdown=True, clock=clock)
    log.truncate_to(12)  # segment 10 is active again; its first record is 5 s old
    log.append(batch(1))
    assert [s.base_offset for s in log.segments] == [0, 10]
    clock.now += 5_001
    log.append(batch(1))
    assert [s.base_offset for s in log.segments] == [0, 10, 13]


def test_truncate_beyond_the_end_changes_nothing(three_segments: Log) -> None:
    three_segments.truncate_to(30)
    three_segments.truncate_to(100)
    assert three_segments.log_end_offset == 30


def test_truncate_fully_and_start_at(three_segments: Log) -> None:
    log = three_segments
    log.truncate_fully_and_start_at(77)
    assert (log.log_start_offset, log.log_end_offset) == (77, 77)
    assert [p.name for p in log.dir.glob("*.log")] == ["00000000000000000077.log"]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(10, 100)
    assert log.append(batch(1)).first_offset == 77


# -- retention ---------------------------------------------------------------------------------


def test_retention_by_time_uses_the_largest_timestamp(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=200, retention_ms=1000)
    for ts in (1000, 2000, 3000, 1500):
        log.append(batch(2, timestamp=ts))  # one segment each
    assert len(log.segments) == 4
    assert log.delete_old_segments(now_ms=2001) == 0  # 2001 - 1001 is not more than 1000
    assert log.delete_old_segments(now_ms=2002) == 1
    assert log.log_start_offset == 2
    # The segment with timestamps 3000 blocks deletion of later ones, and the active one stays.
    assert log.delete_old_segments(now_ms=100_000) == 2
    assert [s.base_offset for s in log.segments] == [6]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert not (log.dir / "00000000000000000000.log").exists()


def test_retention_by_time_minus_one_keeps_everything(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=200, retention_ms=-1)
    for _ in range(3):
        log.append(batch(2, timestamp=1))
    assert log.delete_old_segments(now_ms=10**12) == 0


@pytest.mark.parametrize(
    ("retention_bytes", "deleted"), [(650, 2), (600, 3), (599, 3), (1500, 0), (0, 4)]
)
def test_retention_by_bytes_keeps_at_least_retention_bytes(
    tmp_path: Path, retention_bytes: int, deleted: int
) -> None:
    log = make_log(tmp_path, segment_bytes=300, retention_bytes=retention_bytes)
    for _ in range(5):
        log.append(batch(3))  # five 300-byte segments
    # Oldest segments go while the size without them stays >= retention.bytes.
    assert log.delete_old_segments(now_ms=0) == deleted
    assert log.size == 1500 - 300 * deleted
    assert log.log_start_offset == 3 * deleted
    assert log.delete_old_segments(now_ms=0) == 0


def test_retention_never_deletes_the_active_segment(tmp_path: Path) -> None:
    log = make_log(tmp_path, retention_bytes=0, retention_ms=0)
    log.append(batch(3, timestamp=1))
    assert log.delete_old_segments(now_ms=10**12) == 0
    assert log.log_end_offset == 3


# -- flushing ----------------------------------------------------------------------------------


def test_flush_messages_advances_the_recovery_point(tmp_path: Path) -> None:
    log = make_log(tmp_path, flush_messages=5)
    log.append(batch(3))
    assert (log.recovery_point, log.unflushed_messages) == (0, 3)
    log.append(batch(3))
    assert (log.recovery_point, log.unflushed_messages) == (6, 0)


def test_flush_ms_counts_from_the_oldest_unflushed_append(tmp_path: Path) -> None:
    clock = FakeClock(10_000)
    log = make_log(tmp_path, clock, flush_ms=500)
    assert not log.maybe_flush(20_000)  # nothing unflushed
    log.append(batch(1))
    clock.now = 10_400
    log.append(batch(1))
    assert not log.maybe_flush(10_499)
    assert log.recovery_point == 0
    assert log.maybe_flush(10_500)
    assert log.recovery_point == 2


def test_explicit_flush_and_default_policy(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append(batch(4))
    assert log.recovery_point == 0  # flush.messages defaults to never
    log.flush()
    assert log.recovery_point == 4


# -- lifecycle ---------------------------------------------------------------------------------


def test_close_and_reopen_clean(three_segments: Log) -> None:
    log = three_segments
    before = read_all(log)
    log.close()
    reopened = Log.open(log.dir, log.config, recovery_point=30, clean_shutdown=True)
    assert reopened.recovery_report.recovered == []
    assert reopened.log_end_offset == 30
    assert read_all(reopened) == before
    assert reopened.offset_for_timestamp(1013) == 13
    assert reopened.append(batch(1)).first_offset == 30


def test_reopen_keeps_segment_timestamps_for_retention(three_segments: Log) -> None:
    log = three_segments
    log.close()
    reopened = Log.open(log.dir, log.config, recovery_point=30, clean_shutdown=True)
    assert [s.max_timestamp for s in reopened.segments] == [1009, 1019, 1029]


def test_closed_log_refuses_work(three_segments: Log) -> None:
    three_segments.close()
    with pytest.raises(Exception, match="closed"):
        three_segments.append(batch(1))


def test_delete_removes_the_directory(three_segments: Log) -> None:
    directory = three_segments.dir
    three_segments.delete()
    assert not directory.exists()
    assert list(directory.parent.iterdir()) == []


def test_update_config_applies_to_the_next_append(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append(batch(3))
    log.update_config(LogConfig(segment_bytes=350))
    log.append(batch(1))
    assert len(log.segments) == 2


def test_log_files_are_written_unbuffered(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append(batch(2))
    # Another reader sees the data at once: it is in the kernel, not in a Python buffer.
    assert os.path.getsize(log.dir / "00000000000000000000.log") == 2 * RECORD_SIZE


# -- configuration -----------------------------------------------------------------------------


def test_log_config_from_broker_defaults_and_overrides() -> None:
    broker = BrokerConfig({"log.segment.bytes": "2048", "log.retention.ms": "-1"})
    config = LogConfig.from_mapping(broker.topic_defaults() | {"retention.bytes": "4096"})
    assert config.segment_bytes == 2048
    assert config.retention_ms == -1
    assert config.retention_bytes == 4096
    assert LogConfig.from_mapping(config.to_mapping()) == config
    assert LogConfig.from_mapping({}) == LogConfig()


def test_log_config_rejects_unknown_keys_and_bad_values() -> None:
    with pytest.raises(ConfigError, match="unknown"):
        LogConfig.from_mapping({"segment.byte": 1})
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        LogConfig.from_mapping({"segment.bytes": "abc"})
    with pytest.raises(ConfigError, match=r"flush\.messages"):
        LogConfig(flush_messages=0)
