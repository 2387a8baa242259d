"""The FUSE filesystem: a passthrough over a backing directory that can forget, on command,
everything not fsynced, as a power loss would.

Reads and writes go to the backing files at once (the kernel's page cache of the backing
filesystem serves reads); what a drop must undo is journalled beside them: per file, the
size at its last fsync and the pre-images of the bytes overwritten or cut since
(``journal.FileJournal``); per directory, its listing at its last fsync, with removed entries
kept in a hidden graveyard while a snapshot names them (``directories.DirectoryJournal``).
``drop()`` puts every file back to its last fsynced contents and size and every directory
back to its last fsynced listing.

What counts as durable: everything on the backing directory when it is mounted; a file's
contents and size after fsync or fdatasync of it (or a write through a descriptor opened
with O_SYNC or O_DSYNC); a directory's entries (created, removed, renamed) after fsync of
that directory. Metadata (modes, owners, times, extended attributes) passes through and is
not rolled back. Hard links are refused (EOPNOTSUPP): nothing on a broker's disk uses them.

The kernel caches no names (entry timeouts 0: a lookup always asks the backing directory);
it caches attributes and pages for a second, as libfuse does by default, and a drop tells it
to forget both for every file (``fuse_invalidate_path``), so that afterwards no process sees
a size or a byte that is gone. A drop is meant for when the processes that used the disk
are dead, as after a power loss.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mfusepy

from .directories import GRAVEYARD, DirectoryJournal, listing
from .journal import FileJournal
from .tallies import Dropped, Unsynced

log = logging.getLogger("lazyfs")

_STAT_FIELDS = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")
_STATVFS_FIELDS = (
    "f_bsize",
    "f_frsize",
    "f_blocks",
    "f_bfree",
    "f_bavail",
    "f_files",
    "f_ffree",
    "f_favail",
    "f_flag",
    "f_namemax",
)
ATTRIBUTE_TIMEOUT_S = 1.0
"""How long the kernel may cache a file's attributes (libfuse's default)."""
_OPEN_FLAGS_HANDLED_HERE = os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_ACCMODE


@dataclass(frozen=True)
class Handle:
    """An open backing file: its inode, and whether its writes are synchronous."""

    ino: int
    sync: bool


class LazyFilesystem(mfusepy.Operations):  # type: ignore[misc]
    """Passthrough operations on ``backing`` with a journal of everything not fsynced."""

    use_ns = True

    def __init__(self, backing: str) -> None:
        self.backing = os.path.realpath(backing)
        if not os.path.isdir(self.backing):
            raise NotADirectoryError(f"backing directory {self.backing} does not exist")
        self._fuse: int | None = None
        """libfuse's ``struct fuse *`` once mounted (to invalidate the kernel's caches)."""
        self.on_mounted: Callable[[], None] | None = None
        """Called once the kernel has the mount (the control socket starts there)."""
        self._lock = threading.Lock()
        self._files: dict[int, FileJournal] = {}
        self._handles: dict[int, Handle] = {}
        graveyard = os.path.join(self.backing, GRAVEYARD)
        os.makedirs(graveyard, exist_ok=True)
        self._graveyard_fd = os.open(graveyard, os.O_RDONLY | os.O_DIRECTORY)
        self._directories = DirectoryJournal(os.lstat(self.backing).st_ino, self._graveyard_fd)
        # A graveyard left by an earlier mount holds nothing durable: the backing tree is.
        self._directories.empty_graveyard()

    # --- paths ------------------------------------------------------------------------

    def _path(self, path: str | None) -> str:
        if path is None:
            raise mfusepy.FuseOSError(errno.ENOENT)
        relative = path.lstrip("/")
        if relative == GRAVEYARD or relative.startswith(GRAVEYARD + "/"):
            raise mfusepy.FuseOSError(errno.ENOENT)
        return os.path.join(self.backing, relative)

    def _parent_changes(self, full: str) -> None:
        self._directories.before_change(os.path.dirname(full) or self.backing)

    # --- attributes and listing ----------------------------------------------------------

    def init_with_config(self, conn: Any, config: Any) -> None:
        self._fuse = mfusepy._libfuse.fuse_get_context().contents.fuse
        if config is not None:
            config.entry_timeout = 0.0
            config.negative_timeout = 0.0
            config.attr_timeout = ATTRIBUTE_TIMEOUT_S
            config.use_ino = 1
            config.hard_remove = 1  # unlink means unlink, not a rename to .fuse_hidden*
            config.nullpath_ok = 1  # an unlinked open file is used through its handle
        if self.on_mounted is not None:
            self.on_mounted()

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh else os.lstat(self._path(path))
        attrs: dict[str, Any] = {key: getattr(st, key) for key in _STAT_FIELDS}
        attrs["st_atime"] = st.st_atime_ns
        attrs["st_mtime"] = st.st_mtime_ns
        attrs["st_ctime"] = st.st_ctime_ns
        return attrs

    def opendir(self, path: str) -> int:
        return os.open(self._path(path), os.O_RDONLY | os.O_DIRECTORY)

    def readdir(self, path: str | None, fh: int) -> list[tuple[str, dict[str, int], int]]:
        """Names with their inode numbers and types (with ``use_ino`` a zero inode number
        would hide the entry from readdir(3))."""
        own = os.fstat(fh)
        hide = GRAVEYARD if own.st_ino == self._directories.root_ino else None
        entries = [
            (name, {"st_ino": own.st_ino, "st_mode": own.st_mode}, 0) for name in (".", "..")
        ]
        with os.scandir(fh) as scan:
            for entry in scan:
                if entry.name != hide:
                    st = entry.stat(follow_symlinks=False)
                    entries.append((entry.name, {"st_ino": st.st_ino, "st_mode": st.st_mode}, 0))
        return entries

    def releasedir(self, path: str | None, fh: int) -> int:
        os.close(fh)
        return 0

    def readlink(self, path: str) -> str:
        return os.readlink(self._path(path))

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._path(path), amode):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._path(path))
        return {key: getattr(st, key) for key in _STATVFS_FIELDS}

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._path(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._path(path), uid, gid, follow_symlinks=False)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        full = self._path(path)
        if times is None:
            os.utime(full, follow_symlinks=False)
        else:
            os.utime(full, ns=times, follow_symlinks=False)
        return 0

    # --- file contents -------------------------------------------------------------------

    def _open_backing(self, full: str, flags: int, mode: int = 0o644) -> int:
        """The backing descriptor: read-write whenever writing (pre-images are read
        through it), never O_APPEND (the kernel gives every write its offset)."""
        access = flags & os.O_ACCMODE
        backing_flags = (flags & ~_OPEN_FLAGS_HANDLED_HERE) | (
            os.O_RDONLY if access == os.O_RDONLY else os.O_RDWR
        )
        fd = os.open(full, backing_flags | (flags & (os.O_CREAT | os.O_EXCL)), mode)
        try:
            ino = os.fstat(fd).st_ino
            if flags & os.O_TRUNC and access != os.O_RDONLY:
                self._truncate(fd, 0)
        except BaseException:
            os.close(fd)
            raise
        self._handles[fd] = Handle(ino, bool(flags & os.O_DSYNC))
        return fd

    def open(self, path: str, flags: int) -> int:
        full = self._path(path)
        with self._lock:
            return self._open_backing(full, flags)

    def create(self, path: str, mode: int, flags: int) -> int:
        full = self._path(path)
        with self._lock:
            self._parent_changes(full)
            existed = os.path.lexists(full)
            fd = self._open_backing(full, flags | os.O_CREAT, stat.S_IMODE(mode))
            if not existed:
                self._files[self._handles[fd].ino] = FileJournal(synced_size=0)
            return fd

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        handle = self._handles[fh]
        with self._lock:
            journal = self._files.get(handle.ino)
            if journal is None:
                journal = self._files[handle.ino] = FileJournal(os.fstat(fh).st_size)
            journal.before_write(offset, len(data), lambda at, n: os.pread(fh, n, at))
            written = os.pwrite(fh, data, offset)
            if handle.sync:  # the backing descriptor is O_SYNC/O_DSYNC too
                self._files.pop(handle.ino, None)
            return written

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        with self._lock:
            if fh:
                self._truncate(fh, length)
                return 0
            fd = os.open(self._path(path), os.O_RDWR)
            try:
                self._truncate(fd, length)
            finally:
                os.close(fd)
        return 0

    def _truncate(self, fd: int, length: int) -> None:
        st = os.fstat(fd)
        journal = self._files.get(st.st_ino)
        if journal is None:
            journal = self._files[st.st_ino] = FileJournal(st.st_size)
        journal.before_truncate(length, st.st_size, lambda at, n: os.pread(fd, n, at))
        os.ftruncate(fd, length)

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        handle = self._handles[fh]
        # Writes after this point are unsynced again, whatever the real fsync below covers.
        with self._lock:
            self._files.pop(handle.ino, None)
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0

    def release(self, path: str | None, fh: int) -> int:
        with self._lock:
            handle = self._handles.pop(fh)
            if os.fstat(fh).st_nlink == 0:  # unlinked: its inode number may be reused
                self._files.pop(handle.ino, None)
            os.close(fh)
        return 0

    # --- directory entries ---------------------------------------------------------------

    def mkdir(self, path: str, mode: int) -> int:
        full = self._path(path)
        with self._lock:
            self._parent_changes(full)
            os.mkdir(full, stat.S_IMODE(mode))
        return 0

    def mknod(self, path: str, mode: int, dev: int) -> int:
        full = self._path(path)
        with self._lock:
            self._parent_changes(full)
            os.mknod(full, mode, dev)
        return 0

    def symlink(self, target: str, source: str) -> int:
        """``target`` is the new link, ``source`` what it points to (mfusepy's names)."""
        full = self._path(target)
        with self._lock:
            self._parent_changes(full)
            os.symlink(source, full)
        return 0

    def link(self, target: str, source: str) -> int:
        raise mfusepy.FuseOSError(errno.EOPNOTSUPP)

    def unlink(self, path: str) -> int:
        full = self._path(path)
        with self._lock:
            self._parent_changes(full)
            self._remove(full, os.lstat(full))
        return 0

    def rmdir(self, path: str) -> int:
        full = self._path(path)
        with self._lock:
            self._parent_changes(full)
            st = os.lstat(full)
            if not stat.S_ISDIR(st.st_mode):
                raise mfusepy.FuseOSError(errno.ENOTDIR)
            if os.listdir(full):
                raise mfusepy.FuseOSError(errno.ENOTEMPTY)
            self._remove(full, st)
        return 0

    def _remove(self, full: str, st: os.stat_result) -> None:
        """Remove an entry whose parent is snapshotted: into the graveyard if a snapshot
        names it, else for good (with whatever is journalled about it)."""
        if self._directories.must_keep(st.st_ino):
            self._directories.bury(full, st.st_ino)
        elif stat.S_ISDIR(st.st_mode):
            os.rmdir(full)
            self._directories.discard(st.st_ino)
        else:
            os.unlink(full)
            self._files.pop(st.st_ino, None)

    def rename(self, old: str, new: str) -> int:
        source, target = self._path(old), self._path(new)
        with self._lock:
            self._parent_changes(source)
            self._parent_changes(target)
            source_st = os.lstat(source)
            try:
                victim = os.lstat(target)
            except FileNotFoundError:
                victim = None
            if victim is not None and victim.st_ino != source_st.st_ino:
                _check_replaceable(source_st, victim, target)
                self._remove(target, victim)
            os.rename(source, target)
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        with self._lock:
            self._directories.discard(os.fstat(fh).st_ino)
        os.fsync(fh)
        return 0

    # --- control ------------------------------------------------------------------------

    def _locations(self) -> dict[int, str]:
        """Backing path of every regular file, the graveyard's too, by inode number."""
        where: dict[int, str] = {}
        for top, _dirs, files in os.walk(self.backing):
            for name in files:
                path = os.path.join(top, name)
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode):
                    where[st.st_ino] = path
        return where

    def unsynced(self) -> Unsynced:
        with self._lock:
            where = self._locations()
            size = 0
            for ino, journal in self._files.items():
                current = os.lstat(where[ino]).st_size if ino in where else journal.synced_size
                size += journal.unsynced_bytes(current)
            return Unsynced(
                files=len(self._files),
                bytes=size,
                directories=len(self._directories.snapshots),
                entries=self._directories.changed_entries(),
            )

    def drop(self) -> Dropped:
        """Forget everything not fsynced: file contents and sizes first (wherever the files
        are now, the graveyard included), then directory entries."""
        with self._lock:
            where = self._locations()
            files, size = 0, 0
            for ino, journal in self._files.items():
                path = where.get(ino)
                if path is None:
                    continue  # gone for good, with its directory entry
                fd = os.open(path, os.O_RDWR)
                try:
                    size += journal.unsynced_bytes(os.fstat(fd).st_size)
                    journal.restore(fd)
                finally:
                    os.close(fd)
                files += 1
            self._files.clear()
            removed, restored = self._directories.restore()
            dropped = Dropped(files, size, removed, restored)
        self._invalidate_kernel_caches()
        log.warning("dropped everything not fsynced: %s", dropped)
        return dropped

    def _invalidate_kernel_caches(self) -> None:
        """Make the kernel forget the attributes and pages it cached of every file."""
        if self._fuse is None:
            return
        invalidate = mfusepy._libfuse.fuse_invalidate_path
        invalidate.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
        invalidate.restype = ctypes.c_int
        for top, dirs, files in os.walk(self.backing):
            if top == self.backing:
                dirs[:] = [d for d in dirs if d != GRAVEYARD]
            relative = "/" + os.path.relpath(top, self.backing).removeprefix(".").lstrip("/")
            for name in [*dirs, *files]:
                path = os.path.join(relative, name)
                invalidate(self._fuse, os.fsencode(path))  # ENOENT: nothing cached of it

    def destroy(self, path: str) -> None:
        self._directories.forget()
        os.close(self._graveyard_fd)


def _check_replaceable(source: os.stat_result, victim: os.stat_result, target: str) -> None:
    """rename(2)'s checks on the entry it replaces, made before that entry is moved away."""
    if stat.S_ISDIR(victim.st_mode):
        if not stat.S_ISDIR(source.st_mode):
            raise mfusepy.FuseOSError(errno.EISDIR)
        if os.listdir(target):
            raise mfusepy.FuseOSError(errno.ENOTEMPTY)
    elif stat.S_ISDIR(source.st_mode):
        raise mfusepy.FuseOSError(errno.ENOTDIR)


class LazyFuse(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy's FUSE, except that a rename with flags (RENAME_NOREPLACE, RENAME_EXCHANGE)
    is refused rather than done as a plain rename."""

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        if flags:
            return -errno.EINVAL
        return int(self.rename_fuse_2(old, new))

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        """As mfusepy's, but an ftruncate's file handle is passed on (its path may be NULL)."""
        decoded = None if path is None else path.decode(self.encoding, self.errors)
        fh = fip.contents.fh if fip else None
        return int(self.operations.truncate(decoded, length, fh))


def mount(filesystem: LazyFilesystem, mountpoint: str, *, threads: bool = False) -> None:
    """Serve ``filesystem`` at ``mountpoint`` until it is unmounted (blocks). One thread
    serves the requests unless ``threads``: under the GIL, libfuse's worker threads cost
    more in hand-offs than they win (a blocking fsync then holds up the other requests, as
    one disk queue would). The control socket has a thread of its own either way."""
    LazyFuse(
        filesystem,
        mountpoint,
        foreground=True,
        nothreads=not threads,
        fsname=f"lazyfs:{filesystem.backing}",
        subtype="lazyfs",
    )


__all__ = ["Dropped", "LazyFilesystem", "Unsynced", "listing", "mount"]
