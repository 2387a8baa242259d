"""QueueWorkload: Jepsen's Kafka queue workload against squall's replicated log (or any
system with a `workloads.client.ClientFactory`).

Producers send unique ints to random keys (async by default, many sends in flight, no
retries inside the client) and now and then crash; consumers of one group poll, commit and
crash; all at a total rate split by the op mix. Every operation goes into the history as it
happens. The runner's sequence is::

    workload = QueueWorkload(spec)
    workload.prepare(bootstrap)                 # the topic, with leaders and a full ISR
    workload.run(bootstrap, zk, writer, stop_event=..., time_limit_s=60, rng=rng)
    ...heal every fault, wait for recovery...
    workload.final_read(bootstrap, writer)      # final: true operations

`counters` can be read from another thread at any time for a progress display.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Literal

from workloads.acknowledged import AcknowledgedSends
from workloads.client import ClientFactory
from workloads.clients import speaks_kafka
from workloads.consumer_worker import ConsumerWorker
from workloads.counters import CounterSnapshot, WorkloadCounters
from workloads.errors import WorkloadFailedError, WorkloadSpecError
from workloads.final_read import FinalRead, FinalReadResult
from workloads.group_members import GroupMembers
from workloads.leaders import LeaderView
from workloads.producer_worker import ProducerWorker
from workloads.rate import RateLimiter
from workloads.recorder import HistorySink, OperationRecorder, ProcessNumbers
from workloads.spec import WorkloadSpec
from workloads.squall_client import SquallClientFactory
from workloads.topic_setup import ensure_topic
from workloads.values import ValueSequence

log = logging.getLogger(__name__)

ABANDONED = "the workload stopped before this operation completed; its outcome is unknown"
_WATCH_INTERVAL_S = 0.05


@dataclass(frozen=True, slots=True)
class WorkloadRunSummary:
    """How a run ended and what it did."""

    stopped_by: Literal["time-limit", "stop-event"]
    duration_s: float
    counters: CounterSnapshot
    acknowledged: int
    """Sends acknowledged with an offset."""
    abandoned: int
    """Operations still in flight at the shutdown timeout, completed as `info`."""


class QueueWorkload:
    """The queue workload of one test; one instance per test (values and process numbers
    stay unique across `run` and `final_read`). Its clients come from `client_factory`,
    squall's own by default, but for the members of a group (`group_membership`): each runs
    in a process of its own, opened there by the client the spec names."""

    name = "queue"

    def __init__(
        self, spec: WorkloadSpec | None = None, *, client_factory: ClientFactory | None = None
    ) -> None:
        self.spec = spec if spec is not None else WorkloadSpec()
        self.client_factory = (
            client_factory if client_factory is not None else SquallClientFactory()
        )
        self.counters = WorkloadCounters()
        self.acknowledged = AcknowledgedSends()
        self.values = ValueSequence()
        self.processes = ProcessNumbers()
        self.members = GroupMembers()
        """The consumers as members of the group (`group_membership`), each in a process of
        its own opened by the spec's client, for the nemesis to pause, kill and make leave."""
        self._prepared: str | None = None
        self._failures: list[BaseException] = []
        self._failure_lock = threading.Lock()

    def prepare(self, bootstrap: str, *, timeout_s: float = 60.0) -> None:
        """Create the topic unless it exists; wait for leaders and a full ISR."""
        ensure_topic(bootstrap, self.spec, client_factory=self.client_factory, timeout_s=timeout_s)
        self._prepared = bootstrap

    def run(
        self,
        bootstrap: str,
        zookeeper_connect: str | None,
        writer: HistorySink,
        *,
        stop_event: threading.Event,
        time_limit_s: float,
        rng: random.Random,
    ) -> WorkloadRunSummary:
        """Run the workers until `time_limit_s` passes or `stop_event` is set.

        Waits up to `spec.shutdown_timeout_s` for operations in flight, then completes any
        left as `info`. Raises WorkloadFailedError if a worker hit an unexpected error.
        """
        spec = self.spec
        if not time_limit_s > 0:
            raise WorkloadSpecError(f"time_limit_s is {time_limit_s!r}, expected > 0")
        if (
            spec.consumers > 0
            and not zookeeper_connect
            and not speaks_kafka(spec.client)
            and not spec.group_membership
        ):
            raise WorkloadSpecError(
                "squall's consumers outside the group (group_membership=False) keep their "
                "group's offsets in ZooKeeper: pass zookeeper_connect (the cluster's "
                "HOST:PORT), make them members of the group (the default with subscribe: the "
                "group's coordinator keeps them), or set consumers=0"
            )
        if self._prepared != bootstrap:
            self.prepare(bootstrap)
        self._failures.clear()
        halt = threading.Event()
        recorder = OperationRecorder(writer, numbers=self.processes, counters=self.counters)
        leaders = (
            LeaderView(bootstrap, spec.topic, client_factory=self.client_factory)
            if spec.producers > 0
            else None
        )
        self.members.start()
        threads = self._workers(bootstrap, zookeeper_connect or "", recorder, leaders, rng, halt)
        self.counters.restart_clock()
        started = time.monotonic()
        if leaders is not None:
            leaders.start()
        for thread in threads:
            thread.start()
        stopped_by: Literal["time-limit", "stop-event"] = "time-limit"
        try:
            end = started + time_limit_s
            while not halt.is_set():
                left = end - time.monotonic()
                if left <= 0:
                    break
                if stop_event.wait(min(left, _WATCH_INTERVAL_S)):
                    stopped_by = "stop-event"
                    break
        finally:
            halt.set()
            self.members.close()
            give_up = time.monotonic() + spec.shutdown_timeout_s
            for thread in threads:
                thread.join(max(0.0, give_up - time.monotonic()))
            abandoned = recorder.abandon_outstanding(ABANDONED)
            self.counters.stop_clock()
            if leaders is not None:
                leaders.stop()
        duration = time.monotonic() - started
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            log.warning("workload threads still busy after the shutdown timeout: %s", stuck)
        if self._failures:
            first = self._failures[0]
            raise WorkloadFailedError(
                f"a workload worker failed with {type(first).__name__}: {first}; the run "
                "stopped early and its history is complete up to then"
            ) from first
        return WorkloadRunSummary(
            stopped_by=stopped_by,
            duration_s=duration,
            counters=self.counters.snapshot(),
            acknowledged=self.acknowledged.count(),
            abandoned=abandoned,
        )

    def final_read(
        self,
        bootstrap: str,
        writer: HistorySink,
        *,
        deadline_s: float | None = None,
        stop_event: threading.Event | None = None,
    ) -> FinalReadResult:
        """Read every key to its end until every acknowledged offset is seen (final: true)."""
        recorder = OperationRecorder(
            writer, numbers=self.processes, counters=self.counters, final=True
        )
        return FinalRead(
            self.spec,
            bootstrap,
            recorder,
            self.acknowledged,
            client_factory=self.client_factory,
            deadline_s=deadline_s,
            stop=stop_event,
        ).run()

    # --- internals -----------------------------------------------------------------------

    def _workers(
        self,
        bootstrap: str,
        zookeeper_connect: str,
        recorder: OperationRecorder,
        leaders: LeaderView | None,
        rng: random.Random,
        halt: threading.Event,
    ) -> list[threading.Thread]:
        spec = self.spec

        def failed(err: BaseException) -> None:
            log.error("workload worker failed: %s", err, exc_info=err)
            with self._failure_lock:
                self._failures.append(err)
            halt.set()

        threads: list[threading.Thread] = []
        send_limiter = RateLimiter(spec.producer_rate, rng=random.Random(rng.getrandbits(64)))
        for index in range(spec.producers):
            producer = ProducerWorker(
                index,
                spec,
                bootstrap,
                client_factory=self.client_factory,
                recorder=recorder,
                values=self.values,
                limiter=send_limiter,
                acknowledged=self.acknowledged,
                leaders=leaders,
                rng=random.Random(rng.getrandbits(64)),
                stop=halt,
                on_failure=failed,
            )
            threads.append(
                threading.Thread(target=producer.run, name=f"producer-{index}", daemon=True)
            )
        if spec.consumers > 0:
            poll_limiter = RateLimiter(spec.consumer_rate, rng=random.Random(rng.getrandbits(64)))
            for index in range(spec.consumers):
                consumer = ConsumerWorker(
                    index,
                    spec,
                    bootstrap,
                    zookeeper_connect,
                    client_factory=self.client_factory,
                    recorder=recorder,
                    limiter=poll_limiter,
                    rng=random.Random(rng.getrandbits(64)),
                    stop=halt,
                    on_failure=failed,
                    members=self.members,
                )
                threads.append(
                    threading.Thread(target=consumer.run, name=f"consumer-{index}", daemon=True)
                )
        return threads
