"""squall's private cache directory (the Spark logging configuration, the JVM's class-data
archive, the Connect server's state, converted histories): made and checked so that no other
user of the machine can put files there."""

from __future__ import annotations

import os
import stat
from contextlib import suppress
from pathlib import Path


def user_cache_dir() -> Path:
    """squall's cache directory: $XDG_CACHE_HOME/squall, else ~/.cache/squall."""
    base = os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "squall"


def check_private(directory: Path) -> None:
    """Raise `PermissionError` unless `directory` is a directory (not a symbolic link) owned
    by the current user and writable by nobody else."""
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise PermissionError(f"{directory} is not a directory (a symbolic link or a file)")
    if info.st_uid != os.getuid():
        raise PermissionError(
            f"{directory} belongs to user id {info.st_uid}, not to the current user "
            f"({os.getuid()}): another user may have put files there"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(
            f"{directory} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            "make it private (chmod 700) or remove it"
        )


def private_cache_dir(*parts: str) -> Path:
    """`user_cache_dir()/parts...`, every level from squall's own made with mode 0700 and
    checked with `check_private` (also when it already existed); `PermissionError` if one
    fails. The cache's base may be shared only if it is sticky, like /tmp."""
    directory = user_cache_dir()
    base = directory.parent
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = os.stat(base).st_mode
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        raise PermissionError(
            f"{base} is writable by every user and not sticky: another user could replace "
            "squall's cache directory in it"
        )
    for part in ("", *parts):
        directory = directory / part if part else directory
        with suppress(FileExistsError):
            directory.mkdir(mode=0o700)
        check_private(directory)
    return directory
