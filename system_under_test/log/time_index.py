"""The time index: a sparse map from timestamps to offsets in one segment.

Each entry is 12 bytes, big-endian: a timestamp (int64) and an offset relative to the
segment's base offset (int32). An entry holds the largest timestamp seen so far in the
segment and the offset of the first record that carried it, so timestamps strictly increase
and offsets never decrease; every record before an entry's offset has a smaller timestamp.
Like the offset index, entries are kept in memory and appended to the file one write each.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from system_under_test.log.offset_index import INT32_MAX, CorruptIndexError

ENTRY_SIZE = 12
NO_TIMESTAMP = -1
"""Kafka's 'no timestamp': records at or below it never make a time index entry."""
_ENTRY = struct.Struct(">qi")


class TimeIndex:
    """Sparse (max timestamp so far, offset) entries of one segment.

    One slot of the configured size is kept free during appends for the final entry written
    when the segment becomes inactive (as Kafka's skipFullCheck), so the file never exceeds
    segment.index.bytes.
    """

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int, *, truncate: bool = False
    ) -> None:
        """Open (or create) the index file; raise CorruptIndexError if its content is invalid."""
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(2, max_index_size // ENTRY_SIZE)
        self._timestamps: array[int] = array("q")
        self._offsets: array[int] = array("i")
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

    @property
    def entries(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        """True when only the slot reserved for the final entry is left."""
        return len(self._offsets) >= self.max_entries - 1

    @property
    def size_in_bytes(self) -> int:
        return len(self._offsets) * ENTRY_SIZE

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
        os.write(self._fd, _ENTRY.pack(timestamp, relative))
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
        self._dirty = True
        return True

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
        del self._timestamps[keep:]
        del self._offsets[keep:]
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
