"""The log's record format: Kafka's RecordBatch v2, as produced, stored, replicated and fetched.

A segment file, a produce's records and a fetch's answer are the same bytes: batches laid end
to end, each a 61-byte header (``kafka/record_batch.py``: base offset, length, partition
leader epoch, magic 2, CRC-32C, attributes, last offset delta, base and max timestamp,
producer id, epoch and base sequence, record count) and its records (``kafka/record.py``).

The log keeps Kafka's rules for uncompressed batches without compaction: a batch holds at
least one record, its records' offset deltas run 0, 1, ... to its last offset delta, and each
batch starts where the previous one ended, so offsets stay consecutive across the log. A
leader assigns offsets and its leader epoch by rewriting them in place (the CRC does not
cover them); a follower appends its leader's batches byte for byte.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from crc32c import crc32c

from system_under_test.errors import KafkaCodecError
from system_under_test.kafka.record import MIN_RECORD_BYTES
from system_under_test.kafka.record_batch import (
    COMPRESSION_CODECS,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_START,
    HEADER_BYTES,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    NewRecord,
    RecordBatch,
    batch_of,
    decode_batch,
    encode_batch,
)

__all__ = [
    "LOG_OVERHEAD",
    "MAX_RECORD_OVERHEAD",
    "MIN_BATCH_BYTES",
    "BatchInfo",
    "BatchPosition",
    "CorruptRecordError",
    "Record",
    "assign_offsets",
    "decode_records",
    "encode_records",
    "iter_batches",
    "read_base_offset",
    "records_from",
    "valid_prefix_length",
    "validate_records",
]

MIN_BATCH_BYTES = HEADER_BYTES + MIN_RECORD_BYTES
"""The smallest batch: a header and one record of six one-byte fields."""
MIN_BATCH_LENGTH = MIN_BATCH_BYTES - LOG_OVERHEAD
"""The smallest value of a batch's length field."""
MAX_RECORD_OVERHEAD = 32
"""The most bytes a record without headers adds to a batch beyond its key and value: its
length, attributes, timestamp and offset deltas, key and value lengths, header count."""

# base offset, length, (leader epoch), magic, crc, attributes, last offset delta,
# base timestamp, max timestamp, producer id, producer epoch, base sequence, record count
_WALK = struct.Struct(">qi4xbIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
_EPOCH_AT = 12
_CRC = struct.Struct(">I")
_CRC_AT = 17
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 35
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21


class CorruptRecordError(ValueError):
    """A batch whose length, CRC, header or records are wrong."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"corrupt record batch at byte {position}: {reason}")
        self.position = position
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record, at its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class BatchPosition:
    """Where one batch sits in a buffer, read from its header, for scans and index rebuilds."""

    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """What validating the batches of one append learned about them."""

    count: int
    """Records in all the batches."""
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    """The last offset of the batch holding the max timestamp (Kafka's shallow offset)."""
    size: int
    max_batch_size: int
    batches: int
    producers: tuple[BatchPosition, ...] = ()
    """The idempotent producers' batches among them, at their (assigned) offsets."""


def encode_records(
    items: Iterable[tuple[bytes | None, bytes | None, int]],
    *,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """(key, value, timestamp) items as one batch at consecutive offsets from base_offset."""
    return encode_batch(
        batch_of(
            (NewRecord(timestamp=ts, key=key, value=value) for key, value, ts in items),
            base_offset=base_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
    )


def _check_batch(
    buf: bytes | bytearray | memoryview, position: int, end: int, check_crc: bool
) -> BatchPosition:
    """Validate the header (and CRC) of the batch at position."""
    available = end - position
    if available < LOG_OVERHEAD:
        raise CorruptRecordError(
            position, f"{available} bytes left, a batch's offset and length need {LOG_OVERHEAD}"
        )
    if available < HEADER_BYTES:
        length = int.from_bytes(buf[position + 8 : position + 12], "big", signed=True)
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                position, f"batch length {length} is below the minimum {MIN_BATCH_LENGTH}"
            )
        raise CorruptRecordError(
            position, f"{available} bytes left, a batch header needs {HEADER_BYTES}"
        )
    (
        base,
        length,
        magic,
        crc,
        attributes,
        last_delta,
        _base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _WALK.unpack_from(buf, position)
    if length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            position, f"batch length {length} is below the minimum {MIN_BATCH_LENGTH}"
        )
    size = LOG_OVERHEAD + length
    if position + size > end:
        raise CorruptRecordError(position, f"batch length {length} runs past the end of the data")
    if magic != MAGIC:
        raise CorruptRecordError(position, f"magic {magic}, expected {MAGIC} (RecordBatch v2)")
    if check_crc:
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        actual = crc32c(view[position + CRC_START : position + size])
        if actual != crc:
            raise CorruptRecordError(
                position, f"CRC-32C {actual:#010x} does not match stored {crc:#010x}"
            )
    codec = attributes & COMPRESSION_MASK
    if codec:
        name = COMPRESSION_CODECS.get(codec, f"unknown codec {codec}")
        raise CorruptRecordError(position, f"compressed batches ({name}) are not supported")
    if attributes & CONTROL_BIT:
        raise CorruptRecordError(position, "control batches are not supported")
    if last_delta < 0 or count != last_delta + 1:
        raise CorruptRecordError(
            position,
            f"{count} record(s) but last offset delta {last_delta}: a batch holds records at "
            f"consecutive offsets, at least one",
        )
    if count * MIN_RECORD_BYTES > size - HEADER_BYTES:
        raise CorruptRecordError(
            position, f"{count} records cannot fit in the batch's {size - HEADER_BYTES} bytes"
        )
    return BatchPosition(
        position,
        base,
        base + last_delta,
        max_ts,
        size,
        producer_id,
        producer_epoch,
        base_sequence,
    )


def iter_batches(
    buf: bytes | bytearray | memoryview, start: int = 0, *, check_crc: bool = True
) -> Iterator[BatchPosition]:
    """Every batch from start to the end of buf, headers checked; raises at the first invalid."""
    end = len(buf)
    position = start
    while position < end:
        batch = _check_batch(buf, position, end, check_crc)
        yield batch
        position += batch.size


def valid_prefix_length(buf: bytes | bytearray | memoryview, start: int = 0) -> int:
    """Length of the longest prefix of buf (from start) made of whole valid batches."""
    position = start
    try:
        for batch in iter_batches(buf, start):
            position = batch.position + batch.size
    except CorruptRecordError:
        pass
    return position - start


def _decode(view: memoryview, batch: BatchPosition) -> RecordBatch:
    """The batch's records, every one checked: lengths, and offset deltas 0, 1, ..."""
    try:
        decoded = decode_batch(view[batch.position : batch.position + batch.size], verify_crc=False)
    except KafkaCodecError as err:
        raise CorruptRecordError(batch.position, str(err)) from None
    for index, record in enumerate(decoded.records):
        if record.offset_delta != index:
            raise CorruptRecordError(
                batch.position,
                f"record {index} has offset delta {record.offset_delta}, expected {index}",
            )
    return decoded


def _info_of(batches: list[BatchPosition], size: int) -> BatchInfo:
    """What an append's batches (at their final offsets and max timestamps) add up to."""
    if not batches:
        raise CorruptRecordError(0, "no record batch")
    max_timestamp = offset_of_max = -1
    for batch in batches:
        if batch.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
    return BatchInfo(
        count=sum(b.last_offset - b.base_offset + 1 for b in batches),
        first_offset=batches[0].base_offset,
        last_offset=batches[-1].last_offset,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max,
        size=size,
        max_batch_size=max(b.size for b in batches),
        batches=len(batches),
        producers=tuple(b for b in batches if b.producer_id != NO_PRODUCER_ID),
    )


def _assign(view: memoryview, base_offset: int, leader_epoch: int) -> BatchInfo:
    assigned: list[BatchPosition] = []
    next_offset = base_offset
    for batch in iter_batches(view):
        decoded = _decode(view, batch)
        if decoded.log_append_time:
            _set_max_timestamp(view, batch.position, batch.size)
            max_ts = _read_max_timestamp(view, batch.position)
        else:
            max_ts = max(decoded.timestamp_of(r) for r in decoded.records)
            if max_ts != batch.max_timestamp:
                _MAX_TIMESTAMP.pack_into(view, batch.position + _MAX_TIMESTAMP_AT, max_ts)
                _refresh_crc(view, batch.position, batch.size)
        _BASE_OFFSET.pack_into(view, batch.position, next_offset)
        _EPOCH.pack_into(view, batch.position + _EPOCH_AT, leader_epoch)
        last = next_offset + batch.last_offset - batch.base_offset
        assigned.append(
            replace(batch, base_offset=next_offset, last_offset=last, max_timestamp=max_ts)
        )
        next_offset = last + 1
    return _info_of(assigned, len(view))


def _read_max_timestamp(view: memoryview, position: int) -> int:
    return int(_MAX_TIMESTAMP.unpack_from(view, position + _MAX_TIMESTAMP_AT)[0])


def _set_max_timestamp(view: memoryview, position: int, size: int) -> None:
    """Stamp a LogAppendTime batch with the broker's clock, as Kafka's leader does."""
    _MAX_TIMESTAMP.pack_into(view, position + _MAX_TIMESTAMP_AT, time.time_ns() // 1_000_000)
    _refresh_crc(view, position, size)


def _refresh_crc(view: memoryview, position: int, size: int) -> None:
    _CRC.pack_into(view, position + _CRC_AT, crc32c(view[position + CRC_START : position + size]))


def validate_records(buf: bytes | bytearray | memoryview, *, check_crc: bool = True) -> BatchInfo:
    """Check replicated batches from their headers and CRCs: each whole, consecutive offsets.

    Raises CorruptRecordError if any byte of buf is not part of a valid batch.
    """
    batches: list[BatchPosition] = []
    for batch in iter_batches(buf, check_crc=check_crc):
        if batches and batch.base_offset != batches[-1].last_offset + 1:
            raise CorruptRecordError(
                batch.position,
                f"batch starts at offset {batch.base_offset}, expected "
                f"{batches[-1].last_offset + 1}",
            )
        batches.append(batch)
    return _info_of(batches, len(buf))


def assign_offsets(
    buf: bytearray | memoryview, base_offset: int, *, leader_epoch: int = NO_PARTITION_LEADER_EPOCH
) -> BatchInfo:
    """Validate a producer's batches, every record decoded, and rewrite in place their base
    offsets (from base_offset on) and partition leader epochs; LogAppendTime batches get the
    broker's clock as their max timestamp."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return _assign(view, base_offset, leader_epoch)


def decode_records(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = True, allow_partial_tail: bool = False
) -> list[Record]:
    """The records of every batch in buf. A partial last batch is dropped only if
    allow_partial_tail is set (a fetch may end inside one)."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    out: list[Record] = []
    position = 0
    while position < end:
        try:
            batch = _check_batch(view, position, end, check_crc)
        except CorruptRecordError:
            if allow_partial_tail and _is_partial_tail(view, position, end):
                break
            raise
        decoded = _decode(view, batch)
        base = batch.base_offset
        if decoded.log_append_time:
            stamp = decoded.max_timestamp
            out.extend(
                Record(base + r.offset_delta, stamp, r.key, r.value) for r in decoded.records
            )
        else:
            base_ts = decoded.base_timestamp
            out.extend(
                Record(base + r.offset_delta, base_ts + r.timestamp_delta, r.key, r.value)
                for r in decoded.records
            )
        position += batch.size
    return out


def _is_partial_tail(view: memoryview, position: int, end: int) -> bool:
    if end - position < LOG_OVERHEAD:
        return True
    length = int.from_bytes(view[position + 8 : position + 12], "big", signed=True)
    return length >= MIN_BATCH_LENGTH and position + LOG_OVERHEAD + length > end


def records_from(buf: bytes | bytearray | memoryview, offset: int) -> bytes:
    """The batches of buf without their records below offset: whole batches below it dropped,
    a batch holding it re-encoded from it on (producer fields and attributes kept, its base
    sequence moved on as far). For a follower whose log ends inside its leader's batch."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    parts: list[bytes | memoryview] = []
    for batch in iter_batches(view):
        if batch.last_offset < offset:
            continue
        if batch.base_offset >= offset:
            parts.append(view[batch.position : batch.position + batch.size])
            continue
        decoded = _decode(view, batch)
        skip = offset - batch.base_offset
        kept = decoded.records[skip:]
        base_ts = decoded.base_timestamp
        rebuilt = batch_of(
            (
                NewRecord(
                    timestamp=base_ts + r.timestamp_delta,
                    key=r.key,
                    value=r.value,
                    headers=tuple((h.key, h.value) for h in r.headers),
                )
                for r in kept
            ),
            base_offset=offset,
            producer_id=decoded.producer_id,
            producer_epoch=decoded.producer_epoch,
            base_sequence=(
                NO_SEQUENCE if decoded.base_sequence < 0 else decoded.base_sequence + skip
            ),
        )
        encoded = bytearray(encode_batch(rebuilt))
        _EPOCH.pack_into(encoded, _EPOCH_AT, decoded.partition_leader_epoch)
        attributes = decoded.attributes
        if attributes != rebuilt.attributes:
            _ATTRIBUTES.pack_into(encoded, _ATTRIBUTES_AT, attributes)
            if attributes & TIMESTAMP_TYPE_BIT:
                _MAX_TIMESTAMP.pack_into(encoded, _MAX_TIMESTAMP_AT, decoded.max_timestamp)
            _refresh_crc(memoryview(encoded), 0, len(encoded))
        parts.append(bytes(encoded))
    return b"".join(parts)


def read_base_offset(buf: bytes | bytearray | memoryview, position: int = 0) -> int:
    """The base offset of the batch at position."""
    return int(_BASE_OFFSET.unpack_from(buf, position)[0])
