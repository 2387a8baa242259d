"""The records of ``__consumer_offsets``: what a group coordinator writes to its partition of
that topic, and reads back when it takes the partition over.

As in Kafka, each record's key and value begin with an int16 version. Key versions 0 and 1
are a committed offset (group, topic, partition); key version 2 is a group's metadata (its
generation, protocol, leader and members with their subscriptions and assignments). A value
of null is a tombstone: the offset or group was deleted. The layouts are Kafka's
(``OffsetCommitKey``/``OffsetCommitValue`` v1 and ``GroupMetadataKey``/``GroupMetadataValue``
v2), so Kafka's tools could read the topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from system_under_test.errors import KafkaCodecError
from system_under_test.kafka.primitives import Buffer, Reader, Writer
from system_under_test.kafka.schema import (
    BYTES,
    INT32,
    INT64,
    STRING,
    array_of,
    field,
    struct,
    wire_of,
)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 1
GROUP_VALUE_VERSION = 2
_T = TypeVar("_T")


@struct
class OffsetCommitKey:
    group: str = field(STRING)
    topic: str = field(STRING)
    partition: int = field(INT32)


@struct
class OffsetCommitValue:
    offset: int = field(INT64)
    metadata: str = field(STRING)
    commit_timestamp: int = field(INT64)
    expire_timestamp: int = field(INT64, default=-1)


@struct
class GroupMetadataKey:
    group: str = field(STRING)


@struct
class MemberMetadata:
    member_id: str = field(STRING)
    client_id: str = field(STRING)
    client_host: str = field(STRING)
    rebalance_timeout: int = field(INT32)
    session_timeout: int = field(INT32)
    subscription: bytes = field(BYTES)
    assignment: bytes = field(BYTES)


@struct
class GroupMetadataValue:
    protocol_type: str = field(STRING)
    generation: int = field(INT32)
    protocol: str | None = field(STRING, nullable="0+")
    leader: str | None = field(STRING, nullable="0+")
    current_state_timestamp: int = field(INT64, default=-1)
    members: list[MemberMetadata] = field(array_of(MemberMetadata))


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    """A committed offset (``value`` None: deleted)."""

    key: OffsetCommitKey
    value: OffsetCommitValue | None


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A group's metadata (``value`` None: the group was deleted)."""

    key: GroupMetadataKey
    value: GroupMetadataValue | None


def offset_record(key: OffsetCommitKey, value: OffsetCommitValue) -> tuple[bytes, bytes]:
    """The key and value bytes of a committed offset."""
    return _encode(key, OFFSET_KEY_VERSION), _encode(value, OFFSET_VALUE_VERSION)


def group_record(key: GroupMetadataKey, value: GroupMetadataValue) -> tuple[bytes, bytes]:
    """The key and value bytes of a group's metadata."""
    return _encode(key, GROUP_KEY_VERSION), _encode(value, GROUP_VALUE_VERSION)


def decode_record(key: Buffer | None, value: Buffer | None) -> OffsetRecord | GroupRecord:
    """One record of the topic; KafkaCodecError for one that is neither kind."""
    if key is None:
        raise KafkaCodecError("a record of __consumer_offsets without a key")
    reader = Reader(key)
    version = reader.int16()
    if version in (0, 1):
        offset_key = _read(OffsetCommitKey, reader, 0, "offset commit key")
        offset_value = None
        if value is not None:
            offset_value = _decode_value(OffsetCommitValue, value, (0, 1), "offset commit value")
        return OffsetRecord(offset_key, offset_value)
    if version == GROUP_KEY_VERSION:
        group_key = _read(GroupMetadataKey, reader, 0, "group metadata key")
        group_value = None
        if value is not None:
            group_value = _decode_value(GroupMetadataValue, value, (2, 2), "group metadata value")
        return GroupRecord(group_key, group_value)
    raise KafkaCodecError(f"key version {version} is neither an offset (0-1) nor a group (2)")


def _decode_value(cls: type[_T], value: Buffer, versions: tuple[int, int], what: str) -> _T:
    reader = Reader(value)
    version = reader.int16()
    if not versions[0] <= version <= versions[1]:
        raise KafkaCodecError(f"{what} version {version} is not {versions[0]}-{versions[1]}")
    # Offset values v0 lack the expire timestamp: our one codec version reads both alike.
    if cls is OffsetCommitValue and version == 0:
        offset = reader.int64()
        metadata = reader.string(nullable=False) or ""
        timestamp = reader.int64()
        reader.expect_end()
        return OffsetCommitValue(  # type: ignore[return-value]
            offset=offset, metadata=metadata, commit_timestamp=timestamp
        )
    return _read(cls, reader, 0, what)


def _read(cls: type[_T], reader: Reader, version: int, what: str) -> _T:
    try:
        body: _T = wire_of(cls).read(reader, version, False)
        reader.expect_end()
    except KafkaCodecError as err:
        raise err.within(what) from None
    return body


def _encode(body: object, version: int) -> bytes:
    writer = Writer()
    writer.int16(version)
    wire_of(type(body)).write(writer, body, 0, False)
    return bytes(writer.buf)
