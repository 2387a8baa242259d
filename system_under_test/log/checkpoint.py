"""Checkpoint files: small text files of offsets that must survive a crash intact.

The format is Kafka's: a version line (``0``), a count line, then one entry per line. A file
is replaced atomically: written to ``<file>.tmp``, fsynced, renamed over the old one, and the
directory fsynced, so a reader sees either the old or the new content, never a mix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Generic, TypeVar

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
"""In each log dir: the offset up to which each partition's log is known to be fsynced."""
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
"""In each log dir: each partition's high watermark."""
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
"""In each partition dir: the start offset of every leader epoch."""

CHECKPOINT_VERSION = 0
TEMP_SUFFIX = ".tmp"

EntryT = TypeVar("EntryT")
_INTEGER = re.compile(r"-?[0-9]+")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be parsed."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        super().__init__(
            f"checkpoint file {path}, line {line}: {problem}. The file is damaged; the broker "
            f"can rebuild it: move it aside and restart (logs are then fully recovered)"
        )
        self.path = path
        self.line = line
        self.problem = problem


def fsync_directory(directory: Path) -> None:
    """Make a rename or a file creation in directory durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(path: Path, data: bytes) -> None:
    """Replace ``path``'s contents with ``data`` atomically and durably: a temp file, fsync,
    rename, directory fsync. A write that fails leaves the old file and no temp file."""
    temp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)  # the old file stays as it was
        raise
    fsync_directory(path.parent)


def _parse_int(path: Path, number: int, text: str, what: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise CheckpointError(path, number, f"{what} {text!r} is not an integer")
    return int(text)


class _CheckpointFile(Generic[EntryT]):
    """A versioned list of entries, one per line, replaced atomically."""

    def __init__(
        self,
        path: Path,
        fields: int,
        parse: Callable[[Path, int, list[str]], EntryT],
        format_entry: Callable[[EntryT], str],
    ) -> None:
        self.path = Path(path)
        self._fields = fields
        self._parse = parse
        self._format = format_entry

    def read_entries(self) -> list[EntryT]:
        """Every entry in file order; a missing file holds none."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            bad_line = raw[: err.start].count(b"\n") + 1
            raise CheckpointError(self.path, bad_line, "the file is not UTF-8 text") from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            raise CheckpointError(self.path, 1, "the file is empty, expected a version line")
        version = _parse_int(self.path, 1, lines[0].strip(), "version")
        if version != CHECKPOINT_VERSION:
            raise CheckpointError(
                self.path, 1, f"unsupported version {version}, expected {CHECKPOINT_VERSION}"
            )
        if len(lines) < 2:
            raise CheckpointError(self.path, 2, "the count line is missing")
        count = _parse_int(self.path, 2, lines[1].strip(), "entry count")
        if count < 0:
            raise CheckpointError(self.path, 2, f"entry count {count} is negative")
        entries: list[EntryT] = []
        for number, line in enumerate(lines[2:], start=3):
            fields = line.split()
            if len(fields) != self._fields:
                raise CheckpointError(
                    self.path, number, f"expected {self._fields} fields, got {line!r}"
                )
            entries.append(self._parse(self.path, number, fields))
        if len(entries) != count:
            raise CheckpointError(
                self.path, 2, f"the count line says {count} entries but {len(entries)} follow"
            )
        return entries

    def write_entries(self, entries: Sequence[EntryT]) -> None:
        """Replace the file with entries: temp file, fsync, rename, directory fsync. A write
        that fails leaves the old file and no temp file."""
        lines = [str(CHECKPOINT_VERSION), str(len(entries))]
        lines.extend(self._format(entry) for entry in entries)
        replace_file(self.path, ("\n".join(lines) + "\n").encode("utf-8"))


def _parse_offset_entry(path: Path, number: int, fields: list[str]) -> tuple[str, int, int]:
    topic, partition_text, offset_text = fields
    partition = _parse_int(path, number, partition_text, "partition")
    offset = _parse_int(path, number, offset_text, "offset")
    if partition < 0:
        raise CheckpointError(path, number, f"partition {partition} is negative")
    return topic, partition, offset


def _format_offset_entry(entry: tuple[str, int, int]) -> str:
    topic, partition, offset = entry
    if not topic or any(ch.isspace() for ch in topic):
        raise ValueError(
            f"topic {topic!r} cannot be written to a checkpoint: it is empty or has spaces"
        )
    return f"{topic} {partition} {offset}"


class OffsetCheckpointFile:
    """Per-partition offsets (``topic partition offset`` lines): recovery points, high watermarks."""

    def __init__(self, path: Path) -> None:
        self._file = _CheckpointFile(Path(path), 3, _parse_offset_entry, _format_offset_entry)

    @property
    def path(self) -> Path:
        return self._file.path

    def read(self) -> dict[tuple[str, int], int]:
        """The offsets by (topic, partition); empty if the file does not exist."""
        out: dict[tuple[str, int], int] = {}
        for topic, partition, offset in self._file.read_entries():
            out[(topic, partition)] = offset
        return out

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Replace the file's content with offsets, atomically and durably."""
        entries = [
            (topic, partition, offsets[(topic, partition)]) for topic, partition in sorted(offsets)
        ]
        self._file.write_entries(entries)


def _parse_epoch_entry(path: Path, number: int, fields: list[str]) -> tuple[int, int]:
    epoch = _parse_int(path, number, fields[0], "epoch")
    start_offset = _parse_int(path, number, fields[1], "start offset")
    if epoch < 0 or start_offset < 0:
        raise CheckpointError(
            path, number, f"epoch {epoch} and start offset {start_offset} must be >= 0"
        )
    return epoch, start_offset


def _format_epoch_entry(entry: tuple[int, int]) -> str:
    return f"{entry[0]} {entry[1]}"


class LeaderEpochCheckpointFile:
    """A partition's leader epochs (``epoch start_offset`` lines), in file order."""

    def __init__(self, path: Path) -> None:
        self._file = _CheckpointFile(Path(path), 2, _parse_epoch_entry, _format_epoch_entry)

    @property
    def path(self) -> Path:
        return self._file.path

    def read(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs; empty if the file does not exist."""
        return self._file.read_entries()

    def write(self, epochs: Sequence[tuple[int, int]]) -> None:
        """Replace the file's content with epochs, atomically and durably."""
        self._file.write_entries(list(epochs))
