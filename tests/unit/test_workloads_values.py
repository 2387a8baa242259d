"""Unique values: one sequence per test, never a value twice, even across threads."""

from __future__ import annotations

import threading

import pytest

from workloads import ValueSequence, decode_value, encode_value


def test_values_are_unique_across_threads() -> None:
    values = ValueSequence()
    drawn: list[list[int]] = [[] for _ in range(8)]

    def draw(out: list[int]) -> None:
        for _ in range(5000):
            out.append(values.next())

    threads = [threading.Thread(target=draw, args=(out,)) for out in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [v for out in drawn for v in out]
    assert len(set(every)) == len(every) == 40000
    assert sorted(every) == list(range(40000))
    assert values.issued == 40000


def test_a_sequence_can_start_after_values_already_used() -> None:
    values = ValueSequence(start=100)
    assert [values.next(), values.next()] == [100, 101]
    with pytest.raises(ValueError, match="start is -1"):
        ValueSequence(start=-1)


@pytest.mark.parametrize("size", [0, 1, 3, 64])
def test_encoding_pads_to_the_value_size_and_decodes_back(size: int) -> None:
    for value in (0, 7, 123, 10**12):
        raw = encode_value(value, size)
        assert len(raw) >= size
        assert decode_value(raw) == value


def test_records_that_are_not_ours_decode_as_text() -> None:
    assert decode_value(b"hello") == "hello"
    assert decode_value(b"007") == "007"
    assert decode_value(b"-3") == "-3"
    assert decode_value(None) == ""
    assert decode_value(b"\xff") == "\ufffd"
