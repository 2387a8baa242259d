"""ProducerWorker: one producer client sending unique values to random keys, and crashing.

Sync mode: one logical client, one send at a time. Async mode (the default): the producer
batches and pipelines, so the worker keeps up to `in_flight` sends outstanding per
partition, each under a logical client (process) of its own, as a process has one operation
at a time (`workloads.send_slots`); each send goes to a partition drawn from those with a
free slot, so sends stuck on one partition's dead or deposed leader do not stop the others;
after a failed send its client rests (`send_backoff_ms`, doubling with the partition's
failures in a row), so that a partition whose sends fail at once does not take the others'.
A send is invoked when it is handed to the client and completes from the producer's
callback, on its I/O thread, at the moment the outcome is known, however late.

Each step draws a send or, by the mix's `producer_crash` weight, a crash: the producer
client is closed at once without flushing. As in Jepsen, the crash is an operation (f
"crash", completed `info`); every send still in flight completes `info` with error
"crashed" first (it may or may not have landed), and a new client, under new process
numbers, takes over at the next step.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import threading
from collections.abc import Callable

from workloads.acknowledged import AcknowledgedSends
from workloads.client import ClientFactory, Producer, SendFuture, SendResult
from workloads.leaders import LeaderView
from workloads.rate import RateLimiter
from workloads.recorder import Client, OperationRecorder, PendingOp
from workloads.send_slots import SendSlots
from workloads.spec import WorkloadSpec
from workloads.values import ValueSequence, encode_value

log = logging.getLogger(__name__)
FailureHandler = Callable[[BaseException], None]
CRASHED = "crashed"
"""The `error` of a send that was in flight when its producer crashed."""


class ProducerSession:
    """One producer client and the logical clients sending through it, until it crashes:
    per partition in async mode (`slots`), one for every partition in sync mode."""

    __slots__ = ("_in_flight", "_lock", "producer", "slots", "sync_client")

    def __init__(self, producer: Producer, clients: SendSlots | Client) -> None:
        self.producer = producer
        self.slots = clients if isinstance(clients, SendSlots) else None
        self.sync_client = clients if isinstance(clients, Client) else None
        self._lock = threading.Lock()
        self._in_flight: dict[int, PendingOp] = {}

    def handed(self, pending: PendingOp) -> None:
        """`pending` was handed to the producer: in flight until `settled`."""
        with self._lock:
            self._in_flight[id(pending)] = pending

    def settled(self, pending: PendingOp) -> None:
        with self._lock:
            self._in_flight.pop(id(pending), None)

    def take_in_flight(self) -> list[PendingOp]:
        """Every send in flight now, forgotten by the session, in the order handed."""
        with self._lock:
            pending = list(self._in_flight.values())
            self._in_flight.clear()
        return pending

    def idle_client(self) -> Client | None:
        """A client with no send in flight, if there is one."""
        if self.slots is not None:
            return self.slots.take_any()
        return self.sync_client


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
        self.session: ProducerSession | None = None
        """The producer client now in use; None before the first step and after a crash."""
        self.crashes = 0
        self._failures_in_a_row: dict[int, int] = {}
        mix = spec.mix
        self._crash_share = mix.producer_crash / mix.producer_total if mix.send > 0 else 0.0
        # The first client's process numbers are taken now, in worker order, so that a
        # seeded run numbers its processes the same way every time.
        self._clients: SendSlots | Client | None = self._new_clients()

    def run(self) -> None:
        try:
            while self.limiter.acquire(self.stop):
                session = self.session if self.session is not None else self.open()
                if self._crash_share and self.rng.random() < self._crash_share:
                    self.crash()
                elif not self.send(session):
                    return
        except BaseException as err:
            self.on_failure(err)
        finally:
            if self.session is not None:
                self._close(self.session.producer)

    # --- steps -------------------------------------------------------------------------

    def open(self) -> ProducerSession:
        """A new producer client, with logical clients that have sent nothing yet."""
        clients = self._clients if self._clients is not None else self._new_clients()
        self._clients = None
        suffix = f".{self.crashes}" if self.crashes else ""
        producer = self.client_factory.producer(
            self.bootstrap,
            acks=self.spec.acks,
            mode=self.spec.producer_mode,
            settings=self.spec.producer_settings(
                idempotent=self.spec.is_idempotent_producer(self.index)
            ),
            client_id=f"squall-producer-{self.index}{suffix}",
        )
        self.session = ProducerSession(producer, clients)
        return self.session

    def crash(self) -> None:
        """Close the producer client at once, without flushing (see the module docstring)."""
        session = self.session
        if session is None:
            raise RuntimeError(f"producer worker {self.index} has no client; open() first")
        self.session = None
        self.crashes += 1
        client = session.idle_client()
        if client is None:  # every logical client has a send in flight
            client = self.recorder.new_client()

        def discard() -> None:
            for pending in session.take_in_flight():
                self.recorder.complete(pending, "info", pending.invocation.value, error=CRASHED)
            session.producer.close(0.0)

        self.recorder.record_crash(client, discard)

    def send(self, session: ProducerSession) -> bool:
        """Send one value to a random key: sync, until its outcome; async, handed to the
        producer. False if the worker was stopped while waiting for an idle client."""
        if self.spec.producer_mode == "sync":
            self._send_sync(session)
            return True
        return self._send_async(session)

    # --- sends -------------------------------------------------------------------------

    def _new_clients(self) -> SendSlots | Client:
        if self.spec.producer_mode == "sync":
            return self.recorder.new_client()
        return SendSlots(
            {
                partition: [self.recorder.new_client() for _ in range(self.spec.in_flight)]
                for partition in range(self.spec.partitions)
            }
        )

    def _next_send(self, client: Client, partition: int) -> tuple[PendingOp, bytes]:
        value = self.values.next()
        node = self.leaders.node(partition) if self.leaders is not None else None
        pending = self.recorder.invoke_send(
            client, self.spec.key(partition), value, acks=self.spec.acks, node=node
        )
        return pending, encode_value(value, self.spec.value_size)

    def _settle(
        self, session: ProducerSession, pending: PendingOp, outcome: SendResult | BaseException
    ) -> None:
        session.settled(pending)
        self.acknowledged.add_completion(self.recorder.complete_send(pending, outcome))

    def _send_sync(self, session: ProducerSession) -> None:
        client = session.sync_client
        if client is None:
            raise RuntimeError(f"producer worker {self.index} has no sync client")
        partition = self.rng.randrange(self.spec.partitions)
        pending, payload = self._next_send(client, partition)
        session.handed(pending)
        outcome: SendResult | BaseException
        try:
            outcome = session.producer.send(self.spec.topic, partition, payload).result()
        except Exception as err:
            outcome = err
        self._settle(session, pending, outcome)

    def _send_async(self, session: ProducerSession) -> bool:
        """Hand one send to the producer, to a partition with a free slot; False once
        stopped while waiting for one."""
        slots = session.slots
        if slots is None:
            raise RuntimeError(f"producer worker {self.index} has no send slots")
        taken = slots.take(self.rng, self.stop)
        if taken is None:
            return False
        partition, client = taken
        pending, payload = self._next_send(client, partition)
        session.handed(pending)
        try:
            future = session.producer.send(self.spec.topic, partition, payload)
        except Exception as err:
            self._settle(session, pending, err)
            slots.give_back(partition, client, rest_s=self._rest_after(partition, True))
            return True
        future.add_callback(functools.partial(self._on_done, slots, partition, session, pending))
        return True

    def _rest_after(self, partition: int, failed: bool) -> float:
        """How long a client rests after its send to `partition`: after failures in a row
        of that partition, send_backoff_ms doubling up to ten times it; else 0."""
        if not failed:
            self._failures_in_a_row[partition] = 0
            return 0.0
        failures = self._failures_in_a_row.get(partition, 0) + 1
        self._failures_in_a_row[partition] = failures
        base = self.spec.send_backoff_ms
        return min(base * (1 << min(failures - 1, 30)), 10 * base) / 1000

    def _on_done(
        self,
        slots: SendSlots,
        partition: int,
        session: ProducerSession,
        pending: PendingOp,
        future: SendFuture,
    ) -> None:
        rest = 0.0
        try:
            outcome: SendResult | BaseException
            try:
                outcome = future.result(0)
            except Exception as err:
                outcome = err
            rest = self._rest_after(partition, isinstance(outcome, BaseException))
            self._settle(session, pending, outcome)
        except BaseException as err:  # the producer would only log it: stop the run instead
            self.on_failure(err)
        finally:
            slots.give_back(partition, pending.client, rest_s=rest)

    def _close(self, producer: Producer) -> None:
        """Let sends in flight finish (async) within the shutdown timeout, then close."""
        timeout = self.spec.shutdown_timeout_s
        with contextlib.suppress(Exception):
            producer.flush(timeout)
        try:
            producer.close(timeout)
        except Exception as err:
            log.warning("producer %d did not close cleanly: %s", self.index, err)
