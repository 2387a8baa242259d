"""Unique values: every value a test sends is an int no other send of the test uses.

Checkers tell records apart by value (docs/history.md: "Every value sent in one test is
unique"), so one `ValueSequence` serves all the producers of a test. On the wire a value
is its decimal digits, padded with spaces to the workload's value size; records that do not
decode as ours go into the history as text, so foreign data is still evidence.
"""

from __future__ import annotations

import threading

_PAD = b" "


class NumberSequence:
    """Hands out consecutive ints from `start`, each exactly once; thread-safe."""

    __slots__ = ("_lock", "_next")

    def __init__(self, start: int = 0) -> None:
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ValueError(f"start is {start!r}, expected an integer >= 0")
        self._next = start
        self._lock = threading.Lock()

    def next(self) -> int:
        """A value never returned before by this sequence."""
        with self._lock:
            value = self._next
            self._next = value + 1
        return value

    @property
    def issued(self) -> int:
        """The next value to be handed out (so every value below it has been)."""
        return self._next


class ValueSequence(NumberSequence):
    """The values of one test's sends: consecutive ints, each handed out once."""

    __slots__ = ()


def encode_value(value: int, size: int = 0) -> bytes:
    """The record bytes of `value`: its digits, padded with spaces to at least `size` bytes."""
    digits = str(value).encode("ascii")
    if len(digits) >= size:
        return digits
    return digits + _PAD * (size - len(digits))


def decode_value(raw: bytes | None) -> int | str:
    """The value a record carries: an int if it is one of ours, else its text."""
    if raw is None:
        return ""
    digits = raw.rstrip(_PAD)
    if digits.isdigit() and (digits == b"0" or not digits.startswith(b"0")):
        return int(digits)
    return raw.decode("utf-8", errors="replace")
