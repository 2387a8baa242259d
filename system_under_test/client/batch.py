"""Records on their way to a broker: batches, the futures that watch them, and retries.

A future is a (batch, index) pair, so sending a record allocates almost nothing; a batch
completes all of its records at once, with offsets base_offset + index.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from system_under_test.client.exceptions import ProduceError
from system_under_test.errors import ErrorCode

log = logging.getLogger(__name__)

RecordItem = tuple[bytes | None, bytes | None, int]
"""(key, value, timestamp_ms), as record.encode_records takes them."""

_CALLBACK_LOCK = threading.Lock()

METADATA_REFRESH_CODES = frozenset(
    {
        ErrorCode.NOT_LEADER_FOR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)
"""Errors after which the producer refreshes metadata before retrying."""


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where an acknowledged record landed; offset is -1 for acks=0."""

    topic: str
    partition: int
    offset: int


class ProduceBatch:
    """Records for one partition that travel and complete together."""

    __slots__ = (
        "_callbacks",
        "attempts",
        "base_offset",
        "base_sequence",
        "created",
        "done",
        "error",
        "event",
        "items",
        "maybe_written",
        "partition",
        "producer_epoch",
        "producer_id",
        "retry_at",
        "size",
        "topic",
    )

    def __init__(self, topic: str, partition: int, created: float) -> None:
        self.topic = topic
        self.partition = partition
        self.items: list[RecordItem] = []
        self.size = 0
        """Bytes the records take once encoded."""
        self.created = created
        self.attempts = 0
        """Attempts concluded so far, sent or not."""
        self.retry_at = 0.0
        self.maybe_written = False
        """Some attempt may have been written (sent, and answered indeterminately or not at all)."""
        self.base_offset = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        """An idempotent producer's: set at the first send, kept through every retry."""
        self.error: ProduceError | None = None
        self.done = False
        self.event = threading.Event()
        self._callbacks: list[tuple[int, Callable[[SendFuture], None]]] | None = None

    def __len__(self) -> int:
        return len(self.items)

    def complete(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self._finish()

    def fail(self, error: ProduceError) -> None:
        self.error = error
        self._finish()

    def fail_with(self, code: ErrorCode, message: str) -> None:
        """Fail every record; definite unless some attempt may have been written."""
        self.fail(
            ProduceError(
                code,
                message,
                definite=not self.maybe_written,
                topic=self.topic,
                partition=self.partition,
            )
        )

    def add_callback(self, index: int, fn: Callable[[SendFuture], None]) -> None:
        with _CALLBACK_LOCK:
            if not self.done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append((index, fn))
                return
        _run_callback(fn, SendFuture(self, index))

    def _finish(self) -> None:
        with _CALLBACK_LOCK:
            if self.done:
                return
            self.done = True
            callbacks, self._callbacks = self._callbacks, None
        self.event.set()
        for index, fn in callbacks or ():
            _run_callback(fn, SendFuture(self, index))


def _run_callback(fn: Callable[[SendFuture], None], future: SendFuture) -> None:
    try:
        fn(future)
    except Exception:
        log.exception("a send callback raised; ignoring it")


class SendFuture:
    """The outcome of one send(): a RecordMetadata, or a ProduceError."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProduceBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for the acknowledgement; raise ProduceError, or TimeoutError after timeout s."""
        batch = self._wait(timeout)
        if batch.error is not None:
            raise batch.error
        offset = batch.base_offset + self._index if batch.base_offset >= 0 else -1
        return RecordMetadata(batch.topic, batch.partition, offset)

    def exception(self, timeout: float | None = None) -> ProduceError | None:
        """Wait like result(), but return the ProduceError instead of raising it."""
        return self._wait(timeout).error

    def add_callback(self, fn: Callable[[SendFuture], None]) -> None:
        """Call fn(future) once done (at once if done already), on the completing thread."""
        self._batch.add_callback(self._index, fn)

    def _wait(self, timeout: float | None) -> ProduceBatch:
        batch = self._batch
        if not batch.done and not batch.event.wait(timeout):
            raise TimeoutError(
                f"send to {batch.topic}-{batch.partition} not completed within {timeout} s"
            )
        return batch


def failed_future(topic: str, partition: int, error: ProduceError) -> SendFuture:
    """A future that has already failed (nothing was sent)."""
    batch = ProduceBatch(topic, partition, time.monotonic())
    batch.items.append((None, None, 0))
    batch.fail(error)
    return SendFuture(batch, 0)


class RetryPolicy:
    """Decides, after each attempt of a batch, whether to retry it or to settle it."""

    def __init__(self, retries: int, backoff_ms: int) -> None:
        self.retries = retries
        self.backoff_s = backoff_ms / 1000

    def settle(
        self,
        batch: ProduceBatch,
        code: ErrorCode,
        message: str,
        *,
        sent: bool,
        base_offset: int = -1,
    ) -> bool:
        """Record one attempt's outcome; True if the batch should be sent again.

        sent: the request had gone out whole, so the broker may have acted on it.
        """
        batch.attempts += 1
        if code is ErrorCode.NONE:
            batch.complete(base_offset)
            return False
        if sent and not code.definite:
            batch.maybe_written = True
        if code.retriable and batch.attempts <= self.retries:
            batch.retry_at = time.monotonic() + self.backoff_s
            return True
        batch.fail_with(code, message)
        return False
