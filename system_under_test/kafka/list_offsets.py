"""ListOffsets (key 2), versions 1-5: the offset for a timestamp, or the earliest or latest.

Timestamp -1 asks for the latest offset (the log end offset, or the last stable offset under
read_committed), -2 for the earliest. Version 0 (several offsets per partition) is gone from
Kafka 4.0; 2 adds the isolation level, 4 the leader epochs (KIP-320).
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    Body,
    array_of,
    field,
    struct,
)

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
CONSUMER_REPLICA_ID = -1
"""The replica id of a request that is not a broker's: a client's."""


@struct
class ListOffsetsPartition:
    partition_index: int = field(INT32)
    current_leader_epoch: int = field(INT32, "4+", default=-1, ignorable=True)
    timestamp: int = field(INT64)


@struct
class ListOffsetsTopic:
    name: str = field(STRING)
    partitions: list[ListOffsetsPartition] = field(array_of(ListOffsetsPartition))


@struct
class ListOffsetsRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.LIST_OFFSETS
    VERSIONS: ClassVar[tuple[int, int]] = (1, 5)

    replica_id: int = field(INT32)
    isolation_level: int = field(INT8, "2+", default=0)
    topics: list[ListOffsetsTopic] = field(array_of(ListOffsetsTopic))


@struct
class ListOffsetsPartitionResponse:
    partition_index: int = field(INT32)
    error_code: int = field(INT16)
    timestamp: int = field(INT64, "1+", default=-1)
    offset: int = field(INT64, "1+", default=-1)
    leader_epoch: int = field(INT32, "4+", default=-1)


@struct
class ListOffsetsTopicResponse:
    name: str = field(STRING)
    partitions: list[ListOffsetsPartitionResponse] = field(array_of(ListOffsetsPartitionResponse))


@struct
class ListOffsetsResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.LIST_OFFSETS
    VERSIONS: ClassVar[tuple[int, int]] = (1, 5)

    throttle_time_ms: int = field(INT32, "2+", default=0, ignorable=True)
    topics: list[ListOffsetsTopicResponse] = field(array_of(ListOffsetsTopicResponse))
