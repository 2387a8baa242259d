"""Where an unclean leader's log replaces the old leader's: an offset seen holding one value
before the unclean election and another after, and a value seen at one offset before and at
another after (an idempotent producer's retry that landed on the old lineage while its first
attempt survived on the unclean leader's). Expected where unclean election is allowed, with
the election as the reason; anomalies elsewhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from tests.unit.checkers.history_builder import HistoryBuilder

ALL = CheckConfig(sample=100)


@pytest.mark.parametrize("unclean", [True, False])
def test_a_value_seen_on_both_lineages_of_an_unclean_election(
    spark: Any, tmp_path: Path, unclean: bool
) -> None:
    b = HistoryBuilder(
        tmp_path,
        test_json={
            "workload": {"acks": -1, "producer_retries": 0},
            "topic": {"unclean_leader_election": unclean, "min_insync_replicas": 1},
        },
    )
    writer, reader, later = b.process(), b.process(), b.process()
    b.send1(writer, "k", "a0", 0)
    # The old leader: a1 at 1 and x at 2 (x's first attempt went to the replica elected
    # uncleanly below, whose log holds it at 1; its retry landed here, at 2).
    b.send1(writer, "k", "a1", 1)
    b.send1(writer, "k", "x", 2)
    b.poll(reader, {"k": [(0, "a0"), (1, "a1"), (2, "x")]})
    b.election("k", unclean=True)
    b.send1(writer, "k", "y", 2)
    b.poll(later, {"k": [(0, "a0"), (1, "x"), (2, "y")]})
    results = check_history(b.close(), config=ALL)
    offsets = results["checkers"]["offsets"]
    if not unclean:
        assert offsets["counts"] == {"inconsistent-offsets": 2, "duplicate": 1}
        return
    assert offsets["counts"] == {"inconsistent-offsets": 0, "duplicate": 0}
    assert offsets["expected_counts"]["duplicate"] == 1
    duplicate = offsets["expected"]["duplicate"][0]
    assert duplicate["value"] == "x" and sorted(duplicate["offsets"]) == [1, 2]
    assert duplicate["expected_because"].startswith("seen at offset 2 before the unclean election")
    assert offsets["expected_counts"]["inconsistent-offsets"] == 2
    assert "duplicate" not in results["anomaly_types"]
    assert "inconsistent-offsets" not in results["anomaly_types"]
