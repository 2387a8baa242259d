"""RecordBatch v2 (magic 2, Kafka 0.11+): the unit produced, stored and fetched.

Header, big-endian, 61 bytes::

    baseOffset            int64   offset of the first record (assigned by the leader)
    batchLength           int32   bytes after this field
    partitionLeaderEpoch  int32   set by the leader on append
    magic                 int8    2
    crc                   uint32  CRC-32C of everything from attributes to the end
    attributes            int16   bits 0-2 compression, 3 timestamp type (1: log append
                                  time), 4 transactional, 5 control, 6 delete horizon set
    lastOffsetDelta       int32
    baseTimestamp         int64
    maxTimestamp          int64
    producerId            int64   -1 without an idempotent producer
    producerEpoch         int16
    baseSequence          int32
    records count         int32
    records               record.py

The CRC leaves out the base offset, length, leader epoch and magic, so a leader assigns
offsets and its epoch by rewriting them in place (``BatchView.assign``) without re-encoding.
Only uncompressed batches are implemented; a compressed one is refused with the codec named.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from crc32c import crc32c

from system_under_test.errors import KafkaCodecError, UnsupportedCompressionError
from system_under_test.kafka.primitives import Buffer, Reader, Writer
from system_under_test.kafka.record import (
    MIN_RECORD_BYTES,
    Record,
    RecordHeader,
    read_record,
    write_record,
)

MAGIC = 2
LOG_OVERHEAD = 12
"""Bytes of base offset and batch length, which the length does not count."""
HEADER_BYTES = 61
CRC_START = 21
"""The attributes: the CRC covers from here to the end of the batch."""

_HEAD = struct.Struct(">qiibIhiqqqhii")
_LOG_HEAD = struct.Struct(">qi")
_EPOCH = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")
_EPOCH_AT = 12
_MAGIC_AT = 16
_CRC = struct.Struct(">I")
_CRC_AT = 17

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

COMPRESSION_CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


def check_compression(attributes: int) -> None:
    """Refuse a batch whose attributes name a compression codec."""
    codec = attributes & COMPRESSION_MASK
    if codec:
        raise UnsupportedCompressionError(
            COMPRESSION_CODECS.get(codec, f"unknown codec {codec}"), "RecordBatch.attributes"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordBatch:
    """A decoded batch. Record offsets and timestamps are deltas from the base ones."""

    base_offset: int = 0
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    attributes: int = 0
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    records: tuple[Record, ...]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def log_append_time(self) -> bool:
        """The timestamp type: log append time (set by the broker) rather than create time."""
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    def offset_of(self, record: Record) -> int:
        return self.base_offset + record.offset_delta

    def timestamp_of(self, record: Record) -> int:
        return self.base_timestamp + record.timestamp_delta


@dataclass(frozen=True, slots=True, kw_only=True)
class NewRecord:
    """A record to build a batch from: absolute timestamp, key, value, headers."""

    timestamp: int
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def batch_of(
    records: Iterable[NewRecord],
    *,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
) -> RecordBatch:
    """A batch of records at consecutive offsets, as a producer builds one (at least one record)."""
    new = list(records)
    if not new:
        raise KafkaCodecError("a record batch needs at least one record", "RecordBatch.records")
    base_timestamp = new[0].timestamp
    return RecordBatch(
        base_offset=base_offset,
        attributes=TRANSACTIONAL_BIT if transactional else 0,
        last_offset_delta=len(new) - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max(r.timestamp for r in new),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records=tuple(
            Record(
                offset_delta=index,
                timestamp_delta=r.timestamp - base_timestamp,
                key=r.key,
                value=r.value,
                headers=tuple(RecordHeader(k, v) for k, v in r.headers),
            )
            for index, r in enumerate(new)
        ),
    )


def encode_batch(batch: RecordBatch) -> bytes:
    """The bytes of one batch, CRC included."""
    check_compression(batch.attributes)
    writer = Writer(bytearray(HEADER_BYTES))
    for index, record in enumerate(batch.records):
        try:
            write_record(writer, record)
        except KafkaCodecError as err:
            raise err.within(f"records[{index}]").within("RecordBatch") from None
    buf = writer.buf
    try:
        _HEAD.pack_into(
            buf,
            0,
            batch.base_offset,
            len(buf) - LOG_OVERHEAD,
            batch.partition_leader_epoch,
            MAGIC,
            0,
            batch.attributes,
            batch.last_offset_delta,
            batch.base_timestamp,
            batch.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            len(batch.records),
        )
    except struct.error as err:
        raise KafkaCodecError(
            f"a header field does not fit its type: {err}", "RecordBatch"
        ) from None
    _CRC.pack_into(buf, _CRC_AT, crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)


class BatchView:
    """One batch inside a buffer, read from its header without decoding its records.

    Constructed by ``split_batches``, which has checked that the whole batch is there, its
    length is sane and its magic is 2. Over a writable buffer (a bytearray), ``assign``
    rewrites the base offset and leader epoch in place.
    """

    __slots__ = ("_buf", "position", "size")

    def __init__(self, buf: memoryview, position: int, size: int) -> None:
        self._buf = buf
        self.position = position
        self.size = size

    def _header(self) -> tuple[int, ...]:
        return _HEAD.unpack_from(self._buf, self.position)

    @property
    def data(self) -> memoryview:
        """The batch's bytes, as a view into the buffer."""
        return self._buf[self.position : self.position + self.size]

    @property
    def base_offset(self) -> int:
        return int(_BASE_OFFSET.unpack_from(self._buf, self.position)[0])

    @property
    def partition_leader_epoch(self) -> int:
        return int(_EPOCH.unpack_from(self._buf, self.position + _EPOCH_AT)[0])

    @property
    def crc(self) -> int:
        return int(_CRC.unpack_from(self._buf, self.position + _CRC_AT)[0])

    @property
    def attributes(self) -> int:
        return int(self._header()[5])

    @property
    def last_offset_delta(self) -> int:
        return int(self._header()[6])

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return int(self._header()[7])

    @property
    def max_timestamp(self) -> int:
        return int(self._header()[8])

    @property
    def producer_id(self) -> int:
        return int(self._header()[9])

    @property
    def producer_epoch(self) -> int:
        return int(self._header()[10])

    @property
    def base_sequence(self) -> int:
        return int(self._header()[11])

    @property
    def record_count(self) -> int:
        return int(self._header()[12])

    def crc_ok(self) -> bool:
        """Whether the stored CRC-32C matches the bytes it covers."""
        start = self.position + CRC_START
        return crc32c(self._buf[start : self.position + self.size]) == self.crc

    def assign(self, base_offset: int, partition_leader_epoch: int) -> None:
        """Rewrite the base offset and leader epoch in place (the CRC does not cover them)."""
        _BASE_OFFSET.pack_into(self._buf, self.position, base_offset)
        _EPOCH.pack_into(self._buf, self.position + _EPOCH_AT, partition_leader_epoch)

    def decode(self, *, verify_crc: bool = True) -> RecordBatch:
        """The whole batch, records included."""
        return decode_batch(self.data, verify_crc=verify_crc)


@dataclass(frozen=True, slots=True)
class PartialBatch:
    """A batch cut short at the end of a buffer: consumers skip it, fetches can return one."""

    position: int
    available: int
    needed: int | None
    """The batch's whole size, when enough of it arrived to tell."""


@dataclass(frozen=True, slots=True)
class Batches:
    """What ``split_batches`` found: the complete batches, and a partial one at the end."""

    batches: list[BatchView]
    partial: PartialBatch | None


def _check_length(position: int, length: int) -> None:
    if length < HEADER_BYTES - LOG_OVERHEAD:
        raise KafkaCodecError(
            f"batch length {length} at byte {position} is below the "
            f"{HEADER_BYTES - LOG_OVERHEAD} bytes of a batch header",
            "RecordBatch.batch_length",
        )


def _check_magic(buf: memoryview, position: int) -> None:
    magic = buf[position + _MAGIC_AT]
    if magic != MAGIC:
        raise KafkaCodecError(
            f"magic {magic} at byte {position}: only RecordBatch v2 (magic 2) is supported",
            "RecordBatch.magic",
        )


def split_batches(buf: Buffer) -> Batches:
    """The batches laid end to end in ``buf`` (a log slice, a produce's or fetch's records).

    A batch whose length runs past the end is returned as ``partial``, not an error; a
    length below a header or a magic other than 2 is an error. CRCs are not checked here
    (``BatchView.crc_ok``, ``decode``).
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    position = 0
    batches: list[BatchView] = []
    while position < end:
        available = end - position
        if available < LOG_OVERHEAD:
            return Batches(batches, PartialBatch(position, available, None))
        _, length = _LOG_HEAD.unpack_from(view, position)
        _check_length(position, length)
        if available > _MAGIC_AT:
            _check_magic(view, position)
        size = LOG_OVERHEAD + length
        if available < size:
            return Batches(batches, PartialBatch(position, available, size))
        batches.append(BatchView(view, position, size))
        position += size
    return Batches(batches, None)


def decode_batch(buf: Buffer, *, verify_crc: bool = True) -> RecordBatch:
    """Exactly one whole batch: header, CRC (unless ``verify_crc`` is false), every record."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if len(view) < HEADER_BYTES:
        raise KafkaCodecError(
            f"{len(view)} bytes cannot hold the {HEADER_BYTES}-byte batch header", "RecordBatch"
        )
    (
        base_offset,
        length,
        partition_leader_epoch,
        _magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _HEAD.unpack_from(view, 0)
    if length != len(view) - LOG_OVERHEAD:
        raise KafkaCodecError(
            f"batch length {length} but {len(view) - LOG_OVERHEAD} bytes follow it",
            "RecordBatch.batch_length",
        )
    _check_length(0, length)
    _check_magic(view, 0)
    if verify_crc:
        actual = crc32c(view[CRC_START:])
        if actual != crc:
            raise KafkaCodecError(
                f"stored CRC-32C {crc:#010x} but the batch's bytes give {actual:#010x}",
                "RecordBatch.crc",
            )
    check_compression(attributes)
    reader = Reader(view, HEADER_BYTES)
    if count < 0 or count * MIN_RECORD_BYTES > reader.remaining:
        raise KafkaCodecError(
            f"record count {count} cannot fit in the {reader.remaining} bytes left",
            "RecordBatch.records",
        )
    records = []
    for index in range(count):
        try:
            records.append(read_record(reader))
        except KafkaCodecError as err:
            raise err.within(f"records[{index}]").within("RecordBatch") from None
    if reader.remaining:
        raise KafkaCodecError(
            f"{reader.remaining} bytes left over after the last record", "RecordBatch.records"
        )
    return RecordBatch(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records=tuple(records),
    )
