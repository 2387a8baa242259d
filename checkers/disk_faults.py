"""The faults that change what a broker's disk holds, as applied: `power-loss` (what was
not fsynced is gone), `corrupt-file`, `truncate-file` and `rollback` (docs/history.md,
nemesis events). A replica hit by one may hold less, or other records, than it held
before; one no such fault hit keeps every record it appended until its own protocol
truncates it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from checkers.events import NemesisEvent

DISK_FAULTS = frozenset({"power-loss", "corrupt-file", "truncate-file", "rollback"})


@dataclass(frozen=True)
class DiskFault:
    """One fault on disks: its history index, time (the operations' clock), name and the
    brokers whose disks it hit (by test.json's `brokers`)."""

    index: int
    time: int
    f: str
    brokers: frozenset[int]


def disk_faults(
    nemesis: Sequence[NemesisEvent], brokers: Mapping[str, int] | None
) -> tuple[DiskFault, ...]:
    """The history's faults on disks that did not fail, in history order, each with the
    brokers of its `outcome` (else of its `targets`); none without `brokers`, which tell
    nodes and broker ids apart."""
    if not brokers:
        return ()
    found = []
    for index, time, f, value_json in nemesis:
        if f not in DISK_FAULTS or value_json is None:
            continue
        try:
            value = json.loads(value_json)
        except ValueError:
            continue
        if not isinstance(value, dict) or value.get("error"):
            continue
        outcome = value.get("outcome")
        nodes = outcome if isinstance(outcome, dict) else value.get("targets")
        hit = frozenset(brokers[n] for n in nodes or () if isinstance(n, str) and n in brokers)
        if hit:
            found.append(DiskFault(index, time, f, hit))
    return tuple(found)
