"""Failures by error: the client completions that were `fail` or `info`, grouped by `f` and
by their error with the numbers and addresses taken out, so that ``cannot connect to broker
10.0.0.11:9092`` and ``... 10.0.0.12:9092`` count as one error."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from histories import Operation

NO_ERROR = "(no error given)"

_PATTERNS = [
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\[[0-9a-fA-F:]*:[0-9a-fA-F:]*\](?::\d+)?"), "<addr>"),  # [::1]:9092
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<addr>"),
    (re.compile(r"\b(?:[A-Za-z0-9-]+\.)*[A-Za-z][A-Za-z0-9-]*:\d{2,5}\b"), "<addr>"),  # host:port
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "N"),
    (re.compile(r"(?<![A-Za-z0-9_.])\d+(?:\.\d+)?"), "N"),  # not in n2, log4j2, v1.2
]  # fmt: skip


def normalise_error(text: str) -> str:
    """An error message without its addresses (``<addr>``), ids (``<id>``) and numbers
    (``N``, also in names such as ``squall-queue-N``)."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


@dataclass(slots=True)
class FailureGroup:
    """Completions of one `f` with one normalised error: how many were `fail` and `info`,
    the first and last (seconds since the history began) and the first message as written."""

    f: str
    error: str
    fail: int
    info: int
    first_s: float
    last_s: float
    example: str

    @property
    def count(self) -> int:
        return self.fail + self.info


def failures_by_error(history: Iterable[Operation]) -> list[FailureGroup]:
    """The `fail` and `info` client completions of a history by (f, normalised error), most
    frequent first; one pass over the history."""
    groups: dict[tuple[str, str], FailureGroup] = {}
    normalised: dict[str, str] = {}
    for op in history:
        kind = op.type
        if (kind != "fail" and kind != "info") or type(op.process) is not int:
            continue
        message = op.error if op.error is not None else NO_ERROR
        error = normalised.get(message)
        if error is None:
            error = normalised[message] = normalise_error(message)
        seconds = op.time / 1e9
        group = groups.get((op.f, error))
        if group is None:
            group = groups[(op.f, error)] = FailureGroup(
                op.f, error, 0, 0, seconds, seconds, message
            )
        if kind == "fail":
            group.fail += 1
        else:
            group.info += 1
        group.first_s = min(group.first_s, seconds)
        group.last_s = max(group.last_s, seconds)
    return sorted(groups.values(), key=lambda g: (-g.count, g.f, g.error))
