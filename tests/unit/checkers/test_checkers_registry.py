"""A checker written outside squall joins a check by registration alone (checkers.registry).

The history: key `a` written and read; key `b` written once with acks=1 and never read,
which squall's checkers count as an expected loss (valid), and which the checker defined
here reports as an anomaly of its own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from checkers import (
    REGISTRY,
    CheckConfig,
    CheckContext,
    Checker,
    CheckerDefinitionError,
    CheckerRegistry,
    CheckerReport,
    TestSettings,
    check_history,
    check_loaded,
    load_history,
    write_results,
)
from checkers.evidence import Evidence
from checkers.findings import Finding, finding
from checkers.key_findings import FindingRow, key_finding, rows_of
from checkers.key_log import KeyLog
from checkers.losses import KeyLosses, LossRules
from checkers.registry import compose, default_checkers
from checkers.results import Validity
from tests.unit.checkers.history_builder import HistoryBuilder

CONFIG = CheckConfig(sample=10)
DEFAULT_NAMES = [
    "offsets",
    "delivery",
    "order",
    "consumer_groups",
    "consumer_anchors",
    "generations",
    "unclean",
    "conformance",
    "replicas",
]


@dataclass(frozen=True)
class UnreadKeys:
    """`unread-key`: a key that `ok` sends wrote to and no `ok` poll read."""

    name: str = "unread_keys"
    anomalies: tuple[str, ...] = ("unread-key",)

    def check(self, context: CheckContext) -> CheckerReport:
        written = (
            context.evidence.writes.filter(F.col("status") == "ok")
            .groupBy("key")
            .agg(F.min("complete_index").alias("writer"), F.count(F.lit(1)).alias("writes"))
        )
        unread = written.join(context.evidence.read_bounds, "key", "left_anti")
        found = finding(
            self.name,
            "unread-key",
            unread,
            order="writer",
            detail=["key", "writer", "writes"],
            json_fields=(),
        )
        return CheckerReport(self.name, [found], details={"judged": "ok sends"})


@dataclass(frozen=True)
class Verdict:
    """A checker that finds nothing and gives a verdict of its own, as a Jepsen checker may."""

    name: str
    valid: Validity
    anomalies: tuple[str, ...] = ()

    def check(self, context: CheckContext) -> CheckerReport:
        return CheckerReport(self.name, [], valid=self.valid)


@dataclass(frozen=True)
class Misnamed:
    """Breaks the protocol: its report carries `report_as` and one finding of `anomaly`."""

    report_as: str
    anomaly: str
    frame: Any
    name: str = "misnamed"
    anomalies: tuple[str, ...] = ("declared",)

    def check(self, context: CheckContext) -> CheckerReport:
        found = Finding(self.report_as, (self.anomaly,), self.frame)
        return CheckerReport(self.report_as, [found])


@pytest.fixture(scope="module")
def history(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    b = HistoryBuilder(tmp_path_factory.mktemp("registry"))
    p, q, c = b.process(), b.process(), b.process()
    b.send1(p, "a", "a-0", 0)
    b.send1(p, "a", "a-1", 1)
    b.poll(c, {"a": [(0, "a-0"), (1, "a-1")]})
    b.send1(q, "b", "b-0", 0, acks=1)
    return b.close()


@pytest.fixture(scope="module")
def baseline(history: Path) -> dict[str, Any]:
    """The check with squall's checkers alone."""
    return check_history(history, config=CONFIG)


def _check(spark: Any, history: Path, checkers: Sequence[Checker]) -> dict[str, Any]:
    loaded = load_history(spark, history)
    return check_loaded(spark, loaded, TestSettings(), CONFIG, checkers=checkers)


def test_the_default_checkers_in_the_order_of_results_json(baseline: dict[str, Any]) -> None:
    assert REGISTRY.names == tuple(DEFAULT_NAMES)
    assert list(baseline["checkers"]) == DEFAULT_NAMES
    assert baseline["valid"] is True
    assert baseline["expected_anomaly_types"] == ["unseen"]


def test_a_registered_checker_is_composed_into_results_json(
    history: Path, baseline: dict[str, Any], tmp_path: Path
) -> None:
    REGISTRY.register(UnreadKeys())
    try:
        results = check_history(history, config=CONFIG)
    finally:
        REGISTRY.unregister("unread_keys")
    doc = json.loads(write_results(results, tmp_path / "results.json").read_text())
    assert list(doc["checkers"]) == [*DEFAULT_NAMES, "unread_keys"]
    assert doc["checkers"]["unread_keys"] == {
        "valid": False,
        "anomalies": {"unread-key": [{"key": "b", "writer": 7, "writes": 1}]},
        "counts": {"unread-key": 1},
        "details": {"judged": "ok sends"},
    }
    assert doc["valid"] is False
    assert doc["anomaly_types"] == ["unread-key"]
    assert doc["expected_anomaly_types"] == baseline["expected_anomaly_types"]
    for name in DEFAULT_NAMES:
        assert doc["checkers"][name] == baseline["checkers"][name]
    assert doc["stats"] == baseline["stats"]
    assert REGISTRY.names == tuple(DEFAULT_NAMES)


@pytest.mark.parametrize(
    ("verdicts", "valid"),
    [
        ([("agrees", True)], True),
        ([("undecided", "unknown"), ("agrees", True)], "unknown"),
        ([("undecided", "unknown"), ("refutes", False)], False),
    ],
)
def test_validity_combines_false_over_unknown_over_true(
    spark: Any, history: Path, verdicts: list[tuple[str, Validity]], valid: Validity
) -> None:
    added = [Verdict(name, verdict) for name, verdict in verdicts]
    results = _check(spark, history, [*default_checkers(), *added])
    assert list(results["checkers"]) == DEFAULT_NAMES + [name for name, _ in verdicts]
    for name, verdict in verdicts:
        assert results["checkers"][name] == {"valid": verdict, "anomalies": {}, "counts": {}}
    assert all(results["checkers"][name]["valid"] is True for name in DEFAULT_NAMES)
    assert results["valid"] == valid
    assert type(results["valid"]) is type(valid)


def test_the_registry_refuses_a_second_checker_of_one_name() -> None:
    registry = CheckerRegistry(default_checkers())
    with pytest.raises(CheckerDefinitionError, match="'order' is already registered"):
        registry.register(Verdict("order", True))
    with pytest.raises(CheckerDefinitionError, match="no checker named 'nope'"):
        registry.unregister("nope")
    assert registry.unregister("order").name == "order"
    assert registry.register(Verdict("order", True)).name == "order"
    assert registry.names == (
        "offsets",
        "delivery",
        "consumer_groups",
        "consumer_anchors",
        "generations",
        "unclean",
        "conformance",
        "replicas",
        "order",
    )


@pytest.mark.parametrize(
    ("report_as", "anomaly", "message"),
    [
        ("other", "declared", "reported under \\['other'\\]"),
        ("misnamed", "undeclared", "anomaly types \\['undeclared'\\] it does not declare"),
    ],
)
def test_compose_holds_checkers_to_the_protocol(
    spark: Any, history: Path, report_as: str, anomaly: str, message: str
) -> None:
    loaded = load_history(spark, history)
    context = CheckContext(
        evidence=Evidence(loaded.ops, loaded.mops),
        assign=loaded.assign,
        events=loaded.events,
        losses=LossRules(TestSettings(), frozenset()),
        unclean_lost=loaded.events.limit(0),
        elections={"leader_elections": 0, "unclean_elections": 0},
        config=CONFIG,
    )
    checker = Misnamed(report_as, anomaly, spark.range(0))
    with pytest.raises(CheckerDefinitionError, match=message):
        compose([checker], context)
    with pytest.raises(CheckerDefinitionError, match="'agrees' is already registered"):
        compose([Verdict("agrees", True), Verdict("agrees", False)], context)


@dataclass(frozen=True)
class LongValues:
    """A per-key checker of one's own: `long-value`, a sent value longer than 6 characters
    of JSON text; and, through `check`, the writes lost in unclean windows as `window-loss`."""

    name: str = "long_values"
    anomalies: tuple[str, ...] = ("long-value", "window-loss")

    def check_key(self, log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
        long = log.writes[log.writes["value"].str.len() > 6]
        return rows_of(
            self.name,
            "long-value",
            long.assign(key=log.key),
            order="invoke_index",
            detail=[("key", "key"), ("value", "value")],
        )

    def check(self, context: CheckContext) -> CheckerReport:
        lost = finding(
            self.name,
            "window-loss",
            context.unclean_lost,
            order="election_index",
            detail=["key", "value", "election_index"],
        )
        own = key_finding(context.key_findings, self.name, ("long-value",))
        return CheckerReport(self.name, [own, lost])


def test_a_checker_of_ones_own_joins_the_per_key_pass(tmp_path: Path) -> None:
    b = HistoryBuilder(tmp_path)
    p, c = b.process(), b.process()
    b.send1(p, "k", "ab", 0)
    b.send1(p, "k", "abcdef", 1)
    b.poll(c, {"k": [(0, "ab"), (1, "abcdef")]})
    b.election("k", unclean=True)
    b.send1(b.process(), "k", "new", 1)
    b.poll(c, {"k": [(0, "ab"), (1, "new")]})
    results = check_history(b.close(), config=CONFIG, checkers=[*default_checkers(), LongValues()])
    section = results["checkers"]["long_values"]
    assert section["counts"] == {"long-value": 1, "window-loss": 1}
    assert section["anomalies"]["long-value"] == [{"key": "k", "value": "abcdef"}]
    (window,) = results["checkers"]["unclean"]["anomalies"]["unclean-loss-window"]
    assert section["anomalies"]["window-loss"] == [
        {"key": "k", "value": "abcdef", "election_index": window["election"]}
    ]
