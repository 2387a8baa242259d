"""A log segment: one ``.log`` file of record batches with its offset index and time index.

Files are named by the segment's base offset, zero-padded to 20 digits. The log file is a raw
file descriptor (no Python buffering): a batch is one ``os.write`` and is in the kernel when
append returns, so a SIGKILLed broker loses nothing it acknowledged; reads use ``os.pread``.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from system_under_test.kafka.record_batch import MAGIC
from system_under_test.log.index_file import INT32_MAX, CorruptIndexError
from system_under_test.log.offset_index import OffsetIndex
from system_under_test.log.record import (
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchInfo,
    CorruptRecordError,
    decode_records,
    read_base_offset,
)
from system_under_test.log.time_index import NO_TIMESTAMP, TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SCAN_CHUNK = 64 * 1024
"""Bytes read at a time when walking batch headers."""

# base offset, length, (leader epoch), magic, (crc, attributes), last offset delta,
# (base timestamp), max timestamp
_HEADER = struct.Struct(">qi4xb6xi8xq")
_SIZE = struct.Struct(">i")

logger = logging.getLogger(__name__)

_sync_data = getattr(os, "fdatasync", os.fsync)


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` for base offset 42 and suffix ``.log``."""
    return f"{base_offset:020d}{suffix}"


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """One write call; loops only if the kernel accepted part of it (e.g. a 2 GB batch)."""
    written = os.write(fd, data)
    if written == len(data):
        return
    view = memoryview(data)[written:]
    while view:
        view = view[os.write(fd, view) :]


class LogSegment:
    """Records from base_offset up to next_offset (exclusive), with their indexes.

    Create one with ``LogSegment.create`` (new, empty) or ``LogSegment.open`` (existing files;
    ``index_problem`` then says why its indexes must be rebuilt, or is None).
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        fd: int,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.offset_index = offset_index
        self.time_index = time_index
        self._fd = fd
        self._size = os.fstat(fd).st_size
        self._dirty = False
        self._bytes_since_index = 0
        self.next_offset = base_offset
        """The offset after the last record (the LEO if this is the active segment)."""
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.rolling_base_ms: int | None = None
        """When the segment's age for segment.ms starts: the clock at its first append."""
        self.index_problem: str | None = None

    @classmethod
    def create(cls, directory: Path, base_offset: int, *, index_size: int) -> LogSegment:
        """A new empty segment; existing files of the same name are emptied."""
        fd = os.open(
            directory / segment_file_name(base_offset, LOG_SUFFIX),
            os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
            0o644,
        )
        offset_index = OffsetIndex(
            directory / segment_file_name(base_offset, INDEX_SUFFIX),
            base_offset,
            index_size,
            truncate=True,
        )
        time_index = TimeIndex(
            directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX),
            base_offset,
            index_size,
            truncate=True,
        )
        return cls(directory, base_offset, fd, offset_index, time_index)

    @classmethod
    def open(cls, directory: Path, base_offset: int, *, index_size: int) -> LogSegment:
        """An existing segment; missing or invalid indexes are emptied and reported in index_problem."""
        fd = os.open(
            directory / segment_file_name(base_offset, LOG_SUFFIX), os.O_RDWR | os.O_APPEND
        )
        problems: list[str] = []
        offset_path = directory / segment_file_name(base_offset, INDEX_SUFFIX)
        time_path = directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
        for path in (offset_path, time_path):
            if not path.exists():
                problems.append(f"{path.name} is missing")
        try:
            offset_index = OffsetIndex(offset_path, base_offset, index_size)
        except CorruptIndexError as err:
            problems.append(str(err))
            offset_index = OffsetIndex(offset_path, base_offset, index_size, truncate=True)
        try:
            time_index = TimeIndex(time_path, base_offset, index_size)
        except CorruptIndexError as err:
            problems.append(str(err))
            time_index = TimeIndex(time_path, base_offset, index_size, truncate=True)
        segment = cls(directory, base_offset, fd, offset_index, time_index)
        if not problems:
            problem = segment._load_end_state()
            if problem is not None:
                problems.append(problem)
        segment.index_problem = "; ".join(problems) if problems else None
        return segment

    def _load_end_state(self) -> str | None:
        """Find next_offset and the max timestamp from the indexes and the log's tail.

        Returns why the indexes disagree with the log, or None when they agree.
        """
        expected, position = self.offset_index.last_entry()
        if self.offset_index.entries:
            if position >= self._size:
                return (
                    f"offset index entry at byte {position} is beyond the log's {self._size} bytes"
                )
            header = os.pread(self._fd, LOG_OVERHEAD, position)
            if len(header) < LOG_OVERHEAD or read_base_offset(header) != expected:
                return f"offset index entry ({expected}, {position}) does not point at offset {expected}"
        max_ts, offset_of_max = self.time_index.last_entry()
        try:
            for batch_position, base, last, _size, timestamp in self.walk(position):
                if base != expected:
                    return f"batch at byte {batch_position} has offset {base}, expected {expected}"
                if timestamp > max_ts:
                    max_ts, offset_of_max = timestamp, last
                expected = last + 1
        except CorruptRecordError as err:
            return f"batches after the last index entry are unreadable: {err}"
        if self.time_index.entries and self.time_index.last_entry()[1] >= expected:
            return f"time index points past the segment's last offset {expected - 1}"
        self.next_offset = expected
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, offset_of_max
        return None

    # -- state -----------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes in the log file."""
        return self._size

    @property
    def log_path(self) -> Path:
        return self.directory / segment_file_name(self.base_offset, LOG_SUFFIX)

    @property
    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's modification time if no record has one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    def first_timestamp(self) -> int | None:
        """The max timestamp of the segment's first batch (Kafka's rolling base), None if
        it is empty."""
        header = os.pread(self._fd, _HEADER.size, 0)
        return int(_HEADER.unpack_from(header)[4]) if len(header) == _HEADER.size else None

    # -- writing ---------------------------------------------------------------------------

    def append(
        self, batch: bytes | bytearray | memoryview, info: BatchInfo, *, index_interval_bytes: int
    ) -> None:
        """Write a validated batch with one write call and index it."""
        position = self._size
        try:
            _write_all(self._fd, batch)
        except OSError:
            self._undo_partial_write(position)
            raise
        self._size = position + info.size
        self._dirty = True
        self.next_offset = info.last_offset + 1
        self.track(
            info.first_offset,
            position,
            info.size,
            info.max_timestamp,
            info.offset_of_max_timestamp,
            index_interval_bytes=index_interval_bytes,
        )

    def _undo_partial_write(self, position: int) -> None:
        try:
            os.ftruncate(self._fd, position)
        except OSError as err:
            logger.error("cannot remove a partial write from %s: %s", self.log_path, err)

    def track(
        self,
        first_offset: int,
        position: int,
        size: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        *,
        index_interval_bytes: int,
    ) -> None:
        """Account for batches written at position: the max timestamp and index entries.

        An entry is added when at least index_interval_bytes were written since the last one
        (Kafka's bytesSinceLastIndexEntry); it points at the first batch of this write.
        """
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = offset_of_max_timestamp
        if (
            self._bytes_since_index >= index_interval_bytes
            and not self.offset_index.is_full
            and not self.time_index.is_full
        ):
            self.offset_index.append(first_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def reset_indexes(self) -> None:
        """Forget all index entries and end state, before a rebuild by recovery."""
        self.offset_index.reset()
        self.time_index.reset()
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset

    def truncate_to_position(self, position: int) -> None:
        """Cut the log file at position (indexes are the caller's business)."""
        if position < self._size:
            os.ftruncate(self._fd, position)
            self._size = position
            self._dirty = True
        if self._size == 0:
            self.rolling_base_ms = None

    def truncate_to(self, offset: int) -> int:
        """Remove every batch that holds an offset at or after offset (a batch holding it is
        removed whole: the segment then ends below offset); return the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, first_removed = found
        self.offset_index.truncate_to(first_removed)
        self.time_index.truncate_to(first_removed)
        removed = self._size - position
        self.truncate_to_position(position)
        self.next_offset = first_removed
        self._bytes_since_index = 0
        self._recompute_max_timestamp()
        return removed

    def _recompute_max_timestamp(self) -> None:
        """Exact max timestamp after a truncation, scanning only the tail of the segment.

        Time entries are written together with offset entries, so the last remaining time
        entry covers every record before the second-to-last offset entry's position.
        """
        max_ts, offset_of_max = self.time_index.last_entry()
        start = self.offset_index.entry(-2)[1] if self.offset_index.entries >= 2 else 0
        for _position, _base, last, _size, timestamp in self.walk(start):
            if timestamp > max_ts or (timestamp == max_ts and last < offset_of_max):
                max_ts, offset_of_max = timestamp, last
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, offset_of_max

    def on_become_inactive(self) -> None:
        """Write the final time index entry (the segment's max timestamp) before it stops growing."""
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )

    def mark_unsynced(self) -> None:
        """Make the next flush fsync the log file (data a crashed process left in the page cache)."""
        self._dirty = True

    def flush(self, *, indexes: bool = True) -> None:
        """fsync the log file (and the index files unless indexes is False)."""
        if self._dirty:
            _sync_data(self._fd)
            self._dirty = False
        if indexes:
            self.offset_index.flush()
            self.time_index.flush()

    def close(self) -> None:
        """Write the final time index entry and close the files."""
        if self._fd < 0:
            return
        self.on_become_inactive()
        self.offset_index.close()
        self.time_index.close()
        os.close(self._fd)
        self._fd = -1

    def delete(self) -> None:
        """Close and remove the segment's files (the log first, so no half segment is loaded)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()

    # -- reading ---------------------------------------------------------------------------

    def read_bytes(self, position: int, size: int) -> bytes:
        """Up to size bytes of the log file from position."""
        return os.pread(self._fd, size, position)

    def walk(self, start: int) -> Iterator[tuple[int, int, int, int, int]]:
        """(position, base offset, last offset, size, max timestamp) of each batch from start,
        reading headers only.

        start must be a batch boundary; raises CorruptRecordError on an impossible header.
        """
        end = self._size
        position = start
        header_size = _HEADER.size
        while position < end:
            buf = os.pread(self._fd, min(SCAN_CHUNK, end - position), position)
            n = len(buf)
            if n < header_size:
                raise CorruptRecordError(
                    position, f"{n} bytes left, a batch header needs {header_size}"
                )
            i = 0
            while i + header_size <= n:
                base, length, magic, last_delta, max_ts = _HEADER.unpack_from(buf, i)
                total = LOG_OVERHEAD + length
                if length < MIN_BATCH_LENGTH or position + i + total > end:
                    raise CorruptRecordError(
                        position + i, f"batch length {length} does not fit the segment"
                    )
                if magic != MAGIC or last_delta < 0:
                    raise CorruptRecordError(
                        position + i, f"magic {magic}, last offset delta {last_delta}"
                    )
                yield position + i, base, base + last_delta, total, max_ts
                i += total
            position += i

    def translate_offset(self, offset: int) -> tuple[int, int] | None:
        """(position, base offset) of the first batch whose last offset is >= offset (the
        batch holding offset); None if there is none."""
        if offset >= self.next_offset:
            return None
        if offset <= self.base_offset:
            return 0, self.base_offset
        indexed_offset, position = self.offset_index.lookup(offset)
        if indexed_offset == offset:
            return position, offset
        for batch_position, base, last, _size, _ts in self.walk(position):
            if last >= offset:
                return batch_position, base
        return None

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None, min_one_record: bool
    ) -> tuple[bytes, int] | None:
        """Whole batches from the one holding offset: (data, its base offset).

        At most max_bytes unless min_one_record lets one bigger batch through; never a batch
        holding max_offset or a later offset. None if the segment has nothing at or after
        offset.
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        position, first_offset = found
        limit = self._size
        if max_offset is not None and max_offset < self.next_offset:
            bound = self.translate_offset(max_offset)
            assert bound is not None  # max_offset < next_offset
            if bound[0] <= position:
                return b"", first_offset
            limit = bound[0]
        want = min(max_bytes, limit - position)
        data = os.pread(self._fd, want, position) if want > 0 else b""
        end = self._whole_batches_end(data, position)
        if end == 0:
            if not min_one_record:
                return b"", first_offset
            header = (
                data if len(data) >= LOG_OVERHEAD else os.pread(self._fd, LOG_OVERHEAD, position)
            )
            (size,) = _SIZE.unpack_from(header, 8)
            return os.pread(self._fd, LOG_OVERHEAD + size, position), first_offset
        return (data if end == len(data) else data[:end]), first_offset

    def _whole_batches_end(self, data: bytes, position: int) -> int:
        """Length of the longest prefix of data (read at position) made of whole batches.

        Starts at the last indexed batch boundary inside data, so it walks only a few headers.
        """
        n = len(data)
        i = max(position, self.offset_index.floor_position(position + n)) - position
        unpack = _SIZE.unpack_from
        while i + LOG_OVERHEAD <= n:
            following = i + LOG_OVERHEAD + unpack(data, i + 8)[0]
            if following > n:
                break
            i = following
        return i

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> int | None:
        """The first offset >= start_offset whose record timestamp is >= timestamp, or None."""
        _ts, indexed_offset = self.time_index.lookup(timestamp)
        _offset, position = self.offset_index.lookup(max(indexed_offset, start_offset))
        for batch_position, _base, last, size, max_ts in self.walk(position):
            if last >= start_offset and max_ts >= timestamp:
                for record in decode_records(os.pread(self._fd, size, batch_position)):
                    if record.offset >= start_offset and record.timestamp >= timestamp:
                        return record.offset
        return None

    def can_hold(self, info: BatchInfo) -> bool:
        """False when info's offsets or bytes would overflow the indexes' 32-bit fields."""
        return (
            info.last_offset - self.base_offset <= INT32_MAX and self._size + info.size <= INT32_MAX
        )

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, next_offset={self.next_offset}, size={self._size})"
