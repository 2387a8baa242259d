"""What a lazy disk holds unsynced, and what a drop took: the answers of the node-side
daemon, read the same way by squall on the control side (standard library only)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Unsynced:
    """What a drop would take away now."""

    files: int
    """Files whose contents or size changed since their last fsync."""
    bytes: int
    """Bytes written past the synced size, or overwritten or cut below it."""
    directories: int
    """Directories whose entries changed since their last fsync."""
    entries: int
    """Entries a drop would remove, bring back or point to another file."""

    def to_json(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class Dropped:
    """What a drop took away."""

    files: int
    """Files put back to their last fsynced contents and size (some may have gone since)."""
    bytes: int
    """Unsynced bytes discarded."""
    entries_removed: int
    """Entries created or renamed into place since their directory's fsync, now gone."""
    entries_restored: int
    """Entries removed or renamed away since their directory's fsync, now back."""

    def to_json(self) -> dict[str, int]:
        return asdict(self)
