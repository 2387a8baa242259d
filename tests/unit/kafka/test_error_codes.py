"""Kafka's error codes, as errors.py numbers them, against kafka-python's table."""

from __future__ import annotations

from system_under_test.errors import ErrorCode
from tests.unit.kafka.kafka_python import BROKER_ERRORS

THEIR_NAMES = {
    ErrorCode.NONE: "NO_ERROR",
    ErrorCode.UNKNOWN_SERVER_ERROR: "UNKNOWN",
    ErrorCode.MESSAGE_TOO_LARGE: "MESSAGE_SIZE_TOO_LARGE",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "INVALID_TOPIC",
}
"""Where kafka-python's name differs from Kafka's (ours)."""


def test_every_wire_code_has_kafkas_number_and_name() -> None:
    for code in ErrorCode:
        if code is ErrorCode.QUEUE_FULL:
            continue  # client-side only, never on the wire
        assert int(code) in BROKER_ERRORS, code.name
        assert BROKER_ERRORS[int(code)].message == THEIR_NAMES.get(code, code.name)


def test_retriable_as_in_kafka() -> None:
    """CORRUPT_MESSAGE is retriable in Kafka (CorruptRecordException is a
    RetriableException); kafka-python alone says otherwise."""
    for code in ErrorCode:
        if code in (ErrorCode.QUEUE_FULL, ErrorCode.CORRUPT_MESSAGE):
            continue
        assert code.retriable == BROKER_ERRORS[int(code)].retriable, code.name
    assert ErrorCode.CORRUPT_MESSAGE.retriable
