"""Produce (key 0), versions 3-7: record batches (RecordBatch v2) appended to partitions.

Versions 0-2 carried the older message formats and are gone from Kafka 4.0; version 3 is
the first with RecordBatch v2 and the transactional id. acks=0 gets no response at all.
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import (
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
class PartitionProduceData:
    index: int = field(INT32)
    records: bytes | None = field(RECORDS, nullable="0+")


@struct
class TopicProduceData:
    name: str = field(STRING)
    partition_data: list[PartitionProduceData] = field(array_of(PartitionProduceData))


@struct
class ProduceRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.PRODUCE
    VERSIONS: ClassVar[tuple[int, int]] = (3, 7)

    transactional_id: str | None = field(STRING, "3+", nullable="3+", default=None)
    acks: int = field(INT16)
    timeout_ms: int = field(INT32)
    topic_data: list[TopicProduceData] = field(array_of(TopicProduceData))


@struct
class PartitionProduceResponse:
    index: int = field(INT32)
    error_code: int = field(INT16)
    base_offset: int = field(INT64)
    log_append_time_ms: int = field(INT64, "2+", default=-1)
    log_start_offset: int = field(INT64, "5+", default=-1, ignorable=True)


@struct
class TopicProduceResponse:
    name: str = field(STRING)
    partition_responses: list[PartitionProduceResponse] = field(array_of(PartitionProduceResponse))


@struct
class ProduceResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.PRODUCE
    VERSIONS: ClassVar[tuple[int, int]] = (3, 7)

    responses: list[TopicProduceResponse] = field(array_of(TopicProduceResponse))
    throttle_time_ms: int = field(INT32, "1+", default=0)
