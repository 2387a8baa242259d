"""OffsetFetch (key 9), versions 1-5: a consumer group's committed offsets, read back.

Version 1 is the oldest Kafka 4.0 keeps and 5 the last before the flexible 6. From version 2
a null topic list asks for every partition the group committed, and the response has a
top-level error code; 3+ a throttle time, 5+ each offset's leader epoch.
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import (
    INT16,
    INT32,
    INT64,
    STRING,
    Body,
    array_of,
    field,
    struct,
)


@struct
class OffsetFetchRequestTopic:
    name: str = field(STRING, "0-7")
    partition_indexes: list[int] = field(array_of(INT32), "0-7")


@struct
class OffsetFetchRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.OFFSET_FETCH
    VERSIONS: ClassVar[tuple[int, int]] = (1, 5)

    group_id: str = field(STRING, "0-7")
    topics: list[OffsetFetchRequestTopic] | None = field(
        array_of(OffsetFetchRequestTopic), "0-7", nullable="2-7"
    )


@struct
class OffsetFetchResponsePartition:
    partition_index: int = field(INT32, "0-7")
    committed_offset: int = field(INT64, "0-7")
    committed_leader_epoch: int = field(INT32, "5-7", default=-1, ignorable=True)
    metadata: str | None = field(STRING, "0-7", nullable="0-7")
    error_code: int = field(INT16, "0-7")


@struct
class OffsetFetchResponseTopic:
    name: str = field(STRING, "0-7")
    partitions: list[OffsetFetchResponsePartition] = field(
        array_of(OffsetFetchResponsePartition), "0-7"
    )


@struct
class OffsetFetchResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.OFFSET_FETCH
    VERSIONS: ClassVar[tuple[int, int]] = (1, 5)

    throttle_time_ms: int = field(INT32, "3+", default=0, ignorable=True)
    topics: list[OffsetFetchResponseTopic] = field(array_of(OffsetFetchResponseTopic), "0-7")
    error_code: int = field(INT16, "2-7", default=0, ignorable=True)
