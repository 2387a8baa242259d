"""OffsetCommit (key 8), versions 2-7: a consumer group's committed offsets, per partition.

Version 2 is the oldest Kafka 4.0 keeps and 7 the last before the flexible 8. Versions 2-4
carry a retention time, 6+ each offset's leader epoch, 7+ a static member's instance id.
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
class OffsetCommitRequestPartition:
    partition_index: int = field(INT32)
    committed_offset: int = field(INT64)
    committed_leader_epoch: int = field(INT32, "6+", default=-1, ignorable=True)
    committed_metadata: str | None = field(STRING, nullable="0+")


@struct
class OffsetCommitRequestTopic:
    name: str = field(STRING)
    partitions: list[OffsetCommitRequestPartition] = field(array_of(OffsetCommitRequestPartition))


@struct
class OffsetCommitRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.OFFSET_COMMIT
    VERSIONS: ClassVar[tuple[int, int]] = (2, 7)

    group_id: str = field(STRING)
    generation_id_or_member_epoch: int = field(INT32, "1+", default=-1, ignorable=True)
    member_id: str = field(STRING, "1+", default="", ignorable=True)
    group_instance_id: str | None = field(STRING, "7+", nullable="7+", default=None)
    retention_time_ms: int = field(INT64, "2-4", default=-1, ignorable=True)
    topics: list[OffsetCommitRequestTopic] = field(array_of(OffsetCommitRequestTopic))


@struct
class OffsetCommitResponsePartition:
    partition_index: int = field(INT32)
    error_code: int = field(INT16)


@struct
class OffsetCommitResponseTopic:
    name: str = field(STRING)
    partitions: list[OffsetCommitResponsePartition] = field(array_of(OffsetCommitResponsePartition))


@struct
class OffsetCommitResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.OFFSET_COMMIT
    VERSIONS: ClassVar[tuple[int, int]] = (2, 7)

    throttle_time_ms: int = field(INT32, "3+", default=0, ignorable=True)
    topics: list[OffsetCommitResponseTopic] = field(array_of(OffsetCommitResponseTopic))
