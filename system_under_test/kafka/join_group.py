"""JoinGroup (key 11), versions 2-5: a member joining a consumer group, or joining again.

Version 2 is the oldest Kafka 4.0 keeps and 5 the last before the flexible 6. Version 4 makes
a new member join twice (MEMBER_ID_REQUIRED hands it its id first), 5 adds a static member's
instance id.
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
class JoinGroupRequestProtocol:
    name: str = field(STRING)
    metadata: bytes = field(BYTES)


@struct
class JoinGroupRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.JOIN_GROUP
    VERSIONS: ClassVar[tuple[int, int]] = (2, 5)

    group_id: str = field(STRING)
    session_timeout_ms: int = field(INT32)
    rebalance_timeout_ms: int = field(INT32, "1+", default=-1, ignorable=True)
    member_id: str = field(STRING)
    group_instance_id: str | None = field(STRING, "5+", nullable="5+", default=None)
    protocol_type: str = field(STRING)
    protocols: list[JoinGroupRequestProtocol] = field(array_of(JoinGroupRequestProtocol))


@struct
class JoinGroupResponseMember:
    member_id: str = field(STRING)
    group_instance_id: str | None = field(STRING, "5+", nullable="5+", default=None, ignorable=True)
    metadata: bytes = field(BYTES)


@struct
class JoinGroupResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.JOIN_GROUP
    VERSIONS: ClassVar[tuple[int, int]] = (2, 5)

    throttle_time_ms: int = field(INT32, "2+", default=0, ignorable=True)
    error_code: int = field(INT16)
    generation_id: int = field(INT32, default=-1)
    protocol_name: str = field(STRING)
    leader: str = field(STRING)
    member_id: str = field(STRING)
    members: list[JoinGroupResponseMember] = field(array_of(JoinGroupResponseMember))
