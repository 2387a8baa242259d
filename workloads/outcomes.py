"""What a client error means for the history: `fail` (certainly did not happen) or `info`.

The rule (docs/history.md) is that `fail` is only for definite errors; everything uncertain is
`info`, after which the process is retired. The client says what is definite
(`OperationError.definite`, see workloads.client); any other exception is uncertain.

- send: definite errors are `fail` (squall's client: a ProduceError that says so, such as a
  full queue, or a closed producer); anything else (a timeout waiting for the outcome, a lost
  connection, an error after the append such as NOT_ENOUGH_REPLICAS_AFTER_APPEND or
  NOT_LEADER) may have written it.
- poll: always `fail`. A poll has no durable effect: auto-commit is off, so only a commit
  moves the group, and after a failed poll the consumer workers seek back to the position
  after the last records they delivered, so records a half-done poll fetched but never
  returned are fetched again. Nothing was read as far as the history is concerned, which is
  exactly `fail`; `info` would only retire the process for no gain.
- commit: definite errors are `fail`; any other error may have landed.
- assign / subscribe: they read committed offsets and list offsets, which change nothing,
  so their errors are `fail`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from workloads.client import OperationError

ErrorType = Literal["fail", "info"]
MAX_ERROR_CHARS = 400


@dataclass(frozen=True, slots=True)
class ErrorOutcome:
    """How to complete an operation whose client call raised: its type and `error` text."""

    type: ErrorType
    error: str


def describe_error(err: BaseException) -> str:
    """The `error` field for `err`: the client's error code (else the exception's class),
    then its message, cut to `MAX_ERROR_CHARS`."""
    name = err.code if isinstance(err, OperationError) else type(err).__name__
    message = str(err)
    text = f"{name}: {message}" if message else name
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    return text


def send_outcome(err: BaseException) -> ErrorOutcome:
    """A send that raised `err`: fail only if the record certainly was not written."""
    return ErrorOutcome("fail" if _definite(err) else "info", describe_error(err))


def poll_outcome(err: BaseException) -> ErrorOutcome:
    """A poll that raised `err`: always fail (see the module docstring)."""
    return ErrorOutcome("fail", describe_error(err))


def commit_outcome(err: BaseException) -> ErrorOutcome:
    """A commit that raised `err`: fail only if no offset was written."""
    return ErrorOutcome("fail" if _definite(err) else "info", describe_error(err))


def assign_outcome(err: BaseException) -> ErrorOutcome:
    """An assign or subscribe that raised `err`: it changed nothing, so fail."""
    return ErrorOutcome("fail", describe_error(err))


def _definite(err: BaseException) -> bool:
    """Whether the client said the operation certainly had no effect."""
    return isinstance(err, OperationError) and err.definite
