"""The offset index: a sparse map from offsets to byte positions in one segment's log file.

Each entry is 8 bytes, big-endian: the offset relative to the segment's base offset (int32)
and the position of that record in the log file (int32). Entries are strictly increasing in
both. The entries live in memory (two int arrays searched with bisect) and every new entry is
appended to the file with one write, so the file always holds exactly the valid entries and
never needs trimming (no preallocation, unlike Kafka's mmap'd index).
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from itertools import pairwise
from pathlib import Path

ENTRY_SIZE = 8
INT32_MAX = 2**31 - 1
_ENTRY = struct.Struct(">ii")


class CorruptIndexError(ValueError):
    """An index file whose content cannot be trusted; the segment's indexes are rebuilt."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"index {path}: {reason}")
        self.path = path
        self.reason = reason


def _strictly_increasing(values: array[int]) -> bool:
    return all(a < b for a, b in pairwise(values))


class OffsetIndex:
    """Sparse (offset, position) entries of one segment, searched in memory, appended to disk."""

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int, *, truncate: bool = False
    ) -> None:
        """Open (or create) the index file; raise CorruptIndexError if its content is invalid.

        truncate empties an existing file first (a new segment, or an index being rebuilt).
        """
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // ENTRY_SIZE)
        self._offsets: array[int] = array("i")
        self._positions: array[int] = array("i")
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if truncate else 0)
        self._fd = os.open(path, flags, 0o644)
        self._dirty = False
        try:
            self._load()
        except BaseException:
            os.close(self._fd)
            raise

    def _load(self) -> None:
        size = os.fstat(self._fd).st_size
        if size == 0:
            return
        if size % ENTRY_SIZE:
            raise CorruptIndexError(self.path, f"size {size} is not a multiple of {ENTRY_SIZE}")
        data = os.pread(self._fd, size, 0)
        if len(data) != size:
            raise CorruptIndexError(self.path, f"read {len(data)} of {size} bytes")
        values = array("i")
        values.frombytes(data)
        if sys.byteorder == "little":
            values.byteswap()
        offsets, positions = values[0::2], values[1::2]
        if offsets[0] < 0 or positions[0] < 0:
            raise CorruptIndexError(self.path, "the first entry is negative")
        if not _strictly_increasing(offsets) or not _strictly_increasing(positions):
            raise CorruptIndexError(self.path, "entries are not strictly increasing")
        self._offsets, self._positions = offsets, positions

    @property
    def entries(self) -> int:
        """Number of entries."""
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        """True when no more entries fit in the configured index size (the segment must roll)."""
        return len(self._offsets) >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return len(self._offsets) * ENTRY_SIZE

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (absolute offset, position); negative n counts from the end."""
        return self.base_offset + self._offsets[n], self._positions[n]

    def last_entry(self) -> tuple[int, int]:
        """The last entry, or (base offset, 0) when there is none."""
        if not self._offsets:
            return self.base_offset, 0
        return self.entry(-1)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= offset, or (base offset, 0) if there is none."""
        relative = offset - self.base_offset
        if relative < 0 or not self._offsets:
            return self.base_offset, 0
        i = bisect_right(self._offsets, min(relative, INT32_MAX)) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def floor_position(self, position: int) -> int:
        """The largest indexed position <= position (0 if none): a known record boundary."""
        i = bisect_right(self._positions, min(position, INT32_MAX)) - 1
        return self._positions[i] if i >= 0 else 0

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets and positions must increase and the index must not be full."""
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX or not 0 <= position <= INT32_MAX:
            raise ValueError(f"entry ({offset}, {position}) does not fit index {self.path}")
        if self._offsets and (relative <= self._offsets[-1] or position <= self._positions[-1]):
            last_offset, last_position = self.last_entry()
            raise ValueError(
                f"entry ({offset}, {position}) does not follow ({last_offset}, {last_position}) "
                f"in index {self.path}"
            )
        if self.is_full:
            raise ValueError(f"index {self.path} is full ({self.max_entries} entries)")
        os.write(self._fd, _ENTRY.pack(relative, position))
        self._offsets.append(relative)
        self._positions.append(position)
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
        del self._offsets[keep:]
        del self._positions[keep:]
        os.ftruncate(self._fd, keep * ENTRY_SIZE)
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
