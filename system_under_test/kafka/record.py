"""One record inside a RecordBatch v2 (Kafka 0.11+), as the batch carries it::

length          varint   bytes after this field
attributes      int8     unused (written 0, ignored when read, as Kafka does)
timestampDelta  varlong  from the batch's base timestamp
offsetDelta     varint   from the batch's base offset
keyLength       varint   -1 for a null key
key             bytes
valueLength     varint   -1 for a null value
value           bytes
headers count   varint
headers         key length varint, key UTF-8 (never null), value length varint (-1 null), value
"""

from __future__ import annotations

from dataclasses import dataclass

from system_under_test.errors import KafkaCodecError
from system_under_test.kafka.primitives import Reader, Writer

MIN_RECORD_BYTES = 7
"""A record's length varint plus the smallest body: six one-byte fields."""
MIN_HEADER_BYTES = 2


@dataclass(frozen=True, slots=True)
class RecordHeader:
    """A record header: a UTF-8 key and an optional value."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """A record as the batch stores it: offset and timestamp relative to the batch's base."""

    offset_delta: int
    timestamp_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[RecordHeader, ...] = ()


def write_record(writer: Writer, record: Record) -> None:
    """Append one record, its length first."""
    body = Writer()
    body.int8(0)
    body.varlong(record.timestamp_delta)
    body.varint(record.offset_delta)
    body.varint_bytes(record.key)
    body.varint_bytes(record.value)
    body.varint(len(record.headers))
    for header in record.headers:
        body.varint_string(header.key)
        body.varint_bytes(header.value)
    writer.varint(len(body.buf))
    writer.buf += body.buf


def read_record(reader: Reader) -> Record:
    """Read one record; its length must cover exactly its fields."""
    start = reader.pos
    name = "length"
    try:
        length = reader.varint()
        if length < 0:
            raise KafkaCodecError(f"negative record length {length} at byte {start}")
        body = Reader(reader.take(length, "record"))
        name = "attributes"
        body.int8()
        name = "timestamp_delta"
        timestamp_delta = body.varlong()
        name = "offset_delta"
        offset_delta = body.varint()
        name = "key"
        key = body.varint_bytes()
        name = "value"
        value = body.varint_bytes()
        name = "headers"
        count = body.varint()
        if count < 0:
            raise KafkaCodecError(f"negative header count {count}")
        if count * MIN_HEADER_BYTES > body.remaining:
            raise KafkaCodecError(
                f"header count {count} cannot fit in the {body.remaining} bytes left"
            )
        headers = []
        for index in range(count):
            name = f"headers[{index}]"
            headers.append(RecordHeader(body.varint_string(), body.varint_bytes()))
        name = "length"
        if body.remaining:
            raise KafkaCodecError(f"{body.remaining} bytes left over after the record's fields")
    except KafkaCodecError as err:
        raise err.within(name) from None
    return Record(
        offset_delta=offset_delta,
        timestamp_delta=timestamp_delta,
        key=key,
        value=value,
        headers=tuple(headers),
    )
