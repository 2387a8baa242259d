"""A broker's membership of a ZooKeeper-backed cluster.

It registers the broker (ephemeral ``/brokers/ids/<id>``), runs the controller election
on every broker, creates topics by writing their assignment to ZooKeeper for the controller
to pick up, and reacts to the ZooKeeper session: when it is lost, the broker stops acting as
leader and controller at once; when a new session is made, the broker registers again, and the
controller (seeing a new broker epoch) hands it its partitions afresh. Before it stops
cleanly, it asks the controller to move its leaderships and ISR memberships away
(``controlled_shutdown``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping, Sequence

from kazoo.exceptions import KazooException, NodeExistsError

from system_under_test import protocol
from system_under_test.config import BrokerConfig
from system_under_test.controller import Controller, LeaderRebalance
from system_under_test.controller_channel import BrokerRequestChannel, request_once
from system_under_test.errors import ErrorCode
from system_under_test.event_log import EventLog
from system_under_test.metadata_cache import NO_LEADER, BrokerEndpoint, MetadataCache
from system_under_test.replication.assignment import AssignmentError, assign_replicas
from system_under_test.replication.replica_manager import ReplicaManager
from system_under_test.topic_spec import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicError,
    TopicSpec,
    request_errors,
    validate_creatable_topic,
)
from system_under_test.zookeeper import ClusterMetadataStore, MetadataError

log = logging.getLogger(__name__)

KAFKA_ENDPOINTS_MAX_AGE_S = 10.0
"""How long a copy of the brokers' Kafka listeners read from ZooKeeper is used."""


class ClusterMembership:
    """Registration, controller and topic creation of one broker in ZooKeeper mode."""

    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        events: EventLog,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata = metadata
        self.events = events
        self.store = ClusterMetadataStore(
            str(config["zookeeper.connect"]),
            session_timeout_ms=config["zookeeper.session.timeout.ms"],
            connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
            on_session_lost=self._session_lost,
            on_reconnected=self._reconnected,
        )
        self.channel = BrokerRequestChannel(self.broker_id)
        self.controller = Controller(
            self.broker_id,
            self.store,
            self.channel,
            events,
            default_unclean=bool(config["unclean.leader.election.enable"]),
            default_min_insync=int(config["min.insync.replicas"]),
            rebalance=LeaderRebalance(
                enabled=bool(config["auto.leader.rebalance.enable"]),
                interval_s=float(config["leader.imbalance.check.interval.seconds"]),
                imbalance_percent=int(config["leader.imbalance.per.broker.percentage"]),
            ),
        )
        self.replica_manager: ReplicaManager | None = None
        self.endpoint: BrokerEndpoint | None = None
        self.kafka_endpoint: tuple[str, int] | None = None
        """This broker's advertised Kafka-protocol listener, if it has one."""
        self._kafka_endpoints: dict[int, tuple[BrokerEndpoint, tuple[str, int] | None]] = {}
        self._kafka_endpoints_read = 0.0
        self._incarnation: int | None = None
        """The czxid of this process's first registration."""
        self._broker_epoch: int | None = None
        """The czxid of this process's current registration (KIP-380's broker epoch)."""
        self._loop: asyncio.AbstractEventLoop | None = None

    def connect(self) -> None:
        """Open the ZooKeeper session (before the logs load, so a bad connect fails fast)."""
        self.store.start()

    def register(
        self,
        endpoint: BrokerEndpoint,
        loop: asyncio.AbstractEventLoop,
        kafka_endpoint: tuple[str, int] | None = None,
    ) -> None:
        """Announce this broker and join the controller election (blocking)."""
        self.endpoint = endpoint
        self.kafka_endpoint = kafka_endpoint
        self._loop = loop
        self._incarnation = self.store.register_broker(endpoint, kafka_endpoint=kafka_endpoint)
        self._registered(self._incarnation)
        self.controller.startup()
        log.info("broker %d registered in ZooKeeper at %s", self.broker_id, self.store.connect)

    def _registered(self, broker_epoch: int) -> None:
        """This run's registration is `broker_epoch`: from now on the replica manager takes
        the controller's orders meant for it, and only those."""
        self._broker_epoch = broker_epoch
        loop, manager = self._loop, self.replica_manager
        if loop is not None and manager is not None:
            loop.call_soon_threadsafe(manager.registered, broker_epoch)

    def controlled_shutdown(self, *, attempts: int, backoff_s: float, timeout_s: float) -> bool:
        """Ask the controller to move this broker's leaderships and ISR memberships to other
        replicas, up to `attempts` times until it leads nothing others could lead (Kafka's
        controlledShutdown; blocking). Whether the controller answered at all: the broker then
        stops following (its ISR memberships are gone), whatever it still leads."""
        answered = False
        for attempt in range(1, attempts + 1):
            try:
                remaining = self._ask_controller_to_move_off(timeout_s)
            except Exception as err:  # best effort: the broker stops regardless
                log.warning(
                    "broker %d: controlled shutdown attempt %d of %d failed: %s: %s",
                    self.broker_id,
                    attempt,
                    attempts,
                    type(err).__name__,
                    err,
                )
            else:
                answered = True
                if not remaining:
                    log.info("broker %d: controlled shutdown succeeded", self.broker_id)
                    return True
                log.warning(
                    "broker %d: controlled shutdown attempt %d of %d: still leads %s "
                    "(no other in-sync replica)",
                    self.broker_id,
                    attempt,
                    attempts,
                    ", ".join(f"{t}-{p}" for t, p in remaining),
                )
            if attempt < attempts:
                time.sleep(backoff_s)
        log.warning("broker %d: stopping without a complete controlled shutdown", self.broker_id)
        return answered

    def _ask_controller_to_move_off(self, timeout_s: float) -> list[tuple[str, int]]:
        if self._broker_epoch is None:
            raise MetadataError("this broker never registered")
        controller = self.store.controller_id()
        if controller is None:
            raise MetadataError("no controller is elected")
        endpoint = self.store.broker(controller)
        if endpoint is None:
            raise MetadataError(f"controller {controller} is not registered")
        answer = request_once(
            endpoint,
            protocol.ControlledShutdownRequest(self.broker_id, self._broker_epoch),
            protocol.ControlledShutdownResponse,
            client_id=f"broker-{self.broker_id}",
            timeout_s=timeout_s,
        )
        code = ErrorCode.from_wire(answer.error_code)
        if code is not ErrorCode.NONE:
            raise MetadataError(f"controller {controller} answered {code.name}")
        return [(p.topic, p.partition) for p in answer.remaining]

    def shutdown(self) -> None:
        self.controller.shutdown()
        self.channel.close()
        self.store.close()

    # --- the ZooKeeper session ---------------------------------------------------------------

    def _session_lost(self) -> None:
        """On kazoo's thread: fence everything now."""
        self.controller.session_lost()
        loop, manager = self._loop, self.replica_manager
        if loop is not None and manager is not None:
            loop.call_soon_threadsafe(manager.fence_all)

    def _reconnected(self) -> None:
        """On kazoo's thread: a new session; register again off this thread."""
        threading.Thread(target=self._register_again, name="re-register", daemon=True).start()

    def _register_again(self) -> None:
        if self.endpoint is None:
            return
        try:
            self._registered(
                self.store.register_broker(
                    self.endpoint,
                    incarnation=self._incarnation,
                    kafka_endpoint=self.kafka_endpoint,
                )
            )
            log.info("broker %d registered again after a new ZooKeeper session", self.broker_id)
        except MetadataError as err:
            log.error("broker %d could not register again: %s", self.broker_id, err)
        self.controller.reconnected()

    async def kafka_endpoints(self, brokers: list[BrokerEndpoint]) -> dict[int, tuple[str, int]]:
        """The Kafka-protocol listeners of `brokers` (those the controller says are alive),
        read from their ZooKeeper registrations: again when one of them is not known under
        the endpoint the controller gave, or once the copy is KAFKA_ENDPOINTS_MAX_AGE_S old.
        Brokers without a Kafka listener, or whose registration cannot be read, are left out."""
        known = self._kafka_endpoints
        stale = time.monotonic() - self._kafka_endpoints_read > KAFKA_ENDPOINTS_MAX_AGE_S
        if stale or any(known.get(b.broker_id, (None,))[0] != b for b in brokers):
            loop = asyncio.get_running_loop()
            try:
                known = await loop.run_in_executor(None, self.store.kafka_endpoints)
            except (MetadataError, KazooException) as err:
                log.warning("cannot read the brokers' Kafka listeners from ZooKeeper: %s", err)
            else:
                self._kafka_endpoints = known
                self._kafka_endpoints_read = time.monotonic()
        out: dict[int, tuple[str, int]] = {}
        for broker in brokers:
            endpoint, kafka = known.get(broker.broker_id, (None, None))
            if endpoint == broker and kafka is not None:
                out[broker.broker_id] = kafka
        return out

    # --- consumer groups' committed offsets (ZooKeeper, as Kafka 0.8 kept them) ---------------

    async def commit_offsets(
        self, group: str, offsets: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], str | None]:
        """Write `group`'s committed offsets to ZooKeeper, one partition at a time (a commit
        of several may land in part); per partition None, or why its write failed."""
        loop = asyncio.get_running_loop()
        out: dict[tuple[str, int], str | None] = {}
        for (topic, partition), offset in offsets.items():
            try:
                await loop.run_in_executor(
                    None, self.store.commit_offset, group, topic, partition, offset
                )
            except (MetadataError, KazooException) as err:
                out[(topic, partition)] = f"ZooKeeper did not take the commit: {err!r}"
            else:
                out[(topic, partition)] = None
        return out

    async def committed_offsets(
        self, group: str, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], int | None]:
        """`group`'s committed offsets of `partitions` (None: every one it committed), read
        from ZooKeeper; None where it committed none. MetadataError when ZooKeeper cannot
        be read."""
        loop = asyncio.get_running_loop()

        def read() -> dict[tuple[str, int], int | None]:
            if partitions is None:
                return dict(self.store.group_offsets(group))
            return {(t, p): self.store.committed_offset(group, t, p) for t, p in partitions}

        try:
            return await loop.run_in_executor(None, read)
        except KazooException as err:
            raise MetadataError(f"cannot read group {group!r}'s offsets: {err!r}") from err

    # --- topics ------------------------------------------------------------------------------

    async def create_topics(
        self, topics: list[CreatableTopic], timeout_ms: int
    ) -> list[CreatableTopicResult]:
        """Write each topic's assignment to ZooKeeper; wait (up to timeout_ms) for leaders."""
        loop = asyncio.get_running_loop()
        results: list[CreatableTopicResult] = []
        created: list[tuple[str, int]] = []
        brokers: list[int] | None = None
        for topic, error in zip(topics, request_errors(topics, self.config), strict=True):
            if error is None:
                try:
                    spec = validate_creatable_topic(topic, self.config)
                    if brokers is None:
                        brokers = await loop.run_in_executor(None, self.store.broker_ids)
                    layout = await self._write_topic(spec, brokers)
                except CreateTopicError as err:
                    error = err
            if error is not None:
                results.append(CreatableTopicResult(topic.name, error.code, error.message))
                continue
            log.info("created topic %s: assignment %s, config %s", spec.name, layout, spec.config)
            created.append((spec.name, spec.partitions))
            results.append(CreatableTopicResult(topic.name, ErrorCode.NONE, None))
        await self._wait_for_leaders(created, timeout_ms)
        return results

    async def _write_topic(self, spec: TopicSpec, brokers: list[int]) -> dict[int, list[int]]:
        """Assign the replicas and write the topic to ZooKeeper; the assignment."""
        try:
            layout = assign_replicas(spec.name, brokers, spec.partitions, spec.replication_factor)
        except AssignmentError as err:
            raise CreateTopicError(ErrorCode.INVALID_REPLICATION_FACTOR, str(err)) from None
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(
                None, self.store.create_topic, spec.name, layout, spec.config
            )
        except NodeExistsError:
            raise CreateTopicError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {spec.name!r} already exists"
            ) from None
        except MetadataError as err:
            raise CreateTopicError(ErrorCode.UNKNOWN_SERVER_ERROR, str(err)) from None
        return layout

    async def _wait_for_leaders(self, topics: list[tuple[str, int]], timeout_ms: int) -> None:
        """Kafka answers CreateTopics once the controller has elected leaders; so do we."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while topics and time.monotonic() < deadline:
            pending = [
                name
                for name, count in topics
                if len(parts := self.metadata.partitions(name) or {}) < count
                or any(s.leader == NO_LEADER for s in parts.values())
            ]
            if not pending:
                return
            await asyncio.sleep(0.02)
