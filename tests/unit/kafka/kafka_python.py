"""kafka-python (an independent implementation of Kafka's protocol) as the codec's reference.

Its message classes are generated from Kafka's own JSON message definitions, which it
bundles; these helpers convert values between its classes and ours by field name.
"""

from __future__ import annotations

from typing import Any

import kafka.errors
from kafka.protocol.admin.topics import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.protocol.schemas.fields.base import BaseField
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import decode_varint, encode_varint

from system_under_test.kafka.schema import Array, StructType, wire_of

__all__ = [
    "BROKER_API_VERSIONS",
    "BROKER_ERRORS",
    "CLASSES",
    "BaseField",
    "DefaultRecordBatch",
    "DefaultRecordBatchBuilder",
    "as_dict",
    "decode_varint",
    "encode_varint",
    "their_name",
    "their_value",
    "theirs",
]

CLASSES: dict[str, Any] = {
    cls.__name__: cls
    for cls in (
        ApiVersionsRequest,
        ApiVersionsResponse,
        MetadataRequest,
        MetadataResponse,
        ProduceRequest,
        ProduceResponse,
        FetchRequest,
        FetchResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        InitProducerIdRequest,
        InitProducerIdResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        SyncGroupRequest,
        SyncGroupResponse,
        HeartbeatRequest,
        HeartbeatResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
    )
}
"""kafka-python's message classes, by the name ours share."""

BROKER_ERRORS: dict[int, Any] = {
    cls.errno: cls
    for cls in vars(kafka.errors).values()
    if isinstance(cls, type)
    and issubclass(cls, kafka.errors.BrokerResponseError)
    and getattr(cls, "errno", None) is not None
}
"""kafka-python's broker error classes, by Kafka's error code."""

RENAMED = {
    ("MetadataResponse", "cluster_authorized_operations"): "authorized_operations",
    ("MetadataResponseTopic", "topic_authorized_operations"): "authorized_operations",
}
"""The fields kafka-python renames from Kafka's definitions (ours keep Kafka's names). Both
are int32 bitfields that it also retypes: a set of bit numbers, None for only bit 31 set."""


def their_name(cls: type[Any], name: str) -> str:
    """kafka-python's name for one of our fields."""
    return RENAMED.get((cls.__name__, name), name)


def their_value(cls: type[Any], name: str, value: Any) -> Any:
    """kafka-python's representation of one of our field values."""
    if (cls.__name__, name) not in RENAMED:
        return value
    bits = {bit for bit in range(32) if value & (1 << bit)}
    return None if bits == {31} else bits


def theirs(value: Any, their_cls: Any, version: int) -> Any:
    """Our @struct value as an instance of kafka-python's class (``their_cls``)."""
    kwargs = {}
    their_fields = their_cls._struct.fields
    for name, wire_type, _ in wire_of(type(value)).at(version):
        field_value = getattr(value, name)
        element = wire_type.element if isinstance(wire_type, Array) else None
        if isinstance(element, StructType) and field_value is not None:
            element_cls = their_fields[name].data_class
            field_value = [theirs(item, element_cls, version) for item in field_value]
        kwargs[their_name(type(value), name)] = their_value(type(value), name, field_value)
    return their_cls(**kwargs)


def as_dict(value: Any, version: int) -> dict[str, Any]:
    """Our value as kafka-python's ``to_dict(json=False)`` renders one: fields of the version."""
    result: dict[str, Any] = {}
    for name, wire_type, _ in wire_of(type(value)).at(version):
        field_value = getattr(value, name)
        element = wire_type.element if isinstance(wire_type, Array) else None
        if isinstance(element, StructType) and field_value is not None:
            field_value = [as_dict(item, version) for item in field_value]
        result[their_name(type(value), name)] = their_value(type(value), name, field_value)
    return result
