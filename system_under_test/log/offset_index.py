"""The offset index: a sparse map from offsets to byte positions in one segment's log file.

Each entry is 8 bytes, big-endian: the offset relative to the segment's base offset (int32)
and the position of that record in the log file (int32). Entries are strictly increasing in
both; they live in memory (two int arrays searched with bisect) and in the file
(``system_under_test.log.index_file``).
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from itertools import pairwise
from pathlib import Path

from system_under_test.log.index_file import INT32_MAX, CorruptIndexError, IndexFile

ENTRY_SIZE = 8
_ENTRY = struct.Struct(">ii")


def _strictly_increasing(values: array[int]) -> bool:
    return all(a < b for a, b in pairwise(values))


class OffsetIndex(IndexFile):
    """Sparse (offset, position) entries of one segment, searched in memory, appended to disk."""

    entry_size = ENTRY_SIZE

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int, *, truncate: bool = False
    ) -> None:
        """Open (or create) the index file; raise CorruptIndexError if its content is invalid.

        truncate empties an existing file first (a new segment, or an index being rebuilt).
        """
        self.max_entries = max(1, max_index_size // ENTRY_SIZE)
        self._positions: array[int] = array("i")
        super().__init__(path, base_offset, truncate=truncate)

    def _load(self, data: bytes) -> None:
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

    def _columns(self) -> tuple[array[int], ...]:
        return self._offsets, self._positions

    @property
    def is_full(self) -> bool:
        """True when no more entries fit in the configured index size (the segment must roll)."""
        return len(self._offsets) >= self.max_entries

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
        self._write(_ENTRY.pack(relative, position))
        self._offsets.append(relative)
        self._positions.append(position)
