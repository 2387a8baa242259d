"""Reading results.json back per key, to compare with what scenarios expect."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tests.unit.checkers.scenarios import Outcome

LOSS_TYPES = frozenset(
    {"lost-write", "unseen", "inconsistent-offsets", "unclean-loss-window", "lost-acked-write"}
)


def found_by_key(results: dict[str, Any]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(anomaly types per key, expected-loss types per key) from results' samples."""
    anomalies: dict[str, set[str]] = defaultdict(set)
    expected: dict[str, set[str]] = defaultdict(set)
    for section in results["checkers"].values():
        for name, samples in section["anomalies"].items():
            for sample in samples:
                anomalies[str(sample["key"])].add(name)
        for name, samples in section.get("expected", {}).items():
            for sample in samples:
                expected[str(sample["key"])].add(name)
    return anomalies, expected


def as_expected(outcome: Outcome) -> Outcome:
    """The same outcome under a configuration that allows its losses."""
    moved = Outcome()
    for key, names in outcome.anomalies.items():
        if key in outcome.unexcused:
            moved.anomalies[key] = set(names)
            continue
        loss = LOSS_TYPES | outcome.caused_by_loss
        kept = names - loss
        if kept:
            moved.anomalies[key] = kept
        if names & loss:
            moved.expected[key] = names & loss
    for key, names in outcome.expected.items():
        moved.expected.setdefault(key, set()).update(names)
    return moved


def assert_outcome(results: dict[str, Any], name: str, outcome: Outcome) -> None:
    """The keys of scenario `name` show exactly what its outcome says."""
    anomalies, expected = found_by_key(results)
    keys = {key for key in set(anomalies) | set(expected) | set(outcome.anomalies)
            | set(outcome.expected) if key == name or key.startswith(f"{name}-")}  # fmt: skip
    for key in sorted(keys | {name}):
        assert anomalies.get(key, set()) == outcome.anomalies.get(key, set()), (
            f"scenario {name}, key {key}: anomalies"
        )
        assert expected.get(key, set()) == outcome.expected.get(key, set()), (
            f"scenario {name}, key {key}: expected losses"
        )
