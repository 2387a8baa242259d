"""The async producer's queue: records batched per partition until a batch is due.

A batch is due when it holds batch.num.messages records (or 1 MiB), when its first record is
queue.buffering.max.ms old, when a retry's backoff has passed, or at once while someone
flushes or closes. At most queue.buffering.max.messages records may wait for their
acknowledgement; send() blocks or drops beyond that, per queue.enqueue.timeout.ms.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from system_under_test.client.batch import ProduceBatch, RecordItem, SendFuture
from system_under_test.client.exceptions import ProducerClosedError
from system_under_test.log.record import MAX_RECORD_OVERHEAD

TopicPartition = tuple[str, int]

MAX_BATCH_BYTES = 1 << 20
"""A batch also closes once its records reach this many bytes: requests stay bounded, and one
partition's record set stays within the broker's default message.max.bytes (1048588)."""


class RecordAccumulator:
    """Thread-safe: send() threads append, the sender thread drains."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        max_records: int,
        enqueue_timeout_ms: int,
        wakeup: Callable[[], None],
    ) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.max_records = max_records
        self.enqueue_timeout_ms = enqueue_timeout_ms
        self._wakeup = wakeup
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._open: dict[TopicPartition, ProduceBatch] = {}
        self._retries: deque[ProduceBatch] = deque()
        self._full: deque[ProduceBatch] = deque()
        self._incomplete = 0
        self._flushing = 0
        self.closing = False
        self.stopped = False
        """Set once the sender has stopped: nothing appended afterwards could be sent."""

    def append(self, topic: str, partition: int, item: RecordItem) -> SendFuture | None:
        """Queue one record; None if the queue stayed full (the record is dropped)."""
        key = (topic, partition)
        with self._lock:
            if self.stopped:
                raise ProducerClosedError(
                    "the producer's sender has stopped; create a new Producer"
                )
            if self._incomplete >= self.max_records and not self._wait_for_space():
                return None
            self._incomplete += 1
            size = MAX_RECORD_OVERHEAD + len(item[1] or b"") + len(item[0] or b"")
            batch = self._open.get(key)
            if batch is not None and batch.size + size <= MAX_BATCH_BYTES:
                items = batch.items
                items.append(item)
                batch.size += size
                future = SendFuture(batch, len(items) - 1)
                if len(items) < self.batch_size:
                    return future
                del self._open[key]
                self._full.append(batch)
            else:
                if batch is not None:
                    del self._open[key]
                    self._full.append(batch)
                batch = ProduceBatch(topic, partition, time.monotonic())
                batch.items.append(item)
                batch.size = size
                if self.batch_size > 1:
                    self._open[key] = batch
                else:
                    self._full.append(batch)
                future = SendFuture(batch, 0)
        # A batch is full, or a new one brings a new linger deadline: tell the sender.
        self._wakeup()
        return future

    def _wait_for_space(self) -> bool:
        timeout_ms = self.enqueue_timeout_ms
        if timeout_ms == 0:
            return False
        deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        while self._incomplete >= self.max_records:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            self._space.wait(remaining)
        return True

    def drain(self, now: float) -> tuple[list[ProduceBatch], float | None]:
        """Batches due now, and the time the next one falls due (None: none queued)."""
        ready: list[ProduceBatch] = []
        next_due: float | None = None
        with self._lock:
            rush = self._flushing > 0 or self.closing
            waiting: deque[ProduceBatch] = deque()
            while self._retries:
                batch = self._retries.popleft()
                if batch.retry_at <= now:
                    ready.append(batch)
                else:
                    waiting.append(batch)
                    next_due = batch.retry_at if next_due is None else min(next_due, batch.retry_at)
            self._retries = waiting
            ready.extend(self._full)
            self._full.clear()
            for key, batch in list(self._open.items()):
                due = batch.created + self.linger_s
                if rush or due <= now:
                    ready.append(batch)
                    del self._open[key]
                else:
                    next_due = due if next_due is None else min(next_due, due)
        return ready, next_due

    def retry(self, batch: ProduceBatch) -> None:
        """Queue a batch again; it is due at batch.retry_at."""
        with self._lock:
            self._retries.append(batch)

    def completed(self, count: int) -> None:
        """count records were acknowledged or failed."""
        with self._lock:
            self._incomplete -= count
            self._space.notify_all()
            if self._incomplete == 0:
                self._idle.notify_all()

    def wait_until_idle(self, timeout_s: float | None) -> bool:
        """Send everything queued now and wait until all of it completes; False on timeout."""
        with self._lock:
            self._flushing += 1
        self._wakeup()
        try:
            with self._lock:
                return self._idle.wait_for(lambda: self._incomplete == 0, timeout_s)
        finally:
            with self._lock:
                self._flushing -= 1

    def has_queued(self) -> bool:
        with self._lock:
            return bool(self._open or self._full or self._retries)

    def stop(self) -> list[ProduceBatch]:
        """Refuse further records; remove and return every queued batch (to be failed)."""
        with self._lock:
            self.stopped = True
            batches = [*self._retries, *self._full, *self._open.values()]
            self._retries.clear()
            self._full.clear()
            self._open.clear()
            return batches
