"""The group coordinator on a broker's event loop: JoinGroup and SyncGroup wait for the other
members without blocking the loop, one timer expires sessions and rebalances when their time
comes, and every generation and assignment is written to the event log (``group-rebalance``,
``group-assignment``: the history's record of who owned what in which generation).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from system_under_test.errors import ErrorCode, KafkaCodecError
from system_under_test.event_log import EventLog
from system_under_test.group_coordinator import (
    Assigned,
    GroupCoordinator,
    GroupLimits,
    JoinRequest,
    JoinResult,
    Pending,
    Rebalanced,
    SyncResult,
)
from system_under_test.kafka.consumer_protocol import decode_assignment

log = logging.getLogger(__name__)
ResultT = TypeVar("ResultT")


class GroupService:
    """One broker's groups; ``close`` stops its timer and answers what still waits."""

    def __init__(
        self,
        limits: GroupLimits | None = None,
        *,
        events: EventLog | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.coordinator = GroupCoordinator(limits, listener=self._heard)
        self._events = events
        self._clock = clock
        self._timer: asyncio.TimerHandle | None = None
        self._waiting: set[asyncio.Future[Any]] = set()

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

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for future in self._waiting:
            if not future.done():
                future.cancel()
        self._waiting.clear()

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
