"""What a segment's index files share: fixed-size entries kept in memory as columns, each
new entry appended to the file with one write, so the file always holds exactly the valid
entries (no preallocation, unlike Kafka's mmap'd indexes); truncation by offset, flush,
close and delete. ``OffsetIndex`` and ``TimeIndex`` say what an entry holds."""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left
from pathlib import Path

INT32_MAX = 2**31 - 1


class CorruptIndexError(ValueError):
    """An index file whose content cannot be trusted; the segment's indexes are rebuilt."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"index {path}: {reason}")
        self.path = path
        self.reason = reason


class IndexFile:
    """One index file of a segment: entries of ``entry_size`` bytes, one of whose columns is
    the offset relative to the segment's base offset (``_offsets``), never decreasing."""

    entry_size: int

    def __init__(self, path: Path, base_offset: int, *, truncate: bool) -> None:
        """Open (or create) the file and load it (``_load``); raise CorruptIndexError if its
        content is invalid. ``truncate`` empties an existing file first (a new segment, or an
        index being rebuilt)."""
        self.path = path
        self.base_offset = base_offset
        self._offsets: array[int] = array("i")
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if truncate else 0)
        self._fd = os.open(path, flags, 0o644)
        self._dirty = False
        try:
            data = self._read()
            if data:
                self._load(data)
        except BaseException:
            os.close(self._fd)
            raise

    def _read(self) -> bytes:
        """The file's bytes, a whole number of entries."""
        size = os.fstat(self._fd).st_size
        if size % self.entry_size:
            raise CorruptIndexError(
                self.path, f"size {size} is not a multiple of {self.entry_size}"
            )
        data = os.pread(self._fd, size, 0)
        if len(data) != size:
            raise CorruptIndexError(self.path, f"read {len(data)} of {size} bytes")
        return data

    def _load(self, data: bytes) -> None:
        """Take the entries of a non-empty file into the columns, or raise CorruptIndexError."""
        raise NotImplementedError

    def _columns(self) -> tuple[array[int], ...]:
        """Every column of the entries, ``_offsets`` among them."""
        return (self._offsets,)

    @property
    def entries(self) -> int:
        """Number of entries."""
        return len(self._offsets)

    @property
    def size_in_bytes(self) -> int:
        return len(self._offsets) * self.entry_size

    def _write(self, entry: bytes) -> None:
        """Append one entry to the file (the caller adds it to the columns)."""
        os.write(self._fd, entry)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= offset."""
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else bisect_left(self._offsets, min(relative, INT32_MAX + 1))
        self._truncate_entries(keep)

    def reset(self) -> None:
        """Remove every entry (before a rebuild)."""
        self._truncate_entries(0)

    def _truncate_entries(self, keep: int) -> None:
        if keep >= len(self._offsets):
            return
        for column in self._columns():
            del column[keep:]
        os.ftruncate(self._fd, keep * self.entry_size)
        self._dirty = True

    def flush(self) -> None:
        """fsync the file if it changed since the last flush."""
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        """Close and remove the file."""
        self.close()
        self.path.unlink(missing_ok=True)
