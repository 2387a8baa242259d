"""Malformed input: garbage, truncations and mutations of valid frames and batches only ever
raise KafkaCodecError (a ValueError), quickly, whatever the bytes claim."""

from __future__ import annotations

import contextlib
import struct
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from system_under_test.errors import KafkaCodecError
from system_under_test.kafka.apis import APIS
from system_under_test.kafka.framing import decode_request, decode_response, encode_request
from system_under_test.kafka.record_batch import decode_batch, encode_batch, split_batches
from system_under_test.kafka.schema import Body, decode_body, encode_body
from tests.unit.kafka.strategies import record_batches, structs

FUZZ = settings(
    max_examples=20,
    deadline=timedelta(seconds=5),  # a hang, not a slow machine
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CASES = [
    pytest.param(cls, version, id=f"{cls.__name__}-v{version}")
    for api in APIS.values()
    for cls in (api.request, api.response)
    for version in range(api.min_version, api.max_version + 1)
]


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    """``valid`` with a few bytes overwritten, inserted or deleted, or cut short."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["set", "insert", "delete", "cut"]))
        at = draw(st.integers(0, len(data)))
        if kind == "set" and at < len(data):
            data[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, draw(st.integers(0, 255))]))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 4))]
        else:
            del data[at:]
    return bytes(data)


def _decode_anything(payload: bytes) -> None:
    """Every decoder a broker or client would run over bytes it received."""
    with contextlib.suppress(KafkaCodecError):
        decode_request(payload)
    for key, api in APIS.items():
        for version in range(api.min_version, api.max_version + 1):
            with contextlib.suppress(KafkaCodecError):
                decode_response(payload, key, version)


@FUZZ
@given(st.binary(max_size=64))
def test_garbage_frames(payload: bytes) -> None:
    _decode_anything(payload)


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_mutated_bodies(cls: type[Body], version: int) -> None:
    @FUZZ
    @given(st.data())
    def check(data: st.DataObject) -> None:
        body = data.draw(structs(cls, version))
        bad = data.draw(mutated(bytes(encode_body(body, version))))
        try:
            decode_body(cls, bad, version)
        except KafkaCodecError as err:
            assert str(err).startswith(cls.__name__)

    check()


@FUZZ
@given(st.data())
def test_mutated_request_frames(data: st.DataObject) -> None:
    api = data.draw(st.sampled_from(list(APIS.values())))
    version = data.draw(st.integers(api.min_version, api.max_version))
    frame = encode_request(data.draw(structs(api.request, version)), version, 1, "c")
    _decode_anything(data.draw(mutated(frame[4:])))


def _read_all_batches(data: bytes) -> None:
    try:
        found = split_batches(data)
    except KafkaCodecError:
        return
    for view in found.batches:
        view.crc_ok()
        assert view.size == len(view.data)
        for verify_crc in (True, False):
            with contextlib.suppress(KafkaCodecError):
                view.decode(verify_crc=verify_crc)


@FUZZ
@given(st.binary(max_size=128))
def test_garbage_batches(data: bytes) -> None:
    _read_all_batches(data)
    _read_all_batches(struct.pack(">qib", 0, len(data) + 5, 0) + b"\x00\x00\x00\x02" + data)


@FUZZ
@given(st.data())
def test_mutated_batches(data: st.DataObject) -> None:
    batches = data.draw(st.lists(record_batches(), min_size=1, max_size=3))
    _read_all_batches(data.draw(mutated(b"".join(encode_batch(b) for b in batches))))


@FUZZ
@given(record_batches(), st.data())
def test_every_truncated_batch_is_a_codec_error_or_partial(batch, data: st.DataObject) -> None:
    encoded = encode_batch(batch)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(KafkaCodecError):
        decode_batch(encoded[:cut])
    found = split_batches(encoded[:cut])
    assert found.batches == []
    assert cut == 0 or found.partial is not None


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_forged_counts_and_lengths_fail_fast(cls: type[Body], version: int) -> None:
    """A count or length near 2**31 in the first field that has one fails without allocating."""
    for forged in (b"\x7f\xff\xff\xff" * 8, b"\x7f\xff" * 16):
        with contextlib.suppress(KafkaCodecError):
            decode_body(cls, forged, version)
