"""What one file looked like at its last fsync: its size and the pre-images of the bytes
overwritten or truncated away since.

Writes go to the backing file at once; before a write or a truncate changes a byte that the
last fsync made durable, that byte's old value is saved here (the first time only). Undoing
is then: truncate the file to its synced size, put the saved bytes back. An append past the
synced size saves nothing, so the common case (a log growing at its end) costs no copy.

Invariant: every byte below ``synced_size`` is either unchanged in the backing file since
the last fsync, or saved here.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from dataclasses import dataclass, field

Reader = Callable[[int, int], bytes]
"""``read(offset, length)``: the backing file's current bytes (fewer at its end)."""


@dataclass
class FileJournal:
    """The unsynced changes of one file since its last fsync."""

    synced_size: int
    """The file's size at its last fsync (0 for a file created since)."""
    starts: list[int] = field(default_factory=list)
    """Start offsets of the saved pre-images, sorted; they never overlap."""
    images: list[bytes] = field(default_factory=list)
    """The saved bytes, one per start."""

    def before_write(self, offset: int, length: int, read: Reader) -> None:
        """Save what a write of ``length`` bytes at ``offset`` is about to overwrite."""
        self._save(offset, offset + length, read)

    def before_truncate(self, length: int, current_size: int, read: Reader) -> None:
        """Save what truncating a file of ``current_size`` bytes to ``length`` cuts off.
        Bytes between the current and the synced size were saved when they were cut."""
        self._save(length, current_size, read)

    def _save(self, start: int, end: int, read: Reader) -> None:
        end = min(end, self.synced_size)
        for gap_start, gap_end in self.gaps(start, end):
            data = read(gap_start, gap_end - gap_start)
            if len(data) != gap_end - gap_start:
                raise OSError(
                    f"pre-image of bytes {gap_start}..{gap_end}: read {len(data)} bytes, the "
                    "file is shorter than the journal says"
                )
            at = bisect.bisect_left(self.starts, gap_start)
            self.starts.insert(at, gap_start)
            self.images.insert(at, data)

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` not saved yet."""
        if start >= end:
            return []
        gaps = []
        cursor = start
        at = max(0, bisect.bisect_right(self.starts, start) - 1)
        while at < len(self.starts) and cursor < end:
            saved_start = self.starts[at]
            saved_end = saved_start + len(self.images[at])
            if saved_end <= cursor:
                at += 1
                continue
            if saved_start >= end:
                break
            if saved_start > cursor:
                gaps.append((cursor, saved_start))
            cursor = max(cursor, saved_end)
            at += 1
        if cursor < end:
            gaps.append((cursor, end))
        return gaps

    @property
    def saved_bytes(self) -> int:
        return sum(len(image) for image in self.images)

    def unsynced_bytes(self, current_size: int) -> int:
        """Bytes a drop would change: those saved, and those past the synced size."""
        return self.saved_bytes + max(0, current_size - self.synced_size)

    def restore(self, fd: int) -> None:
        """Put the file open at ``fd`` back to its synced contents and size."""
        os.ftruncate(fd, self.synced_size)
        for start, image in zip(self.starts, self.images, strict=True):
            os.pwrite(fd, image, start)
