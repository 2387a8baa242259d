"""A member of a consumer group, as Kafka's clients are one: the group's coordinator (a broker)
hands out the partitions, and the member's commits go to it.

The member finds its coordinator (FindCoordinator), joins the group (JoinGroup: the first
join learns its member id from MEMBER_ID_REQUIRED, as Kafka 2.2+ asks), and, when it is the
leader, computes every member's partitions with the chosen assignor and sends them
(SyncGroup); each member then reads its partitions from the group's committed offsets
(OffsetFetch), a partition never committed from auto.offset.reset. Rebalancing is eager:
before it joins again, a member gives up every partition. A thread of its own heartbeats every
heartbeat.interval.ms; a heartbeat answered REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or
UNKNOWN_MEMBER_ID, or none answered within session.timeout.ms, makes the next poll join again.
Commits (OffsetCommit) carry the member's generation, so the coordinator refuses those of a
member it has replaced. Reading is the plain Consumer's. Not thread-safe, as a Consumer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

from system_under_test.client.assignors import ASSIGNORS
from system_under_test.client.connection import Address, BrokerConnection
from system_under_test.client.consumer import ConsumedRecord, Consumer
from system_under_test.client.exceptions import (
    BrokerUnavailableError,
    ClientConfigError,
    ClientError,
    ConnectionLostError,
    CorruptResponseError,
    OffsetCommitError,
    RequestTimeoutError,
)
from system_under_test.client.metadata import ClusterMetadata
from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.kafka.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from system_under_test.kafka.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from system_under_test.kafka.heartbeat import HeartbeatRequest, HeartbeatResponse
from system_under_test.kafka.join_group import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
)
from system_under_test.kafka.leave_group import LeaveGroupRequest, LeaveGroupResponse
from system_under_test.kafka.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from system_under_test.kafka.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
)
from system_under_test.kafka.sync_group import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)

log = logging.getLogger(__name__)

JOIN_FAILURE_LOG_S = 10.0
"""While joins keep failing, one log line this often (seconds), not one a poll."""

TopicPartition = tuple[str, int]
GROUP_KEYS = (
    "group.id",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
)
"""The member's own settings (Kafka's names and defaults, 2.x); the rest are the Consumer's."""
MEMBER_KEYS = tuple(key for key in GROUP_KEYS if key != "group.id")
"""The settings only a member of a coordinated group has."""
GROUP_DEFAULTS = {
    "session.timeout.ms": 10_000,
    "heartbeat.interval.ms": 3_000,
    "max.poll.interval.ms": 300_000,
}
UNREACHABLE = (BrokerUnavailableError, ConnectionLostError, RequestTimeoutError)
_COORDINATOR_MOVED = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
_REJOIN = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
    }
)
_JOIN_AGAIN = _COORDINATOR_MOVED | _REJOIN
"""JoinGroup and SyncGroup answers after which a later poll joins again (any other is the
group's or the member's settings refused: raised)."""
_MAX_JOIN_ROUNDS = 5
"""JoinGroup asked again at most this many times in one poll (a new member id, a retry)."""


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A member's own settings."""

    group_id: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    assignor: str

    @classmethod
    def split(cls, config: Mapping[str, object]) -> tuple[GroupConfig, dict[str, object]]:
        """The member's settings out of a consumer config, and the Consumer's rest."""
        rest = {k: v for k, v in config.items() if k not in GROUP_KEYS}
        group = str(config.get("group.id") or "").strip()
        if not group:
            raise ClientConfigError("a group member needs group.id: the name of its group")
        numbers: dict[str, int] = {}
        for key, default in GROUP_DEFAULTS.items():
            raw = config.get(key, default)
            try:
                numbers[key] = int(str(raw))
            except ValueError:
                raise ClientConfigError(
                    f"consumer config {key}={raw!r}: give milliseconds"
                ) from None
            if numbers[key] <= 0:
                raise ClientConfigError(f"consumer config {key}={raw!r} must be above 0")
        if numbers["heartbeat.interval.ms"] >= numbers["session.timeout.ms"]:
            raise ClientConfigError(
                f"heartbeat.interval.ms={numbers['heartbeat.interval.ms']} must be below "
                f"session.timeout.ms={numbers['session.timeout.ms']} (a third of it is usual)"
            )
        assignor = str(config.get("partition.assignment.strategy", "range")).strip().lower()
        if assignor not in ASSIGNORS:
            raise ClientConfigError(
                f"consumer config partition.assignment.strategy={assignor!r}: use "
                + " or ".join(sorted(ASSIGNORS))
            )
        return (
            cls(
                group,
                numbers["session.timeout.ms"],
                numbers["heartbeat.interval.ms"],
                numbers["max.poll.interval.ms"],
                assignor,
            ),
            rest,
        )


class GroupConsumer:
    """A consumer that reads what its group's coordinator assigns it (`subscribe`)."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        config: Mapping[str, object],
        client_id: str = "squall-member",
    ) -> None:
        self.group, rest = GroupConfig.split(config)
        self._consumer = Consumer(bootstrap, config=rest, client_id=client_id)
        timeout_s = self._consumer.config.request_timeout_ms / 1000
        self._request_timeout_s = timeout_s
        self._metadata = ClusterMetadata(
            bootstrap, client_id=client_id, request_timeout_s=timeout_s
        )
        self._client_id = client_id
        self._topics: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self._member_id = ""
        self._generation = -1
        self._assignment: list[TopicPartition] = []
        self._assignments = 0
        self._joined = False
        self._join_failures = 0
        """Joins failed in a row (an outage of the coordinator fails every poll's)."""
        self._join_failure_logged = 0.0
        self._joining = False
        """While a JoinGroup or SyncGroup of this member is under way (no heartbeats)."""
        self._last_heartbeat = 0.0
        self._coordinator: Address | None = None
        self._heartbeat_conn: BrokerConnection | None = None
        self._closed = threading.Event()
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name=f"{client_id}-heartbeat", daemon=True
        )

    def __enter__(self) -> GroupConsumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- membership ----------------------------------------------------------------------

    def subscribe(self, topics: str | Sequence[str]) -> None:
        """Join the group for these topics; partitions come with later polls."""
        wanted = (topics,) if isinstance(topics, str) else tuple(topics)
        if not wanted:
            raise ClientConfigError("subscribe() needs at least one topic")
        with self._lock:
            self._topics = tuple(dict.fromkeys(wanted))
            self._joined = False
        if not self._heartbeat.is_alive():
            self._heartbeat.start()

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Refused, as Kafka's consumer refuses it after subscribe(): a member is given its
        partitions by the group."""
        raise ClientError(
            f"group {self.group.group_id}: a member is given its partitions by the group's "
            "coordinator; use a Consumer to read partitions of your choice"
        )

    def assignment(self) -> list[TopicPartition]:
        """The partitions the coordinator gave this member (none while it joins)."""
        with self._lock:
            return list(self._assignment)

    @property
    def assignments(self) -> int:
        """How many assignments this member has been given."""
        return self._assignments

    @property
    def generation(self) -> int:
        """The generation of the current assignment; -1 before the first."""
        return self._generation

    @property
    def member_id(self) -> str:
        return self._member_id

    # --- reading and committing ----------------------------------------------------------

    def poll(self, timeout_ms: int) -> list[ConsumedRecord]:
        """Join (again) if the group needs it, then read. A coordinator that cannot be
        reached or is rebalancing is not an error: the poll returns nothing and the next
        one tries again, as Kafka's consumers do; a refusal of the member's settings
        (INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL, ...) is raised."""
        if not self._topics:
            raise ClientConfigError("poll() needs a subscription: call subscribe() first")
        deadline = time.monotonic() + timeout_ms / 1000
        if not self._joined:
            try:
                self._join()
            except (BrokerError, *UNREACHABLE, CorruptResponseError) as err:
                if isinstance(err, BrokerError) and err.code not in _JOIN_AGAIN:
                    raise
                self._log_join_failure(err)
                self._forget_coordinator_after(err)
                time.sleep(max(0.0, min(0.1, deadline - time.monotonic())))
                return []
        remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
        return self._consumer.poll(remaining_ms)

    def _log_join_failure(self, err: BaseException) -> None:
        """Log a failed join: the first of a run of them, then one line every
        `JOIN_FAILURE_LOG_S` with how many failed since."""
        self._join_failures += 1
        now = time.monotonic()
        if self._join_failures > 1 and now - self._join_failure_logged < JOIN_FAILURE_LOG_S:
            return
        self._join_failure_logged = now
        log.info(
            "group %s: joining failed (%s; %d in a row); the next poll tries again",
            self.group.group_id,
            err,
            self._join_failures,
        )

    def position(self, topic: str, partition: int) -> int:
        return self._consumer.position(topic, partition)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._consumer.seek(topic, partition, offset)

    def seek_to_beginning(self, topic: str, partition: int) -> None:
        self._consumer.seek_to_beginning(topic, partition)

    def commit(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Commit each partition's next offset to read, under this member's generation.

        Raises OffsetCommitError: ``definite`` when the coordinator refused the commit (a
        generation it replaced, a member it does not know, a rebalance under way: the member
        then joins again) or it certainly was not sent; otherwise it may have landed.
        """
        chosen = {(t, int(p)): int(o) for (t, p), o in offsets.items()}
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(chosen.items()):
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=offset, committed_metadata=""
                )
            )
        request = OffsetCommitRequest(
            group_id=self.group.group_id,
            generation_id_or_member_epoch=self._generation,
            member_id=self._member_id,
            topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        try:
            conn = self._coordinator_connection()
        except (BrokerError, *UNREACHABLE, CorruptResponseError) as err:
            raise OffsetCommitError(f"no coordinator to commit to: {err}", definite=True) from None
        try:
            response = conn.request(
                request, OffsetCommitResponse, timeout_s=self._request_timeout_s
            )
        except ConnectionLostError as err:
            self._coordinator = None
            raise OffsetCommitError(str(err), definite=not err.request_sent) from None
        except (RequestTimeoutError, CorruptResponseError) as err:
            self._coordinator = None
            raise OffsetCommitError(str(err), definite=False) from None
        refused = [
            (topic.name, p.partition_index, ErrorCode.from_wire(p.error_code))
            for topic in response.topics
            for p in topic.partitions
            if p.error_code != ErrorCode.NONE
        ]
        if refused:
            codes = {code for _, _, code in refused}
            if codes & _REJOIN:
                self._rejoin(ErrorCode.UNKNOWN_MEMBER_ID in codes)
            if codes & _COORDINATOR_MOVED:
                self._coordinator = None
            first = refused[0]
            raise OffsetCommitError(
                f"group {self.group.group_id}: the coordinator refused the commit of "
                f"{first[0]}-{first[1]} in generation {self._generation} ({first[2].name})",
                definite=True,
            )
        return chosen

    def committed(self, topic: str, partition: int) -> int | None:
        """The group's committed offset of a partition (the next to read); None if none."""
        return self._fetch_committed([(topic, partition)]).get((topic, partition))

    def close(self) -> None:
        """Leave the group (its partitions go to the others at once) and close."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._heartbeat.is_alive():
            self._heartbeat.join(self._request_timeout_s + 1)
        if self._member_id and self._coordinator is not None:
            leave = LeaveGroupRequest(group_id=self.group.group_id, member_id=self._member_id)
            try:
                conn = self._metadata.connection_to(self._coordinator)
                conn.request(leave, LeaveGroupResponse, timeout_s=self._request_timeout_s)
            except ClientError as err:
                log.info("group %s: leaving failed (%s)", self.group.group_id, err)
        if self._heartbeat_conn is not None:
            self._heartbeat_conn.close()
        self._metadata.close()
        self._consumer.close()

    # --- joining -------------------------------------------------------------------------

    def _join(self) -> None:
        """One rebalance: give up every partition, join, sync, start from the commits."""
        self._consumer.assign([])
        with self._lock:
            self._assignment = []
            self._joining = True
        try:
            self._join_and_sync()
        finally:
            with self._lock:
                self._joining = False

    def _join_and_sync(self) -> None:
        conn = self._coordinator_connection()
        topics = self._topics
        subscription = encode_subscription(Subscription(topics=topics))
        timeout_s = self.group.max_poll_interval_ms / 1000 + self._request_timeout_s
        for _ in range(_MAX_JOIN_ROUNDS):
            joined = conn.request(
                JoinGroupRequest(
                    group_id=self.group.group_id,
                    session_timeout_ms=self.group.session_timeout_ms,
                    rebalance_timeout_ms=self.group.max_poll_interval_ms,
                    member_id=self._member_id,
                    protocol_type=CONSUMER_PROTOCOL_TYPE,
                    protocols=[
                        JoinGroupRequestProtocol(name=self.group.assignor, metadata=subscription)
                    ],
                ),
                JoinGroupResponse,
                timeout_s=timeout_s,
            )
            code = ErrorCode.from_wire(joined.error_code)
            if code is ErrorCode.MEMBER_ID_REQUIRED:
                self._member_id = joined.member_id
                continue
            if code is ErrorCode.UNKNOWN_MEMBER_ID:
                self._member_id = ""
                continue
            if code is not ErrorCode.NONE:
                raise BrokerError.for_code(code, f"group {self.group.group_id}: JoinGroup")
            break
        else:
            raise BrokerError.for_code(
                ErrorCode.REBALANCE_IN_PROGRESS,
                f"group {self.group.group_id}: no generation after {_MAX_JOIN_ROUNDS} joins",
            )
        self._member_id = joined.member_id
        plan: list[SyncGroupRequestAssignment] = []
        if joined.leader == joined.member_id:
            plan = self._assign(
                {m.member_id: decode_subscription(m.metadata).topics for m in joined.members}
            )
        synced = conn.request(
            SyncGroupRequest(
                group_id=self.group.group_id,
                generation_id=joined.generation_id,
                member_id=self._member_id,
                assignments=plan,
            ),
            SyncGroupResponse,
            timeout_s=timeout_s,
        )
        code = ErrorCode.from_wire(synced.error_code)
        if code is not ErrorCode.NONE:
            if code is ErrorCode.UNKNOWN_MEMBER_ID:
                self._member_id = ""
            raise BrokerError.for_code(code, f"group {self.group.group_id}: SyncGroup")
        partitions = sorted(
            (topic, p) for topic, ps in decode_assignment(synced.assignment).items() for p in ps
        )
        committed = self._fetch_committed(partitions)
        self._consumer.assign(partitions)
        for (topic, partition), offset in committed.items():
            self._consumer.seek(topic, partition, offset)
        with self._lock:
            self._generation = joined.generation_id
            self._assignment = partitions
            self._assignments += 1
            self._last_heartbeat = time.monotonic()
            self._joined = self._topics == topics
        self._join_failures = 0
        log.info(
            "group %s: member %s has %s in generation %d",
            self.group.group_id,
            self._member_id,
            partitions,
            joined.generation_id,
        )

    def _assign(
        self, subscriptions: Mapping[str, Sequence[str]]
    ) -> list[SyncGroupRequestAssignment]:
        """The leader's plan: every member's partitions, by the group's assignor."""
        topics = sorted({t for ts in subscriptions.values() for t in ts})
        self._metadata.refresh(topics)
        counts = {t: n for t in topics if (n := self._metadata.partition_count(t)) is not None}
        plan = ASSIGNORS[self.group.assignor](subscriptions, counts)
        return [
            SyncGroupRequestAssignment(member_id=member, assignment=encode_assignment(parts))
            for member, parts in sorted(plan.items())
        ]

    def _fetch_committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of `partitions` (those it has)."""
        if not partitions:
            return {}
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = OffsetFetchRequest(
            group_id=self.group.group_id,
            topics=[
                OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()
            ],
        )
        conn = self._coordinator_connection()
        response = conn.request(request, OffsetFetchResponse, timeout_s=self._request_timeout_s)
        code = ErrorCode.from_wire(response.error_code)
        if code is not ErrorCode.NONE:
            raise BrokerError.for_code(code, f"group {self.group.group_id}: OffsetFetch")
        out: dict[TopicPartition, int] = {}
        for answered in response.topics:
            for p in answered.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise BrokerError.for_code(
                        p.error_code, f"group {self.group.group_id}: OffsetFetch of {answered.name}"
                    )
                if p.committed_offset >= 0:
                    out[(answered.name, p.partition_index)] = p.committed_offset
        return out

    # --- the coordinator -----------------------------------------------------------------

    def _coordinator_connection(self) -> BrokerConnection:
        if self._coordinator is None:
            self._coordinator = self._find_coordinator()
        return self._metadata.connection_to(self._coordinator)

    def _find_coordinator(self) -> Address:
        response = self._metadata.any_request(
            FindCoordinatorRequest(key=self.group.group_id), FindCoordinatorResponse
        )
        code = ErrorCode.from_wire(response.error_code)
        if code is not ErrorCode.NONE:
            raise BrokerError.for_code(code, f"group {self.group.group_id}: FindCoordinator")
        return response.host, response.port

    def _forget_coordinator_after(self, err: BaseException) -> None:
        if isinstance(err, (*UNREACHABLE, CorruptResponseError)) or (
            isinstance(err, BrokerError) and err.code in _COORDINATOR_MOVED
        ):
            self._coordinator = None
        if isinstance(err, BrokerError) and err.code is ErrorCode.UNKNOWN_MEMBER_ID:
            self._member_id = ""

    def _rejoin(self, forget_member: bool) -> None:
        with self._lock:
            self._joined = False
            if forget_member:
                self._member_id = ""

    # --- heartbeats ----------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        interval_s = self.group.heartbeat_interval_ms / 1000
        while not self._closed.wait(interval_s):
            with self._lock:
                # Until it sends JoinGroup again, a member that must rejoin still heartbeats
                # (answered REBALANCE_IN_PROGRESS), so that its session lasts as in Kafka.
                if self._joining or self._generation < 0 or not self._member_id:
                    continue
                request = HeartbeatRequest(
                    group_id=self.group.group_id,
                    generation_id=self._generation,
                    member_id=self._member_id,
                )
                last = self._last_heartbeat
            code = self._send_heartbeat(request)
            now = time.monotonic()
            if code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
                with self._lock:
                    self._last_heartbeat = now
            if code is ErrorCode.NONE:
                pass
            elif code in _REJOIN:
                log.info(
                    "group %s: heartbeat answered %s; joining again", self.group.group_id, code.name
                )
                self._rejoin(code is ErrorCode.UNKNOWN_MEMBER_ID)
            elif now - last > self.group.session_timeout_ms / 1000:
                log.info(
                    "group %s: no heartbeat answered for session.timeout.ms=%d; joining again",
                    self.group.group_id,
                    self.group.session_timeout_ms,
                )
                self._rejoin(False)

    def _send_heartbeat(self, request: HeartbeatRequest) -> ErrorCode | None:
        """The coordinator's answer to a heartbeat; None if none came."""
        coordinator = self._coordinator
        if coordinator is None:
            return None
        try:
            conn = self._heartbeat_conn
            if conn is None or conn.closed or conn.address != coordinator:
                if conn is not None:
                    conn.close()
                conn = BrokerConnection(
                    coordinator,
                    client_id=self._client_id,
                    connect_timeout_s=self._request_timeout_s,
                )
                self._heartbeat_conn = conn
            response = conn.request(request, HeartbeatResponse, timeout_s=self._request_timeout_s)
        except ClientError:
            return None
        code = ErrorCode.from_wire(response.error_code)
        if code in _COORDINATOR_MOVED:
            self._coordinator = None
        return code
