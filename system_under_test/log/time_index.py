"""The time index: a sparse map from timestamps to offsets in one segment.

Each entry is 12 bytes, big-endian: a timestamp (int64) and an offset relative to the
segment's base offset (int32). An entry holds the largest timestamp seen so far in the
segment and the offset of the first record that carried it, so timestamps strictly increase
and offsets never decrease; every record before an entry's offset has a smaller timestamp.
Like the offset index, entries are kept in memory and appended to the file one write each.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from system_under_test.log.index_file import INT32_MAX, CorruptIndexError, IndexFile

ENTRY_SIZE = 12
NO_TIMESTAMP = -1
"""Kafka's 'no timestamp': records at or below it never make a time index entry."""
_ENTRY = struct.Struct(">qi")


class TimeIndex(IndexFile):
    """Sparse (max timestamp so far, offset) entries of one segment.

    One slot of the configured size is kept free during appends for the final entry written
    when the segment becomes inactive (as Kafka's skipFullCheck), so the file never exceeds
    segment.index.bytes.
    """

    entry_size = ENTRY_SIZE

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int, *, truncate: bool = False
    ) -> None:
        """Open (or create) the index file; raise CorruptIndexError if its content is invalid."""
        self.max_entries = max(2, max_index_size // ENTRY_SIZE)
        self._timestamps: array[int] = array("q")
        super().__init__(path, base_offset, truncate=truncate)

    def _load(self, data: bytes) -> None:
        timestamps: array[int] = array("q")
        offsets: array[int] = array("i")
        previous_ts, previous_offset = NO_TIMESTAMP, 0
        for timestamp, relative in _ENTRY.iter_unpack(data):
            if timestamp <= previous_ts or relative < previous_offset:
                raise CorruptIndexError(
                    self.path,
                    f"entry {len(offsets)} ({timestamp}, {relative}) does not follow "
                    f"({previous_ts}, {previous_offset})",
                )
            timestamps.append(timestamp)
            offsets.append(relative)
            previous_ts, previous_offset = timestamp, relative
        self._timestamps, self._offsets = timestamps, offsets

    def _columns(self) -> tuple[array[int], ...]:
        return self._timestamps, self._offsets

    @property
    def is_full(self) -> bool:
        """True when only the slot reserved for the final entry is left."""
        return len(self._offsets) >= self.max_entries - 1

    def last_entry(self) -> tuple[int, int]:
        """The last (timestamp, absolute offset), or (-1, base offset) when there is none."""
        if not self._offsets:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= timestamp, or (-1, base offset) if none."""
        i = bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[i], self.base_offset + self._offsets[i]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add an entry if timestamp is above the last one (and -1); return whether it was added.

        skip_full_check uses the reserved slot (the final entry of a segment being closed).
        """
        if timestamp <= (self._timestamps[-1] if self._timestamps else NO_TIMESTAMP):
            return False
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise ValueError(f"offset {offset} does not fit time index {self.path}")
        if self._offsets and relative < self._offsets[-1]:
            raise ValueError(
                f"offset {offset} is below the last offset "
                f"{self.base_offset + self._offsets[-1]} of time index {self.path}"
            )
        if len(self._offsets) >= (self.max_entries if skip_full_check else self.max_entries - 1):
            if skip_full_check:
                return False
            raise ValueError(f"time index {self.path} is full ({self.max_entries} entries)")
        self._write(_ENTRY.pack(timestamp, relative))
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
        return True
