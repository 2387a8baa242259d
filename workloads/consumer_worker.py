"""ConsumerWorker: one member of the consumer group, polling, committing and crashing.

Each step draws poll or commit (or, with a `mix.crash` weight, a crash) from the op mix.
Crashes are drawn in time: a consumer crashes after an exponentially distributed time with
mean `consumer_crash_interval_s` from its start, whatever it did meanwhile, so an outage
does not turn fast-failing polls into a churn of crashes. The first
`long_lived_consumers` workers never crash on purpose: they tail each partition from the
group's committed offsets for the whole run, through every fault, as their client
reconnects. A failed poll (or a failed start) is followed by a pause that doubles with each
failure in a row, from `poll_backoff_ms` up to `poll_backoff_max_ms`. The worker remembers, per
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
group's committed offsets: the `ok` assign or subscribe carries `positions`, the offset the
new client starts reading at per key. subscribe outside the group (`group_membership = false`)
assigns every partition; assign takes the worker's share of them.

With `group_membership` (subscribe's default), a consumer joins the group instead (its crashes
less frequent by default: WorkloadSpec.consumer_crash_interval_s): its `ok` subscribe holds no keys,
and the group's coordinator gives it partitions at each rebalance. A poll during which the
member was given an assignment is preceded in the history by what happened, as the eager
protocol does it: an `ok` assign of no keys (everything revoked), then an `ok` assign of the
partitions given, with the `positions` the member resumed them at (the group's commits); the
poll itself is written after the fetch, as in at-most-once mode. The member commits only
the partitions it owns; at most once, it commits past what it fetched before delivering it,
as above.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from workloads.client import (
    ClientFactory,
    Consumer,
    GroupConsumer,
    OperationError,
    Record,
    TopicPartition,
)
from workloads.group_members import GroupMembers
from workloads.member_process import MemberProcess
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
        clock: Callable[[], float] = time.monotonic,
        members: GroupMembers | None = None,
    ) -> None:
        """With `members` (and `group_membership`), each member this worker opens runs in a
        process of its own (`workloads.member_process`, the spec's client), registered there
        under the worker's `name` for the nemesis; else members are opened in this process
        by `client_factory`."""
        self.index = index
        self.name = f"consumer-{index}"
        self.spec = spec
        self.bootstrap = bootstrap
        self.zookeeper_connect = zookeeper_connect
        self.client_factory = client_factory
        self.recorder = recorder
        self.limiter = limiter
        self.rng = rng
        self.stop = stop
        self.on_failure = on_failure
        self.clock = clock
        self.long_lived = index < spec.long_lived_consumers
        self.crash_at: float | None = None
        """When the open client is due to crash; None if it never will."""
        self.failures_in_a_row = 0
        self.crashes = 0
        self.client = recorder.new_client()
        self.partitions: list[TopicPartition] = [(spec.topic, p) for p in spec.assignment(index)]
        self.consumer: Consumer | None = None
        self.member: GroupConsumer | None = None
        """The open client, when it is a member of the group (`group_membership`)."""
        self.assignments_seen = 0
        self.delivered: dict[TopicPartition, int] = {}
        self.process: MemberProcess | None = None
        """The open member's process, when members run in processes of their own."""
        self._members = members if spec.group_membership else None
        self._leave_asked = False
        """Set by `leave` for the worker's thread: the open member is to leave its group."""
        self._left = threading.Event()
        self._member_process = -1
        """The process number the open member joined under."""
        if self._members is not None:
            self._members.add(self)
        mix = spec.mix
        self._poll_below = mix.poll / mix.consumer_total
        self._commit_below = (mix.poll + mix.commit) / mix.consumer_total
        self._crash_share = mix.crash / mix.consumer_total

    def run(self) -> None:
        try:
            while self.limiter.acquire(self.stop):
                if self._leave_asked and self.consumer is not None:
                    self.leave_group()
                elif self.consumer is None:
                    self._after(self.open())
                elif self._member_retired():
                    self.discard()
                elif self.crash_due():
                    self.crash()
                else:
                    self._step_unless_killed()
        except BaseException as err:
            self.on_failure(err)
        finally:
            if self.consumer is not None:
                with contextlib.suppress(Exception):
                    self.consumer.close()
                self.consumer = None

    def _step_unless_killed(self) -> None:
        """A step; one cut short because the member's process died (killed) ends there, and
        the next retires the member (`crash_due`)."""
        try:
            self._after(self.step())
        except OperationError:
            if self.process is None or not self.process.dead:
                raise

    def step(self) -> bool | None:
        """One operation drawn from the mix; whether it was a poll that succeeded (None for
        a commit or a crash, which neither start nor end a run of failed polls)."""
        draw = self.rng.random()
        if draw < self._poll_below:
            if self.member is not None:
                return self.poll_as_member(self.member)
            if self.spec.consumer_mode == "at-least-once":
                return self.poll()
            return self.poll_at_most_once()
        if draw < self._commit_below:
            self.commit()
        elif not self.long_lived:
            self.crash()
        return None

    def _member_retired(self) -> bool:
        """Whether the open member's process was retired by an `info` completion (a commit
        that may or may not have landed): a member is one process, so it is thrown away and
        a new one joins, as Jepsen opens a new client for a crashed process's successor.
        (Kept on under the new number, a member that rejoined its group's current
        generation would show one member as two owners of its partitions.)"""
        return self.member is not None and self.client.process != self._member_process

    def crash_due(self) -> bool:
        """Whether the open client's drawn crash time has come, or its process died."""
        if self.process is not None and self.process.dead:
            return True
        return self.crash_at is not None and self.clock() >= self.crash_at

    # --- the nemesis's side (`workloads.group_members.MemberHost`) ---------------------

    def member_pid(self) -> int | None:
        process = self.process
        return None if process is None or process.dead else process.pid

    def kill_member(self) -> bool:
        process = self.process
        return process is not None and process.kill()

    def leave(self, timeout_s: float) -> bool:
        """Ask the worker's thread to have its open member leave the group cleanly; whether
        it did within `timeout_s`."""
        if self.member_pid() is None:
            return False
        self._left.clear()
        self._leave_asked = True
        return self._left.wait(timeout_s)

    def backoff_s(self) -> float:
        """The pause after the current run of failures: doubling from poll_backoff_ms."""
        if self.failures_in_a_row == 0:
            return 0.0
        spec = self.spec
        delay = spec.poll_backoff_ms * (1 << min(self.failures_in_a_row - 1, 30))
        return min(delay, spec.poll_backoff_max_ms) / 1000

    # --- steps -------------------------------------------------------------------------

    def open(self) -> bool:
        """A fresh client joins the group at its committed offsets (assign or subscribe);
        its `ok` completion says where it starts reading (`positions`)."""
        keys = [key_name(t, p) for t, p in self.partitions]
        named = {"member": self.name} if self._members is not None else {}
        _, opened = self.recorder.record_assign(
            self.client,
            self.spec.subscription,
            keys,
            self._connect,
            ok_fields=lambda result: {**_positions(result), **named},
        )
        if opened is None:
            return False
        self.consumer, self.delivered = opened
        self._member_process = self.client.process
        interval = self.spec.consumer_crash_interval_s
        if self.long_lived or interval is None:
            self.crash_at = None
        else:
            self.crash_at = self.clock() + self.rng.expovariate(1.0 / interval)
        return True

    def poll(self) -> bool:
        """At-least-once: deliver what one poll returns; False if it failed."""
        consumer = self._require_consumer()
        pending = self.recorder.invoke_poll(self.client)
        try:
            records = consumer.poll(self.spec.poll_timeout_ms)
        except Exception as err:
            self._rewind(consumer)
            self.recorder.complete_poll(pending, err)
            return False
        self._advance(records)
        self.recorder.complete_poll(pending, records)
        return True

    def _fetch(self, consumer: Consumer) -> Sequence[Record] | None:
        """One poll fetched before it is delivered (written down); None if it failed, which
        is written down as a failed poll after rewinding to what was delivered."""
        try:
            return consumer.poll(self.spec.poll_timeout_ms)
        except Exception as err:
            self._rewind(consumer)
            self.recorder.complete_poll(self.recorder.invoke_poll(self.client), err)
            return None

    def poll_as_member(self, member: GroupConsumer) -> bool:
        """As a member of the group: fetch, write down any assignment the poll brought,
        then deliver (at-most-once: after committing past what was fetched); False if the
        fetch failed."""
        records = self._fetch(member)
        if records is None:
            return False
        if member.assignments() != self.assignments_seen:
            self.assignments_seen = member.assignments()
            self._reassigned(member, records)
        at_most_once = self.spec.consumer_mode == "at-most-once"
        if at_most_once and records and not self._commit_fetched(member, records):
            return True
        pending = self.recorder.invoke_poll(self.client)
        self._advance(records)
        self.recorder.complete_poll(pending, records)
        return True

    def _reassigned(self, member: GroupConsumer, records: Sequence[Record]) -> None:
        """Write down a rebalance: everything revoked, then the partitions given, each
        resumed where this poll's first record of it is (else the member's position)."""
        owned = member.assignment()
        self.recorder.record_assign(self.client, "assign", [], lambda: None)
        first: dict[TopicPartition, int] = {}
        for record in records:
            first.setdefault((record.topic, record.partition), record.offset)

        def starts() -> tuple[Consumer, dict[TopicPartition, int]]:
            found = {}
            for tp in owned:
                if tp in first:
                    found[tp] = first[tp]
                    continue
                with contextlib.suppress(Exception):  # not known yet: no position recorded
                    found[tp] = member.position(tp)
            return member, found

        keys = [key_name(t, p) for t, p in owned]
        generation = member.generation()
        _, given = self.recorder.record_assign(
            self.client,
            "assign",
            keys,
            starts,
            ok_fields=lambda opened: {**_positions(opened), "generation": generation},
        )
        self.delivered = dict(given[1]) if given is not None else {}

    def poll_at_most_once(self) -> bool:
        """At-most-once: fetch, commit past the fetched records, then deliver them; False
        if the fetch failed."""
        consumer = self._require_consumer()
        records = self._fetch(consumer)
        if records is None:
            return False
        if records and not self._commit_fetched(consumer, records):
            return True
        pending = self.recorder.invoke_poll(self.client)
        self._advance(records)
        self.recorder.complete_poll(pending, records)
        return True

    def _commit_fetched(self, consumer: Consumer, records: Sequence[Record]) -> bool:
        """At-most-once: commit past fetched records before they are delivered; False if
        they are not to be delivered (the commit failed: rewound, they will be fetched
        again; or the consumer died right after it, the group having committed past them)."""
        after = dict(self.delivered)
        for record in records:
            after[(record.topic, record.partition)] = record.offset + 1
        fields = {"generation": self.member.generation()} if self.member is not None else {}
        committed = self.recorder.record_commit(
            self.client,
            {key_name(t, p): o for (t, p), o in after.items()},
            lambda: consumer.commit(after),
            **fields,
        )
        if committed is None or committed.type != "ok":
            self._rewind(consumer)
            return False
        drawn = self._crash_share > 0 and self.rng.random() < self._crash_share
        if not self.long_lived and (drawn or self.crash_due()):
            self.crash()
            return False
        return True

    def commit(self) -> None:
        """Commit the positions after the records delivered so far."""
        consumer = self._require_consumer()
        offsets = dict(self.delivered)
        if not offsets:
            return
        fields = {"generation": self.member.generation()} if self.member is not None else {}
        self.recorder.record_commit(
            self.client,
            {key_name(t, p): o for (t, p), o in offsets.items()},
            lambda: consumer.commit(offsets),
            **fields,
        )

    def crash(self) -> None:
        """Throw the client away; the next step opens a fresh one."""
        consumer = self._forget()
        self.crashes += 1
        self.recorder.record_crash(self.client, consumer.close)

    def discard(self) -> None:
        """Throw away a member whose process an `info` completion already retired, without
        a crash of its own: the client's process number has moved on, and a crash written
        under it would be an operation of a process that never opened a client."""
        consumer = self._forget()
        with contextlib.suppress(Exception):
            consumer.close()

    def _forget(self) -> Consumer:
        """The open consumer, no longer the worker's."""
        consumer = self._require_consumer()
        self.consumer = self.member = self.process = None
        self.delivered = {}
        self.crash_at = None
        return consumer

    def leave_group(self) -> None:
        """The member leaves its group cleanly (its client closed: a LeaveGroup) and its
        process is retired, written down as a crash; the next step opens a fresh one."""
        self._leave_asked = False
        alive = self.process is not None and not self.process.dead
        self.crash()
        if alive:
            self._left.set()

    # --- internals ---------------------------------------------------------------------

    def _after(self, succeeded: bool | None) -> None:
        """Count a failure in a row, or end the run of them; pause after a failure."""
        if succeeded is None:
            return
        self.failures_in_a_row = 0 if succeeded else self.failures_in_a_row + 1
        delay = self.backoff_s()
        if delay > 0:
            self.stop.wait(delay)

    def _connect(self) -> tuple[Consumer, dict[TopicPartition, int]]:
        if self.spec.group_membership:
            return self._join()
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

    def _join(self) -> tuple[Consumer, dict[TopicPartition, int]]:
        """A member of the group, subscribed; its partitions come with its polls."""
        settings = self.spec.consumer_settings(self.zookeeper_connect)
        client_id = f"squall-consumer-{self.index}"
        member: GroupConsumer
        if self._members is not None:
            member = process = MemberProcess(
                self.name,
                client=self.spec.client,
                bootstrap=self.bootstrap,
                settings=settings,
                client_id=client_id,
            )
        else:
            member = self.client_factory.group_consumer(
                self.bootstrap, settings=settings, client_id=client_id
            )
        try:
            member.subscribe(self.spec.topic)
        except BaseException:
            with contextlib.suppress(Exception):
                member.close()
            raise
        if self._members is not None:
            self.process = process
        self.member, self.assignments_seen = member, 0
        return member, {}

    def _require_consumer(self) -> Consumer:
        if self.consumer is None:
            raise RuntimeError(f"consumer worker {self.index} has no client; open() first")
        return self.consumer

    def _advance(self, records: Sequence[Record]) -> None:
        for record in records:
            self.delivered[(record.topic, record.partition)] = record.offset + 1

    def _rewind(self, consumer: Consumer) -> None:
        if self.process is not None and self.process.dead:
            return
        owned = set(self.member.assignment()) if self.member is not None else None
        for tp, offset in self.delivered.items():
            if owned is None or tp in owned:  # a member may have lost some in the poll
                consumer.seek(tp, offset)


def _positions(opened: tuple[Consumer, dict[TopicPartition, int]]) -> dict[str, Any]:
    """The `positions` field of an `ok` assign or subscribe: where each key starts."""
    return {"positions": {key_name(t, p): offset for (t, p), offset in opened[1].items()}}
