"""Files replaced atomically: written beside the target, synced, renamed over it, and the
directory synced, so that the rename itself survives a crash of the machine.

A reader sees the old file or the whole new one, never a part; a failed write leaves the
old file and no temporary one.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO


@contextmanager
def atomic_file(target: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file that replaces `target` when the block ends without an exception."""
    path = Path(target)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)
        fsync_directory(path.parent)
    finally:
        temporary.unlink(missing_ok=True)


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename (or a new name) in ``directory`` durable; a file system that cannot sync
    a directory (EINVAL) is let be."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def write_json_atomically(
    target: str | os.PathLike[str], doc: Any, *, default: Callable[[Any], Any] | None = None
) -> Path:
    """Write `doc` as indented JSON (with a final newline) over `target`, atomically."""
    with atomic_file(target) as fh:
        fh.write((json.dumps(doc, indent=2, default=default) + "\n").encode("utf-8"))
    return Path(target)
