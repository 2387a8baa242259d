"""Idempotent producers' state in one partition: who wrote, in which epoch, and the sequence
numbers of their last batches, so that a leader can refuse a batch out of order and answer a
retried one with the offsets it was first written at, instead of writing it twice.

As Kafka's ZooKeeper era (2.4) does it:

- A producer id's batches carry its epoch and a sequence number per partition, counted from 0
  and wrapping after 2**31 - 1. The leader accepts the next sequence after the producer's last
  one, a batch of a newer epoch only from sequence 0, and a producer it has no state for only
  from sequence 0 (UNKNOWN_PRODUCER_ID otherwise: its batches were truncated or deleted away).
- A batch whose sequence range equals one of the producer's last five in the same epoch is a
  duplicate: it is not appended again, and the produce is answered with the first write's
  offsets. Any other batch at or below the last sequence is OUT_OF_ORDER_SEQUENCE_NUMBER, and
  an epoch older than the producer's INVALID_PRODUCER_EPOCH.
- Followers append what their leader wrote without these checks, and keep the same state.
- The state is rebuilt from the log: snapshots (``<offset>.snapshot``, the state of every
  producer up to that offset) are taken when a segment rolls and when the log closes; a log
  that opens, or truncates, loads the newest snapshot at or below its end and replays the
  batches after it (``ProducerStateManager.replay_from`` tells from where).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.log.checkpoint import replace_file

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
BATCHES_RETAINED = 5
"""How many of a producer's last batches a partition remembers (Kafka's five: a producer keeps
at most five requests in flight per partition with idempotence on)."""
MAX_SEQUENCE = 2**31 - 1

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
SNAPSHOTS_KEPT = 2
_SNAPSHOT_HEAD = struct.Struct(">hI")  # version, CRC-32C of the body (the count and entries)
_SNAPSHOT_COUNT = struct.Struct(">i")
_SNAPSHOT_ENTRY = struct.Struct(">qhiiqqq")
# producer id, epoch, first and last sequence, first and last offset, max timestamp


class CorruptSnapshotError(ValueError):
    """A producer state snapshot whose length, version or CRC is wrong."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(
            f"producer state snapshot {path}: {problem}; it is skipped and the state is "
            "rebuilt from the log before it"
        )
        self.path = path


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """What a partition keeps of one batch of an idempotent producer."""

    producer_id: int
    epoch: int
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int

    def same_range(self, other: ProducerBatch) -> bool:
        return (self.epoch, self.first_sequence, self.last_sequence) == (
            other.epoch,
            other.first_sequence,
            other.last_sequence,
        )


@dataclass(slots=True)
class ProducerEntry:
    """One producer id's epoch and last batches in this partition, oldest first."""

    producer_id: int
    epoch: int
    batches: deque[ProducerBatch] = field(default_factory=lambda: deque(maxlen=BATCHES_RETAINED))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def duplicate_of(self, batch: ProducerBatch) -> ProducerBatch | None:
        """The batch already written with ``batch``'s epoch and sequence range, if any."""
        return next((b for b in self.batches if b.same_range(batch)), None)


def in_sequence(last: int, following: int) -> bool:
    """Whether ``following`` is the sequence right after ``last`` (wrapping at 2**31 - 1)."""
    return following == last + 1 or (following == 0 and last == MAX_SEQUENCE)


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    """The idempotent producers of one partition, as of ``end_offset`` (the log's end once
    every batch appended has gone through ``update``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._producers: dict[int, ProducerEntry] = {}
        self.end_offset = 0

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def check(self, batch: ProducerBatch) -> ProducerBatch | None:
        """Validate a client's batch before the leader appends it (its offsets not yet
        assigned): the batch it duplicates (already written: answer with its offsets, append
        nothing), or None to append it. BrokerError with Kafka's code when it is refused."""
        entry = self._producers.get(batch.producer_id)
        if entry is None:
            if batch.first_sequence != 0:
                raise BrokerError(
                    ErrorCode.UNKNOWN_PRODUCER_ID,
                    f"no state for producer {batch.producer_id} in this partition, whose first "
                    f"batch here has sequence {batch.first_sequence}, not 0: its earlier "
                    "batches were truncated or deleted away",
                )
            return None
        if batch.epoch < entry.epoch:
            raise BrokerError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {batch.producer_id} wrote with epoch {batch.epoch}, older than its "
                f"epoch {entry.epoch} here: a fenced producer",
            )
        duplicate = entry.duplicate_of(batch)
        if duplicate is not None:
            return duplicate
        if batch.epoch > entry.epoch:
            if batch.first_sequence != 0:
                raise BrokerError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {batch.producer_id}'s first batch in its new epoch "
                    f"{batch.epoch} has sequence {batch.first_sequence}, not 0",
                )
            return None
        if not in_sequence(entry.last_sequence, batch.first_sequence):
            raise BrokerError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {batch.producer_id} epoch {batch.epoch} sent sequence "
                f"{batch.first_sequence}, but its last batch here ended at sequence "
                f"{entry.last_sequence}",
            )
        return None

    def update(self, batch: ProducerBatch) -> None:
        """Record a batch written to the log (by this leader, or fetched from one)."""
        entry = self._producers.get(batch.producer_id)
        if entry is None or batch.epoch > entry.epoch:
            entry = ProducerEntry(batch.producer_id, batch.epoch)
            self._producers[batch.producer_id] = entry
        entry.batches.append(batch)
        self.end_offset = max(self.end_offset, batch.last_offset + 1)

    # -- snapshots ----------------------------------------------------------------------------

    def snapshots(self) -> list[int]:
        """The offsets of the snapshots on disk, oldest first."""
        offsets = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            stem = path.name.removesuffix(SNAPSHOT_SUFFIX)
            if stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def take_snapshot(self) -> Path:
        """Write the state as of ``end_offset`` (replacing a snapshot of that offset), keep the
        newest ``SNAPSHOTS_KEPT``."""
        path = snapshot_path(self.directory, self.end_offset)
        body = bytearray(
            _SNAPSHOT_COUNT.pack(sum(len(e.batches) for e in self._producers.values()))
        )
        for entry in self._producers.values():
            for b in entry.batches:
                body += _SNAPSHOT_ENTRY.pack(
                    b.producer_id,
                    b.epoch,
                    b.first_sequence,
                    b.last_sequence,
                    b.first_offset,
                    b.last_offset,
                    b.max_timestamp,
                )
        replace_file(path, _SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + body)
        for old in self.snapshots()[:-SNAPSHOTS_KEPT]:
            snapshot_path(self.directory, old).unlink(missing_ok=True)
        return path

    def clear(self, end_offset: int) -> None:
        """Forget every producer and delete every snapshot: the log was emptied and starts
        again at ``end_offset`` (Kafka's truncateFullyAndStartAt)."""
        self._producers.clear()
        for offset in self.snapshots():
            snapshot_path(self.directory, offset).unlink(missing_ok=True)
        self.end_offset = end_offset

    def load(self, log_end_offset: int) -> int:
        """Forget everything, delete snapshots beyond ``log_end_offset`` (their batches are
        gone), and load the newest readable snapshot at or below it; the offset from which
        the log's batches must be replayed through ``update``."""
        self._producers.clear()
        self.end_offset = 0
        for offset in reversed(self.snapshots()):
            path = snapshot_path(self.directory, offset)
            if offset > log_end_offset:
                path.unlink(missing_ok=True)
                continue
            try:
                batches = list(_read_snapshot(path))
            except CorruptSnapshotError:
                path.unlink(missing_ok=True)
                continue
            for batch in batches:
                self.update(batch)
            self.end_offset = offset
            return offset
        return 0

    def replay(self, batches: Iterable[ProducerBatch], log_end_offset: int) -> None:
        """Apply the log's batches after the loaded snapshot, up to its end."""
        for batch in batches:
            self.update(batch)
        self.end_offset = log_end_offset


def _read_snapshot(path: Path) -> Iterator[ProducerBatch]:
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEAD.size + _SNAPSHOT_COUNT.size:
        raise CorruptSnapshotError(path, f"{len(data)} bytes, shorter than its header")
    version, crc = _SNAPSHOT_HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(path, f"version {version}, not {SNAPSHOT_VERSION}")
    body = data[_SNAPSHOT_HEAD.size :]
    if crc32c.crc32c(body) != crc:
        raise CorruptSnapshotError(path, "its CRC-32C does not match its contents")
    (count,) = _SNAPSHOT_COUNT.unpack_from(body)
    if count < 0 or len(body) != _SNAPSHOT_COUNT.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(path, f"{len(body)} bytes do not hold {count} entries")
    for i in range(count):
        yield ProducerBatch(
            *_SNAPSHOT_ENTRY.unpack_from(body, _SNAPSHOT_COUNT.size + i * _SNAPSHOT_ENTRY.size)
        )
