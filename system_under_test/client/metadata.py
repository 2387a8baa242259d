"""The client's view of the cluster: brokers, topics, partition leaders, and connections."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from system_under_test.client.connection import Address, BrokerConnection, parse_bootstrap
from system_under_test.client.exceptions import (
    BrokerUnavailableError,
    ConnectionLostError,
    CorruptResponseError,
    RequestTimeoutError,
)
from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.kafka.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
)
from system_under_test.kafka.schema import Body

NO_LEADER = -1
_R = TypeVar("_R", bound=Body)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as the last metadata response described it."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic as the last metadata response described it."""

    name: str
    error: ErrorCode
    partitions: dict[int, PartitionInfo]


class ClusterMetadata:
    """Cached metadata plus one pooled connection per broker; thread-safe."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str,
        request_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.brokers: dict[int, Address] = {}
        self.controller_id = -1
        self.topics: dict[str, TopicInfo] = {}
        self._lock = threading.RLock()
        self._connections: dict[Address, BrokerConnection] = {}

    # --- connections ---------------------------------------------------------------------

    def connection_to(self, address: Address) -> BrokerConnection:
        """The pooled connection to address, connecting if needed (outside the lock, so that
        a broker that does not answer holds up only the thread that connects to it)."""
        with self._lock:
            conn = self._connections.get(address)
            if conn is not None and not conn.closed:
                return conn
        fresh = BrokerConnection(
            address, client_id=self.client_id, connect_timeout_s=self.connect_timeout_s
        )
        with self._lock:
            conn = self._connections.get(address)
            if conn is not None and not conn.closed:
                fresh.close()
                return conn
            self._connections[address] = fresh
            return fresh

    def connection(self, broker_id: int) -> BrokerConnection:
        """The pooled connection to a broker known from metadata."""
        address = self.brokers.get(broker_id)
        if address is None:
            raise BrokerUnavailableError(f"broker {broker_id} is not in the cluster metadata")
        return self.connection_to(address)

    def any_request(self, request: Body, response_type: type[_R], *, last: int | None = None) -> _R:
        """Send request to the first broker that answers (known brokers, then bootstrap);
        broker `last` is asked only if no other answers."""
        failures: list[str] = []
        candidates = list(dict.fromkeys([*self.brokers.values(), *self.bootstrap]))
        # Idle connected brokers first, then the others; a connection with a request waiting
        # on it (perhaps a broker that stopped answering) last.
        with self._lock:
            rank = {a: 2 if c.busy else 0 for a, c in self._connections.items() if not c.closed}
        if last is not None and last in self.brokers:
            rank[self.brokers[last]] = 3
        candidates.sort(key=lambda address: rank.get(address, 1))
        for address in candidates:
            try:
                conn = self.connection_to(address)
                return conn.request(request, response_type, timeout_s=self.request_timeout_s)
            except (
                BrokerUnavailableError,
                ConnectionLostError,
                RequestTimeoutError,
                CorruptResponseError,
            ) as err:
                failures.append(str(err))
        raise BrokerUnavailableError("no broker answered: " + "; ".join(failures))

    def close(self) -> None:
        with self._lock:
            for conn in self._connections.values():
                conn.close()
            self._connections.clear()

    # --- metadata ------------------------------------------------------------------------

    def refresh(
        self, topics: Sequence[str] | None = None, *, avoid: int | None = None
    ) -> MetadataResponse:
        """Ask a broker (`avoid` only if no other answers) for metadata of topics (all when
        None) and cache it.

        A partition described with an older leader epoch than the cache holds keeps the
        cached description (KIP-320): a broker whose view is stale (a deposed leader, one
        that missed an update) cannot move this client back to a leader it has seen replaced.
        """
        wanted = None if topics is None else [MetadataRequestTopic(name=t) for t in topics]
        request = MetadataRequest(topics=wanted, allow_auto_topic_creation=False)
        response = self.any_request(request, MetadataResponse, last=avoid)
        with self._lock:
            self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
            self.controller_id = response.controller_id
            # Build a new dict and swap it in: other threads read self.topics without the lock.
            new_topics = {} if topics is None else dict(self.topics)
            for topic in response.topics:
                error = ErrorCode.from_wire(topic.error_code)
                if error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    new_topics.pop(topic.name, None)
                    continue
                known = self.topics.get(topic.name)
                partitions: dict[int, PartitionInfo] = {}
                for p in topic.partitions:
                    number = p.partition_index
                    cached = known.partitions.get(number) if known is not None else None
                    if cached is not None and cached.leader_epoch > p.leader_epoch:
                        partitions[number] = cached
                        continue
                    partitions[number] = PartitionInfo(
                        number,
                        p.leader_id,
                        p.leader_epoch,
                        tuple(p.replica_nodes),
                        tuple(p.isr_nodes),
                        ErrorCode.from_wire(p.error_code),
                    )
                new_topics[topic.name] = TopicInfo(topic.name, error, partitions)
            self.topics = new_topics
        return response

    def topic(self, name: str, *, refresh_if_missing: bool = True) -> TopicInfo | None:
        """Cached metadata of a topic; None if the cluster does not have it."""
        info = self.topics.get(name)
        if info is None and refresh_if_missing:
            self.refresh([name])
            info = self.topics.get(name)
        return info

    def partition_count(self, topic: str) -> int | None:
        """How many partitions topic has, or None if it does not exist."""
        info = self.topic(topic)
        return None if info is None else len(info.partitions)

    def leader(self, topic: str, partition: int) -> int | None:
        """The leader's broker id, or None if the partition is unknown or leaderless."""
        info = self.topic(topic)
        if info is None:
            return None
        part = info.partitions.get(partition)
        if part is None or part.leader == NO_LEADER or part.leader not in self.brokers:
            return None
        return part.leader

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch as last seen, or -1 if unknown."""
        info = self.topics.get(topic)
        part = info.partitions.get(partition) if info is not None else None
        return -1 if part is None else part.leader_epoch

    def leader_connection(self, topic: str, partition: int) -> BrokerConnection:
        """A connection to the partition's leader, refreshing metadata once if needed."""
        leader = self.leader(topic, partition)
        if leader is None:
            self.refresh()
            leader = self.leader(topic, partition)
        if leader is None:
            if self.topics.get(topic) is None or partition not in self.topics[topic].partitions:
                raise BrokerError.for_code(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"{topic}-{partition} does not exist; create the topic first",
                )
            raise BrokerError.for_code(
                ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader right now"
            )
        return self.connection(leader)
