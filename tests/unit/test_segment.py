"""LogSegment: appends with index entries, offset translation, reads, truncation, reload."""

from __future__ import annotations

from pathlib import Path

import pytest

from system_under_test.log.record import assign_offsets, decode_records, encode_records
from system_under_test.log.segment import LogSegment

BASE = 100
VALUE = b"x" * 66
BATCH_SIZE = len(encode_records([(None, VALUE, 1000 + i) for i in range(3)]))
"""Bytes of one of the fixture's batches of three records."""


def batch_start(offset: int) -> int:
    """The base offset of the fixture's batch that holds offset."""
    return BASE + (offset - BASE) // 3 * 3


def append_batch(segment: LogSegment, timestamps: list[int], interval: int) -> None:
    batch = bytearray(encode_records([(None, VALUE, ts) for ts in timestamps]))
    info = assign_offsets(batch, segment.next_offset)
    segment.append(batch, info, index_interval_bytes=interval)


@pytest.fixture
def segment(tmp_path: Path) -> LogSegment:
    """Ten batches of three records (offsets 100..129), timestamps 1000 + offset."""
    seg = LogSegment.create(tmp_path, BASE, index_size=4096)
    for b in range(10):
        append_batch(seg, [1000 + BASE + 3 * b + i for i in range(3)], interval=250)
    return seg


def test_append_tracks_size_offsets_and_max_timestamp(segment: LogSegment) -> None:
    assert segment.size == 10 * BATCH_SIZE
    assert segment.next_offset == 130
    assert segment.max_timestamp == 1129
    assert segment.offset_of_max_timestamp == 129


def test_index_entry_after_interval_bytes_points_at_batch_start(segment: LogSegment) -> None:
    # A batch is 286 bytes, the interval 250: every batch but the first gets an entry.
    assert BATCH_SIZE == 286
    entries = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    assert entries == [(BASE + 3 * b, b * BATCH_SIZE) for b in range(1, 10)]
    # The time index holds the max timestamp so far (including the indexed batch).
    assert segment.time_index.lookup(1105) == (1105, 105)


def test_interval_zero_indexes_every_batch(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 0, index_size=4096)
    for _ in range(4):
        append_batch(seg, [5, 6], interval=0)
    assert seg.offset_index.entries == 4
    assert seg.offset_index.entry(0) == (0, 0)


def test_translate_offset_scans_from_the_index_entry(segment: LogSegment) -> None:
    for offset in range(BASE, 130):
        start = batch_start(offset)
        assert segment.translate_offset(offset) == ((start - BASE) // 3 * BATCH_SIZE, start)
    assert segment.translate_offset(50) == (0, BASE)
    assert segment.translate_offset(130) is None


def test_read_returns_whole_batches_from_the_one_holding_the_offset(segment: LogSegment) -> None:
    found = segment.read(104, 2 * BATCH_SIZE + 50, max_offset=None, min_one_record=True)
    assert found is not None
    data, first = found
    assert first == 103
    assert [r.offset for r in decode_records(data)] == list(range(103, 109))


def test_read_min_one_record_returns_a_batch_larger_than_max_bytes(segment: LogSegment) -> None:
    found = segment.read(107, 10, max_offset=None, min_one_record=True)
    assert found is not None
    assert [r.offset for r in decode_records(found[0])] == [106, 107, 108]
    assert segment.read(107, 10, max_offset=None, min_one_record=False) == (b"", 106)


def test_read_stops_before_the_batch_holding_max_offset(segment: LogSegment) -> None:
    found = segment.read(110, 10_000, max_offset=113, min_one_record=True)
    assert found is not None
    assert [r.offset for r in decode_records(found[0])] == [109, 110, 111]
    found = segment.read(110, 10_000, max_offset=112, min_one_record=True)
    assert found is not None
    assert [r.offset for r in decode_records(found[0])] == [109, 110, 111]
    assert segment.read(110, 10_000, max_offset=110, min_one_record=True) == (b"", 109)


def test_find_offset_by_timestamp_matches_brute_force(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 0, index_size=4096)
    timestamps = [50, 10, 70, 70, 20, 90, 90, 30, 100, 5, 120, 110]
    for i in range(0, len(timestamps), 2):
        append_batch(seg, timestamps[i : i + 2], interval=150)
    for target in range(0, 130, 5):
        expected = next((o for o, ts in enumerate(timestamps) if ts >= target), None)
        assert seg.find_offset_by_timestamp(target, 0) == expected, target
    assert seg.find_offset_by_timestamp(60, 3) == 3


@pytest.mark.parametrize("cut", [100, 101, 105, 106, 113, 128, 129])
def test_truncate_to_cuts_data_and_indexes(segment: LogSegment, cut: int) -> None:
    end = batch_start(cut)  # a batch holding the cut goes whole
    kept = (end - BASE) // 3
    removed = segment.truncate_to(cut)
    assert removed == (10 - kept) * BATCH_SIZE
    assert segment.size == kept * BATCH_SIZE
    assert segment.next_offset == end
    assert segment.offset_index.last_entry()[0] < end or segment.offset_index.entries == 0
    assert segment.time_index.last_entry()[1] < end or segment.time_index.entries == 0
    if end > BASE:
        assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (1000 + end - 1, end - 1)
    else:
        assert segment.max_timestamp == -1
    assert segment.truncate_to(end) == 0
    append_batch(segment, [5], interval=250)
    assert segment.translate_offset(end) == (kept * BATCH_SIZE, end)


def test_truncate_recomputes_the_exact_max_timestamp(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 0, index_size=4096)
    timestamps = [10, 500, 20, 30, 40, 50, 60, 70, 80, 90, 600, 95]
    for ts in timestamps:
        append_batch(seg, [ts], interval=150)
    for cut in range(len(timestamps), 0, -1):
        seg.truncate_to(cut)
        kept = timestamps[:cut]
        assert seg.max_timestamp == max(kept)
        assert seg.offset_of_max_timestamp == kept.index(max(kept))


def test_reopen_restores_end_offset_and_max_timestamp(segment: LogSegment, tmp_path: Path) -> None:
    segment.close()
    reopened = LogSegment.open(tmp_path, BASE, index_size=4096)
    assert reopened.index_problem is None
    assert reopened.next_offset == 130
    assert reopened.max_timestamp == 1129
    assert reopened.offset_index.entries == 9


def test_reopen_reports_an_index_that_points_at_the_wrong_record(
    segment: LogSegment, tmp_path: Path
) -> None:
    segment.close()
    index_path = tmp_path / "00000000000000000100.index"
    data = bytearray(index_path.read_bytes())
    data[-4:] = (2 * BATCH_SIZE).to_bytes(4, "big")  # last entry: right offset, wrong position
    index_path.write_bytes(bytes(data))
    reopened = LogSegment.open(tmp_path, BASE, index_size=4096)
    assert reopened.index_problem is not None


def test_reopen_reports_missing_index_files(segment: LogSegment, tmp_path: Path) -> None:
    segment.close()
    (tmp_path / "00000000000000000100.timeindex").unlink()
    reopened = LogSegment.open(tmp_path, BASE, index_size=4096)
    assert reopened.index_problem is not None
    assert "missing" in reopened.index_problem
