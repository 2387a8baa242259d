"""FindCoordinator (key 10), versions 0-2: the broker that coordinates a consumer group (or,
key type 1, a transactional id).

Version 0 has only the group's key; 1 adds the key type, the throttle time and an error
message; 2 changes only when a throttled response is sent. 3 is flexible.
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import INT8, INT16, INT32, STRING, Body, field, struct

GROUP_KEY = 0
TRANSACTION_KEY = 1


@struct
class FindCoordinatorRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.FIND_COORDINATOR
    VERSIONS: ClassVar[tuple[int, int]] = (0, 2)

    key: str = field(STRING, "0-3")
    key_type: int = field(INT8, "1+", default=GROUP_KEY)


@struct
class FindCoordinatorResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.FIND_COORDINATOR
    VERSIONS: ClassVar[tuple[int, int]] = (0, 2)

    throttle_time_ms: int = field(INT32, "1+", default=0, ignorable=True)
    error_code: int = field(INT16, "0-3")
    error_message: str | None = field(STRING, "1-3", nullable="1-3", default="", ignorable=True)
    node_id: int = field(INT32, "0-3")
    host: str = field(STRING, "0-3")
    port: int = field(INT32, "0-3")
