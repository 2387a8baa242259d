"""Loading a partition directory and recovering its segments after a crash.

Loading removes leftovers (``.tmp``, ``.deleted``, ``.cleaned``, ``.swap`` files, index files
without a log file) and opens every segment, checking its indexes against its log. After an
unclean shutdown every segment from the one holding the recovery point onwards is recovered:
its batches are revalidated (length, header, CRC-32C, offsets consecutive from the base
offset), the segment is cut at the first bad batch and its indexes rebuilt. After a cut, or when the next
segment does not start where this one ends, all later segments are deleted: the log comes
back as its longest valid prefix, and a corrupt batch is never served.
"""

from __future__ import annotations

import logging
import os
import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from system_under_test.log.record import (
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchPosition,
    CorruptRecordError,
    iter_batches,
)
from system_under_test.log.segment import LogSegment

STRAY_SUFFIXES = (".tmp", ".deleted", ".cleaned", ".swap")
RECOVERY_CHUNK = 1 << 20
"""Bytes read at a time while revalidating a segment."""

_SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex)")

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """What recovering one segment found."""

    base_offset: int
    valid_bytes: int
    truncated_bytes: int
    next_offset: int
    problem: str | None
    """Why the segment was cut (None when every byte was valid)."""


@dataclass(slots=True)
class RecoveryReport:
    """What loading a partition directory changed."""

    directory: Path
    clean_shutdown: bool
    removed_files: list[str] = field(default_factory=list)
    rebuilt_indexes: dict[int, str] = field(default_factory=dict)
    """Base offset -> why that segment's indexes were rebuilt."""
    recovered: list[SegmentRecovery] = field(default_factory=list)
    deleted_segments: list[int] = field(default_factory=list)
    """Base offsets of segments deleted because an earlier segment was cut."""

    @property
    def truncated(self) -> bool:
        """True if any data was dropped."""
        return bool(self.deleted_segments) or any(r.truncated_bytes for r in self.recovered)


def _scan(segment: LogSegment) -> Iterator[BatchPosition]:
    """Every valid batch of the segment (CRC checked), read in chunks; positions are absolute.

    Raises CorruptRecordError (with an absolute position) at the first invalid batch.
    """
    file_size = segment.size
    position = 0
    length = min(RECOVERY_CHUNK, file_size)
    while position < file_size:
        buf = segment.read_bytes(position, length)
        at_eof = position + len(buf) >= file_size
        consumed = 0
        try:
            for batch in iter_batches(buf):
                yield replace(batch, position=position + batch.position)
                consumed = batch.position + batch.size
        except CorruptRecordError as err:
            if at_eof:
                raise CorruptRecordError(position + err.position, err.reason) from None
            needed = _bytes_needed(buf, err.position)
            if needed is None:
                raise CorruptRecordError(position + err.position, err.reason) from None
            if position + err.position + needed > file_size:
                raise CorruptRecordError(
                    position + err.position, f"a {needed}-byte batch runs past the end of the file"
                ) from None
            consumed = err.position
            length = max(RECOVERY_CHUNK, needed)
        else:
            length = RECOVERY_CHUNK
        position += consumed
        length = min(length, file_size - position)


def _bytes_needed(buf: bytes, position: int) -> int | None:
    """Bytes the batch at position needs if it merely runs past the chunk, else None."""
    if len(buf) - position < LOG_OVERHEAD:
        return LOG_OVERHEAD + MIN_BATCH_LENGTH
    size = int.from_bytes(buf[position + 8 : position + 12], "big", signed=True)
    if size < MIN_BATCH_LENGTH or position + LOG_OVERHEAD + size <= len(buf):
        return None
    return LOG_OVERHEAD + size


def recover_segment(segment: LogSegment, *, index_interval_bytes: int) -> SegmentRecovery:
    """Revalidate every batch, cut the segment at the first bad one, rebuild its indexes."""
    segment.reset_indexes()
    segment.mark_unsynced()
    expected = segment.base_offset
    valid = 0
    problem: str | None = None
    try:
        for batch in _scan(segment):
            if batch.base_offset != expected:
                problem = (
                    f"batch at byte {batch.position} has offset {batch.base_offset}, "
                    f"expected {expected}"
                )
                break
            segment.track(
                batch.base_offset,
                batch.position,
                batch.size,
                batch.max_timestamp,
                batch.last_offset,
                index_interval_bytes=index_interval_bytes,
            )
            expected = batch.last_offset + 1
            valid = batch.position + batch.size
    except CorruptRecordError as err:
        problem = str(err)
    truncated = segment.size - valid
    if truncated:
        segment.truncate_to_position(valid)
    segment.next_offset = expected
    return SegmentRecovery(segment.base_offset, valid, truncated, expected, problem)


def remove_stray_files(directory: Path) -> tuple[list[int], list[str]]:
    """Delete leftovers; return the base offsets that have a log file and the removed names."""
    kinds: dict[int, set[str]] = {}
    removed: list[str] = []
    for entry in os.scandir(directory):
        if not entry.is_file():
            continue
        if entry.name.endswith(STRAY_SUFFIXES):
            os.unlink(entry.path)
            removed.append(entry.name)
            continue
        match = _SEGMENT_FILE.fullmatch(entry.name)
        if match:
            kinds.setdefault(int(match[1]), set()).add(match[2])
    for base_offset, present in sorted(kinds.items()):
        if "log" not in present:
            for kind in sorted(present):
                name = f"{base_offset:020d}.{kind}"
                (directory / name).unlink(missing_ok=True)
                removed.append(name)
    bases = sorted(b for b, present in kinds.items() if "log" in present)
    return bases, removed


def load_segments(
    directory: Path,
    *,
    index_size: int,
    index_interval_bytes: int,
    recovery_point: int,
    clean_shutdown: bool,
) -> tuple[list[LogSegment], RecoveryReport]:
    """Open a partition directory's segments, recovering them as its shutdown requires.

    Always returns at least one segment (an empty one at offset 0 for an empty directory).
    """
    directory.mkdir(parents=True, exist_ok=True)
    report = RecoveryReport(directory, clean_shutdown)
    bases, report.removed_files = remove_stray_files(directory)
    segments: list[LogSegment] = []
    try:
        for base_offset in bases:
            segments.append(LogSegment.open(directory, base_offset, index_size=index_size))
        first_recovered = len(segments)
        if not clean_shutdown and segments:
            first_recovered = max(0, bisect_right(bases, recovery_point) - 1)
        for i, segment in enumerate(segments):
            if i < first_recovered and segment.index_problem is None:
                continue
            if segment.index_problem is not None:
                report.rebuilt_indexes[segment.base_offset] = segment.index_problem
                logger.warning(
                    "%s: rebuilding the indexes of segment %d: %s",
                    directory,
                    segment.base_offset,
                    segment.index_problem,
                )
            result = recover_segment(segment, index_interval_bytes=index_interval_bytes)
            report.recovered.append(result)
            if result.truncated_bytes:
                logger.warning(
                    "%s: truncated segment %d at byte %d (%d bytes dropped, log end offset %d): %s",
                    directory,
                    segment.base_offset,
                    result.valid_bytes,
                    result.truncated_bytes,
                    result.next_offset,
                    result.problem,
                )
            following = segments[i + 1] if i + 1 < len(segments) else None
            if following is not None and (
                result.truncated_bytes or following.base_offset != segment.next_offset
            ):
                _delete_after(segments, i, report)
                break
        for segment in segments[:-1]:
            segment.on_become_inactive()
        if not segments:
            segments.append(LogSegment.create(directory, 0, index_size=index_size))
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    return segments, report


def _delete_after(segments: list[LogSegment], i: int, report: RecoveryReport) -> None:
    """Delete segments after index i, last first, so a crash midway leaves a prefix."""
    doomed = segments[i + 1 :]
    del segments[i + 1 :]
    for segment in reversed(doomed):
        segment.delete()
        report.deleted_segments.insert(0, segment.base_offset)
    logger.warning(
        "%s: deleted segments %s after the log was cut at offset %d",
        report.directory,
        ", ".join(str(b) for b in report.deleted_segments),
        segments[i].next_offset,
    )
