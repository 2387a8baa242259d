"""Consumer groups as Kafka's group coordinator keeps them (the classic protocol of Kafka 2.x):
members that join, a leader member that assigns, generations, session and rebalance timeouts.

A group moves through Kafka's states::

    EMPTY --join--> PREPARING_REBALANCE --all joined, or the rebalance timeout--> COMPLETING_REBALANCE
    COMPLETING_REBALANCE --the leader's SyncGroup--> STABLE
    STABLE | COMPLETING_REBALANCE --a member joins, leaves, changes or expires--> PREPARING_REBALANCE
    PREPARING_REBALANCE --every member gone--> EMPTY (a new generation)

A rebalance ends when every member has joined again, or when the longest rebalance timeout of
its members has passed since it began; members that did not join by then are removed. The
generation then goes up by one, the first member to have joined leads, and only the leader's
JoinGroup response lists the members (with their protocol metadata), so that it runs the
assignor and sends the assignment in its SyncGroup. A member whose session timeout passes
without a heartbeat, join or sync is removed, and the group rebalances.

Time is explicit: every call takes ``now`` (seconds, monotonic) and ``expire(now)`` removes
what has timed out, so that the broker drives it from its event loop and tests drive it by
hand. JoinGroup and SyncGroup may wait for other members: they return a ``Pending`` that the
coordinator completes later (``on_done`` tells the broker).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from system_under_test.errors import ErrorCode

ResultT = TypeVar("ResultT")


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


class Pending(Generic[ResultT]):
    """A response that may have to wait for other members; completed once."""

    def __init__(self) -> None:
        self._result: ResultT | None = None
        self._done = False
        self._callbacks: list[Callable[[ResultT], None]] = []

    @property
    def done(self) -> bool:
        return self._done

    def result(self) -> ResultT:
        if not self._done:
            raise RuntimeError("the response is not ready yet")
        assert self._result is not None
        return self._result

    def on_done(self, callback: Callable[[ResultT], None]) -> None:
        if self._done:
            assert self._result is not None
            callback(self._result)
        else:
            self._callbacks.append(callback)

    def complete(self, result: ResultT) -> None:
        if self._done:
            return
        self._result, self._done = result, True
        for callback in self._callbacks:
            callback(result)
        self._callbacks.clear()

    @classmethod
    def of(cls, result: ResultT) -> Pending[ResultT]:
        pending: Pending[ResultT] = cls()
        pending.complete(result)
        return pending


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_name: str = ""
    leader_id: str = ""
    member_id: str = ""
    members: tuple[tuple[str, bytes], ...] = ()
    """Every member and its metadata for the chosen protocol: the leader's response only."""


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """What a member says of itself when it joins."""

    client_id: str
    client_host: str
    session_timeout_s: float
    rebalance_timeout_s: float
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    """The protocols it supports, most preferred first, with its metadata for each."""


@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_s: float
    rebalance_timeout_s: float
    protocols: tuple[tuple[str, bytes], ...]
    """The protocols the member supports, most preferred first, with its metadata for each."""
    session_deadline: float
    assignment: bytes = b""
    join: Pending[JoinResult] | None = None
    sync: Pending[SyncResult] | None = None

    def metadata(self, protocol: str) -> bytes:
        return next(meta for name, meta in self.protocols if name == protocol)


@dataclass(frozen=True, slots=True)
class GroupLimits:
    """The broker's group settings (Kafka's names and 2.x defaults)."""

    min_session_timeout_s: float = 6.0
    """group.min.session.timeout.ms."""
    max_session_timeout_s: float = 1800.0
    """group.max.session.timeout.ms."""
    initial_rebalance_delay_s: float = 3.0
    """group.initial.rebalance.delay.ms: how long the first rebalance of an empty group waits
    for more members (extended by as much each time one joins, up to the rebalance timeout)."""


@dataclass(slots=True)
class Group:
    group_id: str
    protocol_type: str = ""
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_name: str = ""
    leader_id: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    """By member id, in the order they joined (the first is the next leader)."""
    pending_member_ids: set[str] = field(default_factory=set)
    """Ids handed out with MEMBER_ID_REQUIRED whose member has not joined with them yet."""
    rebalance_deadline: float = 0.0
    initial_delay_deadline: float | None = None
    storing: bool = False
    """The leader's assignment is being stored; the members get it once it is."""

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def assignments(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}


@dataclass(frozen=True, slots=True)
class Rebalanced:
    """A generation begun: what the coordinator tells its listener (an SUT event)."""

    group_id: str
    generation_id: int
    protocol_name: str
    leader_id: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Assigned:
    """The leader's assignment of a generation, taken: every member's assignment bytes."""

    group_id: str
    generation_id: int
    assignments: Mapping[str, bytes]


class GroupCoordinator:
    """The groups this broker coordinates, in memory. ``listener`` hears each generation that
    begins and each assignment taken."""

    def __init__(
        self,
        limits: GroupLimits | None = None,
        *,
        listener: Callable[[Rebalanced | Assigned], None] | None = None,
        new_member_id: Callable[[str], str] | None = None,
        store: Callable[[Group], None] | None = None,
    ) -> None:
        """``store``: persist a group (its leader's assignment, or its emptying); the
        assignment is given to the members only once ``stored`` says it was written."""
        self.limits = limits or GroupLimits()
        self._groups: dict[str, Group] = {}
        self._listener = listener
        self._store = store
        self._new_member_id = new_member_id or (lambda client_id: f"{client_id}-{uuid.uuid4()}")

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def groups(self) -> Iterator[Group]:
        return iter(self._groups.values())

    def restore(self, group: Group) -> None:
        """Take over a group loaded from where a previous coordinator stored it."""
        self.unload(group.group_id)
        self._groups[group.group_id] = group

    def unload(self, group_id: str) -> None:
        """Stop coordinating a group (another broker does now): whoever waits on it is told
        NOT_COORDINATOR, and finds the new coordinator."""
        group = self._groups.pop(group_id, None)
        if group is None:
            return
        for member in group.members.values():
            if member.join is not None:
                member.join.complete(
                    JoinResult(ErrorCode.NOT_COORDINATOR, member_id=member.member_id)
                )
                member.join = None
            if member.sync is not None:
                member.sync.complete(SyncResult(ErrorCode.NOT_COORDINATOR))
                member.sync = None

    # -- JoinGroup -----------------------------------------------------------------------------

    def join(
        self,
        group_id: str,
        member_id: str,
        request: JoinRequest,
        *,
        now: float,
        require_known_member_id: bool = False,
    ) -> Pending[JoinResult]:
        """A member (a new one: ``member_id`` "") joining, or joining again. With
        ``require_known_member_id`` (JoinGroup v4+), a new member is first given its id with
        MEMBER_ID_REQUIRED and must join again with it."""
        if not group_id:
            return Pending.of(JoinResult(ErrorCode.INVALID_GROUP_ID, member_id=member_id))
        limits = self.limits
        timeout = request.session_timeout_s
        if not limits.min_session_timeout_s <= timeout <= limits.max_session_timeout_s:
            return Pending.of(JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id))
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return Pending.of(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
            group = self._groups[group_id] = Group(group_id)
        if not request.protocols or not self._supports(group, request, excluding=member_id):
            return Pending.of(
                JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            )
        if not member_id:
            new_id = self._new_member_id(request.client_id)
            if require_known_member_id:
                group.pending_member_ids.add(new_id)
                return Pending.of(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id))
            return self._add_member(group, new_id, request, now)
        if member_id in group.pending_member_ids:
            group.pending_member_ids.discard(member_id)
            return self._add_member(group, member_id, request, now)
        member = group.members.get(member_id)
        if member is None:
            return Pending.of(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
        return self._rejoin(group, member, request.protocols, now)

    @staticmethod
    def _supports(group: Group, request: JoinRequest, *, excluding: str) -> bool:
        """Kafka's rule: the first member names the protocol type; a later one must share it
        and support a protocol that every other member supports."""
        others = [m for m in group.members.values() if m.member_id != excluding]
        if not others:
            return bool(request.protocol_type)
        if request.protocol_type != group.protocol_type:
            return False
        common = set.intersection(*({n for n, _ in m.protocols} for m in others))
        return bool(common & {name for name, _ in request.protocols})

    def _add_member(
        self, group: Group, member_id: str, request: JoinRequest, now: float
    ) -> Pending[JoinResult]:
        if not group.members:
            group.protocol_type = request.protocol_type
        member = Member(
            member_id,
            request.client_id,
            request.client_host,
            request.session_timeout_s,
            request.rebalance_timeout_s,
            request.protocols,
            session_deadline=now + request.session_timeout_s,
        )
        pending = member.join = Pending()
        group.members[member_id] = member
        if group.state is GroupState.EMPTY:
            self._prepare_rebalance(group, now, initial=True)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._extend_initial_delay(group, now)
        else:
            self._prepare_rebalance(group, now)
        self._maybe_complete_join(group, now)
        return pending

    def _rejoin(
        self, group: Group, member: Member, protocols: tuple[tuple[str, bytes], ...], now: float
    ) -> Pending[JoinResult]:
        member.session_deadline = now + member.session_timeout_s
        if group.state is GroupState.PREPARING_REBALANCE:
            member.protocols = protocols
            pending: Pending[JoinResult] = Pending()
            if member.join is not None:  # a retried join: the first one is answered as this one
                pending.on_done(member.join.complete)
            member.join = pending
            self._maybe_complete_join(group, now)
            return pending
        unchanged = protocols == member.protocols
        if group.state is GroupState.COMPLETING_REBALANCE and unchanged:
            return Pending.of(self._join_result(group, member))  # a retry of an answered join
        if group.state is GroupState.STABLE and unchanged and member.member_id != group.leader_id:
            return Pending.of(self._join_result(group, member))
        member.protocols = protocols
        pending = member.join = Pending()
        self._prepare_rebalance(group, now)
        self._maybe_complete_join(group, now)
        return pending

    def _extend_initial_delay(self, group: Group, now: float) -> None:
        """A member joining an empty group's first rebalance waits another initial delay for
        more, within the rebalance timeout."""
        if group.initial_delay_deadline is not None:
            group.initial_delay_deadline = min(
                now + self.limits.initial_rebalance_delay_s, group.rebalance_deadline
            )

    def _prepare_rebalance(self, group: Group, now: float, *, initial: bool = False) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            group.storing = False
            for member in group.members.values():
                if member.sync is not None:
                    member.sync.complete(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                    member.sync = None
        if group.state is not GroupState.PREPARING_REBALANCE:
            group.state = GroupState.PREPARING_REBALANCE
            longest = max((m.rebalance_timeout_s for m in group.members.values()), default=0.0)
            group.rebalance_deadline = now + longest
            delay = self.limits.initial_rebalance_delay_s
            group.initial_delay_deadline = (
                min(now + delay, group.rebalance_deadline) if initial and delay > 0 else None
            )

    def _maybe_complete_join(self, group: Group, now: float) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.initial_delay_deadline is not None and now < group.initial_delay_deadline:
            return
        everyone = all(m.join is not None for m in group.members.values())
        if not everyone and now < group.rebalance_deadline:
            return
        for member in [m for m in group.members.values() if m.join is None]:
            del group.members[member.member_id]  # did not join in time
        group.initial_delay_deadline = None
        group.generation_id += 1
        if not group.members:
            self._empty(group)
            return
        group.state = GroupState.COMPLETING_REBALANCE
        group.protocol_name = self._vote(group)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        for member in group.members.values():
            member.assignment = b""
        if self._listener is not None:
            self._listener(
                Rebalanced(
                    group.group_id,
                    group.generation_id,
                    group.protocol_name,
                    group.leader_id,
                    tuple(group.members),
                )
            )
        for member in group.members.values():
            join, member.join = member.join, None
            member.session_deadline = now + member.session_timeout_s
            assert join is not None
            join.complete(self._join_result(group, member))

    @staticmethod
    def _vote(group: Group) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote: each
        member votes for its most preferred candidate)."""
        members = list(group.members.values())
        candidates = set.intersection(*({n for n, _ in m.protocols} for m in members))
        votes: dict[str, int] = dict.fromkeys(candidates, 0)
        for member in members:
            favourite = next(n for n, _ in member.protocols if n in candidates)
            votes[favourite] += 1
        return max(sorted(votes), key=lambda n: votes[n])

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        listed = member.member_id == group.leader_id
        return JoinResult(
            ErrorCode.NONE,
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            member.member_id,
            tuple((m.member_id, m.metadata(group.protocol_name)) for m in group.members.values())
            if listed
            else (),
        )

    # -- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------------

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: Mapping[str, bytes],
        *,
        now: float,
    ) -> Pending[SyncResult]:
        """A member asking for its assignment; the leader's request carries everyone's."""
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return Pending.of(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if generation_id != group.generation_id:
            return Pending.of(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        if group.state is GroupState.PREPARING_REBALANCE:
            return Pending.of(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.session_deadline = now + member.session_timeout_s
        if group.state is GroupState.STABLE:
            return Pending.of(SyncResult(ErrorCode.NONE, member.assignment))
        pending = member.sync = member.sync or Pending()
        if member_id == group.leader_id and not group.storing:
            for other in group.members.values():
                other.assignment = bytes(assignments.get(other.member_id, b""))
            if self._store is None:
                self._stabilize(group)
            else:
                group.storing = True
                self._store(group)
        return pending

    def stored(self, group_id: str, generation_id: int, error: ErrorCode, *, now: float) -> None:
        """What became of storing a generation's assignment: written (the members get it)
        or not (they get the error, as Kafka answers, and the group rebalances)."""
        group = self._groups.get(group_id)
        if (
            group is None
            or not group.storing
            or group.generation_id != generation_id
            or group.state is not GroupState.COMPLETING_REBALANCE
        ):
            return
        group.storing = False
        if error is ErrorCode.NONE:
            self._stabilize(group)
            return
        for member in group.members.values():
            member.assignment = b""
            if member.sync is not None:
                member.sync.complete(SyncResult(error))
                member.sync = None
        self._prepare_rebalance(group, now)
        self._maybe_complete_join(group, now)

    def _stabilize(self, group: Group) -> None:
        group.state = GroupState.STABLE
        if self._listener is not None:
            self._listener(Assigned(group.group_id, group.generation_id, group.assignments()))
        for member in group.members.values():
            if member.sync is not None:
                member.sync.complete(SyncResult(ErrorCode.NONE, member.assignment))
                member.sync = None

    def _empty(self, group: Group) -> None:
        group.state, group.protocol_name, group.leader_id = GroupState.EMPTY, "", ""
        if self._store is not None:
            self._store(group)  # so that a later coordinator goes on from this generation

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, *, now: float
    ) -> ErrorCode:
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member.session_deadline = now + member.session_timeout_s
        if group.state is GroupState.STABLE:
            return ErrorCode.NONE
        return ErrorCode.REBALANCE_IN_PROGRESS  # as Kafka 2.4, also while awaiting the sync

    def leave(self, group_id: str, member_id: str, *, now: float) -> ErrorCode:
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove(group, member_id, now)
        return ErrorCode.NONE

    def _remove(self, group: Group, member_id: str, now: float) -> None:
        member = group.members.pop(member_id)
        if member.join is not None:
            member.join.complete(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
        if member.sync is not None:
            member.sync.complete(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now)
        elif group.members:
            self._prepare_rebalance(group, now)
            self._maybe_complete_join(group, now)
        else:  # the last member of a stable group: an empty group of a new generation
            group.generation_id += 1
            self._empty(group)

    # -- OffsetCommit --------------------------------------------------------------------------

    def check_commit(self, group_id: str, generation_id: int, member_id: str) -> ErrorCode:
        """Whether a commit may be stored (Kafka 2.x's rules): a consumer outside any
        generation (-1, no member id) only while the group has no members; a member only in
        its current generation and not while the group waits for the leader's assignment."""
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.EMPTY:
            if generation_id < 0:
                return ErrorCode.NONE
            return ErrorCode.ILLEGAL_GENERATION if group is None else ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # -- time ----------------------------------------------------------------------------------

    def expire(self, now: float) -> None:
        """Remove members whose session passed (not those waiting in a join, whom the
        rebalance timeout bounds) and complete the rebalances whose time has come."""
        for group in list(self._groups.values()):
            for member in list(group.members.values()):
                if member.join is None and now >= member.session_deadline:
                    self._remove(group, member.member_id, now)
            self._maybe_complete_join(group, now)

    def next_deadline(self) -> float | None:
        """When ``expire`` next has something to do (None: nothing is timed)."""
        deadlines = itertools.chain.from_iterable(
            self._deadlines(group) for group in self._groups.values()
        )
        return min(deadlines, default=None)

    @staticmethod
    def _deadlines(group: Group) -> Iterator[float]:
        for member in group.members.values():
            if member.join is None:
                yield member.session_deadline
        if group.state is GroupState.PREPARING_REBALANCE:
            yield group.rebalance_deadline
            if group.initial_delay_deadline is not None:
                yield group.initial_delay_deadline
