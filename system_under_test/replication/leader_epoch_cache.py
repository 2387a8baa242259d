"""The leader epoch cache of one partition (KIP-101): which epoch began at which offset.

Each entry ``(epoch, start_offset)`` says that the leader of ``epoch`` appended its first
record at ``start_offset``. A follower that becomes follower again asks the leader for the
end offset of its own latest epoch and truncates there, instead of to its high watermark,
which is what lost acknowledged data before Kafka 0.11. Persisted in the partition
directory's ``leader-epoch-checkpoint``.
"""

from __future__ import annotations

import threading
from pathlib import Path

from system_under_test.log.checkpoint import LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
CHECKPOINT_NAME = "leader-epoch-checkpoint"


class LeaderEpochCache:
    """Epoch start offsets, strictly increasing in both epoch and offset."""

    def __init__(self, partition_dir: Path | None) -> None:
        self._file = (
            LeaderEpochCheckpointFile(partition_dir / CHECKPOINT_NAME) if partition_dir else None
        )
        self._lock = threading.Lock()
        self._entries: list[tuple[int, int]] = []
        if self._file is not None and self._file.path.exists():
            self._entries = list(self._file.read())

    @property
    def entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        with self._lock:
            return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def start_offset_of_latest_epoch(self) -> int:
        with self._lock:
            return self._entries[-1][1] if self._entries else UNDEFINED_OFFSET

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; entries it contradicts go."""
        with self._lock:
            if self._entries and self._entries[-1][0] == epoch:
                return
            if self._entries and epoch < self._entries[-1][0]:
                return
            self._entries = [(e, o) for e, o in self._entries if e < epoch and o < start_offset]
            self._entries.append((epoch, start_offset))
            self._flush()

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch in which ``offset`` was written (per this cache)."""
        with self._lock:
            epoch = UNDEFINED_EPOCH
            for e, start in self._entries:
                if start <= offset:
                    epoch = e
                else:
                    break
            return epoch

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """KIP-101/KIP-279: (largest epoch <= requested, the offset where it ended).

        The end of an epoch is the start of the next higher one, or the log end offset for
        the latest epoch. An epoch older than every known one ends where the first known
        epoch starts (as Kafka answers: what this log held of it is gone, so a follower
        must truncate there, not keep what it had); an empty cache gives (UNDEFINED_EPOCH,
        UNDEFINED_OFFSET).
        """
        with self._lock:
            if not self._entries:
                return UNDEFINED_EPOCH, UNDEFINED_OFFSET
            if requested_epoch < self._entries[0][0]:
                return requested_epoch, self._entries[0][1]
            if requested_epoch >= self._entries[-1][0]:
                return self._entries[-1][0], log_end_offset
            found = UNDEFINED_EPOCH
            for index, (epoch, _start) in enumerate(self._entries):
                if epoch > requested_epoch:
                    return found, self._entries[index][1]
                found = epoch
            return found, log_end_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: epochs starting at or after it go."""
        with self._lock:
            kept = [(e, o) for e, o in self._entries if o < end_offset]
            if kept != self._entries:
                self._entries = kept
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Old segments were deleted: the epoch covering ``start_offset`` now starts there."""
        with self._lock:
            older = [(e, o) for e, o in self._entries if o <= start_offset]
            newer = [(e, o) for e, o in self._entries if o > start_offset]
            if older:
                newer.insert(0, (older[-1][0], start_offset))
            if newer != self._entries:
                self._entries = newer
                self._flush()

    def clear(self) -> None:
        with self._lock:
            self._entries = []
            self._flush()

    def _flush(self) -> None:
        if self._file is not None:
            self._file.write(self._entries)
