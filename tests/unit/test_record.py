"""The log's record format (RecordBatch v2): round trips, offset assignment, corruption
detection, and a follower's batch cut at its log end."""

from __future__ import annotations

from dataclasses import replace

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.kafka.record_batch import (
    TIMESTAMP_TYPE_BIT,
    NewRecord,
    batch_of,
    decode_batch,
    encode_batch,
)
from system_under_test.log.record import (
    CorruptRecordError,
    Record,
    assign_offsets,
    decode_records,
    encode_records,
    iter_batches,
    read_base_offset,
    records_from,
    valid_prefix_length,
    validate_records,
)
from tests.unit.kafka.kafka_python import DefaultRecordBatch

Item = tuple[bytes | None, bytes | None, int]

items_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(0, 2**50),
    ),
    min_size=1,
    max_size=20,
)
batches_strategy = st.lists(items_strategy, min_size=1, max_size=4)


def _refresh_crc(batch: bytearray) -> None:
    """Make a hand-edited batch's CRC-32C fit its bytes again (the CRC covers from byte 21)."""
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")


def _batches(groups: list[list[Item]], base: int = 0) -> bytearray:
    out = bytearray()
    for items in groups:
        out += encode_records(items, base_offset=base)
        base += len(items)
    return out


@settings(deadline=None, max_examples=200)
@given(items=items_strategy, base=st.integers(0, 2**62))
def test_encode_decode_round_trip(items: list[Item], base: int) -> None:
    data = encode_records(items, base_offset=base)
    records = decode_records(data)
    assert records == [Record(base + i, ts, key, value) for i, (key, value, ts) in enumerate(items)]
    (position,) = iter_batches(data)
    assert (position.base_offset, position.last_offset) == (base, base + len(items) - 1)
    assert position.max_timestamp == max(ts for _, _, ts in items)
    assert position.size == len(data)
    assert read_base_offset(data) == base
    theirs = DefaultRecordBatch(bytearray(data))  # kafka-python reads it as Kafka wrote it
    assert theirs.validate_crc()
    assert [(r.offset, r.key, r.value, r.timestamp) for r in theirs] == [
        (r.offset, r.key, r.value, r.timestamp) for r in records
    ]


@settings(deadline=None, max_examples=100)
@given(groups=batches_strategy, base=st.integers(0, 2**40), epoch=st.integers(0, 2**31 - 1))
def test_assign_offsets_rewrites_base_offsets_and_epochs_and_keeps_crcs_valid(
    groups: list[list[Item]], base: int, epoch: int
) -> None:
    data = bytearray()
    for items in groups:
        data += encode_records(items, base_offset=777)  # a producer's offsets mean nothing
    info = assign_offsets(data, base, leader_epoch=epoch)
    count = sum(len(items) for items in groups)
    assert (info.first_offset, info.last_offset, info.count, info.batches) == (
        base,
        base + count - 1,
        count,
        len(groups),
    )
    assert info.size == len(data)
    assert info.max_timestamp == max(ts for items in groups for _, _, ts in items)
    batches = list(iter_batches(data))
    holder = next(b for b in batches if b.max_timestamp == info.max_timestamp)
    assert info.offset_of_max_timestamp == holder.last_offset
    assert [r.offset for r in decode_records(data)] == list(range(base, base + count))
    assert {
        decode_batch(data[b.position : b.position + b.size]).partition_leader_epoch for b in batches
    } == {epoch}
    assert validate_records(data) == info


def test_assign_offsets_corrects_a_max_timestamp_the_records_do_not_have() -> None:
    batch = bytearray(encode_records([(None, b"a", 5), (None, b"b", 9)]))
    batch[35:43] = (1).to_bytes(8, "big")  # a producer's wrong header; its CRC made to fit
    _refresh_crc(batch)
    info = assign_offsets(batch, 0)
    assert info.max_timestamp == 9
    assert next(iter_batches(batch)).max_timestamp == 9


def test_a_log_append_time_batch_gets_the_brokers_clock() -> None:
    built = batch_of([NewRecord(timestamp=5, value=b"a"), NewRecord(timestamp=6, value=b"b")])
    data = bytearray(encode_batch(built))
    data[22] |= TIMESTAMP_TYPE_BIT  # attributes' low byte
    _refresh_crc(data)
    info = assign_offsets(data, 0)
    assert info.max_timestamp > 1_700_000_000_000
    assert {r.timestamp for r in decode_records(data)} == {info.max_timestamp}


@settings(deadline=None, max_examples=200)
@given(groups=batches_strategy, data=st.data())
def test_any_flipped_byte_the_crc_covers_is_detected(
    groups: list[list[Item]], data: st.DataObject
) -> None:
    buf = _batches(groups)
    batches = list(iter_batches(buf))
    batch = data.draw(st.sampled_from(batches))
    # Base offset, length and leader epoch are outside the CRC (a leader rewrites the
    # first and last); the length is checked against the data; magic onwards is covered.
    where = data.draw(st.integers(batch.position + 16, batch.position + batch.size - 1))
    buf[where] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptRecordError):
        validate_records(buf)
    assert valid_prefix_length(buf) <= batch.position


@settings(deadline=None, max_examples=100)
@given(groups=batches_strategy, data=st.data())
def test_truncated_data_is_rejected_and_the_prefix_is_whole_batches(
    groups: list[list[Item]], data: st.DataObject
) -> None:
    buf = bytes(_batches(groups))
    records = decode_records(buf)
    ends = [b.position + b.size for b in iter_batches(buf)]
    counts = [len(items) for items in groups]
    cut = data.draw(st.integers(1, len(buf) - 1))
    whole = sum(1 for end in ends if end <= cut)
    if cut in ends:
        assert validate_records(buf[:cut]).batches == whole
    else:
        with pytest.raises(CorruptRecordError):
            validate_records(buf[:cut])
    assert valid_prefix_length(buf[:cut]) == (ends[whole - 1] if whole else 0)
    assert decode_records(buf[:cut], allow_partial_tail=True) == records[: sum(counts[:whole])]


def test_no_bytes_are_no_batch() -> None:
    with pytest.raises(CorruptRecordError, match="no record batch"):
        validate_records(b"")


def test_replicated_batches_must_continue_each_other() -> None:
    data = encode_records([(None, b"a", 1)], base_offset=5) + encode_records(
        [(None, b"b", 1)], base_offset=5
    )
    with pytest.raises(CorruptRecordError, match="starts at offset 5, expected 6"):
        validate_records(data)


def test_a_batch_whose_count_and_last_offset_delta_disagree_is_corrupt() -> None:
    data = bytearray(encode_records([(None, b"a", 1), (None, b"b", 2)]))
    data[23:27] = (5).to_bytes(4, "big")  # last offset delta: outside nothing, CRC refreshed
    _refresh_crc(data)
    with pytest.raises(CorruptRecordError, match="last offset delta 5"):
        validate_records(data)


def test_records_with_shuffled_offset_deltas_are_refused_on_a_leader() -> None:
    built = batch_of([NewRecord(timestamp=1, value=b"a"), NewRecord(timestamp=1, value=b"b")])
    swapped = type(built.records[0])(offset_delta=1, value=b"a")
    second = type(built.records[0])(offset_delta=0, value=b"b")
    data = bytearray(encode_batch(replace(built, records=(swapped, second))))
    with pytest.raises(CorruptRecordError, match="offset delta 1, expected 0"):
        assign_offsets(data, 0)


@settings(deadline=None, max_examples=100)
@given(groups=batches_strategy, data=st.data())
def test_records_from_keeps_exactly_the_records_at_and_after_an_offset(
    groups: list[list[Item]], data: st.DataObject
) -> None:
    base = 40
    buf = bytes(_batches(groups, base))
    records = decode_records(buf)
    offset = data.draw(st.integers(base, records[-1].offset))
    kept = records_from(buf, offset)
    assert decode_records(kept) == [r for r in records if r.offset >= offset]
    assert validate_records(kept).first_offset == offset


def test_records_from_keeps_the_producer_and_moves_the_sequence_on() -> None:
    data = encode_records(
        [(None, b"a", 1), (None, b"b", 2), (None, b"c", 3)],
        base_offset=10,
        producer_id=42,
        producer_epoch=3,
        base_sequence=100,
    )
    kept = decode_batch(records_from(data, 12))
    assert (kept.base_offset, kept.producer_id, kept.producer_epoch, kept.base_sequence) == (
        12,
        42,
        3,
        102,
    )
    assert [r.value for r in kept.records] == [b"c"]
