"""The records of __consumer_offsets and which partition holds a group."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from system_under_test.errors import KafkaCodecError
from system_under_test.group_metadata_manager import java_string_hash, partition_for
from system_under_test.kafka.group_metadata import (
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetRecord,
    decode_record,
    group_record,
    offset_record,
)


def test_a_groups_partition_is_javas_string_hash_as_kafka_takes_it() -> None:
    # Values of Java's "...".hashCode(): ASCII, a negative one, and a character beyond the
    # Basic Multilingual Plane (two UTF-16 code units).
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # its surrogate pair
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_an_offset_commit_is_kafkas_bytes() -> None:
    key, value = offset_record(
        OffsetCommitKey(group="g", topic="t", partition=3),
        OffsetCommitValue(offset=42, metadata="m", commit_timestamp=7),
    )
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert value == (
        b"\x00\x01" + (42).to_bytes(8, "big") + b"\x00\x01m" + (7).to_bytes(8, "big") + b"\xff" * 8
    )
    # Version 0 values (no expire timestamp) read too.
    v0 = b"\x00\x00" + (42).to_bytes(8, "big") + b"\x00\x00" + (7).to_bytes(8, "big")
    decoded = decode_record(key, v0)
    assert isinstance(decoded, OffsetRecord) and decoded.value is not None
    assert (decoded.value.offset, decoded.value.metadata) == (42, "")


names = st.text(max_size=20)


@given(
    group=names,
    generation=st.integers(0, 2**31 - 1),
    members=st.lists(
        st.builds(
            MemberMetadata,
            member_id=names,
            client_id=names,
            client_host=names,
            rebalance_timeout=st.integers(0, 2**31 - 1),
            session_timeout=st.integers(0, 2**31 - 1),
            subscription=st.binary(max_size=30),
            assignment=st.binary(max_size=30),
        ),
        max_size=4,
    ),
)
def test_group_metadata_round_trips(
    group: str, generation: int, members: list[MemberMetadata]
) -> None:
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=generation,
        protocol="range" if members else None,
        leader=members[0].member_id if members else None,
        current_state_timestamp=5,
        members=members,
    )
    decoded = decode_record(*group_record(GroupMetadataKey(group=group), value))
    assert decoded == GroupRecord(GroupMetadataKey(group=group), value)


def test_tombstones_and_records_of_no_known_kind() -> None:
    key, _ = offset_record(
        OffsetCommitKey(group="g", topic="t", partition=0),
        OffsetCommitValue(offset=1, metadata="", commit_timestamp=0),
    )
    assert decode_record(key, None) == OffsetRecord(
        OffsetCommitKey(group="g", topic="t", partition=0), None
    )
    with pytest.raises(KafkaCodecError, match="key version 9"):
        decode_record(b"\x00\x09", b"")
    with pytest.raises(KafkaCodecError, match="without a key"):
        decode_record(None, b"")
    with pytest.raises(KafkaCodecError):
        decode_record(key[:-1], None)  # truncated
