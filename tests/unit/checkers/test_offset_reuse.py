"""A record written below the group's committed position: where the log was cut back below
it and the offset written again (an unclean election does that, and so does a power loss of
every replica under a flush policy that does not fsync before acknowledging), the group
skips the new record. Expected where the configuration allows the cut; an anomaly
elsewhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from checkers.config import NEVER
from checkers.consumer_groups import BELOW_THE_GROUP
from tests.unit.checkers.history_builder import HistoryBuilder
from tests.unit.checkers.test_power_losses import MS, doc_for, lose_power

ALL = CheckConfig(sample=100)


@pytest.mark.parametrize("unclean", [True, False])
def test_a_record_written_below_the_group_s_position(
    spark: Any, tmp_path: Path, unclean: bool
) -> None:
    b = HistoryBuilder(
        tmp_path,
        test_json={"workload": {"acks": -1}, "topic": {"unclean_leader_election": unclean}},
    )
    writer, member, reader = b.process(), b.process(), b.process()
    for offset, value in enumerate(("a0", "a1", "a2")):
        b.send1(writer, "k", value, offset)
    b.subscribe(member, ["k"])
    b.poll(member, {"k": [(0, "a0"), (1, "a1"), (2, "a2")]})
    b.commit(member, {"k": 3})
    # the log cut back to offset 1 (a new leader that had less), and offset 1 written again
    b.send1(writer, "k", "b1", 1)
    b.send1(writer, "k", "b2", 2)
    b.send1(writer, "k", "b3", 3)
    b.poll(member, {"k": [(3, "b3")]})
    b.commit(member, {"k": 4})
    b.poll(reader, {"k": [(0, "a0"), (1, "b1"), (2, "b2"), (3, "b3")]})
    report = check_history(b.close(), config=ALL)["checkers"]["consumer_groups"]
    if unclean:
        cases = report["expected"]["at-least-once-violation"]
        assert sorted(c["value"] for c in cases) == ["b1", "b2"]
        assert all(c["expected_because"] == BELOW_THE_GROUP for c in cases)
        assert report["counts"]["at-least-once-violation"] == 0
    else:
        assert report["counts"]["at-least-once-violation"] == 2


@pytest.mark.parametrize("flush_messages", [NEVER, 1])
def test_a_record_written_below_the_group_s_position_after_a_rack_power_loss(
    spark: Any, tmp_path: Path, flush_messages: int
) -> None:
    """Every replica lost its power after the group had committed past offset 1; the log
    came back cut to 1 and the offset was written again. Allowed where the flush policy does
    not fsync before acknowledging; an anomaly where it does."""
    setting = "log.flush.interval.messages" if flush_messages == NEVER else "flush.messages"
    b = HistoryBuilder(tmp_path, test_json=doc_for(2, flush_messages, setting))
    writer, member, reader = b.process(), b.process(), b.process()
    b.isr_change("k", [1, 2, 3])
    for offset, value in enumerate(("a0", "a1", "a2")):
        b.send1(writer, "k", value, offset)
    b.subscribe(member, ["k"])
    b.poll(member, {"k": [(0, "a0"), (1, "a1"), (2, "a2")]})
    b.commit(member, {"k": 3})
    lose_power(b, "n1", "n2", "n3")
    b.tick(MS)
    b.isr_change("k", [1, 2, 3])
    b.send1(writer, "k", "b1", 1)
    b.send1(writer, "k", "b2", 2)
    b.send1(writer, "k", "b3", 3)
    b.poll(member, {"k": [(3, "b3")]})
    b.commit(member, {"k": 4})
    b.poll(reader, {"k": [(0, "a0"), (1, "b1"), (2, "b2"), (3, "b3")]}, final=True)
    report = check_history(b.close(), config=ALL)["checkers"]["consumer_groups"]
    if flush_messages == 1:
        assert report["counts"]["at-least-once-violation"] == 2
        return
    cases = report["expected"]["at-least-once-violation"]
    assert sorted(c["value"] for c in cases) == ["b1", "b2"]
    assert all(
        "cut the log back below the group's position" in c["expected_because"] for c in cases
    )
    assert all("the power loss of every broker" in c["expected_because"] for c in cases)
    assert report["counts"]["at-least-once-violation"] == 0
