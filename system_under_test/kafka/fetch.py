"""Fetch (key 1), versions 4-11: read record batches from partitions (consumers and followers).

Version 4 (the oldest Kafka 4.0 keeps) brings the isolation level, the last stable offset
and aborted transactions; 5 the log start offset; 7 incremental fetch sessions (KIP-227);
9 the current leader epoch (KIP-320); 11 the rack and the preferred read replica (KIP-392).
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    Body,
    array_of,
    field,
    struct,
)


@struct
class FetchPartition:
    partition: int = field(INT32)
    current_leader_epoch: int = field(INT32, "9+", default=-1, ignorable=True)
    fetch_offset: int = field(INT64)
    log_start_offset: int = field(INT64, "5+", default=-1, ignorable=True)
    partition_max_bytes: int = field(INT32)


@struct
class FetchTopic:
    topic: str = field(STRING)
    partitions: list[FetchPartition] = field(array_of(FetchPartition))


@struct
class ForgottenTopic:
    topic: str = field(STRING)
    partitions: list[int] = field(array_of(INT32))


@struct
class FetchRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.FETCH
    VERSIONS: ClassVar[tuple[int, int]] = (4, 11)

    replica_id: int = field(INT32, default=-1)
    max_wait_ms: int = field(INT32)
    min_bytes: int = field(INT32)
    max_bytes: int = field(INT32, "3+", default=0x7FFF_FFFF)
    isolation_level: int = field(INT8, "4+", default=0)
    session_id: int = field(INT32, "7+", default=0, ignorable=True)
    session_epoch: int = field(INT32, "7+", default=-1, ignorable=True)
    topics: list[FetchTopic] = field(array_of(FetchTopic))
    forgotten_topics_data: list[ForgottenTopic] = field(array_of(ForgottenTopic), "7+", default=[])
    rack_id: str = field(STRING, "11+", default="", ignorable=True)


@struct
class AbortedTransaction:
    producer_id: int = field(INT64)
    first_offset: int = field(INT64)


@struct
class PartitionData:
    partition_index: int = field(INT32)
    error_code: int = field(INT16)
    high_watermark: int = field(INT64)
    last_stable_offset: int = field(INT64, "4+", default=-1)
    log_start_offset: int = field(INT64, "5+", default=-1, ignorable=True)
    aborted_transactions: list[AbortedTransaction] | None = field(
        array_of(AbortedTransaction), "4+", nullable="4+", default=None
    )
    preferred_read_replica: int = field(INT32, "11+", default=-1)
    records: bytes | None = field(RECORDS, nullable="0+")


@struct
class FetchableTopicResponse:
    topic: str = field(STRING)
    partitions: list[PartitionData] = field(array_of(PartitionData))


@struct
class FetchResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.FETCH
    VERSIONS: ClassVar[tuple[int, int]] = (4, 11)

    throttle_time_ms: int = field(INT32, "1+", default=0)
    error_code: int = field(INT16, "7+", default=0, ignorable=True)
    session_id: int = field(INT32, "7+", default=0)
    responses: list[FetchableTopicResponse] = field(array_of(FetchableTopicResponse))
