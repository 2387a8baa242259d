"""The broker's replicas in ZooKeeper mode: the controller's orders and the ISR rules.

LeaderAndIsr makes this broker leader or follower of partitions (fenced by the controller
epoch and the leader epoch); followers are handed to one ReplicaFetcher per leader. As
leader, the broker tracks its followers on every fetch, widens the ISR when one catches up
and narrows it when one lags (``replica.lag.time.max.ms``, or the legacy
``replica.lag.max.messages``), writing each change to ZooKeeper with a conditional set on the
state znode's version before adopting it; a shrink below min.insync.replicas moves the
removed followers to the eligible leader replicas (KIP-966) in the same write. High watermarks are checkpointed to
``replication-offset-checkpoint`` in every log dir, so a restarted follower knows where its
committed data ended (what ``replica.truncation=high-watermark`` truncates to).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from system_under_test import protocol
from system_under_test.config import BrokerConfig
from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.event_log import EventLog
from system_under_test.log.checkpoint import CheckpointError, OffsetCheckpointFile
from system_under_test.log.log import LogConfig
from system_under_test.log.log_manager import LogManager
from system_under_test.metadata_cache import BrokerEndpoint, MetadataCache, PartitionState
from system_under_test.replication.fetcher import ReplicaFetcher
from system_under_test.replication.leader_epoch_cache import LeaderEpochCache
from system_under_test.replication.partition import IsrChange, Partition, Role
from system_under_test.tasks import cancel_and_wait
from system_under_test.zookeeper import LeaderAndIsr

log = logging.getLogger(__name__)

REGISTRATION_WAIT_S = 30.0
"""How long a controller's order waits for this broker's own registration to complete (a
restart within the previous ZooKeeper session registers once that session has expired)."""

TopicPartition = tuple[str, int]
HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
IsrWriter = Callable[[str, int, LeaderAndIsr, int], "int | None"]
"""A leader's conditional ISR write: (topic, partition, new state, expected znode version)
-> the new version, or None when the znode moved on (the controller changed it)."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ReplicaManager:
    """Partitions this broker hosts in a cluster, their roles, fetchers and ISR changes."""

    def __init__(
        self,
        config: BrokerConfig,
        log_manager: LogManager,
        partitions: dict[TopicPartition, Partition],
        metadata: MetadataCache,
        events: EventLog,
        *,
        isr_writer: IsrWriter,
        topic_config: Callable[[str], Mapping[str, str]],
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.partitions = partitions
        self.metadata = metadata
        self.events = events
        self.isr_writer = isr_writer
        self.topic_config = topic_config
        self.controller_epoch = 0
        self.broker_epoch: int | None = None
        """This run's registration czxid (KIP-380 broker epoch), None until registered."""
        self._registration = asyncio.Event()
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._checkpointed_hw: dict[TopicPartition, int] = {}
        self._background: asyncio.Task[None] | None = None
        self._isr_writes: set[asyncio.Task[None]] = set()
        self._replicas_stopped = False
        """After a controlled shutdown: this broker follows no partition any more."""

    # --- life cycle -------------------------------------------------------------------------

    def startup(self) -> None:
        """Load the logs and the checkpointed high watermarks; roles wait for the controller."""
        self.log_manager.startup()
        for log_dir in self.config.log_dirs:
            path = log_dir / HW_CHECKPOINT_FILE
            if path.exists():
                try:
                    self._checkpointed_hw.update(OffsetCheckpointFile(path).read())
                except CheckpointError as err:
                    log.warning("ignoring %s: %s", path, err)
        self._background = asyncio.get_running_loop().create_task(self._run_background())

    async def shutdown(self) -> None:
        if self._background is not None:
            await cancel_and_wait(self._background)
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
        self.checkpoint_high_watermarks()

    async def stop_replicas(self) -> None:
        """Stop following every partition, for good, as the StopReplica that a controlled
        shutdown brings in Kafka: the broker is about to stop, and a follower that went on
        fetching would be taken back into the ISRs the controller just removed it from."""
        self._replicas_stopped = True
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()

    def checkpoint_high_watermarks(self) -> None:
        by_dir: dict[Path, dict[TopicPartition, int]] = {}
        for key, partition in self.partitions.items():
            by_dir.setdefault(partition.log.dir.parent, {})[key] = partition.high_watermark
        for log_dir in self.config.log_dirs:
            try:
                OffsetCheckpointFile(log_dir / HW_CHECKPOINT_FILE).write(by_dir.get(log_dir, {}))
            except OSError as err:
                log.error("cannot checkpoint high watermarks in %s: %s", log_dir, err)

    def fence_all(self) -> None:
        """The ZooKeeper session is gone: stop acting as leader anywhere."""
        for partition in self.partitions.values():
            if partition.role is Role.LEADER:
                log.warning("%s: fenced (ZooKeeper session lost)", partition.name)
                partition.fence()

    # --- controller requests ---------------------------------------------------------------

    def registered(self, broker_epoch: int) -> None:
        """This broker's registration in ZooKeeper is `broker_epoch` (its czxid)."""
        self.broker_epoch = broker_epoch
        self._registration.set()

    async def become_leader_or_follower(
        self, request: protocol.LeaderAndIsrRequest
    ) -> protocol.LeaderAndIsrResponse:
        if request.broker_epoch >= 0 and self.broker_epoch is None:
            # Orders for this run can overtake the answer to its own registration: wait for
            # it (as long as registering may take) before telling them from older ones.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._registration.wait(), REGISTRATION_WAIT_S)
        stale = request.broker_epoch >= 0 and (
            self.broker_epoch is None or request.broker_epoch < self.broker_epoch
        )
        if stale:
            # KIP-380: orders for an earlier run of this broker, from a controller that has not
            # seen it restart (its old session's registration still stood). That run's log
            # may be gone (a power loss, a restored backup): leading with it would make the
            # followers truncate what was committed.
            log.warning(
                "ignoring LeaderAndIsr from controller %d: meant for broker epoch %d, this "
                "broker's is %s",
                request.controller_id,
                request.broker_epoch,
                "not registered yet" if self.broker_epoch is None else self.broker_epoch,
            )
            return protocol.LeaderAndIsrResponse(ErrorCode.STALE_BROKER_EPOCH, [])
        if request.controller_epoch < self.controller_epoch:
            log.warning(
                "ignoring LeaderAndIsr from controller %d: epoch %d is older than %d",
                request.controller_id,
                request.controller_epoch,
                self.controller_epoch,
            )
            return protocol.LeaderAndIsrResponse(ErrorCode.STALE_CONTROLLER_EPOCH, [])
        self.controller_epoch = request.controller_epoch
        live: dict[int, protocol.LiveBroker] = {}
        for broker in request.live_brokers:
            self.metadata.set_broker(BrokerEndpoint(broker.broker_id, broker.host, broker.port))
            live.setdefault(broker.broker_id, broker)
        errors: list[protocol.PartitionError] = []
        for state in request.partition_states:
            code = ErrorCode.NONE
            try:
                await self._apply_state(state, live)
            except BrokerError as err:
                code = err.code
                log.warning("%s-%d: LeaderAndIsr refused: %s", state.topic, state.partition, err)
            errors.append(protocol.PartitionError(state.topic, state.partition, code))
        return protocol.LeaderAndIsrResponse(ErrorCode.NONE, errors)

    async def _apply_state(
        self, state: protocol.PartitionLeaderStateData, live: dict[int, protocol.LiveBroker]
    ) -> None:
        key = (state.topic, state.partition)
        partition = self.partitions.get(key)
        if partition is None:
            partition = await self._create_partition(state.topic, state.partition)
        elif state.leader_epoch < partition.leader_epoch or (
            state.leader_epoch == partition.leader_epoch
            and state.zk_version <= partition.zk_version
            and partition.role is not Role.FENCED
        ):
            return  # stale, or already applied
        partition.controller_epoch = state.controller_epoch
        if state.leader == self.broker_id:
            self._remove_from_fetchers(key)
            was_leader = partition.role is Role.LEADER
            partition.make_leader(
                leader_epoch=state.leader_epoch,
                isr=list(state.isr),
                replicas=list(state.replicas),
                zk_version=state.zk_version,
                elr=tuple(state.elr),
                lag_time_max_ms=self.config["replica.lag.time.max.ms"],
                lag_max_messages=self.config["replica.lag.max.messages"],
                now_ms=now_ms(),
            )
            if not was_leader:
                log.info(
                    "%s: leader in epoch %d, ISR %s, log end %d, HW %d",
                    partition.name,
                    state.leader_epoch,
                    list(state.isr),
                    partition.log_end_offset,
                    partition.high_watermark,
                )
            return
        previous_leader = partition.leader_id if partition.role is Role.FOLLOWER else None
        partition.make_follower(
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=list(state.isr),
            replicas=list(state.replicas),
            zk_version=state.zk_version,
            elr=tuple(state.elr),
        )
        if state.leader < 0:
            self._remove_from_fetchers(key)
            return
        if self.config["replica.truncation"] == "high-watermark":
            # Kafka before 0.11: whatever is above the local high watermark may be uncommitted.
            partition.truncate_to(partition.high_watermark, reason="high-watermark")
        if previous_leader != state.leader:
            self._remove_from_fetchers(key)
        endpoint = live.get(state.leader)
        leader = (
            BrokerEndpoint(endpoint.broker_id, endpoint.host, endpoint.port)
            if endpoint is not None
            else self.metadata.brokers.get(state.leader)
        )
        if leader is None:
            raise BrokerError(
                ErrorCode.LEADER_NOT_AVAILABLE,
                f"leader {state.leader} of {partition.name} has no known endpoint",
            )
        if self._replicas_stopped:
            return
        self._fetcher_for(leader).add(partition, truncate=True)
        log.info(
            "%s: follower of %d in epoch %d, log end %d, HW %d",
            partition.name,
            state.leader,
            state.leader_epoch,
            partition.log_end_offset,
            partition.high_watermark,
        )

    async def _create_partition(self, topic: str, number: int) -> Partition:
        overrides = await asyncio.get_running_loop().run_in_executor(None, self.topic_config, topic)
        config = LogConfig.from_mapping(
            {**self.config.topic_defaults(), **overrides}, source=f"config of topic {topic}"
        )
        partition_log = self.log_manager.get_or_create_log(topic, number, config)
        key = (topic, number)
        partition = Partition(
            topic,
            number,
            partition_log,
            local_broker_id=self.broker_id,
            leader_epoch=-1,
            isr=[],
            high_watermark=self._checkpointed_hw.get(key, 0),
            epoch_cache=LeaderEpochCache(partition_log.dir),
            events=self.events,
        )
        partition.role = Role.FOLLOWER
        partition.leader_id = -1
        partition.zk_version = -1
        self.partitions[key] = partition
        return partition

    def _fetcher_for(self, leader: BrokerEndpoint) -> ReplicaFetcher:
        fetcher = self.fetchers.get(leader.broker_id)
        if fetcher is not None and (fetcher.leader.host, fetcher.leader.port) != (
            leader.host,
            leader.port,
        ):
            asyncio.get_running_loop().create_task(fetcher.stop())
            fetcher = None
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self.broker_id,
                leader,
                truncation=self.config["replica.truncation"],
                max_wait_ms=self.config["replica.fetch.wait.max.ms"],
                max_bytes=self.config["replica.fetch.max.bytes"],
                request_timeout_s=max(5.0, self.config["replica.fetch.wait.max.ms"] / 1000 + 5),
            )
            self.fetchers[leader.broker_id] = fetcher
        return fetcher

    def _remove_from_fetchers(self, key: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(key)

    def update_metadata(
        self, request: protocol.UpdateMetadataRequest
    ) -> protocol.UpdateMetadataResponse:
        if request.controller_epoch < self.controller_epoch:
            return protocol.UpdateMetadataResponse(ErrorCode.STALE_CONTROLLER_EPOCH)
        self.controller_epoch = request.controller_epoch
        self.metadata.controller_id = request.controller_id
        self.metadata.brokers = {
            b.broker_id: BrokerEndpoint(b.broker_id, b.host, b.port) for b in request.live_brokers
        }
        topics: dict[str, dict[int, PartitionState]] = {}
        for s in request.partition_states:
            topics.setdefault(s.topic, {})[s.partition] = PartitionState(
                s.leader, s.leader_epoch, tuple(s.replicas), tuple(s.isr)
            )
        for name in list(self.metadata.topics):
            if name not in topics:
                self.metadata.remove_topic(name)
        for name, states in topics.items():
            self.metadata.set_topic(name, states)
        return protocol.UpdateMetadataResponse(ErrorCode.NONE)

    def offsets_for_leader_epoch(
        self, request: protocol.OffsetForLeaderEpochRequest
    ) -> protocol.OffsetForLeaderEpochResponse:
        topics = []
        for topic in request.topics:
            answers = []
            for wanted in topic.partitions:
                try:
                    partition = self.partitions.get((topic.name, wanted.partition))
                    if partition is None:
                        raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "not hosted")
                    epoch, end = partition.end_offset_for_epoch(wanted.leader_epoch)
                    answers.append(
                        protocol.EpochEndOffset(wanted.partition, ErrorCode.NONE, epoch, end)
                    )
                except BrokerError as err:
                    answers.append(protocol.EpochEndOffset(wanted.partition, err.code, -1, -1))
            topics.append(protocol.OffsetForLeaderEpochTopicResponse(topic.name, answers))
        return protocol.OffsetForLeaderEpochResponse(topics)

    # --- the leader's side of replication -----------------------------------------------------

    def on_follower_fetch(self, partition: Partition, follower: int, fetch_offset: int) -> None:
        """Called for every fetch a follower makes from a partition this broker leads."""
        change = partition.on_follower_fetch(follower, fetch_offset, now_ms())
        if change is not None:
            self._start_isr_write(partition, change)

    def _start_isr_write(self, partition: Partition, change: IsrChange) -> None:
        partition.isr_update_pending = True
        task = asyncio.get_running_loop().create_task(self._write_isr(partition, change))
        self._isr_writes.add(task)
        task.add_done_callback(self._isr_writes.discard)

    async def _write_isr(self, partition: Partition, change: IsrChange) -> None:
        epoch = partition.leader_epoch
        state = LeaderAndIsr(
            self.broker_id, epoch, change.isr, partition.controller_epoch, change.elr
        )
        try:
            version = await asyncio.get_running_loop().run_in_executor(
                None,
                self.isr_writer,
                partition.topic,
                partition.partition,
                state,
                partition.zk_version,
            )
        except Exception as err:
            log.warning(
                "%s: ISR change to %s not written: %s", partition.name, list(change.isr), err
            )
            version = None
        finally:
            partition.isr_update_pending = False
        if version is None:
            log.info(
                "%s: cached zk version %d is stale; skipping ISR update to %s until the "
                "controller's next LeaderAndIsr",
                partition.name,
                partition.zk_version,
                list(change.isr),
            )
            return
        # ZooKeeper now holds the new ISR: that is logged even if this broker stopped
        # leading meanwhile, so that the events show every ISR the controller may elect from.
        self.events.isr_change(
            key=partition.name,
            isr=change.isr,
            elr=change.elr,
            leader=self.broker_id,
            leader_epoch=epoch,
            reason=change.reason,
            previous_isr=change.previous_isr,
            high_watermark=change.high_watermark,
            log_end_offsets=change.log_end_offsets,
            zk_version=version,
        )
        if partition.role is not Role.LEADER or partition.leader_epoch != epoch:
            return
        before = sorted(partition.isr)
        partition.apply_isr(change.isr, change.elr, version)
        log.info(
            "%s: ISR %s -> %s, ELR %s (%s)",
            partition.name,
            before,
            list(change.isr),
            list(change.elr),
            change.reason,
        )

    def check_isr(self) -> None:
        """Shrink the ISR of every led partition whose followers lag."""
        now = now_ms()
        for partition in self.partitions.values():
            change = partition.maybe_shrink_isr(now)
            if change is not None:
                self._start_isr_write(partition, change)

    async def _run_background(self) -> None:
        lag_ms = self.config["replica.lag.time.max.ms"]
        isr_interval = max(0.05, min(lag_ms / 2000, 1.0))
        checkpoint_interval = self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000
        next_checkpoint = time.monotonic() + checkpoint_interval
        while True:
            await asyncio.sleep(isr_interval)
            try:
                self.check_isr()
                if time.monotonic() >= next_checkpoint:
                    next_checkpoint = time.monotonic() + checkpoint_interval
                    self.checkpoint_high_watermarks()
            except Exception:
                log.exception("replica maintenance failed; retrying")
