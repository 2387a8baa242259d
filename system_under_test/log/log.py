"""A partition's log: an ordered list of segments with appends, reads, truncation and retention.

The vocabulary is Kafka's: the log end offset (LEO) is the offset the next record gets; the
log start offset is the first offset still held; the recovery point is the offset below which
everything is fsynced. Offsets are consecutive (no compaction), so a log is valid exactly when
every segment's records run from its base offset, one by one, to the next segment's base.

A Log is not thread-safe: it has one owner (the broker's event loop).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from system_under_test.config import TOPIC_KEYS, ConfigError, resolve_topic_config
from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.log import record
from system_under_test.log.checkpoint import fsync_directory
from system_under_test.log.producer_state import (
    MAX_SEQUENCE,
    NO_PRODUCER_ID,
    ProducerBatch,
    ProducerStateManager,
    in_sequence,
)
from system_under_test.log.record import BatchInfo, BatchPosition, CorruptRecordError, iter_batches
from system_under_test.log.recovery import RecoveryReport, load_segments
from system_under_test.log.segment import LogSegment

DELETE_DIR_SUFFIX = "-delete"
"""A partition directory renamed to ``<name>.<id>-delete`` is being deleted."""

logger = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


# -- errors ------------------------------------------------------------------------------------


class LogError(Exception):
    """Base class of the log layer's errors."""


class OffsetOutOfRangeError(LogError):
    """A read at an offset the log does not hold."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range: the log holds offsets {log_start_offset} to "
            f"{log_end_offset - 1} (log end offset {log_end_offset}); fetch from an offset in "
            f"[{log_start_offset}, {log_end_offset}] or reset to the earliest or latest offset"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(LogError):
    """A record batch larger than max.message.bytes; nothing of the append was written."""

    def __init__(self, size: int, max_message_bytes: int, position: int) -> None:
        super().__init__(
            f"record batch of {size} bytes at byte {position} exceeds max.message.bytes="
            f"{max_message_bytes} (Kafka applies it to whole batches); nothing was written. "
            f"Send smaller batches or raise max.message.bytes for the topic"
        )
        self.size = size
        self.max_message_bytes = max_message_bytes


class InvalidOffsetError(LogError):
    """A replicated batch whose offsets do not continue the log."""


class NonMonotonicOffsetError(InvalidOffsetError):
    """A replicated batch whose offsets do not strictly increase."""


# -- configuration and results -----------------------------------------------------------------


def _default(topic_key: str) -> Any:
    return TOPIC_KEYS[topic_key].default


_FIELD_OF_KEY = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "segment_index_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
    "min.insync.replicas": "min_insync_replicas",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """A topic's log settings; fields mirror Kafka's topic-level keys (segment.bytes, ...)."""

    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    index_interval_bytes: int = _default("index.interval.bytes")
    segment_index_bytes: int = _default("segment.index.bytes")
    retention_ms: int = _default("retention.ms")
    """-1 keeps segments forever."""
    retention_bytes: int = _default("retention.bytes")
    """-1 means no size limit."""
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    max_message_bytes: int = _default("max.message.bytes")
    min_insync_replicas: int = _default("min.insync.replicas")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")

    def __post_init__(self) -> None:
        minimums = {
            "segment_bytes": 1,
            "segment_ms": 1,
            "index_interval_bytes": 0,
            "segment_index_bytes": 24,
            "retention_ms": -1,
            "retention_bytes": -1,
            "flush_messages": 1,
            "flush_ms": 0,
            "max_message_bytes": record.MIN_BATCH_BYTES,
            "min_insync_replicas": 1,
        }
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if value < minimum:
                key = next(k for k, f in _FIELD_OF_KEY.items() if f == name)
                raise ConfigError(f"{key}={value} is below its minimum {minimum}")

    @classmethod
    def from_mapping(
        cls, values: Mapping[str, object], *, source: str = "topic config"
    ) -> LogConfig:
        """From topic-level keys (``broker.topic_defaults() | overrides``); missing keys default."""
        resolved = resolve_topic_config(values, source)
        return cls(**{_FIELD_OF_KEY[k]: v for k, v in resolved.items() if v is not None})

    def to_mapping(self) -> dict[str, object]:
        """The settings under their topic-level key names."""
        return {key: getattr(self, name) for key, name in _FIELD_OF_KEY.items()}


assert {f.name for f in fields(LogConfig)} == set(_FIELD_OF_KEY.values())


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Where an append put a batch."""

    first_offset: int
    last_offset: int
    count: int
    max_timestamp: int
    size: int
    log_append_time: int | None = None
    """Kafka's LogAppendTime; None because records keep their CreateTime timestamps."""
    duplicate: bool = False
    """An idempotent producer's batch already written: nothing was appended, and the
    offsets are those of its first write."""


@dataclass(frozen=True, slots=True)
class FetchData:
    """The result of a read: whole batches, the first of which has base offset first_offset."""

    records: bytes
    first_offset: int


# -- the log -----------------------------------------------------------------------------------


class Log:
    """One partition's segments in ``<log dir>/<topic>-<partition>/``. Open with ``Log.open``."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        recovery_point: int,
        clock: Callable[[], int],
        recovery_report: RecoveryReport,
    ) -> None:
        self.dir = directory
        self.config = config
        self.recovery_report = recovery_report
        """What loading the directory changed (truncations, rebuilt indexes, removed files)."""
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._clock = clock
        self._recovery_point = max(self.log_start_offset, min(recovery_point, self.log_end_offset))
        self._unflushed_messages = 0
        self._first_unflushed_ms: int | None = None
        self._dir_dirty = False
        self._closed = False
        active = segments[-1]
        if active.size:
            active.rolling_base_ms = active.first_timestamp()
        self.producer_state = ProducerStateManager(directory)
        """The idempotent producers of this partition, as of the log end."""

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int,
        clean_shutdown: bool,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> Log:
        """Load (or create) the log in directory.

        After an unclean shutdown every segment from the one holding recovery_point on is
        revalidated and the log cut to its longest valid prefix (see ``recovery``); the
        recovered data is then fsynced, so the recovery point is the log end offset.
        """
        directory = Path(directory)
        segments, report = load_segments(
            directory,
            index_size=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
            recovery_point=recovery_point,
            clean_shutdown=clean_shutdown,
        )
        log = cls(
            directory,
            config,
            segments,
            recovery_point=recovery_point,
            clock=clock,
            recovery_report=report,
        )
        if not clean_shutdown or report.recovered or report.removed_files:
            log._dir_dirty = True
        for segment in segments:
            segment.flush()
        log.flush()
        log._load_producer_state()
        return log

    # -- state -------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (LEO)."""
        return self._segments[-1].next_offset

    @property
    def log_start_offset(self) -> int:
        """The first offset the log holds (the base offset of the oldest segment)."""
        return self._segments[0].base_offset

    @property
    def recovery_point(self) -> int:
        """Every record below this offset is fsynced."""
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments, oldest first; the last one is the active segment."""
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def _segment_index(self, offset: int) -> int:
        """Index of the segment that holds offset (the last with base offset <= offset)."""
        return max(0, bisect_right(self._bases, offset) - 1)

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"log {self.dir} is closed")

    # -- appending ---------------------------------------------------------------------------

    def append(
        self,
        batch: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int = -1,
    ) -> AppendInfo:
        """Validate and append record batches (end to end) with one write.

        assign_offsets (a leader) rewrites the batches' base offsets from the LEO and their
        partition leader epochs to leader_epoch in place, so batch must be a bytearray;
        otherwise (a follower) the batches' offsets must start at the LEO and be consecutive.
        Nothing is written if any batch is invalid or too large.
        """
        self._check_open()
        log_end = self.log_end_offset
        if assign_offsets:
            if not isinstance(batch, bytearray | memoryview) or (
                isinstance(batch, memoryview) and batch.readonly
            ):
                raise TypeError(
                    "append with assign_offsets rewrites offsets in place: pass a bytearray "
                    "or a writable memoryview"
                )
            info = record.assign_offsets(batch, log_end, leader_epoch=leader_epoch)
        else:
            info = self._validate_replicated(batch, log_end)
        if info.max_batch_size > self.config.max_message_bytes:
            self._check_batch_sizes(batch)
        produced = [_producer_batch(found) for found in info.producers]
        if produced and assign_offsets:
            duplicate = self._check_producers(produced, info)
            if duplicate is not None:
                return AppendInfo(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    duplicate.last_offset - duplicate.first_offset + 1,
                    duplicate.max_timestamp,
                    0,
                    duplicate=True,
                )
        now = self._clock()
        segment = self._segment_for(info, now)
        if segment.size == 0:
            segment.rolling_base_ms = now
        segment.append(batch, info, index_interval_bytes=self.config.index_interval_bytes)
        for produced_batch in produced:
            self.producer_state.update(produced_batch)
        self.producer_state.end_offset = self.log_end_offset
        self._unflushed_messages += info.count
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
        return AppendInfo(
            info.first_offset, info.last_offset, info.count, info.max_timestamp, info.size
        )

    def _validate_replicated(
        self, batch: bytes | bytearray | memoryview, log_end: int
    ) -> BatchInfo:
        try:
            info = record.validate_records(batch)
        except CorruptRecordError as err:
            if record.valid_prefix_length(batch) == len(batch):
                raise NonMonotonicOffsetError(
                    f"replicated batches for {self.dir.name} do not have consecutive offsets "
                    f"({err.reason}); the leader's log or the fetch response is damaged"
                ) from err
            raise
        if info.first_offset != log_end:
            raise InvalidOffsetError(
                f"replicated batch for {self.dir.name} starts at offset {info.first_offset} but "
                f"the log end offset is {log_end}; fetch from {log_end}, or truncate the log "
                f"first if it has diverged from the leader"
            )
        if info.last_offset - info.first_offset + 1 != info.count:
            raise InvalidOffsetError(
                f"replicated batch for {self.dir.name} has offsets {info.first_offset} to "
                f"{info.last_offset} in {info.count} records; offsets must be consecutive"
            )
        return info

    def _check_producers(
        self, produced: list[ProducerBatch], info: BatchInfo
    ) -> ProducerBatch | None:
        """Kafka's sequence checks for an idempotent producer's batches, before a leader
        appends them: the batch already written that a lone batch repeats (append nothing),
        else None; BrokerError with Kafka's code when they are refused."""
        last_in_append: dict[int, ProducerBatch] = {}
        for produced_batch in produced:
            before = last_in_append.get(produced_batch.producer_id)
            if before is None:
                duplicate = self.producer_state.check(produced_batch)
                if duplicate is not None:
                    if info.batches == 1:
                        return duplicate
                    raise BrokerError(
                        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                        f"producer {produced_batch.producer_id} repeated sequences "
                        f"{produced_batch.first_sequence}-{produced_batch.last_sequence} among "
                        f"other batches; nothing was written",
                    )
            elif produced_batch.epoch != before.epoch or not in_sequence(
                before.last_sequence, produced_batch.first_sequence
            ):
                raise BrokerError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {produced_batch.producer_id}'s batches in one append do not "
                    f"follow each other (sequence {produced_batch.first_sequence} after "
                    f"{before.last_sequence}); nothing was written",
                )
            last_in_append[produced_batch.producer_id] = produced_batch
        return None

    def _load_producer_state(self) -> None:
        """Rebuild the producer state as of the log end: the newest snapshot at or below it,
        then the batches after the snapshot, read from the log."""
        state = self.producer_state
        start = max(state.load(self.log_end_offset), self.log_start_offset)
        state.replay(self._producer_batches(start), self.log_end_offset)

    def _producer_batches(self, offset: int) -> Iterator[ProducerBatch]:
        """The batches of idempotent producers from ``offset`` to the log end."""
        while offset < self.log_end_offset:
            data = self.read(offset, 1 << 20).records
            if not data:
                return
            for found in iter_batches(data, check_crc=False):
                if found.last_offset >= offset and found.producer_id != NO_PRODUCER_ID:
                    yield _producer_batch(found)
                offset = found.last_offset + 1

    def _check_batch_sizes(self, batch: bytes | bytearray | memoryview) -> None:
        """Raise RecordTooLargeError for the first batch above max.message.bytes."""
        limit = self.config.max_message_bytes
        for found in iter_batches(batch, check_crc=False):
            if found.size > limit:
                raise RecordTooLargeError(found.size, limit, found.position)

    def _segment_for(self, info: BatchInfo, now: int) -> LogSegment:
        """The active segment, rolled first if the batch must go into a new one."""
        active = self._segments[-1]
        if active.size == 0:
            return active
        config = self.config
        if (
            active.size + info.size > config.segment_bytes
            or (
                active.rolling_base_ms is not None
                and now - active.rolling_base_ms > config.segment_ms
            )
            or active.offset_index.is_full
            or active.time_index.is_full
            or not active.can_hold(info)
        ):
            return self.roll()
        return active

    def roll(self) -> LogSegment:
        """Start a new active segment at the LEO and fsync the old one (no-op if empty)."""
        self._check_open()
        active = self._segments[-1]
        if active.size == 0:
            return active
        active.on_become_inactive()
        segment = LogSegment.create(
            self.dir, self.log_end_offset, index_size=self.config.segment_index_bytes
        )
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self._dir_dirty = True
        self.flush()
        self.producer_state.take_snapshot()
        return segment

    # -- flushing ----------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything appended since the recovery point; the recovery point becomes the LEO."""
        self._check_open()
        active = self._segments[-1]
        for segment in self._segments[self._segment_index(self._recovery_point) :]:
            segment.flush(indexes=segment is not active)
        if self._dir_dirty:
            fsync_directory(self.dir)
            self._dir_dirty = False
        self._recovery_point = self.log_end_offset
        self._unflushed_messages = 0
        self._first_unflushed_ms = None

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if the oldest unflushed data is at least flush.ms old; return whether it did."""
        first = self._first_unflushed_ms
        if first is None or now_ms - first < self.config.flush_ms:
            return False
        self.flush()
        return True

    # -- reading -----------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_record: bool = True,
    ) -> FetchData:
        """Whole batches from the one holding offset: at most max_bytes, none holding an offset
        at or beyond max_offset. The first batch may start below offset (readers skip what
        they did not ask for, as Kafka's clients do).

        With min_one_record the first batch is returned even if larger than max_bytes (KIP-74).
        A read stops at the end of the segment holding offset, as Kafka's does; the next read
        continues in the next segment. offset == LEO gives no records.
        """
        self._check_open()
        log_start, log_end = self.log_start_offset, self.log_end_offset
        if offset < log_start or offset > log_end:
            raise OffsetOutOfRangeError(offset, log_start, log_end)
        if offset == log_end or (max_offset is not None and offset >= max_offset):
            return FetchData(b"", offset)
        segments = self._segments
        for i in range(self._segment_index(offset), len(segments)):
            segment = segments[i]
            if max_offset is not None and segment.base_offset >= max_offset:
                break
            found = segment.read(
                offset, max_bytes, max_offset=max_offset, min_one_record=min_one_record
            )
            if found is not None:
                data, first_offset = found
                return FetchData(data, first_offset if data else offset)
        return FetchData(b"", offset)

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset whose record timestamp is >= timestamp; None if there is none."""
        self._check_open()
        start = self.log_start_offset
        for segment in self._segments:
            if segment.max_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, start)
                if found is not None:
                    return found
        return None

    # -- truncation and retention ------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or after offset (a follower discarding a diverged suffix).

        Batches are removed whole, as Kafka's are: when offset falls inside one, the log
        ends at that batch's base offset, below offset.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate {self.dir.name} to negative offset {offset}")
        if offset >= self.log_end_offset:
            return
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        i = self._segment_index(offset)
        self._delete_segments(self._segments[i + 1 :], newest_first=True)
        active = self._segments[i]
        removed = active.truncate_to(offset)
        if active.size and active.rolling_base_ms is None:  # an older segment is active again
            active.rolling_base_ms = active.first_timestamp()
        logger.info(
            "%s: truncated to offset %d (%d bytes removed from the last segment)",
            self.dir,
            offset,
            removed,
        )
        self._make_cut_durable()
        self._recovery_point = min(self._recovery_point, self.log_end_offset)
        self._unflushed_messages = self.log_end_offset - self._recovery_point
        if not self._unflushed_messages:
            self._first_unflushed_ms = None
        self._load_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at offset."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot start {self.dir.name} at negative offset {offset}")
        self._delete_segments(list(self._segments), newest_first=True)
        segment = LogSegment.create(self.dir, offset, index_size=self.config.segment_index_bytes)
        self._segments = [segment]
        self._bases = [offset]
        self._recovery_point = offset
        self._unflushed_messages = 0
        self._first_unflushed_ms = None
        self._make_cut_durable()
        self.producer_state.clear(offset)
        logger.info("%s: truncated fully, starting at offset %d", self.dir, offset)

    def _make_cut_durable(self) -> None:
        """fsync a truncation: the cut file and the directory that lost segments.

        Whatever the flush policy, a cut must not be undone by a power loss: the leader
        epoch checkpoint written after it describes the shorter log, so records that came
        back would sit under a later epoch's name, and the next OffsetForLeaderEpoch could
        not find them (our log is stricter than Kafka here, whose truncateTo does not fsync).
        """
        self._segments[-1].flush()
        if self._dir_dirty:
            fsync_directory(self.dir)
            self._dir_dirty = False

    def delete_old_segments(self, now_ms: int) -> int:
        """Apply retention.ms, then retention.bytes, to inactive segments; return how many went."""
        self._check_open()
        config = self.config
        inactive = self._segments[:-1]
        doomed = 0
        if config.retention_ms >= 0:
            while (
                doomed < len(inactive)
                and now_ms - inactive[doomed].largest_timestamp > config.retention_ms
            ):
                doomed += 1
        if config.retention_bytes >= 0:
            excess = self.size - config.retention_bytes - sum(s.size for s in inactive[:doomed])
            while doomed < len(inactive) and excess - inactive[doomed].size >= 0:
                excess -= inactive[doomed].size
                doomed += 1
        if doomed:
            self._delete_segments(inactive[:doomed], newest_first=False)
            self._recovery_point = max(self._recovery_point, self.log_start_offset)
            logger.info(
                "%s: retention deleted %d segment(s); log start offset %d",
                self.dir,
                doomed,
                self.log_start_offset,
            )
        return doomed

    def _delete_segments(self, doomed: list[LogSegment], *, newest_first: bool) -> None:
        """Remove segments from the list and the disk; the order keeps a crash's leftovers contiguous."""
        if not doomed:
            return
        gone = {id(s) for s in doomed}
        self._segments = [s for s in self._segments if id(s) not in gone]
        self._bases = [s.base_offset for s in self._segments]
        for segment in reversed(doomed) if newest_first else doomed:
            segment.delete()
        self._dir_dirty = True

    # -- lifecycle ---------------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        """Use new settings from the next append on (index sizes apply to new segments)."""
        self.config = config

    def close(self) -> None:
        """Flush, write the active segment's final time index entry, fsync it, close the files."""
        if self._closed:
            return
        self.flush()
        self.producer_state.take_snapshot()
        active = self._segments[-1]
        active.on_become_inactive()
        active.flush()
        for segment in self._segments:
            segment.close()
        self._closed = True

    def delete(self) -> None:
        """Close without flushing and remove the partition directory."""
        if not self._closed:
            for segment in self._segments:
                segment.close()
            self._closed = True
        doomed = self.dir.with_name(f"{self.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.rename(self.dir, doomed)
        fsync_directory(doomed.parent)
        shutil.rmtree(doomed)

    def __repr__(self) -> str:
        return (
            f"Log({self.dir}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self._segments)})"
        )


def _producer_batch(found: BatchPosition) -> ProducerBatch:
    """What the producer state keeps of an idempotent producer's batch."""
    count = found.last_offset - found.base_offset + 1
    return ProducerBatch(
        producer_id=found.producer_id,
        epoch=found.producer_epoch,
        first_sequence=found.base_sequence,
        last_sequence=(found.base_sequence + count - 1) % (MAX_SEQUENCE + 1),
        first_offset=found.base_offset,
        last_offset=found.last_offset,
        max_timestamp=found.max_timestamp,
    )
