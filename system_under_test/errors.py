"""Error codes of the wire protocol (Kafka's numbers) and the exceptions that carry them.

Every code says whether a client may retry it (``retriable``, as in Kafka) and whether a
produce that got it certainly wrote nothing (``definite``). The broker keeps the second
promise: it answers a produce with a definite code only before touching the log, and every
failure after an append is one of the indeterminate codes. PROTOCOL.md has the table.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar


class ErrorCode(IntEnum):
    """Kafka's error codes; the values are the int16 sent on the wire."""

    QUEUE_FULL = -2
    """Client-side only, never on the wire: the producer's queue was full; nothing was sent."""
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_FOR_PARTITION = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    INVALID_RECORD = 87

    @classmethod
    def from_wire(cls, value: int) -> ErrorCode:
        """The code for an int16 read off the wire; unknown numbers become UNKNOWN_SERVER_ERROR."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR

    @property
    def retriable(self) -> bool:
        """A later attempt of the same request may succeed (Kafka's RetriableException)."""
        return self in _RETRIABLE

    @property
    def definite(self) -> bool:
        """A produce answered with this code certainly wrote none of its records."""
        return self in _DEFINITE


_RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_FOR_PARTITION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)

_DEFINITE = frozenset(
    {
        ErrorCode.QUEUE_FULL,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.INVALID_REQUIRED_ACKS,
        ErrorCode.INVALID_TIMESTAMP,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.UNKNOWN_PRODUCER_ID,
    }
)
"""Codes the broker only ever returns before appending. NOT_LEADER_FOR_PARTITION is absent on
purpose: a leader that loses leadership while an acks=-1 produce waits answers with it after
the append (docs/history.md classifies it as indeterminate)."""


class ProtocolError(ValueError):
    """Bytes that are not a valid frame, header or message of the wire protocol."""


class KafkaCodecError(ProtocolError):
    """Bytes that are not valid in Kafka's wire protocol, or a value it cannot carry.

    ``path`` names the field, e.g. ``ProduceRequest.topic_data[0].partition_data[1].records``;
    decoders fill it in from the inside out as the error unwinds through them.
    """

    def __init__(self, reason: str, path: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path

    def within(self, part: str) -> KafkaCodecError:
        """Prefix the path with an enclosing field (``name``) or element (``[3]``)."""
        if not self.path:
            self.path = part
        elif self.path.startswith("["):
            self.path = part + self.path
        else:
            self.path = f"{part}.{self.path}"
        return self

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


class UnsupportedCompressionError(KafkaCodecError):
    """A record batch compressed with a codec this codec does not implement (only none is)."""

    def __init__(self, codec: str, path: str = "") -> None:
        super().__init__(
            f"record batch compressed with {codec}; only uncompressed batches are supported", path
        )
        self.codec = codec


class UnsupportedRequestVersionError(KafkaCodecError):
    """A request header naming an API key or version the codec does not implement.

    The header was read, so a broker can still answer: ``api_key``, ``api_version`` and
    ``correlation_id`` are those of the request.
    """

    def __init__(
        self, api_key: int, api_version: int, correlation_id: int, client_id: str | None
    ) -> None:
        super().__init__(
            f"API key {api_key} version {api_version} is not supported", "RequestHeader"
        )
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


class BrokerError(Exception):
    """An error code returned by a broker, with the broker's (or the client's) explanation."""

    code: ErrorCode
    registry: ClassVar[dict[ErrorCode, type[BrokerError]]] = {}
    default_code: ClassVar[ErrorCode | None] = None

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        self.code = code
        self.message = message or code.name
        super().__init__(f"{code.name} ({int(code)}): {self.message}")

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.default_code is not None:
            BrokerError.registry[cls.default_code] = cls

    @property
    def retriable(self) -> bool:
        """Whether retrying the same request may succeed."""
        return self.code.retriable

    @staticmethod
    def for_code(code: ErrorCode | int, message: str | None = None) -> BrokerError:
        """The most specific exception for a code (a subclass where one exists)."""
        error_code = code if isinstance(code, ErrorCode) else ErrorCode.from_wire(code)
        cls = BrokerError.registry.get(error_code, BrokerError)
        return cls(error_code, message)


class TopicAlreadyExistsError(BrokerError):
    """CreateTopics named a topic that exists."""

    default_code = ErrorCode.TOPIC_ALREADY_EXISTS


class UnknownTopicOrPartitionError(BrokerError):
    """The topic or partition does not exist (create it first)."""

    default_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidTopicError(BrokerError):
    """A topic name outside [a-zA-Z0-9._-]{1,249}, or '.' or '..'."""

    default_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class InvalidReplicationFactorError(BrokerError):
    """A replication factor the cluster cannot place."""

    default_code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidPartitionsError(BrokerError):
    """A partition count below 1."""

    default_code = ErrorCode.INVALID_PARTITIONS


class InvalidConfigError(BrokerError):
    """An unknown topic configuration key or a bad value."""

    default_code = ErrorCode.INVALID_CONFIG


class NotLeaderForPartitionError(BrokerError):
    """The broker asked does not lead the partition; refresh metadata and retry."""

    default_code = ErrorCode.NOT_LEADER_FOR_PARTITION


class OffsetOutOfRangeError(BrokerError):
    """A fetch offset outside [log start offset, log end offset]."""

    default_code = ErrorCode.OFFSET_OUT_OF_RANGE


class UnsupportedVersionError(BrokerError):
    """The broker does not know this API key or version."""

    default_code = ErrorCode.UNSUPPORTED_VERSION


class InvalidRequestError(BrokerError):
    """The broker could not decode the request body."""

    default_code = ErrorCode.INVALID_REQUEST
