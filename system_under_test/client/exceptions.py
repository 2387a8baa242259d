"""Exceptions raised by the client library (broker error codes are in errors.py)."""

from __future__ import annotations

from collections.abc import Mapping

from system_under_test.errors import ErrorCode


class ClientError(Exception):
    """Base of the client's own errors."""


class ClientConfigError(ClientError, ValueError):
    """An unknown client configuration key or a bad value."""


class BrokerUnavailableError(ClientError):
    """No connection could be made; nothing was sent."""


class ConnectionLostError(ClientError):
    """The connection broke; ``request_sent`` says whether the whole request had gone out."""

    def __init__(self, message: str, *, request_sent: bool) -> None:
        super().__init__(message)
        self.request_sent = request_sent


class RequestTimeoutError(ClientError):
    """A request was sent but no response came in time; it may or may not have taken effect."""


class CorruptResponseError(ClientError):
    """A broker answered with bytes that are not a valid response or hold corrupt records."""


class NoOffsetForPartitionError(ClientError):
    """A consumer has no position for a partition and auto.offset.reset is none."""


PRODUCE_ANSWERS: dict[ErrorCode, str] = {
    ErrorCode.MESSAGE_TOO_LARGE: "a record batch is larger than the topic's max.message.bytes",
    ErrorCode.CORRUPT_MESSAGE: "the broker found the records corrupt",
    ErrorCode.INVALID_RECORD: "the broker refused the records as invalid",
    ErrorCode.NOT_ENOUGH_REPLICAS: "the ISR is smaller than min.insync.replicas; nothing written",
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: (
        "written, but the ISR shrank below min.insync.replicas before it was replicated"
    ),
    ErrorCode.REQUEST_TIMED_OUT: "written, but not replicated within the request's timeout",
    ErrorCode.NOT_LEADER_FOR_PARTITION: "the broker does not lead the partition now",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "the broker does not host the partition",
    ErrorCode.INVALID_REQUIRED_ACKS: "acks must be -1, 0 or 1",
}
"""What a broker's answer to a produce means, for the messages of produce errors (Kafka's
answers carry a code only)."""


def produce_answer(broker: str, code: ErrorCode) -> str:
    """A broker's answer to a produce, in words: ``broker B: CODE (what it means)``."""
    meaning = PRODUCE_ANSWERS.get(code)
    return f"broker {broker}: {code.name}" + (f" ({meaning})" if meaning else "")


class ProduceError(ClientError):
    """A record was not acknowledged.

    ``definite`` is True only when the record certainly was not written (history type
    ``fail``); otherwise it may have been written (history type ``info``).
    """

    def __init__(
        self,
        error: ErrorCode,
        message: str,
        *,
        definite: bool,
        topic: str,
        partition: int,
    ) -> None:
        outcome = "not written" if definite else "may or may not have been written"
        where = f"{topic}-{partition}" if partition >= 0 else topic
        super().__init__(f"produce to {where} failed ({error.name}, {outcome}): {message}")
        self.error = error
        self.definite = definite
        self.topic = topic
        self.partition = partition

    @property
    def retriable(self) -> bool:
        """Whether sending the record again may succeed."""
        return self.error.retriable


class QueueFullError(ProduceError):
    """The producer's queue stayed full for queue.enqueue.timeout.ms; the record was dropped."""

    def __init__(self, topic: str, partition: int, message: str) -> None:
        super().__init__(
            ErrorCode.QUEUE_FULL, message, definite=True, topic=topic, partition=partition
        )


class ProducerClosedError(ClientError):
    """send() or flush() on a producer that was closed."""


class OffsetStoreError(ClientError):
    """A consumer group's offset store (ZooKeeper) could not be reached or read."""


class OffsetCommitError(OffsetStoreError):
    """A commit of consumer group offsets did not certainly succeed.

    ``definite`` is True only when nothing was written (history type ``fail``); otherwise
    some or all offsets may have been written (history type ``info``). ``committed`` holds
    the offsets known to have been written before the failure.
    """

    def __init__(
        self,
        message: str,
        *,
        definite: bool,
        committed: Mapping[tuple[str, int], int] | None = None,
    ) -> None:
        super().__init__(message)
        self.definite = definite
        self.committed: dict[tuple[str, int], int] = dict(committed or {})
