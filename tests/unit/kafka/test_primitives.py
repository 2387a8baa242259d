"""Kafka's primitive types: exact encodings, range checks, and strict reads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.errors import KafkaCodecError
from system_under_test.kafka.primitives import Reader, Writer
from tests.unit.kafka.kafka_python import decode_varint, encode_varint

EXAMPLES = settings(max_examples=200, deadline=None, database=None)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-2, "03"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (300, "d804"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
    ],
)
def test_varint_golden(value: int, encoded: str) -> None:
    """Zigzag then base-128, least significant group first (Protocol Buffers' sint32)."""
    writer = Writer()
    writer.varint(value)
    assert writer.buf.hex() == encoded
    reader = Reader(bytes.fromhex(encoded))
    assert reader.varint() == value
    reader.expect_end()


@EXAMPLES
@given(INT64)
def test_varlong_round_trip_and_kafka_python_agree(value: int) -> None:
    writer = Writer()
    writer.varlong(value)
    out = bytearray()
    encode_varint(value, out.append)
    assert bytes(writer.buf) == bytes(out)
    assert Reader(writer.buf).varlong() == value
    assert decode_varint(bytes(writer.buf), 0)[0] == value


@EXAMPLES
@given(INT32)
def test_varint_round_trip(value: int) -> None:
    writer = Writer()
    writer.varint(value)
    assert len(writer.buf) <= 5
    assert Reader(writer.buf).varint() == value


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("ffffffffff01", "longer than 5 bytes"),
        ("8080808010", "does not fit in 32 bits"),
        ("80", "past the end"),
        ("", "past the end"),
    ],
)
def test_bad_varints(data: str, match: str) -> None:
    with pytest.raises(KafkaCodecError, match=match):
        Reader(bytes.fromhex(data)).varint()


def test_values_that_do_not_fit_are_refused_on_write() -> None:
    writer = Writer()
    for write, value in [
        (writer.int8, 128),
        (writer.int16, -(2**15) - 1),
        (writer.int32, 2**31),
        (writer.int64, 2**63),
        (writer.uint32, -1),
        (writer.varint, 2**31),
        (writer.varlong, -(2**63) - 1),
    ]:
        with pytest.raises(KafkaCodecError, match="does not fit"):
            write(value)
    with pytest.raises(KafkaCodecError, match="longer than 32767"):
        writer.string("x" * 32768, nullable=False)
    with pytest.raises(KafkaCodecError, match="UTF-8"):
        writer.string("\ud800", nullable=False)
    with pytest.raises(KafkaCodecError, match="null where a string is required"):
        writer.string(None, nullable=False)
    with pytest.raises(KafkaCodecError, match="null where an array is required"):
        writer.count(None, nullable=False)


def test_integers_are_big_endian() -> None:
    writer = Writer()
    writer.int16(0x0102)
    writer.int32(-2)
    writer.int64(1)
    writer.uint32(0xFFFFFFFF)
    assert writer.buf.hex() == "0102" + "fffffffe" + "0000000000000001" + "ffffffff"
    reader = Reader(writer.buf)
    assert (reader.int16(), reader.int32(), reader.int64(), reader.uint32()) == (
        0x0102,
        -2,
        1,
        0xFFFFFFFF,
    )


def test_strings_and_bytes() -> None:
    writer = Writer()
    writer.string("hé", nullable=False)
    writer.string(None, nullable=True)
    writer.bytes_(b"\x00\x01", nullable=False)
    writer.bytes_(None, nullable=True)
    assert writer.buf.hex() == "000368c3a9" + "ffff" + "000000020001" + "ffffffff"
    reader = Reader(writer.buf)
    assert reader.string(nullable=False) == "hé"
    assert reader.string(nullable=True) is None
    assert reader.bytes_(nullable=False) == b"\x00\x01"
    assert reader.bytes_(nullable=True) is None
    reader.expect_end()


@pytest.mark.parametrize(
    ("data", "read", "match"),
    [
        ("ffff", lambda r: r.string(nullable=False), "null where a string is required"),
        ("fffe", lambda r: r.string(nullable=True), "string length -2"),
        ("0005abcd", lambda r: r.string(nullable=False), "needs 5 bytes"),
        ("0002c328", lambda r: r.string(nullable=False), "not UTF-8"),
        ("ffffffff", lambda r: r.bytes_(nullable=False), "null where bytes are required"),
        ("fffffffe", lambda r: r.bytes_(nullable=True), "bytes length -2"),
        ("7fffffff", lambda r: r.bytes_(nullable=False), "needs 2147483647 bytes"),
        ("7fffffff", lambda r: r.count(4, nullable=False), "cannot fit"),
        ("ffffffff", lambda r: r.count(4, nullable=False), "null where an array is required"),
        ("fffffffe", lambda r: r.count(4, nullable=True), "array count -2"),
        ("00", lambda r: r.int16(), "int16 needs 2 bytes"),
        ("01", lambda r: r.varint_string(), "string length -1"),
    ],
)
def test_strict_reads(data: str, read, match: str) -> None:
    with pytest.raises(KafkaCodecError, match=match):
        read(Reader(bytes.fromhex(data)))


def test_booleans_read_any_non_zero_byte_as_true() -> None:
    """As Kafka reads them; they are always written 0 or 1."""
    reader = Reader(b"\x00\x01\x02\xff")
    assert [reader.boolean() for _ in range(4)] == [False, True, True, True]
    writer = Writer()
    writer.boolean(True)
    writer.boolean(False)
    assert bytes(writer.buf) == b"\x01\x00"


def test_leftover_bytes_are_refused() -> None:
    reader = Reader(b"\x00\x01\x02")
    reader.int16()
    with pytest.raises(KafkaCodecError, match="1 bytes left over"):
        reader.expect_end()
