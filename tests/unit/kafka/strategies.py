"""Hypothesis strategies for the Kafka codec's values, derived from the message schemas."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from system_under_test.kafka.record import Record, RecordHeader
from system_under_test.kafka.record_batch import RecordBatch
from system_under_test.kafka.schema import (
    BOOLEAN,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    Array,
    StructType,
    WireType,
    wire_of,
)


def _bits(bits: int) -> st.SearchStrategy[int]:
    return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


_PRIMITIVES: dict[int, st.SearchStrategy[Any]] = {
    id(INT8): _bits(8),
    id(INT16): _bits(16),
    id(INT32): _bits(32),
    id(INT64): _bits(64),
    id(BOOLEAN): st.booleans(),
    id(STRING): st.text(max_size=12),
    id(BYTES): st.binary(max_size=24),
    id(RECORDS): st.binary(max_size=24),
}


def values(wire_type: WireType, version: int, nullable: bool) -> st.SearchStrategy[Any]:
    """Any value a field of this type can carry at a version."""
    if isinstance(wire_type, StructType):
        strategy = structs(wire_type.cls, version)
    elif isinstance(wire_type, Array):
        strategy = st.lists(values(wire_type.element, version, False), max_size=3)
    else:
        strategy = _PRIMITIVES[id(wire_type)]
    return st.none() | strategy if nullable else strategy


def structs(cls: type[Any], version: int) -> st.SearchStrategy[Any]:
    """Instances of a @struct class whose fields absent at ``version`` hold their defaults."""
    fields = {
        name: values(wire_type, version, nullable)
        for name, wire_type, nullable in wire_of(cls).at(version)
    }
    return st.fixed_dictionaries(fields).map(lambda kwargs: cls(**kwargs))


_headers = st.lists(
    st.builds(RecordHeader, st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
).map(tuple)

records = st.builds(
    Record,
    offset_delta=_bits(32),
    timestamp_delta=_bits(64),
    key=st.none() | st.binary(max_size=16),
    value=st.none() | st.binary(max_size=32),
    headers=_headers,
)


@st.composite
def record_batches(
    draw: st.DrawFn, *, attributes: st.SearchStrategy[int] | None = None
) -> RecordBatch:
    """Any uncompressed batch; attribute bits other than compression are drawn freely."""
    attribute_bits = attributes if attributes is not None else _bits(16).map(lambda a: a & ~0x07)
    return RecordBatch(
        base_offset=draw(_bits(64)),
        partition_leader_epoch=draw(_bits(32)),
        attributes=draw(attribute_bits),
        last_offset_delta=draw(_bits(32)),
        base_timestamp=draw(_bits(64)),
        max_timestamp=draw(_bits(64)),
        producer_id=draw(_bits(64)),
        producer_epoch=draw(_bits(16)),
        base_sequence=draw(_bits(32)),
        records=tuple(draw(st.lists(records, max_size=5))),
    )
