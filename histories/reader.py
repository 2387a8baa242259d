"""Reading `history.jsonl`: every line validated, never a line skipped silently.

A malformed line raises `HistoryFormatError` with the file, the 1-based line number and
what is wrong. The one exception is a torn last line (no newline and not valid JSON),
which is what a crash mid-write leaves: it is reported with a `TruncatedHistoryWarning`,
recorded as `truncated_tail`, and ignored.
"""

from __future__ import annotations

import gc
import json
import json.scanner
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from histories.errors import HistoryFormatError, OperationError
from histories.operation import Operation
from histories.validation import check_json_dict, check_text

_CHUNK_BYTES = 1 << 20
_SCAN: Any = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""An escaped UTF-16 surrogate (`\\ud800`): legal JSON, but Unicode only as half of a pair;
a line holding one is checked with `check_text`."""


class WholeLineBlocks:
    """The blocks of whole lines of a file, read `block_bytes` at a time.

    Iterating yields `(data, cut)`: `data[:cut]` ends at a newline (the rest of `data` is
    carried into the next block). Afterwards `tail` holds what follows the last newline (a
    last line without one) and `consumed` the bytes before it.
    """

    def __init__(self, path: Path, block_bytes: int) -> None:
        self.path = path
        self.block_bytes = block_bytes
        self.tail = b""
        self.consumed = 0

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        self.tail, self.consumed = b"", 0
        carry = b""
        with open(self.path, "rb") as fh:
            while chunk := fh.read(self.block_bytes):
                data = carry + chunk if carry else chunk
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    carry = data
                    continue
                carry = data[cut:]
                self.consumed += cut
                yield data, cut
        self.tail = carry


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of acyclic objects are built.

    With that many young objects alive, the collector rescans them again and again for
    nothing; that doubles the time of reading or converting a history. Process-wide.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class TruncatedHistoryWarning(UserWarning):
    """The history ends in a torn line (a crash mid-write); that line was ignored."""


@dataclass(frozen=True, slots=True)
class TruncatedTail:
    """The torn last line of a history: where it was and how it began."""

    line: int
    byte_offset: int
    length: int
    fragment: bytes

    def describe(self, path: str | Path) -> str:
        return (
            f"{path}, line {self.line}: the last line is torn ({self.length} bytes, no newline, "
            f"not valid JSON: {self.fragment[:60]!r}), as a crash mid-write leaves it; "
            "it was ignored"
        )


@dataclass(frozen=True, slots=True)
class HistoryReadResult:
    """A whole history, and its torn last line if it had one."""

    operations: list[Operation]
    truncated_tail: TruncatedTail | None


class HistoryReader:
    """A streaming reader of one history file.

    Iterate it for `Operation`s, or call `records()` for the validated JSON dicts (faster:
    no objects are built). After a complete pass, `truncated_tail` tells whether the last
    line was torn, and `lines` how many lines were read.
    """

    def __init__(self, path: str | os.PathLike[str], *, warn: bool = True) -> None:
        self.path = Path(path)
        self.warn = warn
        self.truncated_tail: TruncatedTail | None = None
        self.lines = 0

    def __iter__(self) -> Iterator[Operation]:
        return map(Operation._unchecked, self.records())

    def records(self) -> Iterator[dict[str, Any]]:
        """Yield each line's decoded JSON object, validated, with dense indices checked."""
        self.truncated_tail = None
        self.lines = 0
        scan = _SCAN
        check = check_json_dict
        expected = 0
        line_number = 0
        blocks = WholeLineBlocks(self.path, _CHUNK_BYTES)
        for data, cut in blocks:
            not_utf8: str | None = None
            try:
                text = data[:cut].decode("utf-8")
            except UnicodeDecodeError as err:
                # Read the lines before the one that is not UTF-8, then blame that one.
                start = data.rfind(b"\n", 0, err.start) + 1
                not_utf8 = f"not UTF-8 text: {err.reason} at byte {err.start - start}"
                text = data[:start].decode("utf-8")
            pos = 0
            size = len(text)
            # A surrogate escaped in the block (rare): each line that has one is checked.
            surrogates = "\\" in text and _SURROGATE_ESCAPE.search(text) is not None
            find = text.find
            while pos < size:
                line_number += 1
                # Fast path: the C scanner over the chunk, one object per line.
                try:
                    record, end = scan(text, pos)
                    if text[end] != "\n":
                        raise ValueError("more than one JSON value on the line")
                    if find("\n", pos, end) >= 0:  # one object over several lines
                        self._spread(line_number, text.count("\n", pos, end))
                    check(record)
                    if surrogates and _SURROGATE_ESCAPE.search(text, pos, end):
                        check_text(record)
                except (StopIteration, ValueError, OperationError, RecursionError):
                    end = text.index("\n", pos)
                    record = self._decode_line(text[pos : end + 1], line_number)
                if record["index"] != expected:
                    raise HistoryFormatError(
                        self.path,
                        line_number,
                        f"field 'index' is {record['index']}, expected {expected}: indices "
                        "are dense from 0, so a line is missing, repeated or out of order",
                    )
                expected += 1
                pos = end + 1
                self.lines = line_number
                yield record
            if not_utf8 is not None:
                raise HistoryFormatError(self.path, line_number + 1, not_utf8)
        if carry := blocks.tail:
            line_number += 1
            try:
                json.loads(carry)
            except ValueError:
                self._torn(line_number, blocks.consumed, carry)
            except RecursionError:
                self._decode_line(carry, line_number)  # raises, saying why
            else:
                record = self._decode_line(carry, line_number)
                if record["index"] != expected:
                    raise HistoryFormatError(
                        self.path,
                        line_number,
                        f"field 'index' is {record['index']}, expected {expected}",
                    )
                self.lines = line_number
                yield record
        self.lines = line_number

    def _decode_line(self, raw: bytes | str, line_number: int) -> dict[str, Any]:
        """Decode and validate one line, or raise `HistoryFormatError` saying why not."""
        try:
            record = json.loads(raw)
            check_json_dict(record)
            check_text(record)
        except (ValueError, OperationError) as err:
            raise HistoryFormatError(self.path, line_number, _reason(raw, err)) from err
        except RecursionError as err:
            raise HistoryFormatError(
                self.path, line_number, "not valid JSON: nested too deeply to be read"
            ) from err
        return cast(dict[str, Any], record)

    def _spread(self, line_number: int, newlines: int) -> None:
        raise HistoryFormatError(
            self.path,
            line_number,
            f"one JSON object spread over lines {line_number} to {line_number + newlines}: "
            "each line must hold one whole JSON object",
        )

    def _torn(self, line_number: int, offset: int, raw: bytes) -> None:
        self.truncated_tail = TruncatedTail(line_number, offset, len(raw), raw[:200])
        if self.warn:
            warnings.warn(
                TruncatedHistoryWarning(self.truncated_tail.describe(self.path)), stacklevel=4
            )


def _reason(raw: bytes | str, err: Exception) -> str:
    if isinstance(err, OperationError):
        return str(err)
    if isinstance(err, UnicodeDecodeError):
        return f"not UTF-8 text: {err.reason} at byte {err.start}"
    if isinstance(err, json.JSONDecodeError):
        if not raw.strip():
            return "empty line"
        return f"not valid JSON: {err.msg} at column {err.colno}"
    return f"not valid JSON: {err}"


def iter_history(path: str | os.PathLike[str], *, warn: bool = True) -> HistoryReader:
    """Stream the operations of a history; see `HistoryReader`."""
    return HistoryReader(path, warn=warn)


def read_history_result(path: str | os.PathLike[str], *, warn: bool = True) -> HistoryReadResult:
    """Read a whole history, with its torn last line if any."""
    reader = HistoryReader(path, warn=warn)
    with collector_paused():
        operations = list(reader)
    return HistoryReadResult(operations, reader.truncated_tail)


def read_history(path: str | os.PathLike[str]) -> list[Operation]:
    """Read a whole history; a torn last line is reported with a warning and ignored."""
    return read_history_result(path).operations
