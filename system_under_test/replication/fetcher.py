"""The follower's fetcher: one asyncio task per leader broker, pulling its partitions.

Before it fetches a partition it has just started to follow, the fetcher truncates it: with
``replica.truncation=leader-epoch`` it asks the leader for the end offset of the follower's
latest epoch (KIP-101, with KIP-279's rule for epochs the leader does not know); with
``high-watermark`` the replica manager already truncated to the local high watermark, as
Kafka did before 0.11. Then it fetches from the log end offset, appends what the leader
sends with the leader's offsets, and adopts the leader's high watermark.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from system_under_test import protocol
from system_under_test.errors import ErrorCode, ProtocolError
from system_under_test.log.log import LogError
from system_under_test.log.record import CorruptRecordError
from system_under_test.metadata_cache import BrokerEndpoint
from system_under_test.replication.leader_epoch_cache import UNDEFINED_EPOCH
from system_under_test.replication.partition import Partition, Role
from system_under_test.tasks import cancel_and_wait

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
FETCH_BACKOFF_S = 0.2
CONNECT_TIMEOUT_S = 3.0


@dataclass
class FollowedPartition:
    """A partition this fetcher pulls, and whether it must truncate first."""

    partition: Partition
    leader_epoch: int
    needs_truncation: bool


class ReplicaFetcher:
    """Pulls every partition this broker follows from one leader."""

    def __init__(
        self,
        broker_id: int,
        leader: BrokerEndpoint,
        *,
        truncation: str,
        max_wait_ms: int,
        max_bytes: int,
        request_timeout_s: float,
        on_progress: Callable[[Partition], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.leader = leader
        self.truncation = truncation
        self.max_wait_ms = max_wait_ms
        self.max_bytes = max_bytes
        self.request_timeout_s = request_timeout_s
        self.on_progress = on_progress
        self.partitions: dict[TopicPartition, FollowedPartition] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)
        self.paused = False
        """Tests hold a follower back with this (a 'stuck follower')."""

    def add(self, partition: Partition, *, truncate: bool) -> None:
        self.partitions[partition.key] = FollowedPartition(
            partition, partition.leader_epoch, truncate and self.truncation == "leader-epoch"
        )
        self._wakeup.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"fetcher-{self.broker_id}-from-{self.leader.broker_id}"
            )

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)
        await self._disconnect()

    # --- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            current = {
                k: f
                for k, f in self.partitions.items()
                if f.partition.role is Role.FOLLOWER
                and f.partition.leader_id == self.leader.broker_id
                and f.partition.leader_epoch == f.leader_epoch
            }
            if not current or self.paused:
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), 0.5)
                continue
            try:
                await self._connect()
                truncating = [f for f in current.values() if f.needs_truncation]
                if truncating:
                    await self._truncate(truncating)
                await self._fetch([f for f in current.values() if not f.needs_truncation])
            except (OSError, ProtocolError, asyncio.IncompleteReadError, TimeoutError) as err:
                log.info(
                    "fetcher %d from leader %d: %s; retrying",
                    self.broker_id,
                    self.leader.broker_id,
                    err or type(err).__name__,
                )
                await self._disconnect()
                await asyncio.sleep(FETCH_BACKOFF_S)

    async def _request(
        self, request: protocol.Request, expected: type[protocol.Response]
    ) -> object:
        assert self._writer is not None and self._reader is not None
        correlation_id = next(self._correlation)
        frame = protocol.encode_request(
            request, correlation_id=correlation_id, client_id=f"replica-fetcher-{self.broker_id}"
        )
        self._writer.write(frame)
        await self._writer.drain()
        size_bytes = await asyncio.wait_for(self._reader.readexactly(4), self.request_timeout_s)
        (size,) = protocol.FRAME_SIZE.unpack(size_bytes)
        payload = await asyncio.wait_for(self._reader.readexactly(size), self.request_timeout_s)
        got_id, body = protocol.decode_response(payload, expected)
        if got_id != correlation_id:
            raise ProtocolError(f"response for correlation id {got_id}, expected {correlation_id}")
        if isinstance(body, protocol.ErrorResponse):
            raise ProtocolError(f"leader refused {type(request).__name__}: {body.error_message}")
        return body

    async def _connect(self) -> None:
        if self._writer is not None:
            return
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(self.leader.host, self.leader.port), CONNECT_TIMEOUT_S
        )

    async def _disconnect(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    # --- truncation (KIP-101) ----------------------------------------------------------------

    async def _truncate(self, followed: list[FollowedPartition]) -> None:
        by_topic: dict[str, list[protocol.OffsetForLeaderEpochPartition]] = {}
        asked: dict[TopicPartition, int] = {}
        for f in followed:
            epoch = f.partition.epoch_cache.latest_epoch
            if epoch == UNDEFINED_EPOCH:
                # Nothing to compare epochs with: fall back to the high watermark (as Kafka).
                f.partition.truncate_to(f.partition.high_watermark, reason="high-watermark")
                f.needs_truncation = False
                continue
            asked[f.partition.key] = epoch
            by_topic.setdefault(f.partition.topic, []).append(
                protocol.OffsetForLeaderEpochPartition(f.partition.partition, epoch)
            )
        if not by_topic:
            return
        request = protocol.OffsetForLeaderEpochRequest(
            self.broker_id,
            [protocol.OffsetForLeaderEpochTopic(t, parts) for t, parts in by_topic.items()],
        )
        response = await self._request(request, protocol.OffsetForLeaderEpochResponse)
        assert isinstance(response, protocol.OffsetForLeaderEpochResponse)
        for topic in response.topics:
            for answer in topic.partitions:
                key = (topic.name, answer.partition)
                entry = self.partitions.get(key)
                if entry is None or key not in asked or not entry.needs_truncation:
                    continue
                f = entry
                if answer.error_code != ErrorCode.NONE:
                    log.info(
                        "%s-%d: leader answered OffsetForLeaderEpoch with %s",
                        *key,
                        ErrorCode.from_wire(answer.error_code).name,
                    )
                    continue
                partition = f.partition
                leo = partition.log_end_offset
                if answer.leader_epoch == UNDEFINED_EPOCH:
                    target = partition.high_watermark
                elif answer.leader_epoch < asked[key]:
                    # KIP-279: the leader knows only an older epoch; end where ours ended.
                    _e, ours = partition.epoch_cache.end_offset_for(answer.leader_epoch, leo)
                    target = min(answer.end_offset, ours)
                else:
                    target = answer.end_offset
                target = min(target, leo)
                partition.truncate_to(target, reason="leader-epoch")
                f.needs_truncation = False
                log.info(
                    "%s: truncated to %d after OffsetForLeaderEpoch(epoch %d) -> (epoch %d, end %d)",
                    partition.name,
                    target,
                    asked[key],
                    answer.leader_epoch,
                    answer.end_offset,
                )

    # --- fetching ----------------------------------------------------------------------------

    async def _fetch(self, followed: list[FollowedPartition]) -> None:
        if not followed:
            return
        by_topic: dict[str, list[protocol.FetchPartition]] = {}
        offsets: dict[TopicPartition, int] = {}
        for f in followed:
            offset = f.partition.log_end_offset
            offsets[f.partition.key] = offset
            by_topic.setdefault(f.partition.topic, []).append(
                protocol.FetchPartition(f.partition.partition, offset, self.max_bytes)
            )
        request = protocol.FetchRequest(
            self.broker_id,
            self.max_wait_ms,
            1,
            self.max_bytes * len(followed),
            [protocol.FetchTopic(t, parts) for t, parts in by_topic.items()],
        )
        response = await self._request(request, protocol.FetchResponse)
        assert isinstance(response, protocol.FetchResponse)
        failed = False
        for topic in response.topics:
            for answer in topic.partitions:
                key = (topic.name, answer.partition)
                found = self.partitions.get(key)
                if found is None or key not in offsets:
                    continue
                f = found
                partition = f.partition
                if (
                    partition.role is not Role.FOLLOWER
                    or partition.leader_epoch != f.leader_epoch
                    or partition.log_end_offset != offsets[key]
                ):
                    continue  # leadership moved, or truncated meanwhile: this answer is stale
                code = ErrorCode.from_wire(answer.error_code)
                if code is ErrorCode.NONE:
                    try:
                        partition.append_as_follower(
                            answer.records,
                            answer.high_watermark,
                            [(e.leader_epoch, e.start_offset) for e in answer.epoch_starts],
                        )
                    except (LogError, CorruptRecordError) as err:
                        log.error(
                            "%s: cannot append what leader %d sent: %s",
                            partition.name,
                            self.leader.broker_id,
                            err,
                        )
                        failed = True
                        continue
                    if self.on_progress is not None:
                        self.on_progress(partition)
                elif code is ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._handle_out_of_range(partition, answer)
                else:
                    failed = True
                    log.debug(
                        "%s: fetch from leader %d answered %s",
                        partition.name,
                        self.leader.broker_id,
                        code.name,
                    )
        if failed:
            await asyncio.sleep(FETCH_BACKOFF_S)

    async def _handle_out_of_range(
        self, partition: Partition, answer: protocol.FetchPartitionResponse
    ) -> None:
        """The follower is past the leader's end (it diverged), or before its start."""
        request = protocol.ListOffsetsRequest(
            self.broker_id,
            [
                protocol.ListOffsetsTopic(
                    partition.topic,
                    [protocol.ListOffsetsPartition(partition.partition, protocol.LATEST_TIMESTAMP)],
                )
            ],
        )
        response = await self._request(request, protocol.ListOffsetsResponse)
        assert isinstance(response, protocol.ListOffsetsResponse)
        leader_end = response.topics[0].partitions[0].offset
        if leader_end < 0:
            return
        if partition.log_end_offset > leader_end:
            log.warning(
                "%s: follower's log end %d is past leader %d's end %d: truncating (data the "
                "leader never had is discarded)",
                partition.name,
                partition.log_end_offset,
                self.leader.broker_id,
                leader_end,
            )
            partition.truncate_to(leader_end, reason="past-leader-end")
        elif partition.log_end_offset < answer.log_start_offset:
            partition.log.truncate_fully_and_start_at(answer.log_start_offset)
            partition.epoch_cache.clear()
