"""The brokers' own APIs: round trips of every message, and total decoders."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from system_under_test import protocol as p
from system_under_test.errors import (
    BrokerError,
    ErrorCode,
    ProtocolError,
    TopicAlreadyExistsError,
)
from system_under_test.log.record import decode_records, encode_records

REQUEST_TYPES = [codec.request for versions in p.API_TABLE.values() for codec in versions.values()]
RESPONSE_TYPES = [
    codec.response for versions in p.API_TABLE.values() for codec in versions.values()
] + [p.ErrorResponse]

_PRIMITIVES: dict[int, st.SearchStrategy[Any]] = {
    id(p.INT8): st.integers(-(2**7), 2**7 - 1),
    id(p.INT16): st.integers(-(2**15), 2**15 - 1),
    id(p.INT32): st.integers(-(2**31), 2**31 - 1),
    id(p.INT64): st.integers(-(2**63), 2**63 - 1),
    id(p.STRING): st.text(max_size=20),
    id(p.NULLABLE_STRING): st.none() | st.text(max_size=20),
    id(p.RECORDS): st.binary(max_size=64),
}


def _strategy(field_type: Any) -> st.SearchStrategy[Any]:
    """A Hypothesis strategy for any wire type, derived from the message schema."""
    if id(field_type) in _PRIMITIVES:
        return _PRIMITIVES[id(field_type)]
    if isinstance(field_type, p._Array):
        items = st.lists(_strategy(field_type.element), max_size=3)
        return st.none() | items if field_type.nullable else items
    assert isinstance(field_type, p._Struct)
    return st.builds(field_type.cls, *[_strategy(t) for _, t in field_type.fields])


def message_strategy(cls: type[p.Message]) -> st.SearchStrategy[Any]:
    return _strategy(cls._wire)  # type: ignore[attr-defined]


def _normalise(message: Any) -> Any:
    """Records come back as memoryviews; compare them as bytes."""
    if isinstance(message, memoryview | bytearray):
        return bytes(message)
    if isinstance(message, list):
        return [_normalise(m) for m in message]
    if hasattr(message, "_wire"):
        return tuple(_normalise(getattr(message, name)) for name, _ in message._wire.fields)
    return message


# --- round trips ---------------------------------------------------------------------------


def test_fetch_response_round_trip_carries_record_bytes_unchanged() -> None:
    batch = encode_records([(b"k", b"v" * 100, 1_700_000_000_000), (None, None, 5)])
    part = p.FetchPartitionResponse(3, 0, 2, 0, batch, [p.EpochStart(1, 0)])
    response = p.FetchResponse([p.FetchTopicResponse("orders", [part])])
    frame = p.encode_response(42, response)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    correlation_id, decoded = p.decode_response(frame[4:], p.FetchResponse)
    assert correlation_id == 42
    assert isinstance(decoded, p.FetchResponse)
    records = decoded.topics[0].partitions[0].records
    assert bytes(records) == batch
    assert [r.value for r in decode_records(records)] == [b"v" * 100, None]


def test_request_header_with_null_client_id() -> None:
    request = p.ListOffsetsRequest(1, [])
    frame = p.encode_request(request, correlation_id=-5, client_id=None)
    header, body = p.decode_request(frame[4:])
    assert header == p.RequestHeader(p.ApiKey.LIST_OFFSETS, 0, -5, None)
    assert body == request


@pytest.mark.parametrize("cls", REQUEST_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_request_round_trips(cls: type[p.Request], data: st.DataObject) -> None:
    request = data.draw(message_strategy(cls))
    frame = p.encode_request(request, correlation_id=9, client_id="c")
    header, decoded = p.decode_request(frame[4:])
    assert header.api_key == cls.API_KEY
    assert _normalise(decoded) == _normalise(request)


@pytest.mark.parametrize("cls", RESPONSE_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_every_response_round_trips(
    cls: type[p.Response], data: st.DataObject, correlation_id: int
) -> None:
    response = data.draw(message_strategy(cls))
    frame = p.encode_response(correlation_id, response)
    got_id, decoded = p.decode_response(frame[4:], cls)
    assert got_id == correlation_id
    assert type(decoded) is cls
    assert _normalise(decoded) == _normalise(response)


def test_error_response_is_recognised_where_another_response_was_expected() -> None:
    frame = p.encode_response(8, p.ErrorResponse(ErrorCode.UNSUPPORTED_VERSION, "no such api"))
    correlation_id, body = p.decode_response(frame[4:], p.FetchResponse)
    assert correlation_id == 8
    assert body == p.ErrorResponse(35, "no such api")


def test_the_brokers_own_apis_are_told_apart_from_kafkas_by_key_and_version() -> None:
    own = {(key, v) for key, versions in p.API_TABLE.items() for v in versions}
    assert own == {(1, 0), (2, 0), (4, 0), (6, 0), (7, 0), (23, 0)}
    assert all(p.serves(key, version) for key, version in own)
    # Kafka's Fetch starts at version 4 and ListOffsets at 1 in the codec clients use.
    assert not p.serves(p.ApiKey.FETCH, 4) and not p.serves(p.ApiKey.LIST_OFFSETS, 1)
    assert not p.serves(p.ApiKey.PRODUCE, 0) and not p.serves(p.ApiKey.API_VERSIONS, 0)


# --- malformed input -----------------------------------------------------------------------


def _header(api_key: int, version: int = 0, client_id: bytes = b"\x00\x01c") -> bytes:
    return struct.pack(">hhi", api_key, version, 77) + client_id


def test_unknown_api_key_and_version_are_unsupported() -> None:
    with pytest.raises(p.UnsupportedApiError, match="unknown api key 99"):
        p.decode_request(_header(99))
    with pytest.raises(p.UnsupportedApiError, match=r"FETCH .* version 7"):
        p.decode_request(_header(1, 7))
    with pytest.raises(p.UnsupportedApiError, match="unknown api key 0"):
        p.decode_request(_header(p.ApiKey.PRODUCE))
    with pytest.raises(p.UnsupportedApiError, match="unknown api key 5"):
        p.decode_request(_header(p.ApiKey.STOP_REPLICA))


def test_header_decodes_even_when_body_does_not() -> None:
    payload = _header(p.ApiKey.FETCH) + b"\x00\x01"
    header, body_start = p.decode_request_header(payload)
    assert (header.api_key, header.correlation_id, body_start) == (1, 77, 11)
    with pytest.raises(ProtocolError, match="truncated"):
        p.decode_request_body(header, payload, body_start)


def test_trailing_bytes_are_rejected() -> None:
    request = p.ListOffsetsRequest(-1, [p.ListOffsetsTopic("t", [])])
    frame = p.encode_request(request, correlation_id=1, client_id=None)
    with pytest.raises(ProtocolError, match="1 unexpected bytes"):
        p.decode_request(bytes(frame[4:]) + b"\x00")


def test_huge_array_count_is_rejected_without_allocating() -> None:
    body = struct.pack(">i", 2**31 - 1) + b"\x00" * 16
    with pytest.raises(ProtocolError, match="cannot fit"):
        p.decode_request(_header(p.ApiKey.LIST_OFFSETS) + struct.pack(">i", -1) + body)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (struct.pack(">ih", 1, -7) + bytes(8), "string length -7"),
        (struct.pack(">ih", 1, 2) + b"\xff\xfe" + bytes(8), "not UTF-8"),
        (struct.pack(">ih", 1, -1) + bytes(8), "null string"),
        (struct.pack(">i", -3), "array count -3"),
    ],
)
def test_bad_primitives_raise_protocol_error(body: bytes, message: str) -> None:
    # ListOffsets v0: replica_id, then its topics (a name, then partitions).
    with pytest.raises(ProtocolError, match=message):
        p.decode_request(_header(p.ApiKey.LIST_OFFSETS) + struct.pack(">i", -1) + body)


def test_negative_records_length_is_rejected() -> None:
    head = struct.pack(">i", 1) + b"\x00\x01t" + struct.pack(">iihqq", 1, 0, 0, 5, 0)
    with pytest.raises(ProtocolError, match="bytes length -9"):
        payload = struct.pack(">i", 1) + head + struct.pack(">i", -9) + bytes(8)
        p.decode_response(payload, p.FetchResponse)


def test_every_truncation_of_a_valid_request_is_a_protocol_error() -> None:
    request = p.FetchRequest(2, 500, 1, 1 << 20, [p.FetchTopic("t", [p.FetchPartition(0, 7, 100)])])
    payload = bytes(p.encode_request(request, correlation_id=1, client_id="x")[4:])
    for cut in range(len(payload)):
        with pytest.raises(ProtocolError):
            p.decode_request(payload[:cut])


def test_frame_size_limits() -> None:
    p.check_frame_size(100, 100)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        p.check_frame_size(101, 100)
    with pytest.raises(ProtocolError, match="negative"):
        p.check_frame_size(-1, 100)


@settings(max_examples=400)
@given(st.binary(max_size=200))
def test_random_bytes_into_request_decoder_only_raise_protocol_error(payload: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        p.decode_request(payload)


@settings(max_examples=300)
@given(api_key=st.sampled_from(sorted(p.API_TABLE)), body=st.binary(max_size=200))
def test_random_bodies_behind_a_valid_header_only_raise_protocol_error(
    api_key: int, body: bytes
) -> None:
    with contextlib.suppress(ProtocolError):
        p.decode_request(_header(api_key) + body)


@settings(max_examples=300)
@given(cls=st.sampled_from(RESPONSE_TYPES), payload=st.binary(max_size=200))
def test_random_bytes_into_response_decoder_only_raise_protocol_error(
    cls: type[p.Response], payload: bytes
) -> None:
    with contextlib.suppress(ProtocolError):
        p.decode_response(payload, cls)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_valid_requests_decode_or_raise_protocol_error(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(REQUEST_TYPES))
    request = data.draw(message_strategy(cls))
    payload = bytearray(p.encode_request(request, correlation_id=1, client_id="c")[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(payload) - 1))
        payload[position] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        p.decode_request(payload)


# --- error codes ---------------------------------------------------------------------------


def test_error_codes_have_kafkas_numbers() -> None:
    numbers = {code.name: int(code) for code in ErrorCode}
    assert numbers["NOT_LEADER_FOR_PARTITION"] == 6
    assert numbers["NOT_ENOUGH_REPLICAS_AFTER_APPEND"] == 20
    assert numbers["UNSUPPORTED_VERSION"] == 35
    assert numbers["FENCED_LEADER_EPOCH"] == 74
    assert numbers["UNKNOWN_SERVER_ERROR"] == -1


def test_definite_and_retriable_classification() -> None:
    assert ErrorCode.NOT_ENOUGH_REPLICAS.definite
    assert ErrorCode.NOT_ENOUGH_REPLICAS.retriable
    assert not ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND.definite
    assert not ErrorCode.REQUEST_TIMED_OUT.definite
    assert not ErrorCode.NETWORK_EXCEPTION.definite
    assert not ErrorCode.NOT_LEADER_FOR_PARTITION.definite
    assert ErrorCode.MESSAGE_TOO_LARGE.definite
    assert not ErrorCode.MESSAGE_TOO_LARGE.retriable
    assert not ErrorCode.UNKNOWN_SERVER_ERROR.definite


def test_unknown_wire_codes_become_unknown_server_error() -> None:
    assert ErrorCode.from_wire(999) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.from_wire(36) is ErrorCode.TOPIC_ALREADY_EXISTS


def test_broker_error_for_code_picks_the_specific_class() -> None:
    err = BrokerError.for_code(36, "topic t exists")
    assert isinstance(err, TopicAlreadyExistsError)
    assert err.code is ErrorCode.TOPIC_ALREADY_EXISTS
    assert str(err) == "TOPIC_ALREADY_EXISTS (36): topic t exists"
    plain = BrokerError.for_code(ErrorCode.CORRUPT_MESSAGE)
    assert type(plain) is BrokerError
    assert plain.retriable
