"""TimeIndex: monotonic entries, lookup, the reserved final slot, truncation, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from system_under_test.log.index_file import CorruptIndexError
from system_under_test.log.time_index import TimeIndex

BASE = 500


def make_index(tmp_path: Path, max_size: int = 1200) -> TimeIndex:
    return TimeIndex(tmp_path / "00000000000000000500.timeindex", BASE, max_size)


def test_only_larger_timestamps_make_entries(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    assert index.maybe_append(100, 501)
    assert not index.maybe_append(100, 502)  # equal: the first record with it stays
    assert not index.maybe_append(90, 503)  # timestamps never go backwards
    assert index.maybe_append(150, 503)
    assert index.entries == 2
    assert index.last_entry() == (150, 503)


def test_no_timestamp_is_never_indexed(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    assert not index.maybe_append(-1, 500)
    assert index.entries == 0
    assert index.last_entry() == (-1, BASE)


def test_offset_going_backwards_is_an_error(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    index.maybe_append(100, 510)
    with pytest.raises(ValueError, match="below the last offset"):
        index.maybe_append(200, 505)


def test_lookup_finds_largest_timestamp_at_or_below_target(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    for ts, offset in [(100, 500), (200, 510), (300, 530)]:
        index.maybe_append(ts, offset)
    assert index.lookup(99) == (-1, BASE)
    assert index.lookup(100) == (100, 500)
    assert index.lookup(250) == (200, 510)
    assert index.lookup(10**15) == (300, 530)


def test_full_index_keeps_one_slot_for_the_final_entry(tmp_path: Path) -> None:
    index = make_index(tmp_path, max_size=36)  # 3 entries of 12 bytes
    index.maybe_append(10, 501)
    assert not index.is_full
    index.maybe_append(20, 502)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.maybe_append(30, 503)
    assert index.maybe_append(30, 503, skip_full_check=True)
    assert not index.maybe_append(40, 504, skip_full_check=True)  # nothing beyond the max size
    assert index.path.stat().st_size == 36


def test_truncate_removes_entries_at_and_after_offset(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    for ts, offset in [(100, 500), (200, 510), (300, 530)]:
        index.maybe_append(ts, offset)
    index.truncate_to(530)
    assert index.last_entry() == (200, 510)
    index.truncate_to(505)
    assert index.last_entry() == (100, 500)
    assert index.path.stat().st_size == 12
    assert index.maybe_append(150, 501)  # appending continues from the truncated state


def test_entries_survive_reopen(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    for ts, offset in [(100, 500), (200, 510), (300, 510)]:
        index.maybe_append(ts, offset)
    index.close()
    reopened = make_index(tmp_path)
    assert reopened.entries == 3
    assert reopened.lookup(250) == (200, 510)
    assert reopened.last_entry() == (300, 510)


@pytest.mark.parametrize(
    "content",
    [
        b"\x00" * 13,
        bytes.fromhex("000000000000006400000001 000000000000006400000002"),  # equal timestamps
        bytes.fromhex("000000000000006400000005 00000000000000c800000002"),  # offset goes back
        b"\x00" * 24,  # preallocated zeros
    ],
)
def test_invalid_files_raise_corrupt_index_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "00000000000000000500.timeindex"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, BASE, 1200)
