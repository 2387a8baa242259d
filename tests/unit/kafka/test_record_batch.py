"""RecordBatch v2: round trips, kafka-python's builder and reader, and the broker's helpers."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.errors import KafkaCodecError, UnsupportedCompressionError
from system_under_test.kafka.record import Record, RecordHeader
from system_under_test.kafka.record_batch import (
    HEADER_BYTES,
    TRANSACTIONAL_BIT,
    NewRecord,
    RecordBatch,
    batch_of,
    decode_batch,
    encode_batch,
    split_batches,
)
from tests.unit.kafka.kafka_python import DefaultRecordBatch, DefaultRecordBatchBuilder
from tests.unit.kafka.strategies import record_batches

EXAMPLES = settings(max_examples=60, deadline=None, database=None)

_new_records = st.lists(
    st.builds(
        NewRecord,
        timestamp=st.integers(0, 2**45),
        key=st.none() | st.binary(max_size=12),
        value=st.none() | st.binary(max_size=24),
        headers=st.lists(
            st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=2
        ).map(tuple),
    ),
    min_size=1,
    max_size=6,
)
_producer = st.tuples(
    st.integers(-1, 2**40), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)
)


@EXAMPLES
@given(record_batches())
def test_round_trip(batch: RecordBatch) -> None:
    assert decode_batch(encode_batch(batch)) == batch


@EXAMPLES
@given(_new_records, _producer, st.booleans())
def test_kafka_pythons_builder_writes_our_bytes(
    new: list[NewRecord], producer: tuple[int, int, int], transactional: bool
) -> None:
    producer_id, producer_epoch, base_sequence = producer
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for offset, record in enumerate(new):
        builder.append(offset, record.timestamp, record.key, record.value, list(record.headers))
    their_bytes = bytes(builder.build())
    ours = batch_of(
        new,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
    )
    # kafka-python leaves the leader epoch 0 where a producer that knows none would send -1
    ours = dataclasses.replace(ours, partition_leader_epoch=0)
    assert encode_batch(ours) == their_bytes
    assert decode_batch(their_bytes) == ours


@EXAMPLES
@given(record_batches())
def test_kafka_pythons_reader_reads_our_bytes(batch: RecordBatch) -> None:
    theirs = DefaultRecordBatch(bytearray(encode_batch(batch)))
    assert theirs.validate_crc()
    assert (
        theirs.base_offset,
        theirs.leader_epoch,
        theirs.attributes,
        theirs.last_offset_delta,
        theirs.first_timestamp,
        theirs.max_timestamp,
        theirs.producer_id,
        theirs.producer_epoch,
        theirs.base_sequence,
        theirs.records_count,
    ) == (
        batch.base_offset,
        batch.partition_leader_epoch,
        batch.attributes,
        batch.last_offset_delta,
        batch.base_timestamp,
        batch.max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        len(batch.records),
    )
    if batch.is_control or batch.log_append_time:
        return  # kafka-python parses control records and rewrites timestamps: not raw records
    read = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert read == [
        (
            batch.offset_of(r),
            batch.timestamp_of(r),
            r.key,
            r.value,
            [(h.key, h.value) for h in r.headers],
        )
        for r in batch.records
    ]


def test_golden_single_record_batch() -> None:
    """Laid out by hand from the format: one record, null key, value "v", no headers."""
    record = bytes([0x0E, 0x00, 0x00, 0x00, 0x01, 0x02, ord("v"), 0x00])
    after_crc = struct.pack(">hiqqqhii", 0, 0, 1000, 1000, -1, -1, -1, 1) + record
    head = struct.pack(">qiib", 5, 4 + 1 + 4 + len(after_crc), 7, 2)
    golden = head + struct.pack(">I", crc32c(after_crc)) + after_crc
    batch = RecordBatch(
        base_offset=5,
        partition_leader_epoch=7,
        last_offset_delta=0,
        base_timestamp=1000,
        max_timestamp=1000,
        records=(Record(offset_delta=0, value=b"v"),),
    )
    assert encode_batch(batch) == golden
    assert decode_batch(golden) == batch


def test_crc32c_check_value() -> None:
    """The standard check value of CRC-32C (Castagnoli), not zlib's CRC-32."""
    assert crc32c(b"123456789") == 0xE3069283


def _two_batches() -> tuple[bytes, bytes]:
    first = encode_batch(batch_of([NewRecord(timestamp=1, value=b"a"), NewRecord(timestamp=2)]))
    second = encode_batch(batch_of([NewRecord(timestamp=3, key=b"k")], base_offset=2))
    return first, second


def test_split_batches_reads_headers_without_decoding() -> None:
    first, second = _two_batches()
    found = split_batches(first + second)
    assert found.partial is None
    assert [(b.position, b.size) for b in found.batches] == [
        (0, len(first)),
        (len(first), len(second)),
    ]
    assert [
        (b.base_offset, b.last_offset, b.next_offset, b.record_count) for b in found.batches
    ] == [
        (0, 1, 2, 2),
        (2, 2, 3, 1),
    ]
    assert all(b.crc_ok() for b in found.batches)
    assert found.batches[1].decode().records[0].key == b"k"


def test_a_partial_trailing_batch_is_reported_not_refused() -> None:
    first, second = _two_batches()
    whole = first + second
    for cut in range(len(first) + 1, len(whole)):
        found = split_batches(whole[:cut])
        assert len(found.batches) == 1
        assert found.partial is not None
        assert found.partial.position == len(first)
        assert found.partial.available == cut - len(first)
        expected_size = len(second) if cut - len(first) >= 12 else None
        assert found.partial.needed == expected_size
    assert split_batches(first).partial is None
    assert split_batches(b"").batches == []


def test_assign_rewrites_offset_and_epoch_in_place_keeping_the_crc() -> None:
    first, second = _two_batches()
    buf = bytearray(first + second)
    views = split_batches(buf).batches
    views[0].assign(100, 9)
    views[1].assign(102, 9)
    assert all(v.crc_ok() for v in views)
    decoded = [v.decode() for v in views]
    assert [(d.base_offset, d.partition_leader_epoch, d.last_offset) for d in decoded] == [
        (100, 9, 101),
        (102, 9, 102),
    ]
    assert decoded[0].records == decode_batch(first).records


@pytest.mark.parametrize(
    ("codec", "name"), [(1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd"), (5, "unknown codec 5")]
)
def test_compressed_batches_are_refused_naming_the_codec(codec: int, name: str) -> None:
    batch = RecordBatch(
        attributes=codec, last_offset_delta=0, base_timestamp=0, max_timestamp=0, records=()
    )
    with pytest.raises(UnsupportedCompressionError, match=name) as raised:
        encode_batch(batch)
    assert raised.value.codec == name
    plain = bytearray(encode_batch(dataclasses.replace(batch, attributes=0)))
    plain[22] = codec
    struct.pack_into(">I", plain, 17, crc32c(bytes(plain[21:])))
    with pytest.raises(UnsupportedCompressionError, match=name):
        decode_batch(plain)


def test_a_wrong_crc_is_refused_unless_verification_is_skipped() -> None:
    first, _ = _two_batches()
    corrupt = bytearray(first)
    corrupt[30] ^= 0x01  # inside the base timestamp, which the CRC covers
    with pytest.raises(KafkaCodecError, match=r"RecordBatch\.crc"):
        decode_batch(corrupt)
    assert not split_batches(corrupt).batches[0].crc_ok()
    assert decode_batch(corrupt, verify_crc=False).records == decode_batch(first).records


def test_other_magics_and_short_lengths_are_refused() -> None:
    first, _ = _two_batches()
    old = bytearray(first)
    old[16] = 1
    with pytest.raises(KafkaCodecError, match="magic 1"):
        split_batches(old)
    with pytest.raises(KafkaCodecError, match="magic 1"):
        decode_batch(old)
    short = bytearray(first)
    struct.pack_into(">i", short, 8, 10)
    with pytest.raises(KafkaCodecError, match="batch_length"):
        split_batches(short)
    with pytest.raises(KafkaCodecError, match="batch_length"):
        split_batches(struct.pack(">qi", 0, -5))


def test_a_forged_record_count_is_refused_before_reading() -> None:
    first, _ = _two_batches()
    forged = bytearray(first)
    struct.pack_into(">i", forged, HEADER_BYTES - 4, 2**31 - 1)
    with pytest.raises(KafkaCodecError, match="record count"):
        decode_batch(forged, verify_crc=False)


def test_errors_name_the_record_and_field() -> None:
    batch = batch_of([NewRecord(timestamp=0, value=b"x"), NewRecord(timestamp=0, value=b"yy")])
    encoded = bytearray(encode_batch(batch))
    # the second record's value length: record 1 is 8 bytes, then length, attrs, ts, offset, key
    value_length_at = HEADER_BYTES + 8 + 5
    assert encoded[value_length_at] == 4  # zigzag of 2
    encoded[value_length_at] = 0x7E  # 63 bytes: past the record's end
    with pytest.raises(KafkaCodecError, match=r"RecordBatch\.records\[1\]\.value"):
        decode_batch(encoded, verify_crc=False)


def test_batch_of_assigns_consecutive_offsets_and_timestamp_deltas() -> None:
    batch = batch_of(
        [NewRecord(timestamp=50, headers=(("h", None),)), NewRecord(timestamp=40)],
        producer_id=7,
        producer_epoch=1,
        base_sequence=10,
        transactional=True,
    )
    assert batch.attributes == TRANSACTIONAL_BIT and batch.is_transactional
    assert (batch.last_offset_delta, batch.base_timestamp, batch.max_timestamp) == (1, 50, 50)
    assert [(r.offset_delta, r.timestamp_delta) for r in batch.records] == [(0, 0), (1, -10)]
    assert batch.records[0].headers == (RecordHeader("h", None),)
    with pytest.raises(KafkaCodecError, match="at least one record"):
        batch_of([])
