"""`truncated-acknowledged` (checkers.conformance) on hand-written histories: a replica of
the ISR that cut committed records the log kept is found; a cut of records it never surely
held, of records the log lost, a cut racing the acknowledgement, and a cut after a fault on
its disk, a recovery of its log or an unclean election are not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from tests.unit.checkers.history_builder import HistoryBuilder
from tests.unit.checkers.test_conformance import MS, PROMISE, election, isr_change

SETTINGS = {**PROMISE, "brokers": {"n1": 1, "n2": 2, "n3": 3}}


def truncation(b: HistoryBuilder, key: str, broker: int, start: int, end: int, epoch: int,
               *, at: int | None = None) -> None:  # fmt: skip
    b.writer.event(
        "truncation",
        {"key": key, "broker": broker, "from_offset": start, "to_offset": end,
         "leader_epoch": epoch, "reason": "high-watermark"},
        process="sut",
        time=b.tick() if at is None else at,
    )  # fmt: skip


def acked(b: HistoryBuilder, key: str, count: int, **kw: Any) -> list[str]:
    """`count` acks=-1 writes of `key` at offsets 0.., acknowledged one after another."""
    p = b.process()
    values = [f"{key}-{i}" for i in range(count)]
    for offset, value in enumerate(values):
        b.send1(p, key, value, offset, **kw)
    return values


def final_read(b: HistoryBuilder, key: str, values: list[str]) -> None:
    b.poll(b.process(), {key: list(enumerate(values))}, final=True)


def cut_committed(b: HistoryBuilder) -> None:
    """Follower 2, in the ISR while four writes were acknowledged, cuts the last two when
    made follower of 3; the log keeps them all."""
    k = "cut"
    election(b, k, 1, [1, 2, 3], 0)
    values = acked(b, k, 4)
    b.tick(50 * MS)
    election(b, k, 3, [2, 3], 1, previous=1)
    truncation(b, k, 2, 4, 2, 1)
    final_read(b, k, values)


def cut_uncommitted(b: HistoryBuilder) -> None:
    """The cut records were sent with acks=1: nothing was promised for them."""
    k = "acks1"
    election(b, k, 1, [1, 2, 3], 0)
    values = acked(b, k, 2) + [f"{k}-{i}" for i in (2, 3)]
    p = b.process()
    b.send1(p, k, values[2], 2, acks=1)
    b.send1(p, k, values[3], 3, acks=1)
    b.tick(50 * MS)
    truncation(b, k, 2, 4, 2, 1)
    final_read(b, k, values)


def cut_out_of_sync(b: HistoryBuilder) -> None:
    """Broker 3 left the ISR before the writes: its records there were never the
    committed ones. Broker 2 left it while the second write was in flight."""
    k = "outofsync"
    election(b, k, 1, [1, 2, 3], 0)
    isr_change(b, k, 1, [1, 2], 0)
    b.tick(50 * MS)
    p = b.process()
    b.send1(p, k, f"{k}-0", 0)
    invoke = b.writer.write(p, "invoke", "send", [["send", k, f"{k}-1"]], time=b.tick())
    isr_change(b, k, 1, [1], 0, at=b.tick(2 * MS))
    b.writer.complete(invoke, "ok", [["send", k, [1, f"{k}-1"]]], time=b.tick(2 * MS))
    b.tick(50 * MS)
    truncation(b, k, 3, 2, 0, 1)
    truncation(b, k, 2, 2, 1, 1)
    final_read(b, k, [f"{k}-0", f"{k}-1"])


def cut_lost(b: HistoryBuilder) -> None:
    """The log lost the records the replica cut: that is for the loss checkers."""
    k = "lost"
    election(b, k, 1, [1, 2, 3], 0)
    values = acked(b, k, 4)
    b.tick(50 * MS)
    truncation(b, k, 2, 4, 2, 1)
    final_read(b, k, values[:2])


def cut_racing(b: HistoryBuilder) -> None:
    """A truncation logged within the clock tolerance of the acknowledgement."""
    k = "racing"
    election(b, k, 1, [1, 2, 3], 0)
    values = acked(b, k, 2)
    truncation(b, k, 2, 2, 1, 1, at=b.time + 2 * MS)
    final_read(b, k, values)


def cut_after_disk_fault(b: HistoryBuilder) -> None:
    """Broker 2's node lost power (its records may be gone) before it truncated; broker 3
    recovered its log before it did; an unclean election came before broker 1's cut."""
    k = "disturbed"
    election(b, k, 1, [1, 2, 3], 0)
    values = acked(b, k, 4)
    b.tick(50 * MS)
    b.writer.event(
        "power-loss",
        {"targets": ["n2"], "outcome": {"n2": "lost-power"}},
        process="nemesis",
        time=b.tick(),
    )
    b.writer.event(
        "log-recovery",
        {"key": k, "broker": 3, "log_end_offset": 3, "problem": "a record with a wrong CRC"},
        process="sut",
        time=b.tick(),
    )
    election(b, k, 3, [3], 1, previous=1, unclean=True)
    b.tick(50 * MS)
    truncation(b, k, 2, 4, 2, 2)
    truncation(b, k, 3, 3, 2, 2)
    truncation(b, k, 1, 4, 2, 2)
    final_read(b, k, values)


def build(b: HistoryBuilder) -> None:
    for scenario in (
        cut_committed,
        cut_uncommitted,
        cut_out_of_sync,
        cut_lost,
        cut_racing,
        cut_after_disk_fault,
    ):
        scenario(b)


@pytest.fixture(scope="module")
def results(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root: Path = tmp_path_factory.mktemp("truncated")
    builder = HistoryBuilder(root, test_json=SETTINGS)
    build(builder)
    return check_history(builder.close(), config=CheckConfig(sample=100))


def test_a_cut_of_committed_records_the_log_kept_is_found(results: dict[str, Any]) -> None:
    found = results["checkers"]["conformance"]["anomalies"].get("truncated-acknowledged", [])
    assert [(c["key"], c["broker"]) for c in found] == [("cut", 2)]
    case = found[0]
    assert (case["from_offset"], case["to_offset"], case["acknowledged"]) == (4, 2, 2)
    assert (case["offset"], case["value"], case["reason"]) == (2, "cut-2", "high-watermark")
    assert results["checkers"]["conformance"]["counts"]["truncated-acknowledged"] == 1


def test_the_explanation_names_the_truncation(results: dict[str, Any]) -> None:
    (case,) = results["explanations"]["truncated-acknowledged"]["cases"]
    assert case["text"].startswith("key cut: broker 2's truncation on line")
    assert "cut 2 acknowledged writes it held in the ISR" in case["text"]
