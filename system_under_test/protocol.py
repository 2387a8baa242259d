"""The APIs only brokers use among themselves: framing, primitive types, and their requests
and responses.

They travel on the broker's one listener beside Kafka's own APIs (``system_under_test/kafka``),
with Kafka's framing and request header, at versions of their own (PROTOCOL.md). A message is a frozen dataclass whose fields are annotated with their wire types
(``Int32``, ``String``, ``list[SomeStruct]``...); ``@wire`` derives its codec from the
annotations, so adding an API is writing two dataclasses and one line in ``API_TABLE``.
Decoding is total: any malformed, truncated or oversized input raises ProtocolError.
PROTOCOL.md is the reference for every field and rule.
"""

from __future__ import annotations

import struct
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass
from enum import IntEnum
from typing import Annotated, Any, ClassVar, TypeVar

from system_under_test.errors import ProtocolError as ProtocolError

FRAME_SIZE = struct.Struct(">i")
"""Every frame starts with its payload size as an int32."""

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

Buffer = bytes | bytearray | memoryview


class ApiKey(IntEnum):
    """API keys, numbered as in Kafka."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    OFFSET_FOR_LEADER_EPOCH = 23


class UnsupportedApiError(ProtocolError):
    """A request header naming an API key or version this broker does not implement."""


class Reader:
    """A bounds-checked cursor over a buffer."""

    __slots__ = ("_buf", "_end", "pos")

    def __init__(self, buf: Buffer, start: int = 0) -> None:
        self._buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self._end = len(self._buf)
        self.pos = start

    @property
    def remaining(self) -> int:
        return self._end - self.pos

    def _take(self, size: int, what: str) -> int:
        start = self.pos
        if size > self._end - start:
            raise ProtocolError(
                f"truncated: {what} needs {size} bytes at byte {start}, {self._end - start} left"
            )
        self.pos = start + size
        return start

    def _unpack(self, codec: struct.Struct, what: str) -> int:
        return int(codec.unpack_from(self._buf, self._take(codec.size, what))[0])

    def int8(self) -> int:
        return self._unpack(_I8, "int8")

    def int16(self) -> int:
        return self._unpack(_I16, "int16")

    def int32(self) -> int:
        return self._unpack(_I32, "int32")

    def int64(self) -> int:
        return self._unpack(_I64, "int64")

    def nullable_string(self) -> str | None:
        length = self.int16()
        if length == -1:
            return None
        if length < 0:
            raise ProtocolError(f"string length {length} at byte {self.pos - 2}")
        start = self._take(length, "string")
        try:
            return str(self._buf[start : start + length], "utf-8")
        except UnicodeDecodeError as err:
            raise ProtocolError(f"string at byte {start} is not UTF-8: {err.reason}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise ProtocolError(f"null string at byte {self.pos - 2} where a string is required")
        return value

    def bytes_view(self) -> memoryview:
        """An int32-sized byte field as a zero-copy view; null (-1) reads as empty."""
        length = self.int32()
        if length == -1:
            return memoryview(b"")
        if length < 0:
            raise ProtocolError(f"bytes length {length} at byte {self.pos - 4}")
        start = self._take(length, "bytes")
        return self._buf[start : start + length]

    def array_length(self, element_min_size: int, *, nullable: bool) -> int:
        """An array count, checked against the bytes left so no count can allocate wildly."""
        count = self.int32()
        if count == -1 and nullable:
            return -1
        if count < 0:
            raise ProtocolError(f"array count {count} at byte {self.pos - 4}")
        if count * element_min_size > self._end - self.pos:
            raise ProtocolError(
                f"array count {count} at byte {self.pos - 4} cannot fit in the "
                f"{self._end - self.pos} bytes left"
            )
        return count

    def expect_end(self, what: str) -> None:
        if self.pos != self._end:
            raise ProtocolError(f"{self._end - self.pos} unexpected bytes after the {what}")


class Writer:
    """Builds a frame in one bytearray; the size prefix is filled in by ``frame()``."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray(4)

    def int8(self, value: int) -> None:
        self.buf += _I8.pack(value)

    def int16(self, value: int) -> None:
        self.buf += _I16.pack(value)

    def int32(self, value: int) -> None:
        self.buf += _I32.pack(value)

    def int64(self, value: int) -> None:
        self.buf += _I64.pack(value)

    def nullable_string(self, value: str | None) -> None:
        if value is None:
            self.buf += _I16.pack(-1)
            return
        data = value.encode()
        if len(data) > 0x7FFF:
            raise ProtocolError(f"string of {len(data)} bytes is longer than 32767")
        self.buf += _I16.pack(len(data))
        self.buf += data

    def bytes_field(self, value: Buffer | None) -> None:
        if value is None:
            self.buf += _I32.pack(-1)
            return
        self.buf += _I32.pack(len(value))
        self.buf += value

    def frame(self) -> bytearray:
        """The finished frame: int32 payload size, then the payload."""
        FRAME_SIZE.pack_into(self.buf, 0, len(self.buf) - 4)
        return self.buf


# --- field types -------------------------------------------------------------------------


class FieldType:
    """How one field is read and written, and the fewest bytes it can take."""

    min_size = 1

    def read(self, reader: Reader) -> Any:
        raise NotImplementedError

    def write(self, writer: Writer, value: Any) -> None:
        raise NotImplementedError


class _Primitive(FieldType):
    __slots__ = ("_read", "_write", "min_size")

    def __init__(
        self,
        min_size: int,
        read: Callable[[Reader], Any],
        write: Callable[[Writer, Any], None],
    ) -> None:
        self.min_size = min_size
        self._read = read
        self._write = write

    def read(self, reader: Reader) -> Any:
        return self._read(reader)

    def write(self, writer: Writer, value: Any) -> None:
        self._write(writer, value)


INT8 = _Primitive(1, Reader.int8, Writer.int8)
INT16 = _Primitive(2, Reader.int16, Writer.int16)
INT32 = _Primitive(4, Reader.int32, Writer.int32)
INT64 = _Primitive(8, Reader.int64, Writer.int64)
STRING = _Primitive(2, Reader.string, Writer.nullable_string)
NULLABLE_STRING = _Primitive(2, Reader.nullable_string, Writer.nullable_string)
RECORDS = _Primitive(4, Reader.bytes_view, Writer.bytes_field)

Int8 = Annotated[int, INT8]
Int16 = Annotated[int, INT16]
Int32 = Annotated[int, INT32]
Int64 = Annotated[int, INT64]
String = Annotated[str, STRING]
NullableString = Annotated[str | None, NULLABLE_STRING]
RecordBytes = Annotated[Buffer, RECORDS]
"""A record batch in record.py's format, carried as is (int32 length, then the bytes)."""


class _Array(FieldType):
    min_size = 4

    def __init__(self, element: FieldType, *, nullable: bool) -> None:
        self.element = element
        self.nullable = nullable

    def read(self, reader: Reader) -> list[Any] | None:
        count = reader.array_length(self.element.min_size, nullable=self.nullable)
        if count == -1:
            return None
        read = self.element.read
        return [read(reader) for _ in range(count)]

    def write(self, writer: Writer, value: list[Any] | None) -> None:
        if value is None:
            if not self.nullable:
                raise ProtocolError("null array where an array is required")
            writer.int32(-1)
            return
        writer.int32(len(value))
        write = self.element.write
        for item in value:
            write(writer, item)


class _Struct(FieldType):
    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.fields: list[tuple[str, FieldType]] = []
        self.min_size = 0

    def resolve(self) -> None:
        hints = typing.get_type_hints(self.cls, include_extras=True)
        self.fields = [(f.name, _field_type(hints[f.name], self.cls)) for f in fields(self.cls)]
        self.min_size = sum(t.min_size for _, t in self.fields)

    def read(self, reader: Reader) -> Any:
        return self.cls(*[t.read(reader) for _, t in self.fields])

    def write(self, writer: Writer, value: Any) -> None:
        for name, field_type in self.fields:
            field_type.write(writer, getattr(value, name))


def _field_type(hint: Any, owner: type[Any]) -> FieldType:
    """Translate a field's annotation into its wire type."""
    if typing.get_origin(hint) is Annotated:
        for meta in hint.__metadata__:
            if isinstance(meta, FieldType):
                return meta
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is list:
        return _Array(_field_type(args[0], owner), nullable=False)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        inner = args[0] if args[1] is type(None) else args[1]
        if typing.get_origin(inner) is list:
            return _Array(_field_type(typing.get_args(inner)[0], owner), nullable=True)
    if isinstance(hint, type) and hasattr(hint, "_wire"):
        return typing.cast(FieldType, hint._wire)
    raise TypeError(f"{owner.__name__}: no wire type for annotation {hint!r}")


_T = TypeVar("_T")


def wire(cls: type[_T]) -> type[_T]:
    """Give a dataclass a codec derived from its field annotations."""
    if not is_dataclass(cls):
        raise TypeError(f"{cls.__name__} must be a dataclass")
    codec = _Struct(cls)
    codec.resolve()
    if codec.min_size == 0 and codec.fields:
        raise TypeError(f"{cls.__name__} has fields that take no bytes")
    cls._wire = codec  # type: ignore[attr-defined]
    return cls


def _codec(cls: type[Any]) -> _Struct:
    return typing.cast(_Struct, cls._wire)


# --- headers -------------------------------------------------------------------------------


@wire
@dataclass(frozen=True, slots=True)
class RequestHeader:
    """Precedes every request body."""

    api_key: Int16
    api_version: Int16
    correlation_id: Int32
    client_id: NullableString


class Message:
    """Base of request and response bodies."""

    __slots__ = ()


class Request(Message):
    """A request body; API_KEY says which API it belongs to."""

    __slots__ = ()
    API_KEY: ClassVar[ApiKey]


class Response(Message):
    """A response body."""

    __slots__ = ()


@wire
@dataclass(frozen=True, slots=True)
class ErrorResponse(Response):
    """What the broker answers to a request it cannot decode or does not implement."""

    error_code: Int16
    error_message: NullableString


# --- Fetch (1) -----------------------------------------------------------------------------


@wire
@dataclass(frozen=True, slots=True)
class FetchPartition:
    partition: Int32
    fetch_offset: Int64
    partition_max_bytes: Int32
    current_leader_epoch: Int32 = -1
    """The leader epoch the fetcher believes current (KIP-320); -1: not checked."""


@wire
@dataclass(frozen=True, slots=True)
class FetchTopic:
    name: String
    partitions: list[FetchPartition]


@wire
@dataclass(frozen=True, slots=True)
class FetchRequest(Request):
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    replica_id: Int32
    max_wait_ms: Int32
    min_bytes: Int32
    max_bytes: Int32
    topics: list[FetchTopic]


@wire
@dataclass(frozen=True, slots=True)
class EpochStart:
    """A leader epoch and the first offset written in it."""

    leader_epoch: Int32
    start_offset: Int64


@wire
@dataclass(frozen=True, slots=True)
class FetchPartitionResponse:
    partition: Int32
    error_code: Int16
    high_watermark: Int64
    log_start_offset: Int64
    records: RecordBytes
    epoch_starts: list[EpochStart] = field(default_factory=list)
    """To followers only: the leader epochs that begin at or after the fetch offset (the
    first entry is the epoch of the fetch offset itself), so a follower's leader epoch cache
    follows the leader's. Empty for consumers."""


@wire
@dataclass(frozen=True, slots=True)
class FetchTopicResponse:
    name: String
    partitions: list[FetchPartitionResponse]


@wire
@dataclass(frozen=True, slots=True)
class FetchResponse(Response):
    topics: list[FetchTopicResponse]


# --- ListOffsets (2) -----------------------------------------------------------------------

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
CONSUMER_REPLICA_ID = -1
DEBUG_REPLICA_ID = -2
"""A replica id that may read up to the log end offset (tools only)."""


@wire
@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    partition: Int32
    timestamp: Int64


@wire
@dataclass(frozen=True, slots=True)
class ListOffsetsTopic:
    name: String
    partitions: list[ListOffsetsPartition]


@wire
@dataclass(frozen=True, slots=True)
class ListOffsetsRequest(Request):
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_OFFSETS
    replica_id: Int32
    topics: list[ListOffsetsTopic]


@wire
@dataclass(frozen=True, slots=True)
class ListOffsetsPartitionResponse:
    partition: Int32
    error_code: Int16
    timestamp: Int64
    offset: Int64


@wire
@dataclass(frozen=True, slots=True)
class ListOffsetsTopicResponse:
    name: String
    partitions: list[ListOffsetsPartitionResponse]


@wire
@dataclass(frozen=True, slots=True)
class ListOffsetsResponse(Response):
    topics: list[ListOffsetsTopicResponse]


# --- LeaderAndIsr (4) and UpdateMetadata (6): controller to brokers ------------------------


@wire
@dataclass(frozen=True, slots=True)
class PartitionLeaderStateData:
    """One partition's leadership as the controller decided it."""

    topic: String
    partition: Int32
    controller_epoch: Int32
    leader: Int32
    leader_epoch: Int32
    isr: list[Int32]
    zk_version: Int32
    replicas: list[Int32]
    elr: list[Int32]
    """The eligible leader replicas (KIP-966): out of the ISR, holding everything committed."""


@wire
@dataclass(frozen=True, slots=True)
class LiveBroker:
    broker_id: Int32
    host: String
    port: Int32


@wire
@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest(Request):
    API_KEY: ClassVar[ApiKey] = ApiKey.LEADER_AND_ISR
    controller_id: Int32
    controller_epoch: Int32
    partition_states: list[PartitionLeaderStateData]
    live_brokers: list[LiveBroker]
    broker_epoch: Int64
    """The addressee's registration czxid as the controller knows it (KIP-380), -1 unknown."""


@wire
@dataclass(frozen=True, slots=True)
class PartitionError:
    topic: String
    partition: Int32
    error_code: Int16


@wire
@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponse(Response):
    error_code: Int16
    partitions: list[PartitionError]


@wire
@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest(Request):
    API_KEY: ClassVar[ApiKey] = ApiKey.UPDATE_METADATA
    controller_id: Int32
    controller_epoch: Int32
    partition_states: list[PartitionLeaderStateData]
    live_brokers: list[LiveBroker]


@wire
@dataclass(frozen=True, slots=True)
class UpdateMetadataResponse(Response):
    error_code: Int16


# --- OffsetForLeaderEpoch (23): follower to leader (KIP-101) -------------------------------


@wire
@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochPartition:
    partition: Int32
    leader_epoch: Int32


@wire
@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochTopic:
    name: String
    partitions: list[OffsetForLeaderEpochPartition]


@wire
@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochRequest(Request):
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_FOR_LEADER_EPOCH
    replica_id: Int32
    topics: list[OffsetForLeaderEpochTopic]


@wire
@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    partition: Int32
    error_code: Int16
    leader_epoch: Int32
    """The largest epoch <= the one asked for that the leader knows (KIP-279)."""
    end_offset: Int64


@wire
@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochTopicResponse:
    name: String
    partitions: list[EpochEndOffset]


@wire
@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochResponse(Response):
    topics: list[OffsetForLeaderEpochTopicResponse]


@wire
@dataclass(frozen=True, slots=True)
class ControlledShutdownRequest(Request):
    """A broker about to stop asks the controller to move its leaderships and its ISR
    memberships elsewhere first (Kafka's ControlledShutdown, v2: with the broker epoch)."""

    API_KEY: ClassVar[ApiKey] = ApiKey.CONTROLLED_SHUTDOWN
    broker_id: Int32
    broker_epoch: Int64


@wire
@dataclass(frozen=True, slots=True)
class RemainingPartition:
    topic: String
    partition: Int32


@wire
@dataclass(frozen=True, slots=True)
class ControlledShutdownResponse(Response):
    error_code: Int16
    remaining: list[RemainingPartition]
    """Partitions the broker still leads: no other replica of their ISR could take over."""


# --- the API table -------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiCodec:
    """The request and response body classes of one version of one API."""

    request: type[Request]
    response: type[Response]


API_TABLE: dict[int, dict[int, ApiCodec]] = {
    ApiKey.FETCH: {0: ApiCodec(FetchRequest, FetchResponse)},
    ApiKey.LIST_OFFSETS: {0: ApiCodec(ListOffsetsRequest, ListOffsetsResponse)},
    ApiKey.LEADER_AND_ISR: {0: ApiCodec(LeaderAndIsrRequest, LeaderAndIsrResponse)},
    ApiKey.UPDATE_METADATA: {0: ApiCodec(UpdateMetadataRequest, UpdateMetadataResponse)},
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {
        0: ApiCodec(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse)
    },
    ApiKey.CONTROLLED_SHUTDOWN: {
        0: ApiCodec(ControlledShutdownRequest, ControlledShutdownResponse)
    },
}
"""api key -> version -> codec. StopReplica (5) is reserved."""


def serves(api_key: int, api_version: int) -> bool:
    """Whether a request of this API and version is one of the brokers' own."""
    return api_version in API_TABLE.get(api_key, ())


def api_codec(api_key: int, api_version: int) -> ApiCodec:
    """The codec of one API version; UnsupportedApiError if this broker lacks it."""
    versions = API_TABLE.get(api_key)
    if versions is None:
        raise UnsupportedApiError(f"unknown api key {api_key}")
    codec = versions.get(api_version)
    if codec is None:
        name = ApiKey(api_key).name
        raise UnsupportedApiError(
            f"{name} (api key {api_key}) version {api_version} is not supported; "
            f"supported versions: {min(versions)}..{max(versions)}"
        )
    return codec


# --- encoding and decoding -----------------------------------------------------------------

_M = TypeVar("_M", bound=Message)


def encode_request(
    request: Request, *, correlation_id: int, client_id: str | None, api_version: int = 0
) -> bytearray:
    """A whole request frame (size prefix included)."""
    api_codec(request.API_KEY, api_version)
    writer = Writer()
    header = RequestHeader(request.API_KEY, api_version, correlation_id, client_id)
    _codec(RequestHeader).write(writer, header)
    _codec(type(request)).write(writer, request)
    return writer.frame()


def encode_response(correlation_id: int, response: Response) -> bytearray:
    """A whole response frame (size prefix included)."""
    writer = Writer()
    writer.int32(correlation_id)
    _codec(type(response)).write(writer, response)
    return writer.frame()


def decode_request_header(payload: Buffer) -> tuple[RequestHeader, int]:
    """The header of a request payload (frame without its size) and where the body starts."""
    reader = Reader(payload)
    header: RequestHeader = _codec(RequestHeader).read(reader)
    return header, reader.pos


def decode_request_body(header: RequestHeader, payload: Buffer, body_start: int) -> Request:
    """The body of a request whose header decoded; UnsupportedApiError or ProtocolError."""
    codec = api_codec(header.api_key, header.api_version)
    return decode_message(payload, codec.request, start=body_start)


def decode_request(payload: Buffer) -> tuple[RequestHeader, Request]:
    """Header and body of one request payload."""
    header, body_start = decode_request_header(payload)
    return header, decode_request_body(header, payload, body_start)


def decode_message(payload: Buffer, cls: type[_M], *, start: int = 0) -> _M:
    """Decode exactly one message of type cls from payload[start:]."""
    reader = Reader(payload, start)
    message: _M = _codec(cls).read(reader)
    reader.expect_end(f"{cls.__name__} body")
    return message


def decode_response(payload: Buffer, expected: type[_M]) -> tuple[int, _M | ErrorResponse]:
    """Correlation id and body of a response payload.

    A body that is not a valid ``expected`` but is a valid ErrorResponse (the broker's
    answer to an undecodable or unsupported request) is returned as the ErrorResponse.
    """
    reader = Reader(payload)
    correlation_id = reader.int32()
    try:
        return correlation_id, decode_message(payload, expected, start=4)
    except ProtocolError as err:
        try:
            return correlation_id, decode_message(payload, ErrorResponse, start=4)
        except ProtocolError:
            raise err from None


def encode_message(message: Message) -> bytes:
    """A message body alone (no size, no header): for tests and tools."""
    writer = Writer()
    _codec(type(message)).write(writer, message)
    return bytes(writer.buf[4:])


def check_frame_size(size: int, limit: int) -> None:
    """Reject a frame size that is negative or above limit."""
    if size < 0:
        raise ProtocolError(f"negative frame size {size}")
    if size > limit:
        raise ProtocolError(f"frame of {size} bytes exceeds the limit of {limit} bytes")
