"""The consumer protocol: what consumers of a group tell each other through the coordinator,
in the opaque bytes of JoinGroup's metadata (a member's subscription) and SyncGroup's
assignment (a member's partitions). Each is an int16 version, then a struct of that version
(Kafka's ``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment``, versions 0-3).

As Kafka reads them, a version newer than ours is read as our newest (later versions only add
fields at the end, which are left unread), so that a newer client's members can share a group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from system_under_test.errors import KafkaCodecError
from system_under_test.kafka.primitives import Buffer, Reader, Writer
from system_under_test.kafka.schema import (
    BYTES,
    INT32,
    STRING,
    array_of,
    field,
    struct,
    wire_of,
)

_T = TypeVar("_T")

CONSUMER_PROTOCOL_TYPE = "consumer"
NEWEST_VERSION = 3


@struct
class OwnedPartitions:
    topic: str = field(STRING, "1+", default="")
    partitions: list[int] = field(array_of(INT32), "1+", default=[])


@struct
class ConsumerProtocolSubscription:
    topics: list[str] = field(array_of(STRING))
    user_data: bytes | None = field(BYTES, nullable="0+", default=None)
    owned_partitions: list[OwnedPartitions] = field(array_of(OwnedPartitions), "1+", default=[])
    generation_id: int = field(INT32, "2+", default=-1)
    rack_id: str | None = field(STRING, "3+", nullable="3+", default=None)


@struct
class AssignedPartitions:
    topic: str = field(STRING)
    partitions: list[int] = field(array_of(INT32))


@struct
class ConsumerProtocolAssignment:
    assigned_partitions: list[AssignedPartitions] = field(array_of(AssignedPartitions))
    user_data: bytes | None = field(BYTES, nullable="0+", default=None)


@dataclass(frozen=True, slots=True)
class Subscription:
    """A member's subscription: its topics, what it owned, and the generation it owned it in."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned: Mapping[str, tuple[int, ...]] | None = None
    generation_id: int = -1


def encode_subscription(subscription: Subscription, *, version: int = 0) -> bytes:
    body = ConsumerProtocolSubscription(
        topics=list(subscription.topics),
        user_data=subscription.user_data,
        owned_partitions=[
            OwnedPartitions(topic=topic, partitions=list(partitions))
            for topic, partitions in sorted((subscription.owned or {}).items())
        ],
        generation_id=subscription.generation_id,
    )
    return _encode(body, version)


def decode_subscription(data: Buffer) -> Subscription:
    body = _decode(ConsumerProtocolSubscription, data, "subscription")
    return Subscription(
        tuple(body.topics),
        body.user_data,
        {o.topic: tuple(o.partitions) for o in body.owned_partitions} or None,
        body.generation_id,
    )


def encode_assignment(
    partitions: Mapping[str, Sequence[int]], *, user_data: bytes | None = None
) -> bytes:
    body = ConsumerProtocolAssignment(
        assigned_partitions=[
            AssignedPartitions(topic=topic, partitions=sorted(ps))
            for topic, ps in sorted(partitions.items())
            if ps
        ],
        user_data=user_data,
    )
    return _encode(body, 0)


def decode_assignment(data: Buffer) -> dict[str, list[int]]:
    """A member's partitions by topic; empty bytes (a member the leader gave nothing, or a
    leader that sent nothing for it) are no partitions."""
    if len(data) == 0:
        return {}
    body = _decode(ConsumerProtocolAssignment, data, "assignment")
    return {a.topic: list(a.partitions) for a in body.assigned_partitions}


def _encode(body: object, version: int) -> bytes:
    writer = Writer()
    writer.int16(version)
    wire_of(type(body)).write(writer, body, version, False)
    return bytes(writer.buf)


def _decode(cls: type[_T], data: Buffer, what: str) -> _T:
    reader = Reader(data)
    try:
        version = reader.int16()
        if version < 0:
            raise KafkaCodecError(f"version {version}")
        body: _T = wire_of(cls).read(reader, min(version, NEWEST_VERSION), False)
        return body
    except KafkaCodecError as err:
        raise err.within(f"consumer protocol {what}") from None
