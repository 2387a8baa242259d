"""Kafka's APIs on a broker's listeners: what every client's requests get (KAFKA_PROTOCOL.md).

ApiVersions, Metadata, CreateTopics, ListOffsets, Produce, Fetch, InitProducerId and the
group APIs, decoded and encoded by the codec of ``system_under_test.kafka``. Every partition
is reached through the same ``Partition`` objects and replica manager as the brokers' own
APIs (``RequestHandler``), so leadership, the ISR, the high watermark and min.insync.replicas
behave identically.

The log stores RecordBatch v2 (log/record.py): a produced batch is appended as it came, its
offsets and leader epoch assigned in place; a fetch returns the stored batches as they lie
in the log, up to the high watermark.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from system_under_test.errors import (
    BrokerError,
    ErrorCode,
    KafkaCodecError,
    UnsupportedCompressionError,
    UnsupportedRequestVersionError,
)
from system_under_test.group_metadata_manager import GroupMetadataManager
from system_under_test.kafka import (
    api_versions,
    create_topics,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    produce,
    sync_group,
)
from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.apis import supported_versions
from system_under_test.kafka.framing import Request, decode_request, encode_response
from system_under_test.kafka.record_batch import (
    CONTROL_BIT,
    NO_PRODUCER_ID,
    TRANSACTIONAL_BIT,
    check_compression,
    split_batches,
)
from system_under_test.kafka.schema import Body
from system_under_test.log.log_manager import InvalidTopicError, validate_topic_partition
from system_under_test.metadata_cache import NO_LEADER, BrokerEndpoint
from system_under_test.producer_ids import ProducerIdManager
from system_under_test.replication.partition import CONSUMER_REPLICA_ID, Partition
from system_under_test.request_handler import (
    VALID_ACKS,
    RequestHandler,
    _ProduceResult,
    check_leader_epoch,
)
from system_under_test.topic_spec import CreatableTopic, TopicConfigEntry

log = logging.getLogger(__name__)

SERVED_APIS = frozenset(
    {
        ApiKey.API_VERSIONS,
        ApiKey.METADATA,
        ApiKey.CREATE_TOPICS,
        ApiKey.LIST_OFFSETS,
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.FIND_COORDINATOR,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.INIT_PRODUCER_ID,
    }
)
"""The APIs this listener answers (and advertises)."""

_client_host: contextvars.ContextVar[str] = contextvars.ContextVar("client_host", default="")
"""The address of the client whose request is being handled (a group member's client_host)."""

READ_COMMITTED = 1

KafkaEndpoints = Callable[[list[BrokerEndpoint]], Awaitable[dict[int, tuple[str, int]]]]
"""Given the brokers the controller says are alive, their Kafka listeners' addresses."""
NO_OFFSET = -1
"""OffsetFetch's committed offset of a partition the group never committed."""


class KafkaRecordsError(BrokerError):
    """A produced batch this broker cannot store: the error code is Kafka's answer."""


def api_version_ranges() -> list[api_versions.ApiVersion]:
    """The ranges an ApiVersions answer lists: the codec's, for the APIs served here."""
    return [v for v in supported_versions() if v.api_key in SERVED_APIS]


# --- records: what a produce may store -------------------------------------------------------


def produced_batch(records: bytes | None) -> bytearray:
    """A produce's records as the log will store them: exactly one whole, uncompressed
    RecordBatch v2, as Kafka requires from Produce v3, copied so the leader can assign its
    offsets in place. Its records are checked when the log appends it.

    Refused (KafkaRecordsError, nothing written): more or fewer than one batch, a bad CRC,
    compression, and transactional batches (not supported yet). An idempotent producer's
    batches are checked against its sequence when the log appends them.
    """
    if records is None:
        raise KafkaRecordsError(ErrorCode.CORRUPT_MESSAGE, "null records")
    try:
        found = split_batches(records)
        if found.partial is not None or len(found.batches) != 1:
            raise KafkaRecordsError(
                ErrorCode.INVALID_RECORD,
                f"a produce carries exactly one whole record batch per partition, not "
                f"{len(found.batches)}{' and a partial one' if found.partial else ''}",
            )
        batch = found.batches[0]
        check_compression(batch.attributes)
    except UnsupportedCompressionError as err:
        raise KafkaRecordsError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(err)) from None
    except KafkaCodecError as err:
        raise KafkaRecordsError(ErrorCode.CORRUPT_MESSAGE, str(err)) from None
    if not batch.crc_ok():
        raise KafkaRecordsError(
            ErrorCode.CORRUPT_MESSAGE, "the record batch's CRC-32C does not match its bytes"
        )
    if batch.attributes & (TRANSACTIONAL_BIT | CONTROL_BIT):
        raise KafkaRecordsError(
            ErrorCode.INVALID_RECORD,
            "transactional producers are not supported yet: use no transactional.id",
        )
    if batch.producer_id != NO_PRODUCER_ID and (
        batch.producer_epoch < 0 or batch.base_sequence < 0
    ):
        raise KafkaRecordsError(
            ErrorCode.INVALID_RECORD,
            f"producer {batch.producer_id}'s batch has epoch {batch.producer_epoch} and base "
            f"sequence {batch.base_sequence}: an idempotent batch needs both",
        )
    return bytearray(records)


# --- the handler -------------------------------------------------------------------------------


class KafkaRequestHandler:
    """Answers Kafka-protocol frames from the broker's partitions and metadata cache."""

    def __init__(
        self,
        core: RequestHandler,
        *,
        endpoints: KafkaEndpoints,
        cluster_id: str | None = None,
        groups: GroupMetadataManager | None = None,
        producer_ids: ProducerIdManager | None = None,
    ) -> None:
        """`groups`: the broker's consumer groups and their offsets (None: none here);
        `producer_ids`: where InitProducerId takes ids (None: it answers
        COORDINATOR_NOT_AVAILABLE)."""
        self.core = core
        self.endpoints = endpoints
        self.cluster_id = cluster_id
        self.groups = groups
        self.producer_ids = producer_ids
        self.handlers: dict[int, Callable[[Any], Awaitable[Body | None]]] = {
            ApiKey.API_VERSIONS: self.handle_api_versions,
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.CREATE_TOPICS: self.handle_create_topics,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets,
            ApiKey.PRODUCE: self.handle_produce,
            ApiKey.FETCH: self.handle_fetch,
            ApiKey.FIND_COORDINATOR: self.handle_find_coordinator,
            ApiKey.OFFSET_COMMIT: self.handle_offset_commit,
            ApiKey.OFFSET_FETCH: self.handle_offset_fetch,
            ApiKey.JOIN_GROUP: self.handle_join_group,
            ApiKey.SYNC_GROUP: self.handle_sync_group,
            ApiKey.HEARTBEAT: self.handle_heartbeat,
            ApiKey.LEAVE_GROUP: self.handle_leave_group,
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id,
        }

    async def handle_frame(self, frame: bytearray, peer: str) -> tuple[bytes | None, bool]:
        """The response frame (None: none is due) and whether to close the connection.

        As Kafka does: an ApiVersions request of an unknown version gets a version 0 answer
        with UNSUPPORTED_VERSION and the supported ranges; any other unknown API or version,
        or a request that does not decode, closes the connection.
        """
        try:
            request = decode_request(frame)
        except UnsupportedRequestVersionError as err:
            if err.api_key == ApiKey.API_VERSIONS:
                answer = api_versions.unsupported_version_answer(api_version_ranges())
                return encode_response(answer, 0, err.correlation_id), False
            log.info("closing Kafka connection from %s (client %s): %s", peer, err.client_id, err)
            return None, True
        except KafkaCodecError as err:
            log.warning("closing Kafka connection from %s: undecodable request: %s", peer, err)
            return None, True
        header = request.header
        handler = self.handlers.get(header.api_key)
        if handler is None:
            log.info(
                "closing Kafka connection from %s: API key %d is not served",
                peer,
                header.api_key,
            )
            return None, True
        _client_host.set("/" + peer.rsplit(":", 1)[0])
        try:
            body = await handler(request)
            if body is None:
                return None, False
            return encode_response(body, header.api_version, header.correlation_id), False
        except _Close as err:
            log.info("closing Kafka connection from %s: %s", peer, err)
            return None, True
        except Exception:
            log.exception("handling Kafka %s from %s failed", ApiKey(header.api_key).name, peer)
            return None, True

    # --- ApiVersions, Metadata, CreateTopics ------------------------------------------------

    async def handle_api_versions(self, request: Request) -> api_versions.ApiVersionsResponse:
        return api_versions.ApiVersionsResponse(
            error_code=int(ErrorCode.NONE), api_keys=api_version_ranges()
        )

    async def handle_metadata(self, request: Request) -> metadata.MetadataResponse:
        body = request.body
        assert isinstance(body, metadata.MetadataRequest)
        version = request.header.api_version
        cache = self.core.metadata
        if body.topics is None or (version == 0 and not body.topics):
            names = cache.topic_names()
        else:
            names = list(dict.fromkeys(t.name for t in body.topics))
        alive = cache.alive_brokers()
        addresses = await self.endpoints(alive)
        brokers = [
            metadata.MetadataResponseBroker(node_id=b, host=host, port=port)
            for b, (host, port) in sorted(addresses.items())
        ]
        topics = [self._metadata_topic(name, set(addresses)) for name in names]
        return metadata.MetadataResponse(
            brokers=brokers,
            cluster_id=self.cluster_id,
            controller_id=cache.controller_id,
            topics=topics,
        )

    def _metadata_topic(self, name: str, reachable: set[int]) -> metadata.MetadataResponseTopic:
        try:
            validate_topic_partition(name, 0)
        except InvalidTopicError:
            code = ErrorCode.INVALID_TOPIC_EXCEPTION
            return metadata.MetadataResponseTopic(error_code=code, name=name, partitions=[])
        states = self.core.metadata.partitions(name)
        if states is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return metadata.MetadataResponseTopic(error_code=code, name=name, partitions=[])
        partitions = []
        for number, s in sorted(states.items()):
            code = ErrorCode.NONE
            if s.leader == NO_LEADER or s.leader not in reachable:
                code = ErrorCode.LEADER_NOT_AVAILABLE
            partitions.append(
                metadata.MetadataResponsePartition(
                    error_code=code,
                    partition_index=number,
                    leader_id=s.leader,
                    leader_epoch=s.leader_epoch,
                    replica_nodes=list(s.replicas),
                    isr_nodes=list(s.isr),
                    offline_replicas=[r for r in s.replicas if r not in reachable],
                )
            )
        return metadata.MetadataResponseTopic(error_code=0, name=name, partitions=partitions)

    async def handle_create_topics(self, request: Request) -> create_topics.CreateTopicsResponse:
        body = request.body
        assert isinstance(body, create_topics.CreateTopicsRequest)
        results: dict[int, create_topics.CreatableTopicResult] = {}
        wanted: list[tuple[int, CreatableTopic]] = []
        for index, topic in enumerate(body.topics):
            refusal = None
            if topic.assignments:
                refusal = "replica assignments are not supported: give a replication factor"
            elif body.validate_only:
                refusal = "validate_only is not supported"
            if refusal is not None:
                results[index] = create_topics.CreatableTopicResult(
                    name=topic.name, error_code=ErrorCode.INVALID_REQUEST, error_message=refusal
                )
                continue
            configs = [TopicConfigEntry(c.name, c.value) for c in topic.configs]
            wanted.append(
                (
                    index,
                    CreatableTopic(
                        topic.name, topic.num_partitions, topic.replication_factor, configs
                    ),
                )
            )
        if wanted:
            created = await self.core.topic_creator.create_topics(
                [t for _, t in wanted], body.timeout_ms
            )
            for (index, _), result in zip(wanted, created, strict=True):
                results[index] = create_topics.CreatableTopicResult(
                    name=result.name,
                    error_code=int(result.error_code),
                    error_message=result.error_message,
                )
        return create_topics.CreateTopicsResponse(
            topics=[results[i] for i in range(len(body.topics))]
        )

    # --- groups: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup ---------------

    async def handle_find_coordinator(
        self, request: Request
    ) -> find_coordinator.FindCoordinatorResponse:
        """A group's coordinator: the leader of its partition of __consumer_offsets (the
        topic is created on the first request). No transactions: that key type gets
        COORDINATOR_NOT_AVAILABLE."""
        body = request.body
        assert isinstance(body, find_coordinator.FindCoordinatorRequest)
        why = None
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if body.key_type != find_coordinator.GROUP_KEY:
            why = "transactions are not supported: there is no transaction coordinator"
        elif self.groups is None:
            why = "this broker coordinates no groups"
        else:
            found = await self.groups.find_coordinator(body.key)
            code, why = found.error, found.message
            broker = self.core.metadata.brokers.get(found.broker_id)
            if code is ErrorCode.NONE and broker is not None:
                address = (await self.endpoints([broker])).get(found.broker_id)
                if address is not None:
                    host, port = address
                    return find_coordinator.FindCoordinatorResponse(
                        error_code=0,
                        error_message=None,
                        node_id=found.broker_id,
                        host=host,
                        port=port,
                    )
            if code is ErrorCode.NONE:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                why = f"the coordinator, broker {found.broker_id}, has no Kafka listener known"
        return find_coordinator.FindCoordinatorResponse(
            error_code=int(code), error_message=why, node_id=-1, host="", port=-1
        )

    async def _ready(self, group_id: str, instance_id: str | None = None) -> ErrorCode:
        """Whether this broker answers for the group now; static members (KIP-345, a
        `group_instance_id`) are refused with INVALID_REQUEST."""
        if self.groups is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        code = await self.groups.ready(group_id)
        if code is ErrorCode.NONE and instance_id is not None:
            return ErrorCode.INVALID_REQUEST
        return code

    async def handle_join_group(self, request: Request) -> join_group.JoinGroupResponse:
        body = request.body
        assert isinstance(body, join_group.JoinGroupRequest)
        code = await self._ready(body.group_id, body.group_instance_id)
        if code is not ErrorCode.NONE or self.groups is None:
            return join_group.JoinGroupResponse(
                error_code=int(code),
                generation_id=-1,
                protocol_name="",
                leader="",
                member_id=body.member_id,
                members=[],
            )
        result = await self.groups.service.join(
            body.group_id,
            body.member_id,
            client_id=request.header.client_id or "",
            client_host=_client_host.get(),
            session_timeout_ms=body.session_timeout_ms,
            rebalance_timeout_ms=body.rebalance_timeout_ms,
            protocol_type=body.protocol_type,
            protocols=[(p.name, p.metadata) for p in body.protocols],
            require_known_member_id=request.header.api_version >= 4,
        )
        return join_group.JoinGroupResponse(
            error_code=int(result.error),
            generation_id=result.generation_id,
            protocol_name=result.protocol_name,
            leader=result.leader_id,
            member_id=result.member_id,
            members=[
                join_group.JoinGroupResponseMember(member_id=member, metadata=meta)
                for member, meta in result.members
            ],
        )

    async def handle_sync_group(self, request: Request) -> sync_group.SyncGroupResponse:
        body = request.body
        assert isinstance(body, sync_group.SyncGroupRequest)
        code = await self._ready(body.group_id, body.group_instance_id)
        if code is not ErrorCode.NONE or self.groups is None:
            return sync_group.SyncGroupResponse(error_code=int(code), assignment=b"")
        result = await self.groups.service.sync(
            body.group_id,
            body.generation_id,
            body.member_id,
            {a.member_id: a.assignment for a in body.assignments},
        )
        return sync_group.SyncGroupResponse(
            error_code=int(result.error), assignment=result.assignment
        )

    async def handle_heartbeat(self, request: Request) -> heartbeat.HeartbeatResponse:
        body = request.body
        assert isinstance(body, heartbeat.HeartbeatRequest)
        code = await self._ready(body.group_id, body.group_instance_id)
        if code is ErrorCode.NONE and self.groups is not None:
            code = self.groups.service.heartbeat(body.group_id, body.generation_id, body.member_id)
        return heartbeat.HeartbeatResponse(error_code=int(code))

    async def handle_leave_group(self, request: Request) -> leave_group.LeaveGroupResponse:
        body = request.body
        assert isinstance(body, leave_group.LeaveGroupRequest)
        code = await self._ready(body.group_id)
        if code is ErrorCode.NONE and self.groups is not None:
            code = self.groups.service.leave(body.group_id, body.member_id)
        return leave_group.LeaveGroupResponse(error_code=int(code))

    # --- InitProducerId ---------------------------------------------------------------------

    async def handle_init_producer_id(
        self, request: Request
    ) -> init_producer_id.InitProducerIdResponse:
        """A producer id and epoch 0 for an idempotent producer, from this broker's block
        (claimed in ZooKeeper, so ids never repeat across the cluster or its restarts).
        Transactional ids are refused: transactions are not supported yet."""
        body = request.body
        assert isinstance(body, init_producer_id.InitProducerIdRequest)
        if body.transactional_id is not None:
            log.info("InitProducerId for transactional id %r refused", body.transactional_id)
            return init_producer_id.InitProducerIdResponse(
                throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST), producer_epoch=-1
            )
        if self.producer_ids is None:
            return init_producer_id.InitProducerIdResponse(
                throttle_time_ms=0,
                error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                producer_epoch=-1,
            )
        try:
            # A new block may be claimed in ZooKeeper: not on the event loop.
            producer_id = await asyncio.to_thread(self.producer_ids.next_id)
        except Exception as err:  # ZooKeeper unreachable, a damaged block file
            log.warning("no producer id could be handed out: %s: %s", type(err).__name__, err)
            return init_producer_id.InitProducerIdResponse(
                throttle_time_ms=0,
                error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                producer_epoch=-1,
            )
        return init_producer_id.InitProducerIdResponse(
            throttle_time_ms=0, error_code=0, producer_id=producer_id, producer_epoch=0
        )

    # --- OffsetCommit, OffsetFetch --------------------------------------------------------

    async def handle_offset_commit(self, request: Request) -> offset_commit.OffsetCommitResponse:
        """A group's commit, from a member of its current generation or (generation -1, no
        member id) a consumer that `assign`s while the group has no members; stored in
        __consumer_offsets (or ZooKeeper, with offsets.storage=zookeeper). Partitions that do
        not exist, and negative offsets, are refused one by one."""
        body = request.body
        assert isinstance(body, offset_commit.OffsetCommitRequest)
        codes: dict[tuple[str, int], ErrorCode] = {}
        wanted: dict[tuple[str, int], tuple[int, str]] = {}
        for topic in body.topics:
            known = set(self.core.metadata.partitions(topic.name) or {})
            for part in topic.partitions:
                key = (topic.name, part.partition_index)
                if part.partition_index not in known:
                    codes[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif part.committed_offset < 0:
                    codes[key] = ErrorCode.INVALID_COMMIT_OFFSET_SIZE
                else:
                    wanted[key] = (part.committed_offset, part.committed_metadata or "")
        if body.group_instance_id is not None:
            codes.update(dict.fromkeys(wanted, ErrorCode.INVALID_REQUEST))
        elif self.groups is None:
            codes.update(dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif wanted:
            codes.update(
                await self.groups.commit(
                    body.group_id, body.generation_id_or_member_epoch, body.member_id, wanted
                )
            )
        return offset_commit.OffsetCommitResponse(
            topics=[
                offset_commit.OffsetCommitResponseTopic(
                    name=topic.name,
                    partitions=[
                        offset_commit.OffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=int(codes[(topic.name, p.partition_index)]),
                        )
                        for p in topic.partitions
                    ],
                )
                for topic in body.topics
            ]
        )

    async def handle_offset_fetch(self, request: Request) -> offset_fetch.OffsetFetchResponse:
        """The group's committed offsets (-1 where it committed none); a null topic list
        (v2+) asks for every partition it committed."""
        body = request.body
        assert isinstance(body, offset_fetch.OffsetFetchRequest)
        asked = (
            None
            if body.topics is None
            else [(t.name, p) for t in body.topics for p in t.partition_indexes]
        )
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        found: dict[tuple[str, int], tuple[int, str]] = {}
        if self.groups is not None:
            error, found = await self.groups.committed(body.group_id, asked)
        keys = asked if asked is not None else sorted(found)
        by_topic: dict[str, list[offset_fetch.OffsetFetchResponsePartition]] = {}
        for name, index in keys:
            offset, meta = found.get((name, index), (NO_OFFSET, ""))
            by_topic.setdefault(name, []).append(
                offset_fetch.OffsetFetchResponsePartition(
                    partition_index=index,
                    committed_offset=offset,
                    metadata=meta,
                    error_code=int(error),
                )
            )
        return offset_fetch.OffsetFetchResponse(
            topics=[
                offset_fetch.OffsetFetchResponseTopic(name=name, partitions=parts)
                for name, parts in by_topic.items()
            ],
            error_code=int(error) if request.header.api_version >= 2 else 0,
        )

    # --- ListOffsets ------------------------------------------------------------------------

    async def handle_list_offsets(self, request: Request) -> list_offsets.ListOffsetsResponse:
        body = request.body
        assert isinstance(body, list_offsets.ListOffsetsRequest)
        topics = []
        for topic in body.topics:
            parts = []
            for wanted in topic.partitions:
                try:
                    partition = self.core._partition(topic.name, wanted.partition_index)
                    check_leader_epoch(partition, wanted.current_leader_epoch)
                    # Clients read up to the high watermark, which is also the last stable
                    # offset (no transactions): read_committed changes nothing.
                    timestamp, offset = partition.offset_for(
                        wanted.timestamp, replica_id=CONSUMER_REPLICA_ID
                    )
                    parts.append(
                        list_offsets.ListOffsetsPartitionResponse(
                            partition_index=wanted.partition_index,
                            error_code=0,
                            timestamp=timestamp,
                            offset=offset,
                            # Not ignorable in Kafka's schema: a version before 4 has no
                            # place for it, and only its default may be left out.
                            leader_epoch=partition.leader_epoch
                            if request.header.api_version >= 4
                            else -1,
                        )
                    )
                except BrokerError as err:
                    parts.append(
                        list_offsets.ListOffsetsPartitionResponse(
                            partition_index=wanted.partition_index, error_code=int(err.code)
                        )
                    )
            topics.append(list_offsets.ListOffsetsTopicResponse(name=topic.name, partitions=parts))
        return list_offsets.ListOffsetsResponse(topics=topics)

    # --- Produce ----------------------------------------------------------------------------

    async def handle_produce(self, request: Request) -> produce.ProduceResponse | None:
        body = request.body
        assert isinstance(body, produce.ProduceRequest)
        acks = body.acks
        results: list[_ProduceResult] = []
        for topic in body.topic_data:
            for data in topic.partition_data:
                result = _ProduceResult(topic.name, data.index)
                results.append(result)
                try:
                    if acks not in VALID_ACKS:
                        raise BrokerError(
                            ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks}: use -1, 0 or 1"
                        )
                    if body.transactional_id is not None:
                        raise BrokerError(
                            ErrorCode.INVALID_REQUEST, "transactions are not supported yet"
                        )
                    partition = self.core.client_writable(topic.name, data.index)
                    records = produced_batch(data.records)
                    info = partition.append_as_leader(records, required_acks=acks)
                except BrokerError as err:
                    if err.code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        log.info("Kafka produce to %s-%d refused: %s", topic.name, data.index, err)
                    result.fail(err.code, err.message or err.code.name)
                    continue
                result.base_offset = info.first_offset
                if acks == -1:
                    result.awaiting = (partition, info.last_offset)
        if acks == -1:
            await self.core._await_commit(results, body.timeout_ms)
        if acks == 0:
            if any(r.code is not ErrorCode.NONE for r in results):
                raise _Close("acks=0 produce failed")  # Kafka's only signal to such a producer
            return None
        by_topic: dict[str, list[produce.PartitionProduceResponse]] = {}
        for r in results:
            found = self.core.partitions.get((r.topic, r.partition))
            by_topic.setdefault(r.topic, []).append(
                produce.PartitionProduceResponse(
                    index=r.partition,
                    error_code=int(r.code),
                    base_offset=r.base_offset,
                    log_start_offset=found.log_start_offset if found is not None else -1,
                )
            )
        return produce.ProduceResponse(
            responses=[
                produce.TopicProduceResponse(name=name, partition_responses=parts)
                for name, parts in by_topic.items()
            ]
        )

    # --- Fetch ------------------------------------------------------------------------------

    async def handle_fetch(self, request: Request) -> fetch.FetchResponse:
        """Long-polls as the broker's own Fetch does: until min_bytes or max_wait_ms."""
        body = request.body
        assert isinstance(body, fetch.FetchRequest)
        deadline = time.monotonic() + max(0, body.max_wait_ms) / 1000
        while True:
            response, size, failed, partitions = self._read_fetch(body)
            remaining = deadline - time.monotonic()
            if (
                size >= body.min_bytes
                or failed
                or remaining <= 0
                or self.core.stopping
                or not partitions
            ):
                return response
            await self.core._wait_for_any(partitions, remaining)

    def _read_fetch(
        self, body: fetch.FetchRequest
    ) -> tuple[fetch.FetchResponse, int, bool, list[Partition]]:
        """One pass: (response, bytes of records, any error, partitions read)."""
        total = 0
        failed = False
        read: list[Partition] = []
        committed = body.isolation_level == READ_COMMITTED
        topics = []
        for topic in body.topics:
            parts = []
            for wanted in topic.partitions:
                hw = start = -1
                records = b""
                try:
                    if wanted.partition_max_bytes < 0 or body.max_bytes < 0:
                        raise BrokerError(
                            ErrorCode.INVALID_FETCH_SIZE,
                            "max_bytes and partition_max_bytes must not be negative",
                        )
                    partition = self.core._partition(topic.topic, wanted.partition)
                    check_leader_epoch(partition, wanted.current_leader_epoch)
                    hw, start = partition.high_watermark, partition.log_start_offset
                    read.append(partition)
                    limit = min(wanted.partition_max_bytes, body.max_bytes - total)
                    if limit > 0 or total == 0:
                        data = partition.read(
                            wanted.fetch_offset,
                            max(limit, 0),
                            replica_id=CONSUMER_REPLICA_ID,
                            min_one_record=total == 0,
                        )
                        records = data.records
                    code = ErrorCode.NONE
                except BrokerError as err:
                    code = err.code
                    failed = True
                total += len(records)
                parts.append(
                    fetch.PartitionData(
                        partition_index=wanted.partition,
                        error_code=int(code),
                        high_watermark=hw,
                        last_stable_offset=hw,
                        log_start_offset=start,
                        aborted_transactions=[] if committed else None,
                        records=records,
                    )
                )
            topics.append(fetch.FetchableTopicResponse(topic=topic.topic, partitions=parts))
        return fetch.FetchResponse(responses=topics), total, failed, read


class _Close(Exception):
    """Close the connection instead of answering."""
