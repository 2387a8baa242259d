"""LeaveGroup (key 13), versions 0-2: a member leaving its group, so that it rebalances at
once rather than after the member's session timeout.

Version 2 is the newest Kafka 2.3 knows (3, a batch of static members, came with 2.4).
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import INT16, INT32, STRING, Body, field, struct


@struct
class LeaveGroupRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.LEAVE_GROUP
    VERSIONS: ClassVar[tuple[int, int]] = (0, 2)

    group_id: str = field(STRING)
    member_id: str = field(STRING)


@struct
class LeaveGroupResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.LEAVE_GROUP
    VERSIONS: ClassVar[tuple[int, int]] = (0, 2)

    throttle_time_ms: int = field(INT32, "1+", default=0, ignorable=True)
    error_code: int = field(INT16)
