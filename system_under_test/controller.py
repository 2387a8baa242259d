"""The controller: leader election and ISR bookkeeping, all through ZooKeeper.

One broker at a time is controller: the one whose ephemeral ``/controller`` znode exists,
created together with a bump of ``/controller_epoch``. It watches the live brokers, the
topics and the leaders' ISR-change notifications; it elects leaders (clean: the first live
ISR member in assignment order; else the first live eligible leader replica; unclean, only
where the topic allows it: the first live replica), writes every partition state fenced by the controller epoch, and tells the brokers
with LeaderAndIsr and UpdateMetadata requests through a ``ControllerChannel``.

A replica that restarted since it was last judged in sync may have lost what it held (a
power loss, a cut or rolled-back log): one whose registration is newer than its partition's
state (a bounce the controller saw, or one no controller saw, found at failover by
registration czxid > state mzxid) is shrunk out of the ISR and not elected while an ISR
member that did not restart is live, as Kafka shrinks a failed broker out and KIP-966 keeps
unclean-shutdown replicas from election; it rejoins when its leader finds it caught up.

The eligible leader replicas (ELR, KIP-966) are the replicas a leader shrank out of the ISR
as it fell below min.insync.replicas, or the controller removed as dead while it did: the
high watermark stands still below that minimum, so they hold everything committed. A broker
whose session ended while its process lived on (paused, cut off) registers again under the
same incarnation (its first registration's czxid): it did not restart. Where no ISR member that did not restart is live, one of
them that did not restart is elected cleanly (ISR: it alone), before the restarted ISR
members, which may have lost their unsynced tail. A replica that restarted leaves the ELR.

A broker that stops cleanly asks first (ControlledShutdown, as Kafka's brokers do with
``controlled.shutdown.enable``): the controller elects another live ISR member of each
partition it leads (never an unclean leader, never none: a partition no other ISR member
can take stays with it and is named in the answer), removes it from the ISR of each
partition it follows, and elects it nowhere until it has stopped or registered again.

Leadership goes back to each partition's preferred replica (its first assigned) when an
operator asks (the ``/admin/preferred_replica_election`` znode), and on its own, as Kafka's
``auto.leader.rebalance.enable`` does: every check interval, a broker that leads less than
its share of the partitions it is preferred for, beyond the imbalance allowed, gets those
back where it is live and in the ISR (``LeaderRebalance``). So after a restart leadership
moves without any failure: the old leader becomes a follower while it still holds requests.

Events are processed one at a time on the controller's own thread, as Kafka's
ControllerEventManager does, so no two decisions interleave. A controller that loses its
ZooKeeper session stops acting at once.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from system_under_test.errors import ErrorCode
from system_under_test.event_log import EventLog
from system_under_test.metadata_cache import BrokerEndpoint
from system_under_test.zookeeper import (
    NO_LEADER,
    ClusterMetadataStore,
    ControllerMovedError,
    LeaderAndIsr,
    StalePartitionStateError,
)

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_T = TypeVar("_T")

STALE_STATE_ATTEMPTS = 5
"""How often a decision is made on states re-read after leaders changed them under it."""
FIRST_REBALANCE_CHECK_S = 5.0
"""A new controller's first leader-balance check comes this long after it took over
(Kafka's controller schedules it 5 s after failover), then one every check interval."""


@dataclass(frozen=True)
class LeaderRebalance:
    """Kafka's automatic preferred leader election: ``auto.leader.rebalance.enable``,
    ``leader.imbalance.check.interval.seconds`` and ``leader.imbalance.per.broker.percentage``."""

    enabled: bool = True
    interval_s: float = 300.0
    imbalance_percent: int = 10

    def imbalanced(
        self,
        assignments: Mapping[TopicPartition, tuple[int, ...]],
        leaders: Mapping[TopicPartition, int],
    ) -> dict[int, list[TopicPartition]]:
        """Per preferred broker, the partitions it does not lead, for each broker whose share
        of them is above the allowed imbalance (Kafka's checkAndTriggerAutoLeaderRebalance)."""
        preferred: dict[int, list[TopicPartition]] = {}
        for key, replicas in assignments.items():
            if replicas and key in leaders:
                preferred.setdefault(replicas[0], []).append(key)
        out: dict[int, list[TopicPartition]] = {}
        for broker, keys in sorted(preferred.items()):
            led_by_others = sorted(k for k in keys if leaders[k] != broker)
            if len(led_by_others) * 100 > self.imbalance_percent * len(keys):
                out[broker] = led_by_others
        return out


@dataclass(frozen=True)
class PartitionLeaderState:
    """What a broker is told about one partition: its state, replicas and znode version."""

    topic: str
    partition: int
    state: LeaderAndIsr
    replicas: tuple[int, ...]
    zk_version: int


class ControllerChannel(Protocol):
    """How the controller reaches brokers (the broker protocol in production)."""

    def send_leader_and_isr(
        self,
        broker: BrokerEndpoint,
        controller_id: int,
        controller_epoch: int,
        partitions: list[PartitionLeaderState],
        live_brokers: list[BrokerEndpoint],
        broker_epoch: int,
    ) -> None: ...

    def send_update_metadata(
        self,
        broker: BrokerEndpoint,
        controller_id: int,
        controller_epoch: int,
        partitions: list[PartitionLeaderState],
        live_brokers: list[BrokerEndpoint],
    ) -> None: ...


@dataclass
class ControllerContext:
    """The controller's view of the cluster, loaded from ZooKeeper when it takes over."""

    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    assignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    states: dict[TopicPartition, tuple[LeaderAndIsr, int]] = field(default_factory=dict)
    # The zxid of each state's last write as loaded from ZooKeeper (its mzxid).
    state_zxids: dict[TopicPartition, int] = field(default_factory=dict)
    unclean_allowed: dict[str, bool] = field(default_factory=dict)
    min_insync: dict[str, int] = field(default_factory=dict)
    # Per live broker, the czxid of its process's first registration (its incarnation).
    incarnations: dict[int, int] = field(default_factory=dict)
    # Brokers in controlled shutdown: live, but elected nowhere and kept out of every ISR.
    shutting_down: set[int] = field(default_factory=set)

    @property
    def electable(self) -> set[int]:
        """The live brokers that may lead or join an ISR (not shutting down)."""
        return set(self.live_brokers) - self.shutting_down

    def leader_states(self, keys: Iterable[TopicPartition]) -> list[PartitionLeaderState]:
        out = []
        for key in sorted(set(keys)):
            if key in self.states:
                state, version = self.states[key]
                out.append(
                    PartitionLeaderState(key[0], key[1], state, self.assignments[key], version)
                )
        return out


@dataclass(frozen=True)
class Election:
    """The outcome of electing a leader for one partition: its ISR and ELR, and whether
    the leader came from the eligible leader replicas (`from_elr`)."""

    leader: int
    isr: tuple[int, ...]
    unclean: bool
    elr: tuple[int, ...] = ()
    from_elr: bool = False


@dataclass(frozen=True)
class StateChange:
    """How a written partition state is logged: an election (`unclean` or not) or an ISR
    change, and why."""

    election: bool
    reason: str
    unclean: bool = False


def elect_leader(
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    live: set[int],
    *,
    unclean_allowed: bool,
    elr: tuple[int, ...] = (),
    restarted: frozenset[int] = frozenset(),
    min_insync: int = 1,
) -> Election | None:
    """Kafka's offline-partition election with KIP-966's eligible leader replicas; None
    when the partition must go offline. Candidates in assignment order, first found wins:

    1. a live ISR member that did not restart (the ISR: those live that did not restart);
    2. a live ELR member that did not restart: clean, it holds everything committed (the
       ISR: it alone; the rest of the ELR stays);
    3. a live ISR member that restarted: what the last ISR kept is all there is (the ISR:
       its live members);
    4. where unclean election is allowed, any live replica (the ISR: it alone; no ELR).

    Replicas in `restarted` may have lost what they held: they leave the ELR. ISR members
    that are not live (dead, not restarted) join it where the new ISR is smaller than
    `min_insync` (KIP-966: the high watermark stood still since, so they hold everything
    committed).
    """
    fit = live - restarted
    kept = tuple(r for r in elr if r not in restarted)
    for replica in replicas:
        if replica in fit and replica in isr:
            new_isr = tuple(r for r in isr if r in fit)
            held = fenced_into_elr(kept, isr, new_isr, live, min_insync)
            return Election(replica, new_isr, False, tuple(r for r in held if r not in new_isr))
    for replica in replicas:
        if replica in fit and replica in kept:
            rest = tuple(r for r in kept if r != replica)
            return Election(replica, (replica,), False, rest, from_elr=True)
    for replica in replicas:
        if replica in live and replica in isr:
            new_isr = tuple(r for r in isr if r in live)
            return Election(replica, new_isr, False, tuple(r for r in kept if r not in new_isr))
    if unclean_allowed:
        for replica in replicas:
            if replica in live:
                return Election(replica, (replica,), unclean=True)
    return None


def fenced_into_elr(
    elr: tuple[int, ...],
    isr: tuple[int, ...],
    new_isr: tuple[int, ...],
    live: set[int],
    min_insync: int,
) -> tuple[int, ...]:
    """`elr` with the ISR members that are not live (dead, not restarted: a restarted one is
    live) where `new_isr` falls below `min_insync`, as KIP-966 moves a fenced replica."""
    if len(new_isr) >= min_insync:
        return elr
    gone = tuple(r for r in isr if r not in live and r not in new_isr and r not in elr)
    return elr + gone


class Controller:
    """Runs on every broker; acts only while this broker holds ``/controller``."""

    def __init__(
        self,
        broker_id: int,
        store: ClusterMetadataStore,
        channel: ControllerChannel,
        events: EventLog,
        *,
        default_unclean: bool = False,
        default_min_insync: int = 1,
        rebalance: LeaderRebalance | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.store = store
        self.channel = channel
        self.events = events
        self.default_unclean = default_unclean
        self.default_min_insync = default_min_insync
        self.context = ControllerContext()
        self.active = False
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._thread = threading.Thread(
            target=self._run, name=f"controller-{broker_id}", daemon=True
        )
        self._stopped = threading.Event()
        self.rebalance = rebalance if rebalance is not None else LeaderRebalance(enabled=False)
        self._next_rebalance = math.inf
        """When the next leader-balance check is due (time.monotonic()); inf: none."""
        self._rebalance_clock = threading.Thread(
            target=self._tick_rebalance, name=f"controller-{broker_id}-rebalance", daemon=True
        )

    # lifecycle

    def startup(self) -> None:
        """Start the event thread and take part in the controller election."""
        self._thread.start()
        if self.rebalance.enabled:
            self._rebalance_clock.start()
        self._enqueue("elect")

    def shutdown(self) -> None:
        """Stop acting and resign ``/controller`` if held."""
        self._stopped.set()
        self._enqueue("shutdown")
        if self._thread.ident is not None:  # a broker that failed to start never started it
            self._thread.join(timeout=10)

    def session_lost(self) -> None:
        """Called from ZooKeeper's thread: stop acting immediately, then re-elect later."""
        if self.active:
            log.warning("controller %d lost its ZooKeeper session: resigning", self.broker_id)
        self.active = False
        self._enqueue("session-lost")

    def reconnected(self) -> None:
        self._enqueue("elect")

    def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> Future[tuple[ErrorCode, list[TopicPartition]]]:
        """A broker about to stop asks its leaderships and ISR memberships be moved: the
        error (NOT_CONTROLLER, STALE_BROKER_EPOCH) and the partitions it still leads."""
        answer: Future[tuple[ErrorCode, list[TopicPartition]]] = Future()
        self._enqueue("controlled-shutdown", (broker_id, broker_epoch, answer))
        return answer

    def request_preferred_election(self, partitions: list[TopicPartition] | None) -> None:
        """Admin action: move leadership back to each partition's first assigned replica."""
        self._enqueue("preferred", partitions)

    def _enqueue(self, kind: str, payload: Any = None) -> None:
        self._queue.put((kind, payload))

    def _tick_rebalance(self) -> None:
        """Ask the event thread for a leader-balance check whenever one is due."""
        while not self._stopped.wait(0.5):
            if self.active and time.monotonic() >= self._next_rebalance:
                self._next_rebalance = math.inf  # the check schedules the next
                self._enqueue("auto-rebalance")

    def _watch(self, kind: str) -> Callable[[Any], None]:
        def fire(_event: Any) -> None:
            self._enqueue(kind)

        return fire

    def _run(self) -> None:
        handlers: dict[str, Callable[[Any], None]] = {
            "elect": lambda _p: self._elect(),
            "controller-change": lambda _p: self._elect(),
            "broker-change": lambda _p: self._on_broker_change(),
            "topic-change": lambda _p: self._on_topic_change(),
            "isr-change": lambda _p: self._on_isr_change(),
            "preferred": self._on_preferred_election,
            "preferred-znode": lambda _p: self._on_preferred_znode(),
            "auto-rebalance": lambda _p: self._check_leader_balance(),
            "controlled-shutdown": self._answer_controlled_shutdown,
            "session-lost": lambda _p: None,
        }
        while True:
            kind, payload = self._queue.get()
            if kind == "shutdown":
                while not self._queue.empty():  # nobody waits forever on a stopped controller
                    _kind, waiting = self._queue.get_nowait()
                    if _kind == "controlled-shutdown":
                        waiting[2].set_result((ErrorCode.NOT_CONTROLLER, []))
                if self.active:
                    self.active = False
                    try:
                        self.store.resign_controller(self.broker_id)
                    except Exception as err:
                        log.warning("controller %d could not resign: %s", self.broker_id, err)
                return
            try:
                handlers[kind](payload)
            except ControllerMovedError:
                log.warning("controller %d was deposed; stepping down", self.broker_id)
                self.active = False
            except Exception:
                log.exception("controller %d failed handling %s", self.broker_id, kind)
                if not self.store.connected:
                    self.active = False

    # election of the controller

    def _elect(self) -> None:
        if self.active or not self.store.connected:
            return
        current = self.store.controller_id(watch=self._watch("controller-change"))
        if current is not None:
            if current == self.broker_id:
                # Our own znode survived from a previous session; it is not ours to trust.
                self.store.resign_controller(self.broker_id)
                self._enqueue("elect")
            return
        won = self.store.try_become_controller(self.broker_id)
        if won is None:
            self.store.controller_id(watch=self._watch("controller-change"))
            return
        self.context = ControllerContext(epoch=won[0], epoch_zk_version=won[1])
        self.active = True
        log.info("broker %d is controller, epoch %d", self.broker_id, won[0])
        self.events.write("controller-elected", controller=self.broker_id, controller_epoch=won[0])
        self._on_failover()

    def _on_failover(self) -> None:
        ctx = self.context
        registrations = self.store.broker_registrations(watch=self._watch("broker-change"))
        ctx.live_brokers = {b: e for b, (e, _epoch, _i) in registrations.items()}
        ctx.broker_epochs = {b: epoch for b, (_e, epoch, _i) in registrations.items()}
        ctx.incarnations = {b: born for b, (_e, _epoch, born) in registrations.items()}
        for topic in self.store.topics(watch=self._watch("topic-change")):
            self._load_topic(topic)
        self.store.take_isr_change_notifications(watch=self._watch("isr-change"))
        self._initialize_new_partitions(list(ctx.assignments))
        self._elect_offline(
            list(ctx.assignments),
            reason="controller failover",
            restarted=self._restarted_since_written(),
        )
        self._send_leader_and_isr(list(ctx.assignments), set(ctx.live_brokers))
        self._on_preferred_znode()
        self._next_rebalance = time.monotonic() + FIRST_REBALANCE_CHECK_S

    def _load_topic(self, topic: str) -> None:
        ctx = self.context
        assignment = self.store.topic_assignment(topic) or {}
        config = self.store.topic_config(topic)
        ctx.unclean_allowed[topic] = (
            config.get("unclean.leader.election.enable", str(self.default_unclean)).lower()
            == "true"
        )
        try:
            ctx.min_insync[topic] = int(
                config.get("min.insync.replicas", str(self.default_min_insync))
            )
        except ValueError:
            ctx.min_insync[topic] = self.default_min_insync
        for partition, replicas in assignment.items():
            key = (topic, partition)
            ctx.assignments[key] = tuple(replicas)
            found = self.store.partition_state_written(topic, partition)
            if found is not None:
                ctx.states[key] = (found[0], found[1])
                ctx.state_zxids[key] = found[2]

    def _restarted_since_written(self) -> dict[TopicPartition, frozenset[int]]:
        """Per loaded partition, the live replicas it names whose process first registered
        after its state was last written: they restarted since they were last judged in sync
        (or leading), and their logs may have lost what the state says they hold (one that
        only registered again after its session expired did not). A controller that was
        active then saw the bounce; this one, new, did not."""
        ctx = self.context
        out: dict[TopicPartition, frozenset[int]] = {}
        for key, zxid in ctx.state_zxids.items():
            state = ctx.states[key][0]
            named = {*state.isr, *state.elr, state.leader}
            restarted = frozenset(
                b for b in named if ctx.incarnations.get(b, ctx.broker_epochs.get(b, -1)) > zxid
            )
            if restarted:
                out[key] = restarted
        return out

    # partition state changes

    def _initialize_new_partitions(self, keys: list[TopicPartition]) -> None:
        ctx = self.context
        writes: dict[TopicPartition, tuple[LeaderAndIsr, int | None]] = {}
        for key in keys:
            if key in ctx.states:
                continue
            live_replicas = tuple(r for r in ctx.assignments[key] if r in ctx.live_brokers)
            if not live_replicas:
                log.warning("partition %s-%d has no live replica to lead it", *key)
                continue
            writes[key] = (LeaderAndIsr(live_replicas[0], 0, live_replicas, ctx.epoch), None)
        versions = self.store.write_partition_states(
            writes, controller_epoch_version=ctx.epoch_zk_version
        )
        for key, (state, _v) in writes.items():
            ctx.states[key] = (state, versions[key])
            self.events.leader_election(
                key=f"{key[0]}-{key[1]}",
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=state.isr,
                previous_leader=NO_LEADER,
                unclean=False,
                controller_epoch=ctx.epoch,
                zk_version=versions[key],
                reason="new partition",
            )

    def _fresh(self, decide: Callable[[], _T]) -> _T:
        """``decide`` (a decision that writes partition states), made again on the states
        re-read from ZooKeeper where a leader's ISR write came between this controller's
        reading and its write (the ISR-change notification not handled yet), as Kafka's
        controller retries such partitions; the last attempt's error goes up."""
        for _ in range(STALE_STATE_ATTEMPTS - 1):
            try:
                return decide()
            except StalePartitionStateError as err:
                log.info("controller %d: %s; deciding again", self.broker_id, err)
                self._reload_states(err.keys)
        return decide()

    def _reload_states(self, keys: Iterable[TopicPartition]) -> None:
        """The states of ``keys`` as ZooKeeper holds them now."""
        ctx = self.context
        for key in set(keys):
            found = self.store.partition_state(*key)
            if found is not None and key in ctx.assignments:
                ctx.states[key] = found

    def _elect_offline(
        self,
        keys: list[TopicPartition],
        *,
        reason: str,
        restarted: Mapping[TopicPartition, frozenset[int]] | None = None,
    ) -> set[TopicPartition]:
        """``_decide_offline`` on fresh states (``_fresh``)."""
        return self._fresh(lambda: self._decide_offline(keys, reason=reason, restarted=restarted))

    def _decide_offline(
        self,
        keys: list[TopicPartition],
        *,
        reason: str,
        restarted: Mapping[TopicPartition, frozenset[int]] | None = None,
    ) -> set[TopicPartition]:
        """Elect leaders where the leader is not live; shrink dead brokers out of the ISR.

        ``restarted`` names, per partition, live brokers that restarted since the partition's
        state was written (a bounce): their logs may have lost what they held, so they are
        treated as out of the ISR (shrunk out, not elected) while a replica of the ISR that
        did not restart is live, and leave the eligible leader replicas. Where no such ISR
        member is live, an eligible leader replica that did not restart is elected; where
        none is either, the restarted ISR members are the partition's only candidates and
        stay eligible, as in Kafka before KIP-966: what the last ISR kept is all there is.
        """
        ctx = self.context
        restarted = restarted or {}
        writes: dict[TopicPartition, tuple[LeaderAndIsr, int | None]] = {}
        elections: dict[TopicPartition, Election | None] = {}
        notes: dict[TopicPartition, str] = {}
        for key in keys:
            if key not in ctx.states:
                continue
            state, version = ctx.states[key]
            replicas = ctx.assignments[key]
            live = ctx.electable
            fenced = restarted.get(key, frozenset()) & live
            fit = live - fenced
            elr = tuple(r for r in state.elr if r not in fenced)
            notes[key] = "; ".join(_restart_notes(state, fenced, fit))
            if not notes[key]:
                del notes[key]
            # A restarted leader is elected anew (a new leader epoch) even where it stays; a
            # leader in controlled shutdown that no in-sync replica could relieve leads on
            # until it stops (Kafka takes offline only partitions whose leader is gone).
            stays = state.leader in fit or (
                state.leader in ctx.shutting_down and state.leader in ctx.live_brokers
            )
            if stays:
                isr = tuple(r for r in state.isr if r in fit or r == state.leader)
                elr = fenced_into_elr(elr, state.isr, isr, live, ctx.min_insync.get(key[0], 1))
                if isr != state.isr or elr != state.elr:
                    writes[key] = (
                        LeaderAndIsr(state.leader, state.leader_epoch + 1, isr, ctx.epoch, elr),
                        version,
                    )
                continue
            election = elect_leader(
                replicas,
                state.isr,
                live,
                unclean_allowed=ctx.unclean_allowed.get(key[0], False),
                elr=state.elr,
                restarted=fenced,
                min_insync=ctx.min_insync.get(key[0], 1),
            )
            elections[key] = election
            if election is None:
                if state.leader == NO_LEADER and elr == state.elr:
                    continue
                # Offline: keep the last ISR member so that it can lead again when it returns.
                isr = tuple(r for r in state.isr if r in live) or (state.leader,)
                if state.leader == NO_LEADER:
                    isr = state.isr
                writes[key] = (
                    LeaderAndIsr(NO_LEADER, state.leader_epoch + 1, isr, ctx.epoch, elr),
                    version,
                )
            else:
                writes[key] = (
                    LeaderAndIsr(
                        election.leader,
                        state.leader_epoch + 1,
                        election.isr,
                        ctx.epoch,
                        election.elr,
                    ),
                    version,
                )

        def logged(key: TopicPartition) -> StateChange:
            why = f"{reason}: {notes[key]}" if key in notes else reason
            if key not in elections:
                return StateChange(
                    False, why if key in notes else f"{reason}: dead replica removed"
                )
            election = elections[key]
            if election is None:
                why = f"{why}: no live in-sync or eligible leader replica, offline"
            elif election.from_elr:
                why = f"{why}: elected from the eligible leader replicas"
            return StateChange(True, why, bool(election and election.unclean))

        return self._write_states(writes, logged)

    def _write_states(
        self,
        writes: Mapping[TopicPartition, tuple[LeaderAndIsr, int | None]],
        logged: Callable[[TopicPartition], StateChange],
    ) -> set[TopicPartition]:
        """Write `writes` (new state, the version it replaces) to ZooKeeper, fenced by this
        controller's epoch, take them as the context's, and log each as `logged` says."""
        ctx = self.context
        versions = self.store.write_partition_states(
            writes, controller_epoch_version=ctx.epoch_zk_version
        )
        for key, (new_state, previous_version) in writes.items():
            previous = ctx.states[key][0]
            ctx.states[key] = (new_state, versions[key])
            ctx.state_zxids.pop(key, None)
            change = logged(key)
            if change.election:
                self.events.leader_election(
                    key=f"{key[0]}-{key[1]}",
                    leader=new_state.leader,
                    leader_epoch=new_state.leader_epoch,
                    isr=new_state.isr,
                    elr=new_state.elr,
                    previous_leader=previous.leader,
                    previous_isr=previous.isr,
                    previous_elr=previous.elr,
                    unclean=change.unclean,
                    controller_epoch=ctx.epoch,
                    reason=change.reason,
                    zk_version=versions[key],
                    previous_zk_version=previous_version,
                )
            else:
                self.events.isr_change(
                    key=f"{key[0]}-{key[1]}",
                    isr=new_state.isr,
                    elr=new_state.elr,
                    leader=new_state.leader,
                    leader_epoch=new_state.leader_epoch,
                    reason=change.reason,
                    zk_version=versions[key],
                )
        return set(writes)

    def _send_leader_and_isr(self, keys: Iterable[TopicPartition], brokers: set[int]) -> None:
        ctx = self.context
        live = sorted(ctx.live_brokers.values(), key=lambda e: e.broker_id)
        keys = list(keys)
        for broker_id in sorted(brokers):
            endpoint = ctx.live_brokers.get(broker_id)
            if endpoint is None:
                continue
            own = [k for k in keys if broker_id in ctx.assignments.get(k, ())]
            if own:
                self.channel.send_leader_and_isr(
                    endpoint,
                    self.broker_id,
                    ctx.epoch,
                    ctx.leader_states(own),
                    live,
                    ctx.broker_epochs.get(broker_id, -1),
                )
        everything = ctx.leader_states(ctx.assignments)
        for endpoint in live:
            self.channel.send_update_metadata(endpoint, self.broker_id, ctx.epoch, everything, live)

    # event handlers

    def _on_broker_change(self) -> None:
        if not self.active:
            return
        ctx = self.context
        registrations = self.store.broker_registrations(watch=self._watch("broker-change"))
        epochs = {b: epoch for b, (_e, epoch, _i) in registrations.items()}
        incarnations = {b: born for b, (_e, _epoch, born) in registrations.items()}
        before, was = ctx.broker_epochs, ctx.incarnations
        # A broker that re-registered (new czxid) died and was born again in between.
        bounced = {b for b in epochs if b in before and before[b] != epochs[b]}
        dead = (set(before) - set(epochs)) | bounced
        born = (set(epochs) - set(before)) | bounced
        # Of those, a process that only registered again after its session expired keeps
        # its logs: it did not restart.
        restarted = {b for b in born if was.get(b) != incarnations[b]}
        ctx.live_brokers = {b: e for b, (e, _epoch, _i) in registrations.items()}
        ctx.broker_epochs = epochs
        ctx.incarnations = {**was, **incarnations}  # a dead broker's, to tell when it returns
        ctx.shutting_down -= dead | born
        if not dead and not born:
            return
        log.info(
            "controller %d: brokers died %s, started %s", self.broker_id, sorted(dead), sorted(born)
        )
        affected = [k for k, (s, _v) in ctx.states.items() if s.leader in dead or set(s.isr) & dead]
        offline = [k for k, (s, _v) in ctx.states.items() if s.leader == NO_LEADER]
        # A broker that restarted may have lost what made it eligible.
        eligible_born = [k for k, (s, _v) in ctx.states.items() if set(s.elr) & restarted]
        self._initialize_new_partitions([k for k in ctx.assignments if k not in ctx.states])
        judged = list(dict.fromkeys(affected + offline + eligible_born))
        changed = self._elect_offline(
            judged,
            reason="broker change",
            restarted={k: frozenset(restarted) for k in judged} if restarted else None,
        )
        targets = {r for k in changed for r in ctx.assignments[k]} | born
        keys = changed | {k for k, r in ctx.assignments.items() if set(r) & born}
        self._send_leader_and_isr(keys, targets)

    def _on_topic_change(self) -> None:
        if not self.active:
            return
        ctx = self.context
        known = {t for t, _p in ctx.assignments}
        new_topics = [
            t for t in self.store.topics(watch=self._watch("topic-change")) if t not in known
        ]
        new_keys: list[TopicPartition] = []
        for topic in new_topics:
            self._load_topic(topic)
            new_keys += [k for k in ctx.assignments if k[0] == topic]
        if new_keys:
            self._initialize_new_partitions(new_keys)
            self._send_leader_and_isr(new_keys, {r for k in new_keys for r in ctx.assignments[k]})

    def _on_isr_change(self) -> None:
        if not self.active:
            return
        ctx = self.context
        changed = self.store.take_isr_change_notifications(watch=self._watch("isr-change"))
        self._reload_states(changed)
        if changed:
            live = sorted(ctx.live_brokers.values(), key=lambda e: e.broker_id)
            everything = ctx.leader_states(ctx.assignments)
            for endpoint in live:
                self.channel.send_update_metadata(
                    endpoint, self.broker_id, ctx.epoch, everything, live
                )

    def _on_preferred_znode(self) -> None:
        if not self.active:
            return
        requested = self.store.take_preferred_election(watch=self._watch("preferred-znode"))
        if requested is not None:
            self._on_preferred_election(requested or None)

    def _on_preferred_election(
        self, partitions: list[TopicPartition] | None, reason: str = "preferred leader election"
    ) -> None:
        if not self.active:
            return
        ctx = self.context
        writes = self._fresh(lambda: self._elect_preferred(partitions, reason))
        if writes:
            self._send_leader_and_isr(writes, {r for k in writes for r in ctx.assignments[k]})

    def _answer_controlled_shutdown(
        self, payload: tuple[int, int, Future[tuple[ErrorCode, list[TopicPartition]]]]
    ) -> None:
        broker, broker_epoch, answer = payload
        try:
            answer.set_result(self._controlled_shutdown(broker, broker_epoch))
        except BaseException as err:
            answer.set_exception(err)
            raise

    def _controlled_shutdown(
        self, broker: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """Kafka's doControlledShutdown: move the broker's leaderships to other live ISR
        members and take it out of the ISRs it is in; the partitions it still leads."""
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        ctx = self.context
        if broker not in ctx.live_brokers or ctx.broker_epochs.get(broker) != broker_epoch:
            log.warning(
                "controller %d: controlled shutdown of broker %d (epoch %d) refused: its "
                "registration is %s",
                self.broker_id,
                broker,
                broker_epoch,
                ctx.broker_epochs.get(broker, "gone"),
            )
            return ErrorCode.STALE_BROKER_EPOCH, []
        if broker not in ctx.shutting_down:
            log.info("controller %d: broker %d shuts down", self.broker_id, broker)
        ctx.shutting_down.add(broker)
        changed = self._fresh(lambda: self._move_off(broker))
        if changed:
            self._send_leader_and_isr(changed, {r for k in changed for r in ctx.assignments[k]})
        remaining = sorted(
            k
            for k, (state, _v) in ctx.states.items()
            if state.leader == broker and len(ctx.assignments.get(k, ())) > 1
        )
        return ErrorCode.NONE, remaining

    def _move_off(self, broker: int) -> set[TopicPartition]:
        """Write the states that move `broker`'s leaderships and ISR memberships elsewhere
        (ControlledShutdownPartitionLeaderElectionStrategy, then OfflineReplica)."""
        ctx = self.context
        electable = ctx.electable
        writes: dict[TopicPartition, tuple[LeaderAndIsr, int | None]] = {}
        for key, (state, version) in ctx.states.items():
            replicas = ctx.assignments.get(key, ())
            if broker not in replicas or len(replicas) < 2:
                continue
            if state.leader == broker:
                candidates = [r for r in replicas if r in state.isr and r in electable]
                if not candidates:
                    continue  # it stays leader: no other in-sync replica can take over
                leader = candidates[0]
            elif broker in state.isr:
                leader = state.leader
            else:
                continue
            isr = tuple(r for r in state.isr if r != broker)
            elr = fenced_into_elr(
                state.elr, state.isr, isr, electable, ctx.min_insync.get(key[0], 1)
            )
            writes[key] = (
                LeaderAndIsr(leader, state.leader_epoch + 1, isr, ctx.epoch, elr),
                version,
            )
        moved = {k for k, (state, _v) in writes.items() if state.leader != ctx.states[k][0].leader}
        why = f"controlled shutdown of broker {broker}"
        return self._write_states(writes, lambda key: StateChange(key in moved, why))

    def _check_leader_balance(self) -> None:
        """Kafka's auto leader rebalance: preferred elections for every broker that leads
        too few of the partitions it is preferred for; then the next check is scheduled."""
        if not self.active:
            return
        try:
            ctx = self.context
            leaders = {key: state.leader for key, (state, _v) in ctx.states.items()}
            imbalanced = self.rebalance.imbalanced(ctx.assignments, leaders)
            for broker, keys in imbalanced.items():
                if broker not in ctx.electable:
                    continue
                log.info(
                    "controller %d: broker %d leads too few of its preferred partitions; "
                    "electing it for %d",
                    self.broker_id,
                    broker,
                    len(keys),
                )
                self._on_preferred_election(keys, reason="auto leader rebalance")
        finally:
            if self.active:
                self._next_rebalance = time.monotonic() + self.rebalance.interval_s

    def _elect_preferred(
        self, partitions: list[TopicPartition] | None, reason: str = "preferred leader election"
    ) -> set[TopicPartition]:
        """Elect the preferred replica where it is live, in the ISR and not leading; the
        partitions whose state was written."""
        ctx = self.context
        live = ctx.electable
        writes: dict[TopicPartition, tuple[LeaderAndIsr, int | None]] = {}
        for key in partitions or list(ctx.assignments):
            if key not in ctx.states:
                continue
            state, version = ctx.states[key]
            preferred = ctx.assignments[key][0]
            if state.leader != preferred and preferred in live and preferred in state.isr:
                writes[key] = (
                    LeaderAndIsr(
                        preferred, state.leader_epoch + 1, state.isr, ctx.epoch, state.elr
                    ),
                    version,
                )
        return self._write_states(writes, lambda _key: StateChange(True, reason))


def _restart_notes(state: LeaderAndIsr, fenced: frozenset[int], fit: set[int]) -> list[str]:
    """What the election or ISR change owes to replicas that restarted (`fenced`)."""
    notes = []
    in_sync = fenced & {*state.isr, state.leader}
    if in_sync:
        names = ", ".join(str(b) for b in sorted(in_sync))
        if any(r in fit for r in state.isr):
            notes.append(f"broker {names} restarted since it was last in sync")
        else:
            notes.append(f"broker {names} restarted and no other in-sync replica is live")
    eligible = fenced & set(state.elr)
    if eligible:
        names = ", ".join(str(b) for b in sorted(eligible))
        notes.append(f"broker {names} restarted: no longer an eligible leader replica")
    return notes
