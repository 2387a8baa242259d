"""The handlers of the APIs brokers use among themselves, and what Kafka's APIs share with
them: the partitions a request may touch, waiting for acks=-1 commits and for long polls.

Each handler takes a decoded request and returns its response body. Handlers run on the
broker's event loop, one request per connection at a time, and touch logs only through
Partition. Clients' APIs are Kafka's, answered by kafka_handler.py on top of this.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from system_under_test import protocol
from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.kafka.group_metadata import OFFSETS_TOPIC
from system_under_test.metadata_cache import MetadataCache
from system_under_test.replication.partition import Partition
from system_under_test.replication.replica_manager import ReplicaManager
from system_under_test.topic_spec import CreatableTopic, CreatableTopicResult

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)


INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})
"""Topics only the brokers write: clients may read them, not produce to them."""


class _ProduceResult:
    """The outcome of one partition of a produce request."""

    __slots__ = ("awaiting", "base_offset", "code", "message", "partition", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.code = ErrorCode.NONE
        self.base_offset = -1
        self.message: str | None = None
        self.awaiting: tuple[Partition, int] | None = None
        """acks=-1: the partition and the last offset appended, until the HW passes it."""

    def fail(self, code: ErrorCode, message: str) -> None:
        self.code = code
        self.message = message
        self.base_offset = -1
        self.awaiting = None


class CloseConnection(Exception):
    """Raised by a handler to close the client's connection instead of answering."""


class TopicCreator(Protocol):
    """Creates topics: the standalone controller now, the ZooKeeper controller later."""

    async def create_topics(
        self, topics: list[CreatableTopic], timeout_ms: int
    ) -> list[CreatableTopicResult]: ...


Handler = Callable[[protocol.RequestHeader, Any], Awaitable[protocol.Response | None]]


class ShutdownCoordinator(Protocol):
    """Answers brokers' controlled shutdowns: this broker's controller."""

    def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> concurrent.futures.Future[tuple[ErrorCode, list[tuple[str, int]]]]: ...


class RequestHandler:
    """Answers every implemented API from the partitions and the metadata cache."""

    def __init__(
        self,
        *,
        partitions: dict[tuple[str, int], Partition],
        metadata: MetadataCache,
        topic_creator: TopicCreator,
        replica_manager: ReplicaManager | None = None,
        controller: ShutdownCoordinator | None = None,
    ) -> None:
        self.partitions = partitions
        self.controller = controller
        self.metadata = metadata
        self.topic_creator = topic_creator
        self.replica_manager = replica_manager
        self.stopping = False
        self.handlers: dict[type[protocol.Request], Handler] = {
            protocol.FetchRequest: self.fetch,
            protocol.ListOffsetsRequest: self.list_offsets,
            protocol.LeaderAndIsrRequest: self.leader_and_isr,
            protocol.UpdateMetadataRequest: self.update_metadata,
            protocol.OffsetForLeaderEpochRequest: self.offsets_for_leader_epoch,
            protocol.ControlledShutdownRequest: self.controlled_shutdown,
        }

    async def handle(
        self, header: protocol.RequestHeader, request: protocol.Request
    ) -> protocol.Response | None:
        return await self.handlers[type(request)](header, request)

    def _partition(self, topic: str, partition: int) -> Partition:
        found = self.partitions.get((topic, partition))
        if found is None:
            states = self.metadata.partitions(topic)
            if self.replica_manager is not None and states is not None and partition in states:
                raise BrokerError(
                    ErrorCode.NOT_LEADER_FOR_PARTITION,
                    f"this broker is not a replica of {topic}-{partition} (leader: "
                    f"{states[partition].leader}); refresh metadata",
                )
            raise BrokerError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"this broker does not host {topic}-{partition}",
            )
        return found

    def client_writable(self, topic: str, partition: int) -> Partition:
        """A partition a client's Produce may write: not an internal topic's, which only the
        broker itself writes (as Kafka refuses them to clients)."""
        if topic in INTERNAL_TOPICS:
            raise BrokerError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {topic}"
            )
        return self._partition(topic, partition)

    # --- the leader's appends ------------------------------------------------------------

    async def append_and_wait(
        self, topic: str, partition: int, records: bytes, *, acks: int, timeout_ms: int
    ) -> tuple[ErrorCode, int]:
        """Append log-layout records as this partition's leader, as a Produce with these
        acks would (for the broker's own writes): the error and the last offset written."""
        result = _ProduceResult(topic, partition)
        try:
            found = self._partition(topic, partition)
            info = found.append_as_leader(bytearray(records), required_acks=acks)
        except BrokerError as err:
            return err.code, -1
        if acks == -1:
            result.awaiting = (found, info.last_offset)
            await self._await_commit([result], timeout_ms)
        return result.code, info.last_offset

    async def _await_commit(self, results: list[_ProduceResult], timeout_ms: int) -> None:
        """acks=-1: wait until the HW passes each append, up to timeout_ms."""
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while True:
            waiting: list[Partition] = []
            for result in results:
                if result.awaiting is None:
                    continue
                partition, last_offset = result.awaiting
                code = partition.check_committed(last_offset)
                if code is None:
                    waiting.append(partition)
                elif code is ErrorCode.NONE:
                    result.awaiting = None
                else:
                    result.fail(code, "written, but the ISR shrank below min.insync.replicas")
            remaining = deadline - time.monotonic()
            if not waiting:
                return
            if remaining <= 0 or self.stopping:
                for result in results:
                    if result.awaiting is not None:
                        message = f"written, but not replicated within timeout_ms={timeout_ms}"
                        result.fail(ErrorCode.REQUEST_TIMED_OUT, message)
                return
            await self._wait_for_any(waiting, remaining)

    async def _wait_for_any(self, partitions: list[Partition], timeout_s: float) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for partition in partitions:
            partition.add_waiter(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            pass
        finally:
            for partition in partitions:
                partition.remove_waiter(waiter)

    # --- Fetch ---------------------------------------------------------------------------

    async def fetch(
        self, header: protocol.RequestHeader, request: protocol.FetchRequest
    ) -> protocol.FetchResponse:
        deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
        first_pass = True
        while True:
            # A follower's fetch offset is its log end offset as of this request's arrival:
            # the leader learns it once, not again each time a long poll re-reads.
            response, size, failed, partitions = self._read_fetch(request, first_pass=first_pass)
            first_pass = False
            remaining = deadline - time.monotonic()
            if (
                size >= request.min_bytes
                or failed
                or remaining <= 0
                or self.stopping
                or not partitions
            ):
                return response
            await self._wait_for_any(partitions, remaining)

    def _read_fetch(
        self, request: protocol.FetchRequest, *, first_pass: bool
    ) -> tuple[protocol.FetchResponse, int, bool, list[Partition]]:
        """One pass over the fetched partitions: (response, bytes, any error, partitions read)."""
        budget = request.max_bytes
        total = 0
        failed = False
        read: list[Partition] = []
        topics: list[protocol.FetchTopicResponse] = []
        for topic in request.topics:
            parts: list[protocol.FetchPartitionResponse] = []
            for wanted in topic.partitions:
                hw = start = -1
                records: bytes = b""
                epoch_starts: list[protocol.EpochStart] = []
                try:
                    if wanted.partition_max_bytes < 0 or request.max_bytes < 0:
                        raise BrokerError(
                            ErrorCode.INVALID_FETCH_SIZE,
                            "max_bytes and partition_max_bytes must not be negative",
                        )
                    partition = self._partition(topic.name, wanted.partition)
                    check_leader_epoch(partition, wanted.current_leader_epoch)
                    if request.replica_id >= 0 and self.replica_manager is not None:
                        if first_pass:
                            self.replica_manager.on_follower_fetch(
                                partition, request.replica_id, wanted.fetch_offset
                            )
                        epoch_starts = [
                            protocol.EpochStart(e, o)
                            for e, o in partition.epoch_starts_from(wanted.fetch_offset)
                        ]
                    hw, start = partition.high_watermark, partition.log_start_offset
                    read.append(partition)
                    limit = min(wanted.partition_max_bytes, budget - total)
                    if limit > 0 or total == 0:
                        data = partition.read(
                            wanted.fetch_offset,
                            max(limit, 0),
                            replica_id=request.replica_id,
                            min_one_record=total == 0,
                        )
                        records = data.records
                    code = ErrorCode.NONE
                except BrokerError as err:
                    code = err.code
                    failed = True
                total += len(records)
                parts.append(
                    protocol.FetchPartitionResponse(
                        wanted.partition, code, hw, start, records, epoch_starts
                    )
                )
            topics.append(protocol.FetchTopicResponse(topic.name, parts))
        return protocol.FetchResponse(topics), total, failed, read

    # --- ListOffsets ---------------------------------------------------------------------

    async def list_offsets(
        self, header: protocol.RequestHeader, request: protocol.ListOffsetsRequest
    ) -> protocol.ListOffsetsResponse:
        topics: list[protocol.ListOffsetsTopicResponse] = []
        for topic in request.topics:
            parts: list[protocol.ListOffsetsPartitionResponse] = []
            for wanted in topic.partitions:
                try:
                    partition = self._partition(topic.name, wanted.partition)
                    timestamp, offset = partition.offset_for(
                        wanted.timestamp, replica_id=request.replica_id
                    )
                    parts.append(
                        protocol.ListOffsetsPartitionResponse(
                            wanted.partition, ErrorCode.NONE, timestamp, offset
                        )
                    )
                except BrokerError as err:
                    parts.append(
                        protocol.ListOffsetsPartitionResponse(wanted.partition, err.code, -1, -1)
                    )
            topics.append(protocol.ListOffsetsTopicResponse(topic.name, parts))
        return protocol.ListOffsetsResponse(topics)

    # --- controller to broker, follower to leader ----------------------------------------

    def _replicas(self) -> ReplicaManager:
        if self.replica_manager is None:
            raise BrokerError(
                ErrorCode.INVALID_REQUEST,
                "this broker runs standalone: it takes no orders from a controller",
            )
        return self.replica_manager

    async def leader_and_isr(
        self, header: protocol.RequestHeader, request: protocol.LeaderAndIsrRequest
    ) -> protocol.Response:
        try:
            return await self._replicas().become_leader_or_follower(request)
        except BrokerError as err:
            return protocol.ErrorResponse(err.code, err.message)

    async def update_metadata(
        self, header: protocol.RequestHeader, request: protocol.UpdateMetadataRequest
    ) -> protocol.Response:
        try:
            return self._replicas().update_metadata(request)
        except BrokerError as err:
            return protocol.ErrorResponse(err.code, err.message)

    async def controlled_shutdown(
        self, header: protocol.RequestHeader, request: protocol.ControlledShutdownRequest
    ) -> protocol.Response:
        if self.controller is None:
            return protocol.ErrorResponse(
                ErrorCode.INVALID_REQUEST,
                "this broker runs standalone: there is no controller to shut down through",
            )
        answer = self.controller.controlled_shutdown(request.broker_id, request.broker_epoch)
        code, remaining = await asyncio.wrap_future(answer)
        return protocol.ControlledShutdownResponse(
            int(code), [protocol.RemainingPartition(t, p) for t, p in remaining]
        )

    async def offsets_for_leader_epoch(
        self, header: protocol.RequestHeader, request: protocol.OffsetForLeaderEpochRequest
    ) -> protocol.Response:
        try:
            return self._replicas().offsets_for_leader_epoch(request)
        except BrokerError as err:
            return protocol.ErrorResponse(err.code, err.message)


def check_leader_epoch(partition: Partition, requested: int) -> None:
    """Fence a fetch whose fetcher knows another leader epoch than this replica (KIP-320):
    an older one (FENCED_LEADER_EPOCH) or a newer one (UNKNOWN_LEADER_EPOCH: this replica
    has not heard of it yet, as a deposed leader that was paused). -1 checks nothing."""
    if requested < 0 or requested == partition.leader_epoch:
        return
    if requested < partition.leader_epoch:
        raise BrokerError(
            ErrorCode.FENCED_LEADER_EPOCH,
            f"leader epoch {requested} of {partition.name} is older than this broker's "
            f"{partition.leader_epoch}; refresh metadata",
        )
    raise BrokerError(
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        f"leader epoch {requested} of {partition.name} is newer than this broker's "
        f"{partition.leader_epoch}; refresh metadata",
    )
