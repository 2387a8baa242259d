"""The group coordinator on an event loop: joins that wait for each other, a session that
expires on its own timer, and the generations and assignments in the event log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from system_under_test.errors import ErrorCode
from system_under_test.event_log import EventLog
from system_under_test.group_coordinator import GroupLimits, JoinResult
from system_under_test.group_service import GroupService
from system_under_test.kafka.consumer_protocol import encode_assignment

PROTOCOLS = (("range", b"m"),)


def service(tmp_path: Path) -> tuple[GroupService, Path]:
    path = tmp_path / "events.jsonl"
    limits = GroupLimits(min_session_timeout_s=0.1, initial_rebalance_delay_s=0.0)
    return GroupService(limits, events=EventLog(path, broker_id=1)), path


async def join(groups: GroupService, member_id: str = "", session_ms: int = 60_000) -> JoinResult:
    return await groups.join(
        "g",
        member_id,
        client_id="c",
        client_host="h",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=PROTOCOLS,
        require_known_member_id=False,
    )


def test_members_wait_for_each_other_and_the_log_records_who_owns_what(tmp_path: Path) -> None:
    async def scenario() -> None:
        groups, path = service(tmp_path)
        a = await join(groups)
        b_joining = asyncio.ensure_future(join(groups))
        await asyncio.sleep(0)
        assert groups.heartbeat("g", 1, a.member_id) is ErrorCode.REBALANCE_IN_PROGRESS
        a2 = await join(groups, a.member_id)
        b = await b_joining
        assert a2.generation_id == b.generation_id == 2
        b_sync = asyncio.ensure_future(groups.sync("g", 2, b.member_id, {}))
        await asyncio.sleep(0)
        assert not b_sync.done()
        assignments = {a.member_id: encode_assignment({"t": [0]}), b.member_id: b"\x01"}
        assert (await groups.sync("g", 2, a.member_id, assignments)).error is ErrorCode.NONE
        assert (await b_sync).assignment == b"\x01"
        groups.close()
        events = [json.loads(line) for line in path.read_text().splitlines()]
        assert [(e["type"], e["generation"]) for e in events] == [
            ("group-rebalance", 1),
            ("group-rebalance", 2),
            ("group-assignment", 2),
        ]
        assert events[1]["members"] == [a.member_id, b.member_id]
        assert events[2]["owned"] == {a.member_id: {"t": [0]}, b.member_id: None}

    asyncio.run(scenario())


def test_a_silent_member_is_removed_by_the_timer(tmp_path: Path) -> None:
    async def scenario() -> None:
        groups, _ = service(tmp_path)
        a = await join(groups, session_ms=60_000)
        b_joining = asyncio.ensure_future(join(groups, session_ms=200))
        await asyncio.sleep(0)
        a = await join(groups, a.member_id, session_ms=60_000)
        b = await b_joining
        await groups.sync("g", a.generation_id, a.member_id, {})
        # b never heartbeats: within its 200 ms session plus slack, a hears of a rebalance
        for _ in range(200):
            if groups.heartbeat("g", a.generation_id, a.member_id) is not ErrorCode.NONE:
                break
            await asyncio.sleep(0.05)
        assert groups.heartbeat("g", a.generation_id, a.member_id) is (
            ErrorCode.REBALANCE_IN_PROGRESS
        )
        assert groups.heartbeat("g", b.generation_id, b.member_id) is ErrorCode.UNKNOWN_MEMBER_ID
        groups.close()

    asyncio.run(scenario())
