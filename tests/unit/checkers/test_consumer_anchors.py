"""Consumers followed across processes (checkers.consumer_anchors) on hand-written
histories: a fresh consumer reading below the committed offset its group held, a commit
going backwards; and what does not count (a consumer starting at its anchor, commits of
several processes interleaving, a commit that may have landed concurrently, final reads,
a truncation that explains the step back); and truncations that explain nothing: a
deposed leader cutting its divergent tail above the high watermark of its deposition, and
a replica out of the ISR cutting its records)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from tests.unit.checkers.history_builder import HistoryBuilder, unfsynced_test_json


def log_of(b: HistoryBuilder, key: str, count: int) -> list[str]:
    p = b.process()
    values = [f"{key}-{i}" for i in range(count)]
    for i, value in enumerate(values):
        b.send1(p, key, value, i)
    return values


def records(values: list[str], start: int, end: int) -> list[tuple[int, str]]:
    return [(i, values[i]) for i in range(start, end)]


def reset_to_zero(b: HistoryBuilder) -> None:
    """The group committed 4; the next consumer process starts reading at 0."""
    k = "reset"
    v = log_of(b, k, 6)
    p = b.process()
    b.assign(p, [k])
    b.poll(p, {k: records(v, 0, 4)})
    b.commit(p, {k: 4})
    q = b.process()
    b.assign(q, [k])
    b.poll(q, {k: records(v, 0, 6)})


def resumed(b: HistoryBuilder) -> None:
    """The next consumer resumes at the committed offset, and commits forward."""
    k = "resumed"
    v = log_of(b, k, 6)
    p = b.process()
    b.assign(p, [k])
    b.poll(p, {k: records(v, 0, 4)})
    b.commit(p, {k: 4})
    q = b.process()
    b.assign(q, [k])
    b.poll(q, {k: records(v, 4, 6)})
    b.commit(q, {k: 6})


def interleaved(b: HistoryBuilder) -> None:
    """Subscribed consumers commit one group's offsets in turn: the group's offset goes
    back when a slower member commits, but no process goes back on its own."""
    k = "interleaved"
    v = log_of(b, k, 6)
    p, q = b.process(), b.process()
    b.subscribe(p, [k])
    b.subscribe(q, [k])
    b.poll(p, {k: records(v, 0, 6)})
    b.commit(p, {k: 6})
    b.poll(q, {k: records(v, 0, 3)})
    b.commit(q, {k: 3})
    r = b.process()
    b.subscribe(r, [k])
    b.poll(r, {k: records(v, 3, 6)})


def concurrent_commit(b: HistoryBuilder) -> None:
    """A commit of 2 in flight while the next consumer starts: the group may hold 2, so a
    read from 2 is not below the anchor."""
    k = "concurrent"
    v = log_of(b, k, 6)
    p, q = b.process(), b.process()
    b.assign(p, [k])
    b.commit(p, {k: 4})
    w = b.writer
    slow = w.write(q, "invoke", "commit", {k: 2}, time=b.tick())
    r = b.process()
    assign = w.write(r, "invoke", "assign", [k], time=b.tick())
    w.complete(assign, "ok", [k], time=b.tick())
    w.complete(slow, "ok", {k: 2}, time=b.tick())
    b.poll(r, {k: records(v, 2, 6)})


def indeterminate_commit(b: HistoryBuilder) -> None:
    """A commit of 2 that timed out (info) while another process committed 4: it may have
    landed last, so the next consumer may start at 2 and commit 2 (seen in a real run)."""
    k = "indeterminate"
    v = log_of(b, k, 6)
    p, q = b.process(), b.process()
    b.subscribe(p, [k])
    b.subscribe(q, [k])
    w = b.writer
    lost = w.write(q, "invoke", "commit", {k: 2}, time=b.tick())
    b.commit(p, {k: 4})
    w.complete(lost, "info", {k: 2}, time=b.tick(), error="OffsetCommitError: timed out")
    r = b.process()
    b.subscribe(r, [k])
    b.commit(r, {k: 2})
    b.poll(r, {k: records(v, 2, 6)})


def commits_backwards(b: HistoryBuilder) -> None:
    """A process commits 5 after its own 6, then 3, below where it started (4)."""
    k = "backwards"
    v = log_of(b, k, 7)
    p = b.process()
    b.assign(p, [k])
    b.commit(p, {k: 4})
    q = b.process()
    b.assign(q, [k])
    b.poll(q, {k: records(v, 4, 7)})
    b.commit(q, {k: 6})
    b.commit(q, {k: 5})


def commit_below_start(b: HistoryBuilder) -> None:
    """A process commits 2, below the 4 its group held when it started."""
    k = "belowstart"
    log_of(b, k, 5)
    p = b.process()
    b.assign(p, [k])
    b.commit(p, {k: 4})
    q = b.process()
    b.assign(q, [k])
    b.commit(q, {k: 2})


def truncated(b: HistoryBuilder) -> None:
    """The log was truncated to 1 after the group committed 4: a fresh consumer reading
    from 0 is explained."""
    k = "truncated"
    v = log_of(b, k, 6)
    p = b.process()
    b.assign(p, [k])
    b.commit(p, {k: 4})
    b.writer.event(
        "truncation",
        {"key": k, "from_offset": 6, "to_offset": 1, "leader_epoch": 1},
        process="sut",
        time=b.tick(),
    )
    q = b.process()
    b.assign(q, [k])
    b.poll(q, {k: records(v, 0, 1)})


def truncation(b: HistoryBuilder, key: str, from_offset: int, to_offset: int, broker: int) -> None:
    b.writer.event(
        "truncation",
        {"key": key, "from_offset": from_offset, "to_offset": to_offset, "leader_epoch": 2,
         "broker": broker},
        process="sut",
        time=b.tick(),
    )  # fmt: skip


def deposed_leader_truncated(b: HistoryBuilder) -> None:
    """Broker 1 led with the high watermark at 2 when broker 2 was elected; the group read
    on to 6 from the new leader; broker 1 then cut its own divergent tail back to 3: nothing
    committed was removed, so a fresh consumer reading from 0 is not explained."""
    k = "deposed"
    v = log_of(b, k, 6)
    p = b.process()
    b.assign(p, [k])
    b.poll(p, {k: records(v, 0, 2)})
    b.commit(p, {k: 2})
    b.election(k, unclean=False, leader=2, epoch=2)
    b.tick(1_000_000_000)  # past the clock tolerance (200 ms without test.json)
    b.poll(p, {k: records(v, 2, 6)})
    b.commit(p, {k: 6})
    truncation(b, k, 6, 3, broker=1)
    q = b.process()
    b.assign(q, [k])
    b.poll(q, {k: records(v, 0, 6)})


def out_of_sync_truncated(b: HistoryBuilder, *, in_sync: bool) -> None:
    """The group committed 4; a replica then truncated to 1: explained when it was in the
    ISR (its records there were the committed ones), not when it was out of sync."""
    k = "insync" if in_sync else "outofsync"
    v = log_of(b, k, 6)
    b.isr_change(k, [2, 3])
    p = b.process()
    b.assign(p, [k])
    b.poll(p, {k: records(v, 0, 4)})
    b.commit(p, {k: 4})
    truncation(b, k, 6, 1, broker=3 if in_sync else 1)
    q = b.process()
    b.assign(q, [k])
    b.poll(q, {k: records(v, 0, 1)})


def final_read(b: HistoryBuilder) -> None:
    """The final read reads every key from its start."""
    k = "final"
    v = log_of(b, k, 4)
    p = b.process()
    b.assign(p, [k])
    b.commit(p, {k: 4})
    f = b.process()
    b.assign(f, [k])
    b.poll(f, {k: records(v, 0, 4)}, final=True)


def assign_at(b: HistoryBuilder, process: int, key: str, position: int) -> None:
    """An assign whose completion says where the consumer starts (`positions`)."""
    invoke = b.writer.write(process, "invoke", "assign", [key], time=b.tick())
    b.writer.complete(invoke, "ok", [key], time=b.tick(), positions={key: position})


def read_below_position(b: HistoryBuilder) -> None:
    """No commit yet, but the consumer said it starts at 3 and first reads 1."""
    k = "position"
    v = log_of(b, k, 5)
    p = b.process()
    assign_at(b, p, k, 3)
    b.poll(p, {k: records(v, 1, 5)})


def reads_at_position(b: HistoryBuilder) -> None:
    """The consumer starts where it said, at the committed offset."""
    k = "atposition"
    v = log_of(b, k, 5)
    p = b.process()
    b.assign(p, [k])
    b.commit(p, {k: 2})
    q = b.process()
    assign_at(b, q, k, 2)
    b.poll(q, {k: records(v, 2, 5)})
    b.commit(q, {k: 5})


def rebalanced_member(b: HistoryBuilder) -> None:
    """A member's rebalance is written after the poll in which it happened: another
    member's commit that completed during that poll, after this member read the group's
    offset, may be above where it rightly starts."""
    k = "rebalanced"
    v = log_of(b, k, 8)
    p, q = b.process(), b.process()
    b.subscribe(p, [])
    b.subscribe(q, [])
    b.assign(q, [k])
    b.assign(p, ["elsewhere"])
    b.poll(q, {k: records(v, 0, 3)})
    b.commit(q, {k: 3})
    b.poll(q, {k: records(v, 3, 5)})
    b.commit(q, {k: 5})  # while p's poll rebalanced it, having fetched the group's 3
    b.assign(p, [])
    assign_at(b, p, k, 3)
    b.poll(p, {k: records(v, 3, 8)})


def rebalanced_member_below(b: HistoryBuilder) -> None:
    """A member given a key in a rebalance starts below what the group had committed of it
    before the member's previous assignment: that is still found."""
    k = "rebalancedbelow"
    v = log_of(b, k, 8)
    p, q = b.process(), b.process()
    b.subscribe(p, [])
    b.subscribe(q, [])
    b.assign(q, [k])
    b.poll(q, {k: records(v, 0, 4)})
    b.commit(q, {k: 4})
    b.assign(p, ["elsewhere"])
    b.assign(p, [])
    assign_at(b, p, k, 1)
    b.poll(p, {k: records(v, 1, 8)})


SCENARIOS = (
    rebalanced_member,
    rebalanced_member_below,
    reset_to_zero,
    resumed,
    interleaved,
    concurrent_commit,
    indeterminate_commit,
    commits_backwards,
    commit_below_start,
    truncated,
    deposed_leader_truncated,
    lambda b: out_of_sync_truncated(b, in_sync=True),
    lambda b: out_of_sync_truncated(b, in_sync=False),
    final_read,
    read_below_position,
    reads_at_position,
)


@pytest.fixture(scope="module")
def results(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root: Path = tmp_path_factory.mktemp("anchors")
    builder = HistoryBuilder(root)
    for scenario in SCENARIOS:
        scenario(builder)
    return check_history(builder.close(), config=CheckConfig(sample=100))


def section(results: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = results["checkers"]["consumer_anchors"]
    return found


def test_poll_below_anchor(results: dict[str, Any]) -> None:
    found = section(results)["anomalies"]["poll-below-anchor"]
    assert sorted((c["key"], c["offset"], c["anchor"], c["anchor_from"]) for c in found) == [
        ("deposed", 0, 6, "commit"),
        ("outofsync", 0, 4, "commit"),
        ("position", 1, 3, "position"),
        ("rebalancedbelow", 1, 4, "commit"),
        ("reset", 0, 4, "commit"),
    ]


def test_commit_backwards(results: dict[str, Any]) -> None:
    found = section(results)["anomalies"]["commit-backwards"]
    assert sorted((c["key"], c["committed"], c["above"], c["since"]) for c in found) == [
        ("backwards", 5, 6, "own-commit"),
        ("belowstart", 2, 4, "anchor"),
    ]


def test_a_truncation_explains(results: dict[str, Any]) -> None:
    expected = section(results)["expected"]["poll-below-anchor"]
    assert sorted((c["key"], c["offset"]) for c in expected) == [
        ("insync", 0),
        ("truncated", 0),
    ]
    assert all("truncation to offset 1" in c["expected_because"] for c in expected)


def test_counts(results: dict[str, Any]) -> None:
    assert section(results)["counts"] == {"poll-below-anchor": 5, "commit-backwards": 2}


def test_an_allowed_unclean_election_before_the_anchor_commit_explains(
    spark: Any, tmp_path: Path
) -> None:
    """A member commits offsets it read from the deposed leader after an unclean election
    that discarded them (a real unclean run's case): the next consumer finds them out of
    range and starts from 0. Expected where unclean election is allowed, an anomaly where not."""
    b = HistoryBuilder(tmp_path / "h")
    k = "unclean"
    v = log_of(b, k, 6)
    p = b.process()
    b.assign(p, [k])
    b.poll(p, {k: records(v, 0, 4)})
    b.election(k, unclean=True)
    b.tick(2_000_000_000)  # the commit completes well after the election
    b.commit(p, {k: 4})
    q = b.process()
    b.assign(q, [k])
    b.poll(q, {k: records(v, 0, 2)})
    history = b.close()
    allowed = check_history(history, config=CheckConfig(expect_loss=frozenset({"unclean"})))
    found = allowed["checkers"]["consumer_anchors"]
    assert found["counts"]["poll-below-anchor"] == 0
    assert [c["offset"] for c in found["expected"]["poll-below-anchor"]] == [0]
    assert (
        "unclean leader election" in found["expected"]["poll-below-anchor"][0]["expected_because"]
    )
    strict = check_history(history)["checkers"]["consumer_anchors"]
    assert strict["counts"]["poll-below-anchor"] == 1


@pytest.mark.parametrize("offsets_min_insync", ["1", "2"])
def test_commits_lost_with_one_brokers_power_explain_only_under_an_offsets_isr_of_one(
    spark: Any, tmp_path: Path, offsets_min_insync: str
) -> None:
    """The group's commit lost from the offsets topic with one broker's power (an ISR of one
    acknowledged it, offsets.topic.min.insync.replicas=1, under a flush policy that does not
    fsync): the next consumer starts from 0, expected with that reason; with 2, an anomaly."""
    test = unfsynced_test_json(2, offsets_min_insync_replicas=offsets_min_insync)
    b = HistoryBuilder(tmp_path / "h", test_json=test)
    k = "lost-commit"
    v = log_of(b, k, 6)
    p = b.process()
    b.assign(p, [k])
    b.poll(p, {k: records(v, 0, 4)})
    b.commit(p, {k: 4})
    b.nemesis("power-loss", {"targets": ["n2"], "outcome": {"n2": "lost-power"}})
    q = b.process()
    b.assign(q, [k])
    b.poll(q, {k: records(v, 0, 2)})
    found = check_history(b.close())["checkers"]["consumer_anchors"]
    if offsets_min_insync == "1":
        assert found["counts"]["poll-below-anchor"] == 0
        (case,) = found["expected"]["poll-below-anchor"]
        assert "offsets.topic.min.insync.replicas=1" in case["expected_because"]
    else:
        assert found["counts"]["poll-below-anchor"] == 1
