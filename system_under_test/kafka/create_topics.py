"""CreateTopics (key 19), versions 2-3: create topics with a partition count and replication
factor, or an explicit assignment, and configs.

Version 2 is the oldest Kafka 4.0 keeps and 3 the newest Kafka 2.3 knows; their layout is
the same (3 only changes when a throttled response is sent).
"""

from __future__ import annotations

from typing import ClassVar

from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import (
    BOOLEAN,
    INT16,
    INT32,
    STRING,
    Body,
    array_of,
    field,
    struct,
)


@struct
class CreatableReplicaAssignment:
    partition_index: int = field(INT32)
    broker_ids: list[int] = field(array_of(INT32))


@struct
class CreatableTopicConfig:
    name: str = field(STRING)
    value: str | None = field(STRING, nullable="0+")


@struct
class CreatableTopic:
    name: str = field(STRING)
    num_partitions: int = field(INT32)
    replication_factor: int = field(INT16)
    assignments: list[CreatableReplicaAssignment] = field(array_of(CreatableReplicaAssignment))
    configs: list[CreatableTopicConfig] = field(array_of(CreatableTopicConfig))


@struct
class CreateTopicsRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.CREATE_TOPICS
    VERSIONS: ClassVar[tuple[int, int]] = (2, 3)

    topics: list[CreatableTopic] = field(array_of(CreatableTopic))
    timeout_ms: int = field(INT32, default=60000)
    validate_only: bool = field(BOOLEAN, "1+", default=False)


@struct
class CreatableTopicResult:
    name: str = field(STRING)
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, "1+", nullable="0+", default=None)


@struct
class CreateTopicsResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.CREATE_TOPICS
    VERSIONS: ClassVar[tuple[int, int]] = (2, 3)

    throttle_time_ms: int = field(INT32, "2+", default=0)
    topics: list[CreatableTopicResult] = field(array_of(CreatableTopicResult))
