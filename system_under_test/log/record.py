"""The on-disk and on-wire record format, and batch encoding.

One record, all integers big-endian (Kafka's v0/v1 message layout, which the seeds use)::

    offset      int64   assigned by the leader; not covered by the CRC
    size        int32   bytes after this field
    crc         uint32  CRC32 of everything after this field
    magic       int8    RECORD_MAGIC
    attributes  int8    0 (no compression)
    timestamp   int64   milliseconds since the epoch
    key length  int32   -1 for a null key
    key         bytes
    value length int32  -1 for a null value
    value       bytes

A batch is records laid end to end, so a produce of many records is one write and a fetch
returns a slice of a segment file as it is.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

RECORD_MAGIC = 1
LOG_OVERHEAD = 12
"""Bytes of offset and size that precede every record's sized body."""
BODY_OVERHEAD = 22
"""Bytes of crc, magic, attributes, timestamp and the two lengths."""
RECORD_OVERHEAD = LOG_OVERHEAD + BODY_OVERHEAD
NULL_LENGTH = -1

_HEAD = struct.Struct(">qiI")  # offset, size, crc
_BODY_HEAD = struct.Struct(">bbqi")  # magic, attributes, timestamp, key length
_LENGTH = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
_TIMESTAMP = struct.Struct(">q")


class CorruptRecordError(ValueError):
    """A record whose length, CRC or fields are wrong."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"corrupt record at byte {position}: {reason}")
        self.position = position
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def size(self) -> int:
        """Bytes this record takes on disk."""
        return RECORD_OVERHEAD + len(self.key or b"") + len(self.value or b"")


@dataclass(frozen=True, slots=True)
class RecordPosition:
    """Where one valid record sits in a buffer, for scans that rebuild indexes."""

    position: int
    offset: int
    timestamp: int
    size: int


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """What validating a batch learned about it."""

    count: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    size: int
    max_record_size: int


def encode_record(offset: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    """Encode one record."""
    return encode_records([(key, value, timestamp)], base_offset=offset)


def encode_records(
    items: Iterable[tuple[bytes | None, bytes | None, int]], *, base_offset: int = 0
) -> bytes:
    """Encode (key, value, timestamp) items as one batch with consecutive offsets."""
    parts: list[bytes] = []
    append = parts.append
    head_pack = _HEAD.pack
    body_pack = _BODY_HEAD.pack
    length_pack = _LENGTH.pack
    crc32 = zlib.crc32
    offset = base_offset
    for key, value, timestamp in items:
        if key is None:
            key_part = body_pack(RECORD_MAGIC, 0, timestamp, NULL_LENGTH)
        else:
            key_part = body_pack(RECORD_MAGIC, 0, timestamp, len(key)) + key
        if value is None:
            value_part = length_pack(NULL_LENGTH)
            crc = crc32(value_part, crc32(key_part))
            size = 4 + len(key_part) + 4
            append(head_pack(offset, size, crc))
            append(key_part)
            append(value_part)
        else:
            value_len = length_pack(len(value))
            crc = crc32(value, crc32(value_len, crc32(key_part)))
            size = 4 + len(key_part) + 4 + len(value)
            append(head_pack(offset, size, crc))
            append(key_part)
            append(value_len)
            append(value)
        offset += 1
    return b"".join(parts)


def _check_record(
    buf: bytes | bytearray | memoryview, position: int, end: int, check_crc: bool
) -> tuple[int, int, int]:
    """Validate the record at position; return (offset, timestamp, total size)."""
    if end - position < _HEAD.size:
        raise CorruptRecordError(
            position, f"{end - position} bytes left, header needs {_HEAD.size}"
        )
    offset, size, crc = _HEAD.unpack_from(buf, position)
    if size < BODY_OVERHEAD:
        raise CorruptRecordError(position, f"size {size} is below the minimum {BODY_OVERHEAD}")
    record_end = position + LOG_OVERHEAD + size
    if record_end > end:
        raise CorruptRecordError(position, f"size {size} runs past the end of the data")
    body = position + 16
    magic, _attributes, timestamp, key_len = _BODY_HEAD.unpack_from(buf, body)
    if magic != RECORD_MAGIC:
        raise CorruptRecordError(position, f"magic {magic}, expected {RECORD_MAGIC}")
    key_bytes = 0 if key_len == NULL_LENGTH else key_len
    if key_bytes < 0 or 14 + key_bytes + 4 > size - 4:
        raise CorruptRecordError(position, f"key length {key_len} does not fit size {size}")
    (value_len,) = _LENGTH.unpack_from(buf, body + 14 + key_bytes)
    value_bytes = 0 if value_len == NULL_LENGTH else value_len
    if value_bytes < 0 or BODY_OVERHEAD + key_bytes + value_bytes != size:
        raise CorruptRecordError(
            position, f"key length {key_len} and value length {value_len} disagree with size {size}"
        )
    if check_crc:
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        actual = zlib.crc32(view[body:record_end])
        if actual != crc:
            raise CorruptRecordError(
                position, f"crc {actual:#010x} does not match stored {crc:#010x}"
            )
    return offset, timestamp, LOG_OVERHEAD + size


def iter_record_positions(
    buf: bytes | bytearray | memoryview, start: int = 0, *, check_crc: bool = True
) -> Iterator[RecordPosition]:
    """Yield every record from start to the end of buf; raise at the first invalid one."""
    end = len(buf)
    position = start
    while position < end:
        offset, timestamp, size = _check_record(buf, position, end, check_crc)
        yield RecordPosition(position, offset, timestamp, size)
        position += size


def valid_prefix_length(buf: bytes | bytearray | memoryview, start: int = 0) -> int:
    """Length of the longest prefix of buf (from start) made of whole valid records."""
    position = start
    try:
        for record in iter_record_positions(buf, start):
            position = record.position + record.size
    except CorruptRecordError:
        pass
    return position - start


def validate_records(buf: bytes | bytearray | memoryview, *, check_crc: bool = True) -> BatchInfo:
    """Check a whole batch; raise CorruptRecordError if any byte of it is not a valid record."""
    return _walk(buf, None, check_crc)


def assign_offsets(buf: bytearray | memoryview, base_offset: int) -> BatchInfo:
    """Validate a batch and rewrite its offsets to base_offset, base_offset + 1, ..."""
    return _walk(buf, base_offset, True)


def _walk(
    buf: bytes | bytearray | memoryview, base_offset: int | None, check_crc: bool
) -> BatchInfo:
    end = len(buf)
    if end == 0:
        raise CorruptRecordError(0, "the batch holds no records")
    position = 0
    count = 0
    first_offset = last_offset = -1
    max_timestamp = -1
    offset_of_max = -1
    max_record_size = 0
    pack_into = _OFFSET.pack_into
    while position < end:
        offset, timestamp, size = _check_record(buf, position, end, check_crc)
        if base_offset is not None:
            offset = base_offset + count
            pack_into(buf, position, offset)
        if count == 0:
            first_offset = offset
        elif base_offset is None and offset <= last_offset:
            raise CorruptRecordError(position, f"offset {offset} does not follow {last_offset}")
        last_offset = offset
        if timestamp > max_timestamp:
            max_timestamp = timestamp
            offset_of_max = offset
        if size > max_record_size:
            max_record_size = size
        count += 1
        position += size
    return BatchInfo(
        count, first_offset, last_offset, max_timestamp, offset_of_max, end, max_record_size
    )


def decode_records(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = True, allow_partial_tail: bool = False
) -> list[Record]:
    """Decode a batch. A partial last record is dropped only if allow_partial_tail is set."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    out: list[Record] = []
    position = 0
    while position < end:
        try:
            offset, timestamp, size = _check_record(view, position, end, check_crc)
        except CorruptRecordError:
            if allow_partial_tail and _is_partial_tail(view, position, end):
                break
            raise
        body = position + 16
        (key_len,) = _LENGTH.unpack_from(view, body + 10)
        cursor = body + 14
        key: bytes | None = None
        if key_len != NULL_LENGTH:
            key = bytes(view[cursor : cursor + key_len])
            cursor += key_len
        (value_len,) = _LENGTH.unpack_from(view, cursor)
        cursor += 4
        value: bytes | None = None
        if value_len != NULL_LENGTH:
            value = bytes(view[cursor : cursor + value_len])
        out.append(Record(offset, timestamp, key, value))
        position += size
    return out


def _is_partial_tail(view: memoryview, position: int, end: int) -> bool:
    if end - position < _HEAD.size:
        return True
    size = int(_HEAD.unpack_from(view, position)[1])
    return size >= BODY_OVERHEAD and position + LOG_OVERHEAD + size > end


def read_offset(buf: bytes | bytearray | memoryview, position: int = 0) -> int:
    """The offset field of the record at position."""
    return int(_OFFSET.unpack_from(buf, position)[0])


def read_timestamp(buf: bytes | bytearray | memoryview, position: int = 0) -> int:
    """The timestamp of the record at position."""
    return int(_TIMESTAMP.unpack_from(buf, position + 18)[0])
