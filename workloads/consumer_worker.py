"""ConsumerWorker: one member of the consumer group, polling, committing and crashing.

Each step draws poll, commit or crash from the op mix. The worker remembers, per
partition, the offset after the last record it delivered (recorded in an `ok` poll); that,
not the client's fetch position, is what it commits and where it seeks back to after a
failed poll, so records a failing poll fetched but never returned are read again.

- at-least-once (commit after processing): a poll delivers records; a later commit
  commits the positions after them. A crash in between makes the next client re-read them.
- at-most-once (commit before processing): the worker fetches, commits the positions after
  the fetched records, and only then delivers them as an `ok` poll. The crash weight is
  also the chance of crashing between the commit and the delivery, where an at-most-once
  consumer loses records; the history shows the commit and never the records. The poll's
  invocation is written after the fetch, just before the delivery it represents.

A crash throws the client away (f "crash", type `info`, so the process is retired); the
next step opens a fresh client, records its assign or subscribe, and resumes from the
group's committed offsets. subscribe assigns every partition (the consumer has no group
rebalancing); assign takes the worker's share of them.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable, Sequence

from workloads.client import ClientFactory, Consumer, Record, TopicPartition
from workloads.rate import RateLimiter
from workloads.recorder import OperationRecorder
from workloads.spec import WorkloadSpec, key_name

FailureHandler = Callable[[BaseException], None]


class ConsumerWorker:
    """Runs in its own thread (`run`) until `stop` is set; reports bugs to `on_failure`."""

    def __init__(
        self,
        index: int,
        spec: WorkloadSpec,
        bootstrap: str,
        zookeeper_connect: str,
        *,
        client_factory: ClientFactory,
        recorder: OperationRecorder,
        limiter: RateLimiter,
        rng: random.Random,
        stop: threading.Event,
        on_failure: FailureHandler,
    ) -> None:
        self.index = index
        self.spec = spec
        self.bootstrap = bootstrap
        self.zookeeper_connect = zookeeper_connect
        self.client_factory = client_factory
        self.recorder = recorder
        self.limiter = limiter
        self.rng = rng
        self.stop = stop
        self.on_failure = on_failure
        self.client = recorder.new_client()
        self.partitions: list[TopicPartition] = [(spec.topic, p) for p in spec.assignment(index)]
        self.consumer: Consumer | None = None
        self.delivered: dict[TopicPartition, int] = {}
        mix = spec.mix
        self._poll_below = mix.poll / mix.consumer_total
        self._commit_below = (mix.poll + mix.commit) / mix.consumer_total
        self._crash_share = mix.crash / mix.consumer_total

    def run(self) -> None:
        try:
            while self.limiter.acquire(self.stop):
                if self.consumer is None:
                    self.open()
                    continue
                draw = self.rng.random()
                if draw < self._poll_below:
                    if self.spec.consumer_mode == "at-least-once":
                        self.poll()
                    else:
                        self.poll_at_most_once()
                elif draw < self._commit_below:
                    self.commit()
                else:
                    self.crash()
        except BaseException as err:
            self.on_failure(err)
        finally:
            if self.consumer is not None:
                with contextlib.suppress(Exception):
                    self.consumer.close()
                self.consumer = None

    # --- steps -------------------------------------------------------------------------

    def open(self) -> bool:
        """A fresh client joins the group at its committed offsets (assign or subscribe)."""
        keys = [key_name(t, p) for t, p in self.partitions]
        _, opened = self.recorder.record_assign(
            self.client, self.spec.subscription, keys, self._connect
        )
        if opened is None:
            return False
        self.consumer, self.delivered = opened
        return True

    def poll(self) -> None:
        """At-least-once: deliver what one poll returns."""
        consumer = self._require_consumer()
        pending = self.recorder.invoke_poll(self.client)
        try:
            records = consumer.poll(self.spec.poll_timeout_ms)
        except Exception as err:
            self._rewind(consumer)
            self.recorder.complete_poll(pending, err)
            return
        self._advance(records)
        self.recorder.complete_poll(pending, records)

    def poll_at_most_once(self) -> None:
        """At-most-once: fetch, commit past the fetched records, then deliver them."""
        consumer = self._require_consumer()
        try:
            records = consumer.poll(self.spec.poll_timeout_ms)
        except Exception as err:
            self._rewind(consumer)
            self.recorder.complete_poll(self.recorder.invoke_poll(self.client), err)
            return
        if records:
            after = dict(self.delivered)
            for record in records:
                after[(record.topic, record.partition)] = record.offset + 1
            committed = self.recorder.record_commit(
                self.client,
                {key_name(t, p): o for (t, p), o in after.items()},
                lambda: consumer.commit(after),
            )
            if committed is None or committed.type != "ok":
                self._rewind(consumer)  # not delivered: they will be fetched again
                return
            if self.rng.random() < self._crash_share:
                self.crash()  # died before processing: the group has committed past them
                return
        pending = self.recorder.invoke_poll(self.client)
        self._advance(records)
        self.recorder.complete_poll(pending, records)

    def commit(self) -> None:
        """Commit the positions after the records delivered so far."""
        consumer = self._require_consumer()
        offsets = dict(self.delivered)
        if not offsets:
            return
        self.recorder.record_commit(
            self.client,
            {key_name(t, p): o for (t, p), o in offsets.items()},
            lambda: consumer.commit(offsets),
        )

    def crash(self) -> None:
        """Throw the client away; the next step opens a fresh one."""
        consumer = self._require_consumer()
        self.consumer = None
        self.delivered = {}
        self.recorder.record_crash(self.client, consumer.close)

    # --- internals ---------------------------------------------------------------------

    def _connect(self) -> tuple[Consumer, dict[TopicPartition, int]]:
        consumer = self.client_factory.consumer(
            self.bootstrap,
            settings=self.spec.consumer_settings(self.zookeeper_connect),
            client_id=f"squall-consumer-{self.index}",
        )
        try:
            consumer.assign(self.partitions)
            positions = {tp: consumer.position(tp) for tp in self.partitions}
        except BaseException:
            with contextlib.suppress(Exception):
                consumer.close()
            raise
        return consumer, positions

    def _require_consumer(self) -> Consumer:
        if self.consumer is None:
            raise RuntimeError(f"consumer worker {self.index} has no client; open() first")
        return self.consumer

    def _advance(self, records: Sequence[Record]) -> None:
        for record in records:
            self.delivered[(record.topic, record.partition)] = record.offset + 1

    def _rewind(self, consumer: Consumer) -> None:
        for tp, offset in self.delivered.items():
            consumer.seek(tp, offset)
