"""Metadata (key 3), versions 0-8: brokers, controller, topics, partitions, leaders, ISRs.

Version 0 has no null topic list (an empty one asks for every topic); from version 1 an
empty list asks for none and null for every topic.
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

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)
"""Kafka's default for the authorized-operations bitfields: not computed."""


@struct
class MetadataRequestTopic:
    name: str = field(STRING)


@struct
class MetadataRequest(Body):
    API_KEY: ClassVar[int] = ApiKey.METADATA
    VERSIONS: ClassVar[tuple[int, int]] = (0, 8)

    topics: list[MetadataRequestTopic] | None = field(array_of(MetadataRequestTopic), nullable="1+")
    allow_auto_topic_creation: bool = field(BOOLEAN, "4+", default=True)
    include_cluster_authorized_operations: bool = field(BOOLEAN, "8+", default=False)
    include_topic_authorized_operations: bool = field(BOOLEAN, "8+", default=False)


@struct
class MetadataResponseBroker:
    node_id: int = field(INT32)
    host: str = field(STRING)
    port: int = field(INT32)
    rack: str | None = field(STRING, "1+", nullable="1+", default=None, ignorable=True)


@struct
class MetadataResponsePartition:
    error_code: int = field(INT16)
    partition_index: int = field(INT32)
    leader_id: int = field(INT32)
    leader_epoch: int = field(INT32, "7+", default=-1, ignorable=True)
    replica_nodes: list[int] = field(array_of(INT32))
    isr_nodes: list[int] = field(array_of(INT32))
    offline_replicas: list[int] = field(array_of(INT32), "5+", default=[], ignorable=True)


@struct
class MetadataResponseTopic:
    error_code: int = field(INT16)
    name: str = field(STRING)
    is_internal: bool = field(BOOLEAN, "1+", default=False, ignorable=True)
    partitions: list[MetadataResponsePartition] = field(array_of(MetadataResponsePartition))
    topic_authorized_operations: int = field(INT32, "8+", default=AUTHORIZED_OPERATIONS_UNKNOWN)


@struct
class MetadataResponse(Body):
    API_KEY: ClassVar[int] = ApiKey.METADATA
    VERSIONS: ClassVar[tuple[int, int]] = (0, 8)

    throttle_time_ms: int = field(INT32, "3+", default=0, ignorable=True)
    brokers: list[MetadataResponseBroker] = field(array_of(MetadataResponseBroker))
    cluster_id: str | None = field(STRING, "2+", nullable="2+", default=None, ignorable=True)
    controller_id: int = field(INT32, "1+", default=-1, ignorable=True)
    topics: list[MetadataResponseTopic] = field(array_of(MetadataResponseTopic))
    cluster_authorized_operations: int = field(INT32, "8+", default=AUTHORIZED_OPERATIONS_UNKNOWN)
