"""The durable history writer: one JSON line per operation, handed to the OS as it happens.

Each line goes to the file in a single `write(2)` on an `O_APPEND` descriptor, so a killed
control process leaves every line it wrote whole (the page cache survives the process);
only a crash of the machine needs the optional fsync. Reopening a history continues it:
a torn last line is cut off (with a warning) and numbering resumes after the last line.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time as _time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

from histories.atomic import atomic_file
from histories.contract import Process, show
from histories.errors import HistoryFormatError, HistoryWriterClosedError, OperationError
from histories.jsonline import encode_body, encode_line, line_of
from histories.operation import Operation, assemble
from histories.reader import TruncatedHistoryWarning
from histories.validation import check_json_dict, validate_fields

_TAIL_BLOCK = 1 << 16


class HistoryWriter:
    """Appends operations to `history.jsonl`, numbering and timing them; thread-safe.

    `index` is dense from 0 (or from after the last line of an existing file) and `time` is
    nanoseconds on the monotonic clock since the writer started, unless a time is given.
    `fsync_every_lines` / `fsync_every_seconds` (checked at each write) also push lines to
    the disk; close always does.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync_every_lines: int | None = None,
        fsync_every_seconds: float | None = None,
        clock: Callable[[], int] = _time.monotonic_ns,
    ) -> None:
        if fsync_every_lines is not None and fsync_every_lines < 1:
            raise ValueError(f"fsync_every_lines is {fsync_every_lines}, expected >= 1 or None")
        if fsync_every_seconds is not None and fsync_every_seconds <= 0:
            raise ValueError(f"fsync_every_seconds is {fsync_every_seconds}, expected > 0 or None")
        self._path = Path(path)
        self._lock = threading.Lock()
        self._clock = clock
        self._fsync_lines = fsync_every_lines
        self._fsync_seconds = fsync_every_seconds
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            self._next_index, last_time, self._size = _resume(self._path, self._fd)
        except BaseException:
            os.close(self._fd)
            raise
        self._origin = clock() - (last_time if last_time is not None else 0)
        self._unsynced = 0
        self._last_sync = _time.monotonic()

    @property
    def path(self) -> Path:
        return self._path

    @property
    def next_index(self) -> int:
        """The index the next operation will get."""
        return self._next_index

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def now(self) -> int:
        """The writer's current time: nanoseconds since it started."""
        return self._clock() - self._origin

    def write(
        self,
        process: Process,
        op_type: str,
        f: str,
        value: Any = None,
        *,
        time: int | None = None,
        **fields: Any,
    ) -> Operation:
        """Write one operation; `fields` are the optional fields and any extra ones."""
        if fields:
            error, node = fields.pop("error", None), fields.pop("node", None)
            acks, final = fields.pop("acks", None), fields.pop("final", None)
            key = fields.pop("key", None)
        else:
            error = node = acks = final = key = None
        validate_fields(
            0, 0 if time is None else time, process, op_type, f, value, error, node, acks,
            final, key, fields,
        )  # fmt: skip
        body = encode_body(process, op_type, f, value, error, node, acks, final, key, fields)
        with self._lock:
            self._check_open()
            index = self._next_index
            if time is None:
                time = self._clock() - self._origin
            self._write_locked(line_of(index, time, body))
        return assemble(
            index, time, process, op_type, f, value, error, node, acks, final, key, fields
        )

    def invoke(self, process: int, f: str, value: Any, **fields: Any) -> Operation:
        """Write the invocation of `f` by client `process`."""
        return self.write(process, "invoke", f, value, **fields)

    def complete(self, invocation: Operation, op_type: str, value: Any, **fields: Any) -> Operation:
        """Write the completion (`ok`, `fail` or `info`) of `invocation`.

        The process and f come from the invocation, and so do its optional fields (acks,
        node, final, key) and extra fields unless given again; `error` is not inherited.
        """
        if invocation.type != "invoke" or not invocation.is_client:
            raise OperationError(
                f"operation {invocation.index} is {invocation.type} by {invocation.process}, "
                "not a client invocation: only invocations can be completed"
            )
        if op_type not in ("ok", "fail", "info"):
            raise OperationError(
                f"completion type is {show(op_type)}, expected one of ok, fail, info"
            )
        inherited: dict[str, Any] = dict(invocation.extra)
        for name in ("acks", "node", "final", "key"):
            inherited_value = getattr(invocation, name)
            if inherited_value is not None:
                inherited[name] = inherited_value
        inherited.update(fields)
        return self.write(invocation.process, op_type, invocation.f, value, **inherited)

    def event(
        self, f: str, value: Any, *, process: Process = "nemesis", **fields: Any
    ) -> Operation:
        """Write a nemesis (default) or SUT event: type `info`."""
        return self.write(process, "info", f, value, **fields)

    def append(self, op: Operation) -> Operation:
        """Write an existing operation at the next index (its index is replaced; its time kept)."""
        with self._lock:
            self._check_open()
            if op.index != self._next_index:
                op = op.with_index(self._next_index)
            self._write_locked(encode_line(op))
        return op

    def sync(self) -> None:
        """Push every written line to the disk (fsync)."""
        with self._lock:
            self._check_open()
            self._sync_locked()

    def close(self) -> None:
        """Fsync and close; closing twice is harmless."""
        with self._lock:
            if self._fd < 0:
                return
            try:
                self._sync_locked()
            finally:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._fd < 0:
            raise HistoryWriterClosedError(
                f"the history writer of {self._path} is closed; open a new HistoryWriter "
                "to append more operations"
            )

    def _write_locked(self, data: bytes) -> None:
        _write_all(self._fd, data, self._size)
        self._size += len(data)
        self._next_index += 1
        self._unsynced += 1
        if (self._fsync_lines is not None and self._unsynced >= self._fsync_lines) or (
            self._fsync_seconds is not None
            and _time.monotonic() - self._last_sync >= self._fsync_seconds
        ):
            self._sync_locked()

    def _sync_locked(self) -> None:
        os.fsync(self._fd)
        self._unsynced = 0
        self._last_sync = _time.monotonic()


def _write_all(fd: int, data: bytes, size_before: int) -> None:
    """Write all of `data`; on failure cut the file back so no torn line stays behind."""
    try:
        written = os.write(fd, data)
        while written < len(data):
            written += os.write(fd, data[written:])
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size_before)
        raise


def _resume(path: Path, fd: int) -> tuple[int, int | None, int]:
    """Repair the tail of an existing history; return (next index, last time, size)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0, None, 0
    with open(path, "rb") as fh:
        start = size
        buf = b""
        while True:
            start = max(0, start - _TAIL_BLOCK * (1 + len(buf) // _TAIL_BLOCK))
            fh.seek(start)
            buf = fh.read(size - start)
            body_end = buf.rfind(b"\n") + 1
            line_start = buf.rfind(b"\n", 0, max(body_end - 1, 0)) + 1
            if start == 0 or line_start > 0:
                break
    tail = buf[body_end:]
    if tail:
        record = _parse_record(tail)
        if record is not None:
            # A whole last line written without its newline (by another tool): keep it.
            os.write(fd, b"\n")
            return record["index"] + 1, record["time"], size + 1
        warnings.warn(
            TruncatedHistoryWarning(
                f"{path}: the last line ({len(tail)} bytes) was torn by a crash mid-write; "
                "it is cut off before appending"
            ),
            stacklevel=3,
        )
        size = start + body_end
        os.ftruncate(fd, size)
        if body_end == 0:
            return 0, None, size
    line = buf[line_start : body_end - 1]
    record = _parse_record(line)
    if record is None:
        with open(path, "rb") as fh:
            line_number = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
        raise HistoryFormatError(
            path,
            line_number,
            "the last line is not a valid operation, so the history cannot be continued",
        )
    return record["index"] + 1, record["time"], size


def _parse_record(line: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
        check_json_dict(data)
    except (ValueError, OperationError):
        return None
    return cast(dict[str, Any], data)


def write_history(path: str | os.PathLike[str], ops: Iterable[Operation]) -> int:
    """Write a whole history atomically (a temporary file, fsync, rename); return its length.

    The operations keep their indices and times, which must be dense from 0.
    """
    target = Path(path)
    count = 0
    with atomic_file(target) as fh:
        for op in ops:
            if op.index != count:
                raise OperationError(
                    f"operation {count} of the history has index {op.index}; indices must "
                    "be dense from 0 (re-index with Operation.with_index)"
                )
            fh.write(encode_line(op))
            count += 1
    return count
