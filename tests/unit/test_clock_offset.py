"""Clock offsets (squall.cluster.clock): measured over a node's command channel, and the
tolerance test.json gets from them."""

from __future__ import annotations

from pathlib import Path

from squall.cluster.clock import BASE_TOLERANCE_NS, ClockOffset, clock_section, measure_offset
from squall.cluster.local import LocalNode

SECOND = 1_000_000_000


def test_a_node_on_this_machine_shares_its_clock(tmp_path: Path) -> None:
    measured = measure_offset(LocalNode("n1", "127.0.0.1", tmp_path), round_trips=3)
    assert measured.node == "n1"
    assert measured.uncertainty_ns >= 0
    # The same clock: the offset is within the measurement's own uncertainty (a round
    # trip of a process start), not a bound on time.
    assert abs(measured.offset_ns) <= measured.uncertainty_ns


def test_the_tolerance_covers_uncertainty_and_drift() -> None:
    start = {"n1": ClockOffset("n1", 2 * SECOND, 3_000_000), "n2": ClockOffset("n2", 0, 1_000)}
    end = {"n1": ClockOffset("n1", 2 * SECOND + 7_000_000, 2_000_000)}
    section = clock_section(start, end)
    assert section["offsets_ns"] == {"n1": 2 * SECOND, "n2": 0}
    assert section["tolerance_ns"] == BASE_TOLERANCE_NS + 3_000_000 + 7_000_000
    assert section["end_offsets_ns"] == {"n1": 2 * SECOND + 7_000_000}
    assert clock_section(start)["tolerance_ns"] == BASE_TOLERANCE_NS + 3_000_000
