"""Frames, headers, and whole requests and responses, against golden bytes and kafka-python."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.errors import ErrorCode, KafkaCodecError, UnsupportedRequestVersionError
from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    unsupported_version_answer,
)
from system_under_test.kafka.apis import APIS, supported_versions
from system_under_test.kafka.framing import (
    MAX_FRAME_BYTES,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    frame_size,
    split_frame,
)
from system_under_test.kafka.metadata import MetadataRequest, MetadataRequestTopic
from system_under_test.kafka.primitives import Writer
from system_under_test.kafka.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from system_under_test.kafka.schema import Body
from tests.unit.kafka.kafka_python import CLASSES, theirs
from tests.unit.kafka.strategies import structs

EXAMPLES = settings(max_examples=10, deadline=None, database=None)
REQUESTS = [
    pytest.param(api.request, version, id=f"{api.request.__name__}-v{version}")
    for api in APIS.values()
    for version in range(api.min_version, api.max_version + 1)
]
RESPONSES = [
    pytest.param(api.response, version, id=f"{api.response.__name__}-v{version}")
    for api in APIS.values()
    for version in range(api.min_version, api.max_version + 1)
]


def test_golden_api_versions_v0_request() -> None:
    """size 14 | api_key 18 | version 0 | correlation id 1 | client id "test" | empty body."""
    golden = bytes.fromhex("0000000e0012000000000001000474657374")
    assert encode_request(ApiVersionsRequest(), 0, 1, "test") == golden
    request = decode_request(golden[4:])
    assert request.header == RequestHeader(18, 0, 1, "test")
    assert request.body == ApiVersionsRequest()


def test_golden_metadata_requests() -> None:
    """Version 0 names its topics; version 1 asks for all of them with a null array."""
    v0 = encode_request(MetadataRequest(topics=[MetadataRequestTopic(name="t")]), 0, 7, None)
    assert v0 == bytes.fromhex("000000110003000000000007ffff00000001000174")
    v1 = encode_request(MetadataRequest(topics=None), 1, 7, None)
    assert v1 == bytes.fromhex("0000000e0003000100000007ffffffffffff")
    with pytest.raises(KafkaCodecError, match=r"MetadataRequest\.topics: null where an array"):
        encode_request(MetadataRequest(topics=None), 0, 7, None)


def test_golden_produce_v3_request() -> None:
    """transactional id null, acks -1, timeout 1000, topic "t", partition 0, records "r"."""
    request = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=b"r")])
        ],
    )
    body = "ffffffff000003e80000000100017400000001000000000000000172"
    header = "000000030000002a000163"
    frame = encode_request(request, 3, 42, "c")
    assert frame.hex() == f"{len(bytes.fromhex(header + body)):08x}" + header + body


def test_golden_unsupported_api_versions_answer() -> None:
    """Kafka's answer to an ApiVersions request of a version it does not know: a version 0
    body with UNSUPPORTED_VERSION (35) and the supported ranges, whatever version was asked."""
    answer = unsupported_version_answer([ApiVersion(api_key=18, min_version=0, max_version=2)])
    frame = encode_response(answer, 0, 5)
    assert frame == bytes.fromhex("0000001000000005002300000001001200000002")
    # a client that asked for version 2 reads it as version 0, as Kafka's clients do
    correlation_id, body = decode_response(frame[4:], ApiKey.API_VERSIONS, 2)
    assert (correlation_id, body) == (5, answer)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION  # type: ignore[attr-defined]


def test_a_newer_api_versions_request_is_refused_with_its_header() -> None:
    """A v3 request has a flexible header (tagged fields after the client id) and a compact
    body; the header's first fields still read, and nothing after the client id is read."""
    frame = bytes.fromhex("001200030000000b00016300056b61666b00")
    with pytest.raises(UnsupportedRequestVersionError) as raised:
        decode_request(frame)
    error = raised.value
    assert (error.api_key, error.api_version, error.correlation_id, error.client_id) == (
        18,
        3,
        11,
        "c",
    )
    assert isinstance(error, KafkaCodecError)


@pytest.mark.parametrize(("key", "version"), [(0, 2), (0, 8), (1, 3), (1, 12), (19, 4), (9999, 0)])
def test_versions_outside_the_table_are_unsupported(key: int, version: int) -> None:
    header = RequestHeader(key, version, 1, None)
    writer = Writer()
    header.write(writer)
    with pytest.raises(UnsupportedRequestVersionError, match=f"API key {key} version {version}"):
        decode_request(writer.buf)


def test_supported_versions_lists_every_api() -> None:
    assert [(v.api_key, v.min_version, v.max_version) for v in supported_versions()] == [
        (0, 3, 7),
        (1, 4, 11),
        (2, 1, 5),
        (3, 0, 8),
        (8, 2, 7),
        (9, 1, 5),
        (10, 0, 2),
        (11, 2, 5),
        (12, 0, 3),
        (13, 0, 2),
        (14, 0, 3),
        (18, 0, 2),
        (19, 2, 3),
        (22, 0, 1),
    ]


def test_frame_limits() -> None:
    assert frame_size(b"\x00\x00\x00\x05") == 5
    with pytest.raises(KafkaCodecError, match="negative frame size"):
        frame_size(b"\xff\xff\xff\xff")
    with pytest.raises(KafkaCodecError, match="over the"):
        frame_size((MAX_FRAME_BYTES + 1).to_bytes(4, "big"))
    with pytest.raises(KafkaCodecError, match="over the"):
        split_frame(b"\x00\x00\x01\x00", max_bytes=255)
    assert split_frame(b"\x00\x00\x00") is None
    assert split_frame(b"\x00\x00\x00\x02\x01") is None
    found = split_frame(b"\x00\x00\x00\x02\x01\x02\x03")
    assert found is not None
    assert (bytes(found[0]), found[1]) == (b"\x01\x02", 6)


def test_header_errors_name_the_field() -> None:
    with pytest.raises(KafkaCodecError, match=r"RequestHeader\.client_id: .*needs 5 bytes"):
        decode_request(bytes.fromhex("001200000000000100057465"))
    with pytest.raises(KafkaCodecError, match=r"RequestHeader\.correlation_id"):
        decode_request(bytes.fromhex("001200000000"))
    with pytest.raises(KafkaCodecError, match=r"^ApiVersionsRequest: 1 bytes left over"):
        decode_request(bytes.fromhex("0012000000000001ffff00"))


@pytest.mark.parametrize(("cls", "version"), REQUESTS)
def test_requests_match_kafka_python_framed(cls: type[Body], version: int) -> None:
    their_cls = CLASSES[cls.__name__]

    @EXAMPLES
    @given(structs(cls, version), st.integers(-(2**31), 2**31 - 1), st.none() | st.text(max_size=8))
    def check(body: Body, correlation_id: int, client_id: str | None) -> None:
        frame = encode_request(body, version, correlation_id, client_id)
        their = theirs(body, their_cls, version)
        their.API_VERSION = version
        their.with_header(correlation_id=correlation_id, client_id=client_id)
        assert bytes(their.encode(header=True, framed=True)) == frame
        payload, used = split_frame(frame) or (b"", 0)
        assert used == len(frame)
        request = decode_request(payload)
        assert request.header == RequestHeader(cls.API_KEY, version, correlation_id, client_id)
        assert request.body == body

    check()


@pytest.mark.parametrize(("cls", "version"), RESPONSES)
def test_responses_round_trip_framed(cls: type[Body], version: int) -> None:
    @EXAMPLES
    @given(structs(cls, version), st.integers(-(2**31), 2**31 - 1))
    def check(body: Body, correlation_id: int) -> None:
        frame = encode_response(body, version, correlation_id)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        assert decode_response(frame[4:], cls.API_KEY, version) == (correlation_id, body)

    check()
