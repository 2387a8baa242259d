"""The record codec: round trips, offset assignment and corruption detection."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from system_under_test.log.record import (
    RECORD_OVERHEAD,
    CorruptRecordError,
    Record,
    assign_offsets,
    decode_records,
    encode_records,
    iter_record_positions,
    read_offset,
    read_timestamp,
    valid_prefix_length,
    validate_records,
)

items_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(-(2**63), 2**63 - 1),
    ),
    min_size=1,
    max_size=20,
)


@settings(deadline=None, max_examples=200)
@given(items=items_strategy, base=st.integers(0, 2**62))
def test_encode_decode_round_trip(
    items: list[tuple[bytes | None, bytes | None, int]], base: int
) -> None:
    data = encode_records(items, base_offset=base)
    records = decode_records(data)
    assert records == [Record(base + i, ts, key, value) for i, (key, value, ts) in enumerate(items)]
    assert len(data) == sum(r.size for r in records)
    assert sum(RECORD_OVERHEAD + len(k or b"") + len(v or b"") for k, v, _ in items) == len(data)
    positions = list(iter_record_positions(data))
    assert [p.offset for p in positions] == [r.offset for r in records]
    assert [read_offset(data, p.position) for p in positions] == [r.offset for r in records]
    assert [read_timestamp(data, p.position) for p in positions] == [r.timestamp for r in records]


@settings(deadline=None, max_examples=100)
@given(items=items_strategy, base=st.integers(0, 2**40))
def test_assign_offsets_rewrites_offsets_and_keeps_crc_valid(
    items: list[tuple[bytes | None, bytes | None, int]], base: int
) -> None:
    batch = bytearray(encode_records(items, base_offset=12345))
    info = assign_offsets(batch, base)
    assert (info.first_offset, info.last_offset, info.count) == (
        base,
        base + len(items) - 1,
        len(items),
    )
    assert info.size == len(batch)
    max_ts = max(ts for _, _, ts in items)
    assert info.max_timestamp == max(max_ts, -1)
    if max_ts > -1:
        first_with_max = next(i for i, (_, _, ts) in enumerate(items) if ts == max_ts)
        assert info.offset_of_max_timestamp == base + first_with_max
    assert [r.offset for r in decode_records(batch)] == list(range(base, base + len(items)))
    assert validate_records(batch) == info


@settings(deadline=None, max_examples=200)
@given(items=items_strategy, data=st.data())
def test_any_flipped_byte_after_the_offset_is_detected(
    items: list[tuple[bytes | None, bytes | None, int]], data: st.DataObject
) -> None:
    batch = bytearray(encode_records(items))
    positions = list(iter_record_positions(batch))
    record = data.draw(st.sampled_from(positions))
    # Offsets are not covered by the CRC; every other byte of a record is checked.
    where = data.draw(st.integers(record.position + 8, record.position + record.size - 1))
    batch[where] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptRecordError):
        validate_records(batch)
    assert valid_prefix_length(batch) <= record.position


@settings(deadline=None, max_examples=100)
@given(items=items_strategy, data=st.data())
def test_truncated_batches_are_rejected_and_prefix_is_whole_records(
    items: list[tuple[bytes | None, bytes | None, int]], data: st.DataObject
) -> None:
    batch = encode_records(items)
    records = decode_records(batch)
    ends = [p.position + p.size for p in iter_record_positions(batch)]
    cut = data.draw(st.integers(1, len(batch) - 1))
    whole = sum(1 for end in ends if end <= cut)
    if cut in ends:
        assert validate_records(batch[:cut]).count == whole
    else:
        with pytest.raises(CorruptRecordError):
            validate_records(batch[:cut])
    assert valid_prefix_length(batch[:cut]) == (ends[whole - 1] if whole else 0)
    assert decode_records(batch[:cut], allow_partial_tail=True) == records[:whole]


def test_empty_batch_is_invalid() -> None:
    with pytest.raises(CorruptRecordError, match="no records"):
        validate_records(b"")


def test_follower_batch_with_decreasing_offsets_is_invalid() -> None:
    batch = encode_records([(None, b"a", 1)], base_offset=5) + encode_records(
        [(None, b"b", 1)], base_offset=5
    )
    with pytest.raises(CorruptRecordError, match="does not follow"):
        validate_records(batch)
