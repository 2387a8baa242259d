"""The Kafka listener's produced batches: RecordBatch v2 kept as it came, or refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.errors import ErrorCode
from system_under_test.kafka.record_batch import NewRecord, batch_of, decode_batch, encode_batch
from system_under_test.kafka_handler import KafkaRecordsError, api_version_ranges, produced_batch
from system_under_test.log.record import assign_offsets, decode_records
from tests.unit.kafka.kafka_python import DefaultRecordBatch, DefaultRecordBatchBuilder

_bytes = st.none() | st.binary(max_size=40)
_items = st.lists(
    st.tuples(_bytes, _bytes, st.integers(0, 2**41)),
    min_size=1,
    max_size=20,
)


def _kafka_python_batch(
    items: list[tuple[bytes | None, bytes | None, int]],
    *,
    compression: int = 0,
    producer_id: int = -1,
    headers: list[tuple[str, bytes]] | None = None,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 20,
    )
    for offset, (key, value, timestamp) in enumerate(items):
        builder.append(offset, timestamp, key, value, headers or [])
    return bytes(builder.build())


@given(_items, st.integers(0, 2**40))
def test_a_produced_batch_is_stored_and_fetched_as_it_came_at_the_leaders_offsets(
    items: list[tuple[bytes | None, bytes | None, int]], base_offset: int
) -> None:
    produced = _kafka_python_batch(items, headers=[("h", b"x")])
    stored = produced_batch(produced)
    assign_offsets(stored, base_offset, leader_epoch=7)
    theirs = DefaultRecordBatch(bytearray(stored))  # what a fetch hands kafka-python
    assert theirs.validate_crc()
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in theirs] == [
        (base_offset + i, key, value, timestamp, [("h", b"x")])
        for i, (key, value, timestamp) in enumerate(items)
    ]
    batch = decode_batch(stored)
    assert (batch.base_offset, batch.partition_leader_epoch) == (base_offset, 7)
    assert len(stored) == len(produced)
    assert [r.value for r in decode_records(stored)] == [value for _, value, _ in items]


def _refusal(records: bytes | None) -> ErrorCode:
    with pytest.raises(KafkaRecordsError) as raised:
        produced_batch(records)
    return raised.value.code


def test_batches_the_log_cannot_keep_are_refused() -> None:
    one = encode_batch(batch_of([NewRecord(timestamp=1, value=b"v")]))
    assert _refusal(None) == ErrorCode.CORRUPT_MESSAGE
    assert _refusal(one + one) == ErrorCode.INVALID_RECORD
    assert _refusal(one[:-1]) == ErrorCode.INVALID_RECORD
    damaged = bytearray(one)
    damaged[-2] ^= 0xFF
    assert _refusal(bytes(damaged)) == ErrorCode.CORRUPT_MESSAGE
    gzip = _kafka_python_batch([(None, b"v" * 100, 1)], compression=1)
    assert _refusal(gzip) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    idempotent = _kafka_python_batch([(None, b"v", 1)], producer_id=7)
    assert produced_batch(idempotent) == idempotent  # its sequence is the log's to check


ADVERTISED = {
    0: (3, 7),
    1: (4, 11),
    2: (1, 5),
    3: (0, 8),
    8: (2, 7),
    9: (1, 5),
    10: (0, 2),
    11: (2, 5),
    12: (0, 3),
    13: (0, 2),
    14: (0, 3),
    18: (0, 2),
    19: (2, 3),
    22: (0, 1),
}
"""The versions the Kafka listener advertises, by API key (InitProducerId's among them)."""


def test_the_advertised_versions_include_init_producer_id() -> None:
    ranges = {v.api_key: (v.min_version, v.max_version) for v in api_version_ranges()}
    assert ranges == ADVERTISED
