"""What a client error means for the history: `fail` (certainly did not happen) or `info`.

The rule (HISTORY.md) is that `fail` is only for definite errors; everything uncertain is
`info`, after which the process is retired.

- send: `ProduceError.definite` decides (QueueFullError is definite); a closed producer sent
  nothing; anything else (a timeout waiting for the future, a lost connection, an error after
  the append such as NOT_ENOUGH_REPLICAS_AFTER_APPEND or NOT_LEADER) may have written it.
- poll: always `fail`. A poll has no durable effect: auto-commit is off, so only a commit
  moves the group, and after a failed poll the consumer workers seek back to the position
  after the last records they delivered, so records a half-done poll fetched but never
  returned are fetched again. Nothing was read as far as the history is concerned, which is
  exactly `fail`; `info` would only retire the process for no gain.
- commit: `OffsetCommitError.definite` decides; any other error may have landed.
- assign / subscribe: they read committed offsets and list offsets, which change nothing,
  so their errors are `fail`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from system_under_test.client.exceptions import (
    OffsetCommitError,
    ProduceError,
    ProducerClosedError,
)
from system_under_test.errors import BrokerError

ErrorType = Literal["fail", "info"]
MAX_ERROR_CHARS = 400


@dataclass(frozen=True, slots=True)
class ErrorOutcome:
    """How to complete an operation whose client call raised: its type and `error` text."""

    type: ErrorType
    error: str


def describe_error(err: BaseException) -> str:
    """The `error` field for `err`: the broker's error code or the exception's class, then
    its message, cut to `MAX_ERROR_CHARS`."""
    if isinstance(err, ProduceError):
        name = err.error.name
    elif isinstance(err, BrokerError):
        name = err.code.name
    else:
        name = type(err).__name__
    message = str(err)
    text = f"{name}: {message}" if message else name
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    return text


def send_outcome(err: BaseException) -> ErrorOutcome:
    """A send that raised `err`: fail only if the record certainly was not written."""
    if isinstance(err, ProduceError):
        return ErrorOutcome("fail" if err.definite else "info", describe_error(err))
    if isinstance(err, ProducerClosedError):
        return ErrorOutcome("fail", describe_error(err))
    return ErrorOutcome("info", describe_error(err))


def poll_outcome(err: BaseException) -> ErrorOutcome:
    """A poll that raised `err`: always fail (see the module docstring)."""
    return ErrorOutcome("fail", describe_error(err))


def commit_outcome(err: BaseException) -> ErrorOutcome:
    """A commit that raised `err`: fail only if no offset was written."""
    if isinstance(err, OffsetCommitError) and err.definite:
        return ErrorOutcome("fail", describe_error(err))
    return ErrorOutcome("info", describe_error(err))


def assign_outcome(err: BaseException) -> ErrorOutcome:
    """An assign or subscribe that raised `err`: it changed nothing, so fail."""
    return ErrorOutcome("fail", describe_error(err))
