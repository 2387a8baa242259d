"""Where a broker's groups live: ``__consumer_offsets``, as Kafka keeps them.

A group belongs to one partition of the topic (Kafka's rule: the group id's Java hash code,
made non-negative, modulo the partition count), and its coordinator is that partition's
leader. The coordinator writes each commit and each generation's assignment to the partition
as a record (``kafka/group_metadata.py``), with ``offsets.commit.required.acks``, and answers
only once the write is replicated, so a commit's durability is that of any acknowledged write.
A broker that becomes the partition's leader loads its groups and offsets from its log before
it answers for them (COORDINATOR_LOAD_IN_PROGRESS meanwhile); one that stops leading it drops
them (NOT_COORDINATOR). ``offsets.storage=zookeeper`` keeps the groups here but commits to
ZooKeeper, as Kafka 0.8's consumers did.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from system_under_test.config import BrokerConfig
from system_under_test.errors import ErrorCode, KafkaCodecError
from system_under_test.event_log import EventLog
from system_under_test.group_coordinator import GroupLimits
from system_under_test.group_service import GroupService
from system_under_test.kafka.group_metadata import (
    OFFSETS_TOPIC,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_record,
    group_record,
    offset_record,
)
from system_under_test.log.record import decode_records, encode_records
from system_under_test.metadata_cache import NO_LEADER
from system_under_test.replication.partition import Partition
from system_under_test.request_handler import RequestHandler
from system_under_test.topic_spec import CreatableTopic, TopicConfigEntry
from system_under_test.zookeeper import MetadataError

log = logging.getLogger(__name__)

LOAD_WAIT_S = 1.0
"""How long a request waits for its group's partition to load before it is told to retry."""
LOAD_READ_BYTES = 1 << 20
TOPIC_CREATION_TIMEOUT_MS = 5000

TopicPartition = tuple[str, int]


class ZooKeeperOffsets(Protocol):
    """Offsets in ZooKeeper (``ClusterMembership``), for ``offsets.storage=zookeeper``."""

    async def commit_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, str | None]: ...

    async def committed_offsets(
        self, group: str, partitions: Sequence[TopicPartition] | None
    ) -> dict[TopicPartition, int | None]: ...


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    metadata: str
    log_offset: int
    """Where the commit's record is in ``__consumer_offsets``: the later record wins."""


@dataclass(frozen=True, slots=True)
class Coordinator:
    """FindCoordinator's answer: the broker leading the group's partition, or why none."""

    error: ErrorCode
    broker_id: int = -1
    message: str | None = None


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, as a signed 32-bit integer."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partition_count: int) -> int:
    """The partition of ``__consumer_offsets`` holding a group (Kafka's ``Utils.abs`` keeps
    the low 31 bits)."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partition_count


def _commit_error(code: ErrorCode) -> ErrorCode:
    """A failed write of a commit as the client is told (Kafka 2.x's mapping)."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return code


def _group_store_error(code: ErrorCode) -> ErrorCode:
    """A failed write of a group's metadata as its members are told."""
    if code is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    mapped = _commit_error(code)
    return (
        ErrorCode.UNKNOWN_SERVER_ERROR if mapped is ErrorCode.INVALID_COMMIT_OFFSET_SIZE else mapped
    )


class GroupMetadataManager:
    """The groups and committed offsets of the ``__consumer_offsets`` partitions this broker
    leads. ``service`` runs their members' joins, syncs and heartbeats."""

    def __init__(
        self,
        config: BrokerConfig,
        core: RequestHandler,
        *,
        events: EventLog | None = None,
        zookeeper: ZooKeeperOffsets | None = None,
        standalone: bool = False,
    ) -> None:
        self.core = core
        self.events = events
        self.zookeeper = zookeeper
        self.offsets_in_zookeeper = config["offsets.storage"] == "zookeeper"
        self.configured_partitions = int(config["offsets.topic.num.partitions"])
        self.replication_factor = (
            1 if standalone else int(config["offsets.topic.replication.factor"])
        )
        self.min_insync = config["offsets.topic.min.insync.replicas"]
        self.required_acks = int(config["offsets.commit.required.acks"])
        self.commit_timeout_ms = int(config["offsets.commit.timeout.ms"])
        self.max_metadata_bytes = int(config["offset.metadata.max.bytes"])
        limits = GroupLimits(
            min_session_timeout_s=config["group.min.session.timeout.ms"] / 1000,
            max_session_timeout_s=config["group.max.session.timeout.ms"] / 1000,
            initial_rebalance_delay_s=config["group.initial.rebalance.delay.ms"] / 1000,
        )
        self.service = GroupService(
            limits, events=events, store=self._store_group, before_expiry=self.drop_lost
        )
        self._loaded: dict[int, tuple[Partition, int]] = {}
        """Partitions loaded, each with the replica loaded and its `leaderships_ended` then:
        the state stands while that replica leads without a break (a new leader epoch of the
        same leader, after an ISR change, keeps it, as Kafka keeps a leader's groups)."""
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._groups_of: dict[int, set[str]] = {}
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._creating: asyncio.Task[None] | None = None

    # -- which broker coordinates a group -------------------------------------------------------

    def partition_count(self) -> int:
        """The topic's partition count once it exists (whoever created it), else ours."""
        states = self.core.metadata.partitions(OFFSETS_TOPIC)
        return len(states) if states else self.configured_partitions

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count())

    async def find_coordinator(self, group_id: str) -> Coordinator:
        """The leader of the group's partition; the topic is created on first need."""
        states = self.core.metadata.partitions(OFFSETS_TOPIC)
        if not states:
            why = await self._create_topic()
            return Coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE, message=why)
        state = states.get(partition_for(group_id, len(states)))
        if state is None or state.leader == NO_LEADER:
            return Coordinator(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                message=f"the group's partition of {OFFSETS_TOPIC} has no leader",
            )
        return Coordinator(ErrorCode.NONE, state.leader)

    async def _create_topic(self) -> str:
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create())
        await asyncio.shield(self._creating)
        return f"{OFFSETS_TOPIC} is being created"

    async def _create(self) -> None:
        configs = []
        if self.min_insync is not None:
            configs.append(TopicConfigEntry("min.insync.replicas", str(self.min_insync)))
        topic = CreatableTopic(
            OFFSETS_TOPIC, self.configured_partitions, self.replication_factor, configs
        )
        (result,) = await self.core.topic_creator.create_topics([topic], TOPIC_CREATION_TIMEOUT_MS)
        if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.warning("creating %s: %s", OFFSETS_TOPIC, result.error_message or result.error_code)

    # -- the partitions this broker leads ---------------------------------------------------

    def _led(self, number: int) -> Partition | None:
        partition = self.core.partitions.get((OFFSETS_TOPIC, number))
        return partition if partition is not None and partition.is_leader else None

    async def ready(self, group_id: str) -> ErrorCode:
        """Whether this broker answers for the group now: NONE once its partition is loaded,
        NOT_COORDINATOR where another broker leads it, COORDINATOR_LOAD_IN_PROGRESS while it
        loads."""
        if not self.core.metadata.partitions(OFFSETS_TOPIC):
            return ErrorCode.NOT_COORDINATOR
        number = self.partition_of(group_id)
        partition = self._led(number)
        if partition is None:
            self._unload(number)
            return ErrorCode.NOT_COORDINATOR
        if self._still_loaded(number):
            self._groups_of.setdefault(number, set()).add(group_id)
            return ErrorCode.NONE
        task = self._loading.get(number)
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self._load(number, partition))
            self._loading[number] = task
        try:
            await asyncio.wait_for(asyncio.shield(task), LOAD_WAIT_S)
        except TimeoutError:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return await self.ready(group_id)

    def _still_loaded(self, number: int) -> bool:
        """Whether the partition's state loaded here still stands: the replica loaded has
        led it since without a break."""
        loaded = self._loaded.get(number)
        if loaded is None:
            return False
        replica, ended = loaded
        return self._led(number) is replica and replica.leaderships_ended == ended

    def drop_lost(self) -> None:
        """Drop the groups of partitions this broker has not led without a break since it
        loaded them."""
        for number in list(self._loaded):
            if not self._still_loaded(number):
                self._unload(number)

    def _unload(self, number: int) -> None:
        if self._loaded.pop(number, None) is None:
            return
        groups = self._groups_of.pop(number, set())
        for group_id in groups:
            self.service.unload(group_id)
            self._offsets.pop(group_id, None)
        log.info(
            "%s-%d: not led here any more; %d groups dropped", OFFSETS_TOPIC, number, len(groups)
        )

    async def _load(self, number: int, partition: Partition) -> None:
        """Read the partition's log to its end (as Kafka does) and take over its groups."""
        epoch, ended = partition.leader_epoch, partition.leaderships_ended
        started = time.monotonic()
        groups: dict[str, GroupMetadataValue | None] = {}
        offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        position, end = partition.log_start_offset, partition.log_end_offset
        records = 0
        while position < end:
            data = partition.log.read(position, LOAD_READ_BYTES, max_offset=end)
            found = decode_records(data.records)
            if not found:
                break
            for record in found:
                records += 1
                try:
                    decoded = decode_record(record.key, record.value)
                except KafkaCodecError as err:
                    log.warning("%s: record %d skipped: %s", partition.name, record.offset, err)
                    continue
                if isinstance(decoded, GroupRecord):
                    groups[decoded.key.group] = decoded.value
                    continue
                key = decoded.key
                by_partition = offsets.setdefault(key.group, {})
                if decoded.value is None:
                    by_partition.pop((key.topic, key.partition), None)
                else:
                    by_partition[(key.topic, key.partition)] = CommittedOffset(
                        decoded.value.offset, decoded.value.metadata, record.offset
                    )
            position = found[-1].offset + 1
            await asyncio.sleep(0)  # let the broker serve others between chunks
        if self._led(number) is not partition or partition.leaderships_ended != ended:
            return  # lost the partition while loading
        self._unload(number)
        names = self._groups_of.setdefault(number, set())
        for group_id, stored in groups.items():
            names.add(group_id)
            if stored is None:
                self.service.unload(group_id)
            else:
                self.service.restore(group_id, stored)
        for group_id, committed in offsets.items():
            names.add(group_id)
            self._offsets[group_id] = committed
        self._loaded[number] = (partition, ended)
        log.info(
            "%s: loaded %d groups and the offsets of %d in epoch %d (%d records, %.3f s)",
            partition.name,
            sum(1 for v in groups.values() if v is not None),
            len(offsets),
            epoch,
            records,
            time.monotonic() - started,
        )
        if self.events is not None:
            self.events.write(
                "group-load",
                topic=OFFSETS_TOPIC,
                partition=number,
                leader_epoch=epoch,
                groups=sorted(g for g, v in groups.items() if v is not None),
                log_end_offset=end,
            )

    # -- writes --------------------------------------------------------------------------------

    async def _append(
        self, group_id: str, items: Iterable[tuple[bytes, bytes]]
    ) -> tuple[ErrorCode, int]:
        now_ms = time.time_ns() // 1_000_000
        return await self.core.append_and_wait(
            OFFSETS_TOPIC,
            self.partition_of(group_id),
            encode_records((key, value, now_ms) for key, value in items),
            acks=self.required_acks,
            timeout_ms=self.commit_timeout_ms,
        )

    async def _store_group(self, group_id: str, stored: GroupMetadataValue) -> ErrorCode:
        code, _ = await self._append(
            group_id, [group_record(GroupMetadataKey(group=group_id), stored)]
        )
        return _group_store_error(code)

    async def commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Mapping[TopicPartition, tuple[int, str]],
    ) -> dict[TopicPartition, ErrorCode]:
        """Store a group's commit (offset and metadata by partition): each partition's error."""
        code = await self.ready(group_id)
        if code is ErrorCode.NONE:
            code = self.service.check_commit(group_id, generation_id, member_id)
        if code is not ErrorCode.NONE or not offsets:
            return dict.fromkeys(offsets, code)
        codes = {
            key: ErrorCode.OFFSET_METADATA_TOO_LARGE
            for key, (_, metadata) in offsets.items()
            if len(metadata.encode()) > self.max_metadata_bytes
        }
        wanted = {key: value for key, value in offsets.items() if key not in codes}
        if not wanted:
            return codes
        if self.offsets_in_zookeeper:
            return {**codes, **await self._commit_to_zookeeper(group_id, wanted)}
        return {**codes, **await self._commit_to_log(group_id, wanted)}

    async def _commit_to_log(
        self, group_id: str, offsets: Mapping[TopicPartition, tuple[int, str]]
    ) -> dict[TopicPartition, ErrorCode]:
        """Each partition a record of the group's partition of the topic, answered once
        replicated; the coordinator's view takes them only then."""
        number = self.partition_of(group_id)
        loaded = self._loaded.get(number)
        now_ms = time.time_ns() // 1_000_000
        code, last = await self._append(
            group_id,
            [
                offset_record(
                    OffsetCommitKey(group=group_id, topic=topic, partition=index),
                    OffsetCommitValue(offset=offset, metadata=metadata, commit_timestamp=now_ms),
                )
                for (topic, index), (offset, metadata) in offsets.items()
            ],
        )
        if code is not ErrorCode.NONE:
            return dict.fromkeys(offsets, _commit_error(code))
        if self._loaded.get(number) is loaded:  # not dropped (or reloaded) while written
            committed = self._offsets.setdefault(group_id, {})
            first = last - len(offsets) + 1
            for i, (key, (offset, metadata)) in enumerate(offsets.items()):
                held = committed.get(key)
                if held is None or held.log_offset < first + i:
                    committed[key] = CommittedOffset(offset, metadata, first + i)
        return dict.fromkeys(offsets, ErrorCode.NONE)

    async def _commit_to_zookeeper(
        self, group_id: str, offsets: Mapping[TopicPartition, tuple[int, str]]
    ) -> dict[TopicPartition, ErrorCode]:
        codes: dict[TopicPartition, ErrorCode] = {}
        wanted: dict[TopicPartition, int] = {}
        for key, (offset, metadata) in offsets.items():
            if metadata:  # ZooKeeper's offsets keep none: refused rather than dropped
                codes[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                wanted[key] = offset
        if wanted and self.zookeeper is None:
            codes.update(dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif wanted and self.zookeeper is not None:
            written = await self.zookeeper.commit_offsets(group_id, wanted)
            for key, failure in written.items():
                if failure is not None:
                    log.info("commit of group %s, %s-%d: %s", group_id, *key, failure)
                codes[key] = (
                    ErrorCode.NONE if failure is None else ErrorCode.COORDINATOR_NOT_AVAILABLE
                )
        return codes

    async def committed(
        self, group_id: str, partitions: Sequence[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, tuple[int, str]]]:
        """The group's committed offsets (all of them for None): an error, or the offsets."""
        code = await self.ready(group_id)
        if code is not ErrorCode.NONE:
            return code, {}
        if self.offsets_in_zookeeper:
            if self.zookeeper is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
            try:
                found = await self.zookeeper.committed_offsets(group_id, partitions)
            except MetadataError as err:
                log.info("offsets of group %s: %s", group_id, err)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
            return ErrorCode.NONE, {k: (v, "") for k, v in found.items() if v is not None}
        held = self._offsets.get(group_id, {})
        keys = held.keys() if partitions is None else [k for k in partitions if k in held]
        return ErrorCode.NONE, {k: (held[k].offset, held[k].metadata) for k in keys}

    def close(self) -> None:
        self.service.close()
        for task in self._loading.values():
            task.cancel()
        if self._creating is not None:
            self._creating.cancel()
