"""The consumer: reads assigned partitions from their leaders, below the high watermark.

A poll fetches from every leader of the assigned partitions at once (`Fetcher`: one fetch in
flight per leader) and returns what the leaders that answer give: a leader that is slow or
unreachable holds back only its own partitions, and a poll fails only when no leader could
be reached. Positions are kept in memory. With ``group.id`` and ``zookeeper.connect`` the consumer
belongs to a group whose committed offsets live in ZooKeeper (Kafka 0.8's layout): assign()
starts at them and commit() records them. Every record served is CRC-checked. Not
thread-safe: use one Consumer per thread, as in Kafka.

Fetches carry the leader epoch of the consumer's metadata, which never goes back (KIP-320),
so a deposed leader that has not heard of its successor refuses them instead of reading. A
position is reset (auto.offset.reset) only when the partition's current leader says it is
out of range: on OFFSET_OUT_OF_RANGE the consumer first asks another broker for metadata
and, in a group, ZooKeeper for the partition's state as the controller wrote it (brokers cut
off from ZooKeeper may all still name a deposed leader); if the leader or its epoch changed
since the fetch was sent, or ZooKeeper cannot say, it keeps its position and reads it from
the new leader once one answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

from system_under_test.client.config import ConsumerConfig
from system_under_test.client.exceptions import (
    BrokerUnavailableError,
    ClientConfigError,
    ClientError,
    CorruptResponseError,
    NoOffsetForPartitionError,
    OffsetStoreError,
)
from system_under_test.client.fetcher import UNREACHABLE, Fetcher, FetchOutcome, fetch_request
from system_under_test.client.metadata import ClusterMetadata
from system_under_test.client.offset_store import ZooKeeperOffsetStore
from system_under_test.errors import BrokerError, ErrorCode, OffsetOutOfRangeError
from system_under_test.kafka.fetch import FetchPartition, FetchResponse, PartitionData
from system_under_test.kafka.list_offsets import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from system_under_test.log.record import CorruptRecordError, decode_records

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_RETRY_WITH_NEW_METADATA = frozenset(
    {
        ErrorCode.NOT_LEADER_FOR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)

_RETRY_LIST_OFFSETS = _RETRY_WITH_NEW_METADATA - {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION} | {
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
}
"""ListOffsets failures worth another try at the leader fresh metadata names; an unknown
partition is reported at once."""


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """One record read from a partition."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class FetchResult:
    """What one low-level fetch of one partition returned."""

    records: list[ConsumedRecord]
    high_watermark: int
    log_start_offset: int
    error: ErrorCode


class Consumer:
    """Reads records from explicitly assigned partitions, optionally as a consumer group.

    Creating a Consumer with ``group.id`` opens its ZooKeeper session at once, so an
    unreachable ZooKeeper fails here with OffsetStoreError.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        config: Mapping[str, object] | None = None,
        client_id: str = "squall-consumer",
    ) -> None:
        self.config = ConsumerConfig.from_mapping(config)
        self.client_id = client_id
        self._metadata = ClusterMetadata(
            bootstrap,
            client_id=client_id,
            request_timeout_s=self.config.request_timeout_ms / 1000,
        )
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._closed = False
        self._fetcher = Fetcher(self._metadata, self.config, client_id)
        self._offset_store: ZooKeeperOffsetStore | None = None
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        if self.config.group_id is not None and self.config.zookeeper_connect is not None:
            store = ZooKeeperOffsetStore(
                self.config.group_id,
                self.config.zookeeper_connect,
                session_timeout_ms=self.config.zookeeper_session_timeout_ms,
                connection_timeout_ms=self.config.zookeeper_connection_timeout_ms,
            )
            store.start()
            self._offset_store = store

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- assignment and positions --------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions; positions of partitions kept are kept.

        In a group, each newly assigned partition starts at the group's committed offset;
        one never committed starts per auto.offset.reset when first read.
        """
        assignment = list(dict.fromkeys((t, int(p)) for t, p in partitions))
        added = [tp for tp in assignment if tp not in self._assignment]
        committed: dict[TopicPartition, int] = {}
        if self._offset_store is not None:
            for topic, partition in added:
                offset = self._offset_store.committed(topic, partition)
                if offset is not None:
                    committed[(topic, partition)] = offset
        self._assignment = assignment
        kept = set(self._assignment)
        self._positions = {tp: o for tp, o in self._positions.items() if tp in kept}
        self._positions.update(committed)

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read topic-partition from offset on."""
        self._require_assigned(topic, partition)
        self._positions[(topic, partition)] = offset

    def seek_to_beginning(self, topic: str | None = None, partition: int | None = None) -> None:
        """Move to the log start offset: of one partition, of a topic's assigned partitions,
        or (no arguments) of every assigned partition."""
        for t, p in self._selected(topic, partition):
            self.seek(t, p, self._list_offset(t, p, EARLIEST_TIMESTAMP))

    def seek_to_end(self, topic: str | None = None, partition: int | None = None) -> None:
        """Move to the high watermark, selecting partitions as seek_to_beginning does."""
        for t, p in self._selected(topic, partition):
            self.seek(t, p, self._list_offset(t, p, LATEST_TIMESTAMP))

    def _selected(self, topic: str | None, partition: int | None) -> list[TopicPartition]:
        if topic is None:
            return list(self._assignment)
        if partition is None:
            return [tp for tp in self._assignment if tp[0] == topic]
        self._require_assigned(topic, partition)
        return [(topic, partition)]

    def position(self, topic: str, partition: int) -> int:
        """The offset of the next record poll() returns for this partition."""
        self._require_assigned(topic, partition)
        position = self._positions.get((topic, partition))
        if position is None:
            position = self._reset_position(topic, partition, None)
        return position

    # --- consumer group offsets ------------------------------------------------------------

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None
    ) -> dict[TopicPartition, int]:
        """Commit each partition's next offset to read for the group; returns what was committed.

        None commits the current position of every assigned partition that has one (the
        records poll() returned count as consumed). Raises OffsetCommitError, whose
        ``definite`` tells a commit that certainly failed from one that may have landed.
        """
        store = self._require_group("commit()")
        if offsets is None:
            chosen = {tp: self._positions[tp] for tp in self._assignment if tp in self._positions}
        else:
            chosen = {(t, int(p)): o for (t, p), o in offsets.items()}
        store.commit(chosen)
        return chosen

    def committed(self, topic: str, partition: int) -> int | None:
        """The group's committed offset (the next to read) of a partition; None if none."""
        return self._require_group("committed()").committed(topic, partition)

    def _require_group(self, what: str) -> ZooKeeperOffsetStore:
        if self._offset_store is None:
            raise ClientConfigError(
                f"{what} needs a consumer group: create the Consumer with group.id and "
                "zookeeper.connect in its config"
            )
        return self._offset_store

    def _maybe_auto_commit(self) -> None:
        if not self.config.auto_commit_enable or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        self._auto_commit()

    def _auto_commit(self) -> None:
        try:
            self.commit()
        except OffsetStoreError as err:
            log.warning("auto-commit for group %s failed: %s", self.config.group_id, err)

    # --- reading -------------------------------------------------------------------------

    def poll(self, timeout_ms: int) -> list[ConsumedRecord]:
        """Records from the assigned partitions, waiting up to timeout_ms for some to arrive.

        With auto.commit.enable, first commits the positions reached by earlier polls once
        auto.commit.interval.ms has passed since the last auto-commit.
        """
        self._maybe_auto_commit()
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        for topic, partition in self._assignment:
            self.position(topic, partition)
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            records = self._poll_once(max(0, min(self.config.fetch_max_wait_ms, remaining_ms)))
            if records or time.monotonic() >= deadline:
                return records

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 1048576,
        max_wait_ms: int = 500,
    ) -> FetchResult:
        """One fetch of one partition from its leader; partition errors are returned, not raised."""
        conn = self._metadata.leader_connection(topic, partition)
        wanted = FetchPartition(
            partition=partition,
            current_leader_epoch=self._metadata.leader_epoch(topic, partition),
            fetch_offset=offset,
            partition_max_bytes=max_bytes,
        )
        request = fetch_request(
            max_wait_ms, self.config.fetch_min_bytes, max_bytes, {topic: [wanted]}
        )
        response = conn.request(request, FetchResponse, timeout_s=self._timeout_s(max_wait_ms))
        for t in response.responses:
            for p in t.partitions:
                if t.topic == topic and p.partition_index == partition:
                    return self._result(topic, p, offset)
        raise CorruptResponseError(f"fetch response does not mention {topic}-{partition}")

    def close(self) -> None:
        """Close the broker connections and the group's ZooKeeper session (with auto-commit,
        commit the positions first); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._offset_store is not None:
                if self.config.auto_commit_enable:
                    self._auto_commit()
                self._offset_store.close()
        finally:
            self._fetcher.close()
            self._metadata.close()

    # --- internals -----------------------------------------------------------------------

    def _poll_once(self, max_wait_ms: int) -> list[ConsumedRecord]:
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for topic, partition in self._assignment:
            leader = self._metadata.leader(topic, partition)
            if leader is None:
                self._refresh_quietly()
                leader = self._metadata.leader(topic, partition)
            if leader is not None:
                offsets = by_leader.setdefault(leader, {})
                offsets[(topic, partition)] = self._positions[(topic, partition)]
        fetcher = self._fetcher
        now = time.monotonic()
        if (
            by_leader
            and not fetcher.in_flight()
            and all(fetcher.backing_off(leader, now) for leader in by_leader)
        ):
            raise BrokerUnavailableError(
                "no leader of the assigned partitions is reachable (brokers "
                f"{', '.join(map(str, sorted(by_leader)))} failed just now; they are retried "
                "after a backoff)"
            )
        for leader, offsets in by_leader.items():
            if fetcher.ready(leader, now):
                fetcher.send(leader, offsets, max_wait_ms)
        if not fetcher.in_flight():
            time.sleep(max_wait_ms / 1000)
            return []
        out: list[ConsumedRecord] = []
        answered = False
        failure: BaseException | None = None
        for outcome in fetcher.collect(max_wait_ms / 1000):
            if outcome.response is None:
                if not isinstance(outcome.error, UNREACHABLE):
                    raise outcome.error or CorruptResponseError("a fetch ended without a response")
                self._refresh_quietly()
                log.warning("fetch from broker %d failed: %s", outcome.leader, outcome.error)
                failure = failure or outcome.error
                continue
            answered = True
            out.extend(self._apply(outcome))
        if failure is not None and not answered and not fetcher.in_flight():
            raise failure
        return out

    def _apply(self, outcome: FetchOutcome) -> list[ConsumedRecord]:
        """The records of a fetch's answer, for partitions still at the offsets it asked
        for (a seek, or a read from a new leader meanwhile, makes an answer stale)."""
        assert outcome.response is not None
        out: list[ConsumedRecord] = []
        for t in outcome.response.responses:
            for p in t.partitions:
                key = (t.topic, p.partition_index)
                position = outcome.offsets.get(key)
                if position is None or self._positions.get(key) != position:
                    continue
                result = self._result(t.topic, p, position)
                if result.error is ErrorCode.NONE:
                    if result.records:
                        self._positions[key] = result.records[-1].offset + 1
                        out.extend(result.records)
                elif result.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                    sent_epoch = outcome.leader_epochs.get(key, -1)
                    if not self._leader_moved(key, outcome.leader, sent_epoch):
                        self._reset_position(t.topic, p.partition_index, result)
                elif result.error in _RETRY_WITH_NEW_METADATA:
                    self._refresh_quietly()
                else:
                    raise BrokerError.for_code(
                        result.error,
                        f"fetch of {t.topic}-{p.partition_index} at offset {position} failed",
                    )
        return out

    def _result(self, topic: str, part: PartitionData, offset: int) -> FetchResult:
        error = ErrorCode.from_wire(part.error_code)
        try:
            decoded = decode_records(part.records or b"", check_crc=True, allow_partial_tail=True)
        except CorruptRecordError as err:
            raise CorruptResponseError(
                f"the broker served a corrupt record for {topic}-{part.partition_index} "
                f"(fetch offset {offset}): {err}"
            ) from None
        records = [
            ConsumedRecord(topic, part.partition_index, r.offset, r.timestamp, r.key, r.value)
            for r in decoded
            if r.offset >= offset
        ]
        return FetchResult(records, part.high_watermark, part.log_start_offset, error)

    def _leader_moved(self, key: TopicPartition, leader: int, leader_epoch: int) -> bool:
        """Whether `key` has another leader or leader epoch than the fetch that `leader`
        answered out of range, asking another broker first; True when no broker answers
        (the position is kept until one can confirm)."""
        try:
            self._metadata.refresh(avoid=leader)
        except ClientError as err:
            log.warning("consumer metadata refresh failed: %s", err)
            return True
        now = (self._metadata.leader(*key), self._metadata.leader_epoch(*key))
        if now == (leader, leader_epoch) and self._offset_store is not None:
            # Brokers cut off from ZooKeeper may all still name a deposed leader: ask the
            # controller's record itself (the group's ZooKeeper session reads it).
            try:
                recorded = self._offset_store.partition_leader(*key)
            except OffsetStoreError as err:
                log.warning(
                    "%s-%d: broker %d answered offset %s out of range, and ZooKeeper cannot "
                    "confirm that it leads (%s): position kept",
                    *key,
                    leader,
                    self._positions.get(key),
                    err,
                )
                return True
            now = recorded or now
        if now == (leader, leader_epoch):
            return False
        log.info(
            "%s-%d: broker %d (epoch %d) answered offset %s out of range, but the leader is "
            "now %s (epoch %d): position kept",
            *key,
            leader,
            leader_epoch,
            self._positions.get(key),
            now[0],
            now[1],
        )
        return True

    def _reset_position(self, topic: str, partition: int, result: FetchResult | None) -> int:
        reset = self.config.auto_offset_reset
        current = self._positions.get((topic, partition))
        if reset == "none":
            if result is None:
                group = self.config.group_id
                why = "" if group is None else f" (group {group!r} has no committed offset)"
                raise NoOffsetForPartitionError(
                    f"no position for {topic}-{partition}{why}: call seek(), seek_to_beginning() "
                    "or seek_to_end(), or set auto.offset.reset to earliest or latest"
                )
            raise OffsetOutOfRangeError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {current} of {topic}-{partition} is outside the log "
                f"[{result.log_start_offset}, {result.high_watermark}]; seek to a valid offset "
                "or set auto.offset.reset to earliest or latest",
            )
        spec = EARLIEST_TIMESTAMP if reset == "earliest" else LATEST_TIMESTAMP
        position = self._list_offset(topic, partition, spec)
        if current is not None:
            log.warning(
                "%s-%d: offset %d out of range; reset to %s offset %d",
                topic,
                partition,
                current,
                reset,
                position,
            )
        self._positions[(topic, partition)] = position
        return position

    def _list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        """ListOffsets at the partition's leader, retrying a leader that moved or could not
        be reached with fresh metadata (reconnect.backoff.ms apart) within
        request.timeout.ms."""
        request = list_offsets_request(topic, partition, timestamp)
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        while True:
            try:
                conn = self._metadata.leader_connection(topic, partition)
                response = conn.request(request, ListOffsetsResponse, timeout_s=self._timeout_s(0))
                return offset_from_response(response, topic, partition)
            except BrokerError as err:
                if err.code not in _RETRY_LIST_OFFSETS or time.monotonic() >= deadline:
                    raise
                log.info("listing offsets of %s-%d: %s; retrying", topic, partition, err)
            except UNREACHABLE as err:
                if time.monotonic() >= deadline:
                    raise
                log.info("listing offsets of %s-%d: %s; retrying", topic, partition, err)
            time.sleep(self.config.reconnect_backoff_ms / 1000)
            self._refresh_quietly()

    def _require_assigned(self, topic: str, partition: int) -> None:
        if (topic, partition) not in self._assignment:
            raise ClientError(
                f"{topic}-{partition} is not assigned to this consumer; call assign() first"
            )

    def _refresh_quietly(self) -> None:
        try:
            self._metadata.refresh()
        except ClientError as err:
            log.warning("consumer metadata refresh failed: %s", err)

    def _timeout_s(self, max_wait_ms: int) -> float:
        return (self.config.request_timeout_ms + max_wait_ms) / 1000


def list_offsets_request(topic: str, partition: int, timestamp: int) -> ListOffsetsRequest:
    """A consumer's ListOffsets of one partition (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP or a
    time in milliseconds)."""
    wanted = ListOffsetsPartition(partition_index=partition, timestamp=timestamp)
    return ListOffsetsRequest(
        replica_id=CONSUMER_REPLICA_ID, topics=[ListOffsetsTopic(name=topic, partitions=[wanted])]
    )


def offset_from_response(response: ListOffsetsResponse, topic: str, partition: int) -> int:
    """The offset a ListOffsets response gives for one partition; BrokerError on an error."""
    for t in response.topics:
        for p in t.partitions:
            if t.name == topic and p.partition_index == partition:
                if p.error_code != ErrorCode.NONE:
                    raise BrokerError.for_code(
                        p.error_code, f"listing offsets of {topic}-{partition} failed"
                    )
                return p.offset
    raise CorruptResponseError(f"list offsets response does not mention {topic}-{partition}")
