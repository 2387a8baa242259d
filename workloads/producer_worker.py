"""ProducerWorker: one producer client sending unique values to random keys.

Sync mode: one logical client, one send at a time. Async mode: the producer batches and
pipelines, so the worker keeps up to `in_flight` sends outstanding, each under a logical
client (process) of its own, as a process has one operation at a time; each send completes
from the producer's callback, on its I/O thread, at the moment the outcome is known.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import random
import threading
from collections.abc import Callable

from workloads.acknowledged import AcknowledgedSends
from workloads.client import ClientFactory, Producer, SendFuture, SendResult
from workloads.leaders import LeaderView
from workloads.rate import RateLimiter
from workloads.recorder import Client, OperationRecorder, PendingOp
from workloads.spec import WorkloadSpec
from workloads.values import ValueSequence, encode_value

log = logging.getLogger(__name__)
FailureHandler = Callable[[BaseException], None]


class ProducerWorker:
    """Runs in its own thread (`run`) until `stop` is set; reports bugs to `on_failure`."""

    def __init__(
        self,
        index: int,
        spec: WorkloadSpec,
        bootstrap: str,
        *,
        client_factory: ClientFactory,
        recorder: OperationRecorder,
        values: ValueSequence,
        limiter: RateLimiter,
        acknowledged: AcknowledgedSends,
        leaders: LeaderView | None,
        rng: random.Random,
        stop: threading.Event,
        on_failure: FailureHandler,
    ) -> None:
        self.index = index
        self.spec = spec
        self.bootstrap = bootstrap
        self.client_factory = client_factory
        self.recorder = recorder
        self.values = values
        self.limiter = limiter
        self.acknowledged = acknowledged
        self.leaders = leaders
        self.rng = rng
        self.stop = stop
        self.on_failure = on_failure
        slots = spec.in_flight if spec.producer_mode == "async" else 1
        self._idle: queue.SimpleQueue[Client] = queue.SimpleQueue()
        for _ in range(slots):
            self._idle.put(recorder.new_client())

    def run(self) -> None:
        producer: Producer | None = None
        try:
            producer = self.client_factory.producer(
                self.bootstrap,
                acks=self.spec.acks,
                mode=self.spec.producer_mode,
                settings=self.spec.producer_settings(),
                client_id=f"squall-producer-{self.index}",
            )
            if self.spec.producer_mode == "sync":
                self._run_sync(producer)
            else:
                self._run_async(producer)
        except BaseException as err:
            self.on_failure(err)
        finally:
            if producer is not None:
                self._close(producer)

    def _next_send(self, client: Client) -> tuple[PendingOp, int, bytes]:
        partition = self.rng.randrange(self.spec.partitions)
        value = self.values.next()
        node = self.leaders.node(partition) if self.leaders is not None else None
        pending = self.recorder.invoke_send(
            client, self.spec.key(partition), value, acks=self.spec.acks, node=node
        )
        return pending, partition, encode_value(value, self.spec.value_size)

    def _settle(self, pending: PendingOp, outcome: SendResult | BaseException) -> None:
        self.acknowledged.add_completion(self.recorder.complete_send(pending, outcome))

    # --- sync --------------------------------------------------------------------------

    def _run_sync(self, producer: Producer) -> None:
        client = self._idle.get()
        while self.limiter.acquire(self.stop):
            pending, partition, payload = self._next_send(client)
            outcome: SendResult | BaseException
            try:
                outcome = producer.send(self.spec.topic, partition, payload).result()
            except Exception as err:
                outcome = err
            self._settle(pending, outcome)

    # --- async -------------------------------------------------------------------------

    def _run_async(self, producer: Producer) -> None:
        while self.limiter.acquire(self.stop):
            client = self._idle_client()
            if client is None:
                return
            pending, partition, payload = self._next_send(client)
            try:
                future = producer.send(self.spec.topic, partition, payload)
            except Exception as err:
                self._settle(pending, err)
                self._idle.put(client)
                continue
            future.add_callback(functools.partial(self._on_done, pending))

    def _idle_client(self) -> Client | None:
        """A client with no send in flight, waiting for one; None once stopped."""
        while True:
            try:
                return self._idle.get(timeout=0.05)
            except queue.Empty:
                if self.stop.is_set():
                    return None

    def _on_done(self, pending: PendingOp, future: SendFuture) -> None:
        try:
            outcome: SendResult | BaseException
            try:
                outcome = future.result(0)
            except Exception as err:
                outcome = err
            self._settle(pending, outcome)
        except BaseException as err:  # the producer would only log it: stop the run instead
            self.on_failure(err)
        finally:
            self._idle.put(pending.client)

    def _close(self, producer: Producer) -> None:
        """Let sends in flight finish (async) within the shutdown timeout, then close."""
        timeout = self.spec.shutdown_timeout_s
        with contextlib.suppress(Exception):
            producer.flush(timeout)
        try:
            producer.close(timeout)
        except Exception as err:
            log.warning("producer %d did not close cleanly: %s", self.index, err)
