"""The file journal against a model: after any writes and truncates, restoring gives back
exactly the bytes of the last fsync."""

from __future__ import annotations

import os
import tempfile

from hypothesis import given
from hypothesis import strategies as st

from squall.cluster.lazyfs.journal import FileJournal

offsets = st.integers(min_value=0, max_value=64)
changes = st.lists(
    st.one_of(
        st.tuples(st.just("write"), offsets, st.binary(min_size=1, max_size=24)),
        st.tuples(st.just("truncate"), offsets, st.just(b"")),
    ),
    max_size=20,
)


def _apply(fd: int, journal: FileJournal, kind: str, offset: int, data: bytes) -> None:
    def read(at: int, n: int) -> bytes:
        return os.pread(fd, n, at)

    if kind == "write":
        journal.before_write(offset, len(data), read)
        os.pwrite(fd, data, offset)
    else:
        journal.before_truncate(offset, os.fstat(fd).st_size, read)
        os.ftruncate(fd, offset)


@given(synced=st.binary(max_size=48), steps=changes)
def test_restore_gives_back_the_synced_bytes(
    synced: bytes, steps: list[tuple[str, int, bytes]]
) -> None:
    with tempfile.TemporaryFile() as handle:
        fd = handle.fileno()
        os.pwrite(fd, synced, 0)
        journal = FileJournal(synced_size=len(synced))
        for kind, offset, data in steps:
            _apply(fd, journal, kind, offset, data)
        size = os.fstat(fd).st_size
        changed_below = sum(
            1 for at in range(min(size, len(synced))) if os.pread(fd, 1, at) != synced[at : at + 1]
        )
        assert journal.unsynced_bytes(size) >= changed_below + max(0, size - len(synced))
        journal.restore(fd)
        assert os.pread(fd, 1 << 10, 0) == synced
        assert os.fstat(fd).st_size == len(synced)


def test_appends_past_the_synced_size_save_nothing() -> None:
    journal = FileJournal(synced_size=10)
    journal.before_write(10, 100, lambda at, n: b"\0" * n)
    assert journal.saved_bytes == 0
    assert journal.unsynced_bytes(110) == 100


def test_a_byte_is_saved_once_first_image_wins() -> None:
    journal = FileJournal(synced_size=10)
    journal.before_write(2, 4, lambda at, n: b"a" * n)
    journal.before_write(0, 10, lambda at, n: b"b" * n)
    assert journal.gaps(0, 10) == []
    assert journal.saved_bytes == 10
    assert b"".join(journal.images) == b"bb" + b"aaaa" + b"bbbb"
