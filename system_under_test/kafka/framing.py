"""Frames and headers: how requests and responses travel on a connection.

Every message is a frame: an int32 size, then that many bytes. A request frame holds a
request header (version 1: api_key int16, api_version int16, correlation_id int32, client_id
nullable string) and then the body at that version; a response frame holds a response header
(version 0: correlation_id) and then the body. Only non-flexible versions are implemented,
so the headers never carry tagged fields.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from system_under_test.errors import KafkaCodecError, UnsupportedRequestVersionError
from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.apis import APIS
from system_under_test.kafka.primitives import Buffer, Reader, Writer
from system_under_test.kafka.schema import Body, decode_body, encode_body

_SIZE = struct.Struct(">i")
FRAME_PREFIX = _SIZE.size
MAX_FRAME_BYTES = 100 * 1024 * 1024
"""Kafka's default ``socket.request.max.bytes``: a larger size prefix is refused unread."""


def frame_size(prefix: Buffer, max_bytes: int = MAX_FRAME_BYTES) -> int:
    """The payload size a 4-byte frame prefix announces, refused if negative or over the cap."""
    if len(prefix) != FRAME_PREFIX:
        raise KafkaCodecError(f"a frame prefix is 4 bytes, not {len(prefix)}", "frame")
    size = int(_SIZE.unpack(prefix)[0])
    if size < 0:
        raise KafkaCodecError(f"negative frame size {size}", "frame")
    if size > max_bytes:
        raise KafkaCodecError(f"frame of {size} bytes is over the {max_bytes}-byte limit", "frame")
    return size


def split_frame(buf: Buffer, max_bytes: int = MAX_FRAME_BYTES) -> tuple[memoryview, int] | None:
    """The first complete frame's payload in ``buf`` and the bytes it took, or None if incomplete."""
    view = memoryview(buf)
    if len(view) < FRAME_PREFIX:
        return None
    size = frame_size(view[:FRAME_PREFIX], max_bytes)
    end = FRAME_PREFIX + size
    if len(view) < end:
        return None
    return view[FRAME_PREFIX:end], end


def _framed(writer: Writer) -> bytes:
    _SIZE.pack_into(writer.buf, 0, len(writer.buf) - FRAME_PREFIX)
    return bytes(writer.buf)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """Request header version 1."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    def write(self, writer: Writer) -> None:
        try:
            writer.int16(self.api_key)
            writer.int16(self.api_version)
            writer.int32(self.correlation_id)
            writer.string(self.client_id, nullable=True)
        except KafkaCodecError as err:
            raise err.within("RequestHeader") from None

    @staticmethod
    def read(reader: Reader) -> RequestHeader:
        name = "api_key"
        try:
            api_key = reader.int16()
            name = "api_version"
            api_version = reader.int16()
            name = "correlation_id"
            correlation_id = reader.int32()
            name = "client_id"
            client_id = reader.string(nullable=True)
        except KafkaCodecError as err:
            raise err.within(name).within("RequestHeader") from None
        return RequestHeader(api_key, api_version, correlation_id, client_id)


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: its header and its body."""

    header: RequestHeader
    body: Body


def encode_request(body: Body, version: int, correlation_id: int, client_id: str | None) -> bytes:
    """A whole request frame: size, header v1, body."""
    writer = Writer(bytearray(FRAME_PREFIX))
    RequestHeader(body.API_KEY, version, correlation_id, client_id).write(writer)
    encode_body(body, version, writer)
    return _framed(writer)


def decode_request(payload: Buffer) -> Request:
    """A request from a frame's payload (without the size prefix).

    Raises UnsupportedRequestVersionError, carrying the header, for an API key or version the
    codec does not implement (the body is not read: a newer version may be flexible), and
    KafkaCodecError for anything malformed.
    """
    reader = Reader(payload)
    header = RequestHeader.read(reader)
    api = APIS.get(header.api_key)
    if api is None or not api.supports(header.api_version):
        raise UnsupportedRequestVersionError(
            header.api_key, header.api_version, header.correlation_id, header.client_id
        )
    body = decode_body(api.request, reader.take(reader.remaining, "body"), header.api_version)
    return Request(header, body)


def encode_response(body: Body, version: int, correlation_id: int) -> bytes:
    """A whole response frame: size, header v0 (the correlation id), body."""
    writer = Writer(bytearray(FRAME_PREFIX))
    try:
        writer.int32(correlation_id)
    except KafkaCodecError as err:
        raise err.within("ResponseHeader.correlation_id") from None
    encode_body(body, version, writer)
    return _framed(writer)


def decode_response(payload: Buffer, api_key: int, version: int) -> tuple[int, Body]:
    """The correlation id and body of a response to a request of ``api_key`` at ``version``.

    An ApiVersions response that does not decode at the version asked is read as version 0,
    as Kafka's clients do: a broker answers a version it does not know with a version 0 body.
    """
    api = APIS.get(api_key)
    if api is None:
        raise KafkaCodecError(f"API key {api_key} is not supported", "ResponseHeader")
    reader = Reader(payload)
    try:
        correlation_id = reader.int32()
    except KafkaCodecError as err:
        raise err.within("ResponseHeader.correlation_id") from None
    data = reader.take(reader.remaining, "body")
    try:
        return correlation_id, decode_body(api.response, data, version)
    except KafkaCodecError:
        if api_key != ApiKey.API_VERSIONS or version == 0:
            raise
        return correlation_id, decode_body(api.response, data, 0)
