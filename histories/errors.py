"""The exceptions raised by `histories`, one class per kind of problem."""

from __future__ import annotations

from pathlib import Path


class HistoryError(Exception):
    """Base class of every error raised by the `histories` package."""


class OperationError(HistoryError, ValueError):
    """An operation breaks the history contract (docs/history.md); the message says which field and why."""


class HistoryFormatError(HistoryError):
    """A history file holds a line that is not a valid operation.

    `path` and `line` (1-based) say where, `reason` what is wrong.
    """

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        super().__init__(
            f"{self.path}, line {line}: {reason} "
            "(a history line is one JSON object per docs/history.md; fix or remove the line, "
            "or regenerate the history)"
        )


class PairingError(HistoryError, ValueError):
    """Invocations and completions do not pair up by process (Jepsen semantics)."""


class HistoryWriterClosedError(HistoryError):
    """An operation was written to a `HistoryWriter` after it was closed."""


class EdnError(HistoryError, ValueError):
    """EDN text could not be parsed; `line` and `column` (1-based) say where."""

    def __init__(self, message: str, line: int, column: int, source: str | None = None) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.source = source
        where = f"{source}, " if source else ""
        super().__init__(f"{where}line {line}, column {column}: {message}")


class JepsenImportError(HistoryError, ValueError):
    """A Jepsen history could not be converted into squall operations."""
