"""The group coordinator on a broker's event loop: JoinGroup and SyncGroup wait for the other
members without blocking the loop, one timer expires sessions and rebalances when their time
comes, and every generation and assignment is written to the event log (``group-rebalance``,
``group-assignment``: the history's record of who owned what in which generation).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from system_under_test.errors import ErrorCode, KafkaCodecError
from system_under_test.event_log import EventLog
from system_under_test.group_coordinator import (
    Assigned,
    Group,
    GroupCoordinator,
    GroupLimits,
    GroupState,
    JoinRequest,
    JoinResult,
    Member,
    Pending,
    Rebalanced,
    SyncResult,
)
from system_under_test.kafka.consumer_protocol import decode_assignment
from system_under_test.kafka.group_metadata import GroupMetadataValue, MemberMetadata

log = logging.getLogger(__name__)
ResultT = TypeVar("ResultT")

GroupStore = Callable[[str, GroupMetadataValue], Awaitable[ErrorCode]]
"""Writes a group's metadata where a later coordinator will find it: the error, if any."""


class GroupService:
    """One broker's groups; ``close`` stops its timer and answers what still waits.

    With a ``store``, each generation's assignment reaches the members only once it is
    stored, and an emptied group is stored too, so that a coordinator that takes the group
    over (``restore``) goes on from its generation. ``before_expiry`` runs before each timer
    expiry (the broker drops the groups it no longer coordinates there)."""

    def __init__(
        self,
        limits: GroupLimits | None = None,
        *,
        events: EventLog | None = None,
        clock: Callable[[], float] = time.monotonic,
        store: GroupStore | None = None,
        before_expiry: Callable[[], None] | None = None,
    ) -> None:
        self.coordinator = GroupCoordinator(
            limits, listener=self._heard, store=None if store is None else self._store_group
        )
        self._events = events
        self._clock = clock
        self._store = store
        self._before_expiry = before_expiry
        self._timer: asyncio.TimerHandle | None = None
        self._waiting: set[asyncio.Future[Any]] = set()
        self._writes: set[asyncio.Task[None]] = set()

    async def join(
        self,
        group_id: str,
        member_id: str,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> JoinResult:
        # JoinGroup v0 has no rebalance timeout: the session timeout serves, as in Kafka
        rebalance_ms = rebalance_timeout_ms if rebalance_timeout_ms >= 0 else session_timeout_ms
        request = JoinRequest(
            client_id,
            client_host,
            session_timeout_ms / 1000,
            rebalance_ms / 1000,
            protocol_type,
            tuple(protocols),
        )
        pending = self.coordinator.join(
            group_id,
            member_id,
            request,
            now=self._clock(),
            require_known_member_id=require_known_member_id,
        )
        return await self._answer(pending)

    async def sync(
        self, group_id: str, generation_id: int, member_id: str, assignments: Mapping[str, bytes]
    ) -> SyncResult:
        pending = self.coordinator.sync(
            group_id, generation_id, member_id, assignments, now=self._clock()
        )
        return await self._answer(pending)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> ErrorCode:
        code = self.coordinator.heartbeat(group_id, generation_id, member_id, now=self._clock())
        self._reschedule()
        return code

    def leave(self, group_id: str, member_id: str) -> ErrorCode:
        code = self.coordinator.leave(group_id, member_id, now=self._clock())
        self._reschedule()
        return code

    def check_commit(self, group_id: str, generation_id: int, member_id: str) -> ErrorCode:
        return self.coordinator.check_commit(group_id, generation_id, member_id)

    def restore(self, group_id: str, stored: GroupMetadataValue) -> None:
        """Coordinate a group from its stored metadata: its members keep their generation
        and assignment, each with a new session (they heartbeat here from now on)."""
        now = self._clock()
        protocol = stored.protocol or ""
        members = {
            m.member_id: Member(
                m.member_id,
                m.client_id,
                m.client_host,
                m.session_timeout / 1000,
                m.rebalance_timeout / 1000,
                ((protocol, m.subscription),),
                session_deadline=now + m.session_timeout / 1000,
                assignment=m.assignment,
            )
            for m in stored.members
        }
        self.coordinator.restore(
            Group(
                group_id,
                protocol_type=stored.protocol_type,
                state=GroupState.STABLE if members else GroupState.EMPTY,
                generation_id=stored.generation,
                protocol_name=protocol,
                leader_id=stored.leader or "",
                members=members,
            )
        )
        self._reschedule()

    def unload(self, group_id: str) -> None:
        self.coordinator.unload(group_id)
        self._reschedule()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for future in self._waiting:
            if not future.done():
                future.cancel()
        self._waiting.clear()
        for task in self._writes:
            task.cancel()

    def _store_group(self, group: Group) -> None:
        stored = GroupMetadataValue(
            protocol_type=group.protocol_type,
            generation=group.generation_id,
            protocol=group.protocol_name or None,
            leader=group.leader_id or None,
            current_state_timestamp=time.time_ns() // 1_000_000,
            members=[
                MemberMetadata(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=round(m.rebalance_timeout_s * 1000),
                    session_timeout=round(m.session_timeout_s * 1000),
                    subscription=m.metadata(group.protocol_name),
                    assignment=m.assignment,
                )
                for m in group.members.values()
            ],
        )
        # Tasks start in the order they are made, and each appends before it first waits:
        # a group's records reach the log in the order they were stored.
        task = asyncio.get_running_loop().create_task(
            self._write(group.group_id, group.generation_id, stored)
        )
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, group_id: str, generation_id: int, stored: GroupMetadataValue) -> None:
        assert self._store is not None
        try:
            code = await self._store(group_id, stored)
        except Exception:
            log.exception("storing group %s failed", group_id)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        if code is not ErrorCode.NONE:
            log.info("group %s: generation %d not stored: %s", group_id, generation_id, code.name)
        self.coordinator.stored(group_id, generation_id, code, now=self._clock())
        self._reschedule()

    async def _answer(self, pending: Pending[ResultT]) -> ResultT:
        self._reschedule()
        if pending.done:
            return pending.result()
        future: asyncio.Future[ResultT] = asyncio.get_running_loop().create_future()

        def done(result: ResultT) -> None:
            if not future.done():
                future.set_result(result)

        pending.on_done(done)
        self._waiting.add(future)
        try:
            return await future
        finally:
            self._waiting.discard(future)

    def _reschedule(self) -> None:
        """One timer, at the coordinator's next deadline."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.coordinator.next_deadline()
        if deadline is None:
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(max(0.0, deadline - self._clock()), self._expire)

    def _expire(self) -> None:
        self._timer = None
        if self._before_expiry is not None:
            self._before_expiry()
        self.coordinator.expire(self._clock())
        self._reschedule()

    def _heard(self, news: Rebalanced | Assigned) -> None:
        if isinstance(news, Rebalanced):
            log.info(
                "group %s: generation %d, leader %s, members %s",
                news.group_id,
                news.generation_id,
                news.leader_id,
                ", ".join(news.members),
            )
            if self._events is not None:
                self._events.write(
                    "group-rebalance",
                    group=news.group_id,
                    generation=news.generation_id,
                    protocol=news.protocol_name,
                    leader=news.leader_id,
                    members=list(news.members),
                )
            return
        if self._events is None:
            return
        owned: dict[str, dict[str, list[int]] | None] = {}
        for member, assignment in news.assignments.items():
            try:
                owned[member] = decode_assignment(assignment)
            except KafkaCodecError:
                owned[member] = None  # not the consumer protocol: opaque to the event log
        self._events.write(
            "group-assignment", group=news.group_id, generation=news.generation_id, owned=owned
        )
