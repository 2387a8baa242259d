"""Each node's wall clock against the control machine's, measured over its command channel.

The SUT stamps its events with the node's wall clock; the runner places them on the
history's time line by subtracting the node's offset measured here (docs/history.md, SUT
events). An offset is read as Cristian's algorithm reads it: `date +%s%N` run on the node,
taken to have run at the midpoint of the round trip; of a few round trips the shortest is
kept, and its half is the measurement's uncertainty.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from squall.cluster.node import Node

ROUND_TRIPS = 5
BASE_TOLERANCE_NS = 100_000_000
"""What the event times may be off beyond the clocks: an event is written just after the
state it records has changed (after a ZooKeeper write, on a busy event loop), 100 ms."""


@dataclass(frozen=True)
class ClockOffset:
    """A node's clock minus the control machine's (`offset_ns`), within `uncertainty_ns`."""

    node: str
    offset_ns: int
    uncertainty_ns: int


def measure_offset(node: Node, *, round_trips: int = ROUND_TRIPS) -> ClockOffset:
    """The node's clock offset from the round trip with the shortest time."""
    best: tuple[int, int] | None = None
    for _ in range(round_trips):
        sent = time.time_ns()
        output = node.run("date +%s%N", timeout=10).output.strip()
        received = time.time_ns()
        try:
            remote = int(output.splitlines()[-1])
        except (ValueError, IndexError):
            raise ValueError(
                f"{node.name}: `date +%s%N` printed {output!r}, not nanoseconds"
            ) from None
        half = (received - sent) // 2
        if best is None or half < best[1]:
            best = (remote - (sent + half), half)
    assert best is not None
    return ClockOffset(node.name, best[0], best[1])


def measure_offsets(nodes: Iterable[Node]) -> dict[str, ClockOffset]:
    """Every node's clock offset, by name."""
    return {node.name: measure_offset(node) for node in nodes}


def clock_section(
    start: Mapping[str, ClockOffset], end: Mapping[str, ClockOffset] | None = None
) -> dict[str, object]:
    """test.json's `clock`: the offsets at the start (used to correct the event times) and
    at the end (where measured), and `tolerance_ns`, what the corrected times may still be
    off: the base tolerance, the largest uncertainty, and the largest drift over the run."""
    end = end or {}
    uncertainty = max([o.uncertainty_ns for o in [*start.values(), *end.values()]] or [0])
    drift = max(
        [abs(end[name].offset_ns - o.offset_ns) for name, o in start.items() if name in end] or [0]
    )
    section: dict[str, object] = {
        "offsets_ns": {name: o.offset_ns for name, o in start.items()},
        "uncertainty_ns": {name: o.uncertainty_ns for name, o in start.items()},
        "tolerance_ns": BASE_TOLERANCE_NS + uncertainty + drift,
    }
    if end:
        section["end_offsets_ns"] = {name: o.offset_ns for name, o in end.items()}
        section["end_uncertainty_ns"] = {name: o.uncertainty_ns for name, o in end.items()}
    return section
