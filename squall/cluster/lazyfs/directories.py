"""What directories listed at their last fsync, and the graveyard that keeps what a drop may
have to bring back.

A directory is clean until its first change after an fsync (or after the mount, when
everything on the backing directory counts as durable). Before that change its listing
(name -> inode) is snapshotted and the directory opened, so it can be found again however it
is renamed or moved. An entry removed or replaced while a snapshot still names its inode is
not deleted but moved into the graveyard, a hidden directory on the same backing
filesystem, under its inode number; entries no snapshot names are deleted at once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections import Counter
from dataclasses import dataclass, field

GRAVEYARD = ".lazyfs-graveyard"
"""Hidden at the root of the mount; it lives in the backing directory itself so that moving an
entry there is a rename on one filesystem."""


@dataclass
class DirectorySnapshot:
    """A changed directory: its listing at its last fsync, and an open descriptor of it."""

    fd: int
    entries: dict[str, int]
    """name -> inode number at the last fsync."""


def listing(fd: int, *, hide: str | None = None) -> dict[str, int]:
    """name -> inode number of the directory open at ``fd``."""
    names = {}
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.name != hide:
                names[entry.name] = entry.inode()
    return names


@dataclass
class DirectoryJournal:
    """The snapshots of every directory changed since its last fsync, by inode number."""

    root_ino: int
    graveyard_fd: int
    snapshots: dict[int, DirectorySnapshot] = field(default_factory=dict)
    named: Counter[int] = field(default_factory=Counter)
    """How many snapshots name each inode: those inodes must outlive their removal."""

    def _hide(self, ino: int) -> str | None:
        return GRAVEYARD if ino == self.root_ino else None

    def before_change(self, directory: str) -> None:
        """Snapshot ``directory`` (a backing path) unless it changed before since its fsync."""
        ino = os.lstat(directory).st_ino
        if ino in self.snapshots:
            return
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            entries = listing(fd, hide=self._hide(ino))
        except BaseException:
            os.close(fd)
            raise
        self.snapshots[ino] = DirectorySnapshot(fd, entries)
        self.named.update(entries.values())

    def must_keep(self, ino: int) -> bool:
        """Whether a snapshot names this inode, so that removing it must be undoable."""
        return self.named[ino] > 0

    def bury(self, path: str, ino: int) -> None:
        """Move ``path`` (a backing path, its inode ``ino``) into the graveyard."""
        os.rename(path, str(ino), dst_dir_fd=self.graveyard_fd)

    def discard(self, ino: int) -> int:
        """Forget the snapshot of directory ``ino``: it was fsynced (its listing is durable),
        or deleted for good. Graveyard
        entries no snapshot names any more are deleted. How many."""
        snapshot = self.snapshots.pop(ino, None)
        if snapshot is None:
            return 0
        os.close(snapshot.fd)
        self.named.subtract(snapshot.entries.values())
        deleted = 0
        for child in snapshot.entries.values():
            if self.named[child] <= 0:
                self.named.pop(child, None)
                if self._delete_buried(child):
                    deleted += 1
        return deleted

    def _delete_buried(self, ino: int) -> bool:
        try:
            _delete(str(ino), self.graveyard_fd)
        except FileNotFoundError:
            return False
        return True

    def changed_entries(self) -> int:
        """Entries a drop would remove, bring back or point elsewhere, over all directories."""
        changed = 0
        for ino, snapshot in self.snapshots.items():
            now = listing(snapshot.fd, hide=self._hide(ino))
            changed += sum(1 for n in now if snapshot.entries.get(n) != now[n])
            changed += sum(1 for n in snapshot.entries if n not in now)
        return changed

    def restore(self) -> tuple[int, int]:
        """Every changed directory back to its snapshot: entries made since are deleted,
        entries removed or renamed since come back. (removed, restored) entry counts.

        Everything now in a changed directory goes to the graveyard first (a directory keeps
        its subtree, and descriptors follow moves), then each snapshot's entries are moved
        back; what is left in the graveyard was never durable and is deleted. An entry of a
        snapshot found nowhere in the graveyard was moved into a directory fsynced since: it
        stays there.
        """
        before = {ino: listing(s.fd, hide=self._hide(ino)) for ino, s in self.snapshots.items()}
        for ino, names in before.items():
            fd = self.snapshots[ino].fd
            for name, child in names.items():
                os.rename(name, str(child), src_dir_fd=fd, dst_dir_fd=self.graveyard_fd)
        restored = 0
        for snapshot in self.snapshots.values():
            for name, child in snapshot.entries.items():
                with contextlib.suppress(FileNotFoundError):
                    os.rename(
                        str(child), name, src_dir_fd=self.graveyard_fd, dst_dir_fd=snapshot.fd
                    )
                    restored += 1
        removed = 0
        for ino, snapshot in self.snapshots.items():
            now = before[ino]
            removed += sum(1 for n in now if snapshot.entries.get(n) != now[n])
            restored -= sum(1 for n in snapshot.entries if now.get(n) == snapshot.entries[n])
        self.empty_graveyard()
        self.forget()
        return removed, restored

    def empty_graveyard(self) -> None:
        """Delete everything in the graveyard (nothing there is durable any more)."""
        for name in os.listdir(self.graveyard_fd):
            _delete(name, self.graveyard_fd)

    def forget(self) -> None:
        for snapshot in self.snapshots.values():
            os.close(snapshot.fd)
        self.snapshots.clear()
        self.named.clear()


def _delete(name: str, dir_fd: int) -> None:
    """Delete the file or directory tree ``name`` in the directory open at ``dir_fd``."""
    if stat.S_ISDIR(os.lstat(name, dir_fd=dir_fd).st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)
