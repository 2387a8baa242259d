"""OffsetIndex: lookup, truncation, persistence and corruption detection."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.log.index_file import CorruptIndexError
from system_under_test.log.offset_index import OffsetIndex

BASE = 1000


def make_index(tmp_path: Path, entries: list[tuple[int, int]], max_size: int = 4096) -> OffsetIndex:
    index = OffsetIndex(tmp_path / "00000000000000001000.index", BASE, max_size)
    for offset, position in entries:
        index.append(offset, position)
    return index


def test_empty_index_lookup_gives_base_offset_and_position_zero(tmp_path: Path) -> None:
    index = make_index(tmp_path, [])
    assert index.lookup(BASE) == (BASE, 0)
    assert index.lookup(BASE + 500) == (BASE, 0)
    assert index.last_entry() == (BASE, 0)


def test_lookup_finds_largest_entry_at_or_below_target(tmp_path: Path) -> None:
    index = make_index(tmp_path, [(1010, 100), (1020, 250), (1035, 600)])
    assert index.lookup(999) == (BASE, 0)
    assert index.lookup(1009) == (BASE, 0)
    assert index.lookup(1010) == (1010, 100)
    assert index.lookup(1019) == (1010, 100)
    assert index.lookup(1020) == (1020, 250)
    assert index.lookup(1034) == (1020, 250)
    assert index.lookup(1035) == (1035, 600)
    assert index.lookup(10**12) == (1035, 600)


def test_floor_position_finds_record_boundaries(tmp_path: Path) -> None:
    index = make_index(tmp_path, [(1010, 100), (1020, 250)])
    assert index.floor_position(99) == 0
    assert index.floor_position(100) == 100
    assert index.floor_position(249) == 100
    assert index.floor_position(10_000) == 250


@pytest.mark.parametrize("entry", [(1020, 300), (1030, 200), (1010, 250), (999, 500)])
def test_append_rejects_entries_that_do_not_increase(
    tmp_path: Path, entry: tuple[int, int]
) -> None:
    index = make_index(tmp_path, [(1020, 250)])
    with pytest.raises(ValueError):
        index.append(*entry)
    assert index.entries == 1


def test_full_index_refuses_appends(tmp_path: Path) -> None:
    index = make_index(tmp_path, [], max_size=20)  # room for 2 entries of 8 bytes
    index.append(1001, 10)
    assert not index.is_full
    index.append(1002, 20)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.append(1003, 30)


def test_truncate_removes_entries_at_and_after_offset(tmp_path: Path) -> None:
    index = make_index(tmp_path, [(1010, 100), (1020, 250), (1035, 600)])
    index.truncate_to(1021)
    assert index.entries == 2
    index.truncate_to(1020)
    assert index.entries == 1
    assert index.lookup(1030) == (1010, 100)
    assert index.path.stat().st_size == 8
    index.truncate_to(BASE)
    assert index.entries == 0
    assert index.path.stat().st_size == 0
    index.append(1005, 50)  # appends work again after truncation
    assert index.lookup(1006) == (1005, 50)


def test_entries_survive_reopen_and_file_holds_only_valid_entries(tmp_path: Path) -> None:
    entries = [(1001, 10), (1002, 4000), (1500, 70000)]
    index = make_index(tmp_path, entries)
    index.flush()
    index.close()
    assert (tmp_path / "00000000000000001000.index").stat().st_size == 8 * len(entries)
    reopened = OffsetIndex(tmp_path / "00000000000000001000.index", BASE, 4096)
    assert [reopened.entry(i) for i in range(reopened.entries)] == entries


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\x00" * 7, "multiple of 8"),
        (bytes.fromhex("0000000100000010 0000000100000020"), "strictly increasing"),
        (bytes.fromhex("0000000200000010 0000000300000005"), "strictly increasing"),
        (b"\x00" * 16, "strictly increasing"),  # a preallocated, never written index
        (bytes.fromhex("ffffffff00000010"), "negative"),
    ],
)
def test_invalid_files_raise_corrupt_index_error(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError, match=reason):
        OffsetIndex(path, BASE, 4096)
    OffsetIndex(path, BASE, 4096, truncate=True)  # a rebuild starts from an empty file
    assert path.stat().st_size == 0


increasing_entries = st.lists(st.tuples(st.integers(1, 50), st.integers(1, 5000)), max_size=60).map(
    lambda steps: [
        (BASE + sum(s[0] for s in steps[: i + 1]), sum(s[1] for s in steps[: i + 1]))
        for i in range(len(steps))
    ]
)


@settings(deadline=None, max_examples=150)
@given(
    entries=increasing_entries, targets=st.lists(st.integers(BASE - 10, BASE + 3500), max_size=30)
)
def test_lookup_agrees_with_brute_force(entries: list[tuple[int, int]], targets: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        index = make_index(Path(tmp), entries, max_size=8 * 100)
        for target in targets:
            below = [e for e in entries if e[0] <= target]
            assert index.lookup(target) == (below[-1] if below else (BASE, 0))
        index.close()


@settings(deadline=None, max_examples=100)
@given(entries=increasing_entries, cut=st.integers(BASE - 5, BASE + 3500))
def test_truncate_then_reopen_agrees_with_model(entries: list[tuple[int, int]], cut: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        index = make_index(Path(tmp), entries, max_size=8 * 100)
        index.truncate_to(cut)
        index.close()
        reopened = OffsetIndex(index.path, BASE, 8 * 100)
        kept = [e for e in entries if e[0] < cut]
        assert [reopened.entry(i) for i in range(reopened.entries)] == kept
        reopened.close()
