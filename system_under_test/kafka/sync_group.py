"""SyncGroup (key 14), versions 0-3: a member asking for its assignment of a generation; the
leader member's request carries every member's.

Version 3 is the last before the flexible 4; it adds a static member's instance id.
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import (
    BYTES,
    INT16,
    INT32,
    STRING,
    Body,
    array_of,
    field,
    struct,
)


@struct
class SyncGroupRequestAssignment:
    member_id: str = field(STRING)
    assignment: bytes = field(BYTES)


@struct
class SyncGroupRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.SYNC_GROUP
    VERSIONS: ClassVar[tuple[int, int]] = (0, 3)

    group_id: str = field(STRING)
    generation_id: int = field(INT32)
    member_id: str = field(STRING)
    group_instance_id: str | None = field(STRING, "3+", nullable="3+", default=None)
    assignments: list[SyncGroupRequestAssignment] = field(array_of(SyncGroupRequestAssignment))


@struct
class SyncGroupResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.SYNC_GROUP
    VERSIONS: ClassVar[tuple[int, int]] = (0, 3)

    throttle_time_ms: int = field(INT32, "1+", default=0, ignorable=True)
    error_code: int = field(INT16)
    assignment: bytes = field(BYTES)
