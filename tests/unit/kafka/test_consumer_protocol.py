"""The consumer protocol's subscription and assignment bytes, against kafka-python's encoding
of Kafka's definitions, and read forward-compatibly."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from system_under_test.errors import KafkaCodecError
from system_under_test.kafka.consumer_protocol import (
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscriptions_are_kafkas_bytes(version: int) -> None:
    ours = Subscription(
        ("a", "b"), b"u", {"a": (1, 2)} if version else None, 4 if version > 1 else -1
    )
    owned = [ConsumerProtocolSubscription.TopicPartition(topic="a", partitions=[1, 2])]
    theirs = ConsumerProtocolSubscription(
        version=version,
        topics=["a", "b"],
        user_data=b"u",
        owned_partitions=owned if version else [],
        generation_id=4 if version > 1 else -1,
        rack_id=None,
    )
    assert encode_subscription(ours, version=version) == theirs.encode(version=version)
    assert decode_subscription(theirs.encode(version=version)) == ours


def test_assignments_are_kafkas_bytes() -> None:
    theirs = ConsumerProtocolAssignment(
        version=0,
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic="a", partitions=[0, 2]),
            ConsumerProtocolAssignment.TopicPartition(topic="b", partitions=[1]),
        ],
        user_data=None,
    )
    assert encode_assignment({"b": [1], "a": [2, 0], "c": []}) == theirs.encode(version=0)
    assert decode_assignment(theirs.encode(version=0)) == {"a": [0, 2], "b": [1]}
    assert decode_assignment(b"") == {}


def test_a_newer_version_is_read_as_the_newest_known() -> None:
    data = bytearray(encode_subscription(Subscription(("a",)), version=3))
    data[0:2] = (7).to_bytes(2, "big")  # a version 7 with a field we do not know after it
    assert decode_subscription(bytes(data) + b"\x00\x00\x00\x09").topics == ("a",)
    with pytest.raises(KafkaCodecError, match="consumer protocol subscription"):
        decode_subscription(b"\x00\x00\x00\x00\x00\x05")
