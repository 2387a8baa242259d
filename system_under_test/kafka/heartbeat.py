"""Heartbeat (key 12), versions 0-3: a member telling its coordinator it is alive, and
learning whether its group is rebalancing.

Version 3 is the last before the flexible 4; it adds a static member's instance id.
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import INT16, INT32, STRING, Body, field, struct


@struct
class HeartbeatRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.HEARTBEAT
    VERSIONS: ClassVar[tuple[int, int]] = (0, 3)

    group_id: str = field(STRING)
    generation_id: int = field(INT32)
    member_id: str = field(STRING)
    group_instance_id: str | None = field(STRING, "3+", nullable="3+", default=None)


@struct
class HeartbeatResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.HEARTBEAT
    VERSIONS: ClassVar[tuple[int, int]] = (0, 3)

    throttle_time_ms: int = field(INT32, "1+", default=0, ignorable=True)
    error_code: int = field(INT16)
