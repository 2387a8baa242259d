"""Writes lost with the power of every replica that held them (checkers.power_losses), on
hand-written events: which brokers held a write (the ISR around its acknowledgement, those
that caught up later, not those already powered off), and when the last of them lost power;
a loss of only some of them is no such loss. End to end, in results.json: expected with its
reason under the default flush policy, an anomaly with flush.messages=1, and said so for an
ISR of one under min.insync.replicas=1; a minority's power loss stays INVALID."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from checkers.config import NEVER, TestSettings, read_test_settings
from checkers.errors import TestConfigError
from checkers.key_log import ReplicationEvent
from checkers.power_losses import HolderTimeline, PowerLoss, power_losses
from tests.unit.checkers.history_builder import HistoryBuilder

S = 1_000_000_000
MS = 1_000_000
BROKERS = {"n1": 1, "n2": 2, "n3": 3}
SETTINGS = TestSettings(clock_tolerance_ns=100 * MS, brokers=BROKERS)


def isr(at: float, members: Sequence[int], index: int = 0) -> ReplicationEvent:
    return ReplicationEvent(index, int(at * S), "isr-change", 1, 1, tuple(members), None, False)


def power(at: float, *nodes: str, index: int = 0) -> PowerLoss:
    return PowerLoss(index, int(at * S), tuple(nodes), {n: BROKERS[n] for n in nodes})


def lost(
    events: Sequence[ReplicationEvent],
    losses: Sequence[PowerLoss],
    invoked: float = 1.0,
    completed: float = 1.01,
) -> tuple[int, list[int], list[tuple[float, list[str]]]] | None:
    """(the index of the power loss that took it, its ISR at the ack, the nodes per loss)."""
    found = HolderTimeline(events, losses, SETTINGS).lost_with_power(
        int(invoked * S), int(completed * S)
    )
    if found is None:
        return None
    loss, at_ack, took = found
    return loss.index, sorted(at_ack), [(p.time / S, nodes) for p, nodes in took]


def test_every_replica_losing_power_at_once_loses_the_write() -> None:
    found = lost([isr(0, [1, 2, 3])], [power(5, "n1", "n2", "n3", index=7)])
    assert found == (7, [1, 2, 3], [(5.0, ["n1", "n2", "n3"])])


def test_some_of_the_isr_losing_power_loses_nothing() -> None:
    assert lost([isr(0, [1, 2, 3])], [power(5, "n1")]) is None
    assert lost([isr(0, [1, 2, 3])], [power(5, "n1", "n2")]) is None


def test_a_power_loss_before_the_write_takes_nothing_of_it() -> None:
    assert lost([isr(0, [1, 2, 3])], [power(0.5, "n1", "n2", "n3")]) is None


def test_power_losses_one_after_the_other_take_it_unless_a_replica_caught_up() -> None:
    losses = [power(5, "n1", index=1), power(8, "n2", "n3", index=2)]
    assert lost([isr(0, [1, 2, 3])], losses) == (
        2,
        [1, 2, 3],
        [(5.0, ["n1"]), (8.0, ["n2", "n3"])],
    )
    # n1 rejoined the ISR at 7 s: it caught up with the write before the others lost power
    assert lost([isr(0, [1, 2, 3]), isr(5.05, [2, 3]), isr(7, [1, 2, 3])], losses) is None
    # an ISR naming n1 within the tolerance of its power loss is not its catching up
    assert lost([isr(0, [1, 2, 3]), isr(5.05, [1, 2, 3])], losses) is not None


def test_the_isr_changing_around_the_acknowledgement_counts_every_member() -> None:
    # The ISR shrank to [2] while the write was in flight: 1 and 3 may hold it too, and
    # count as its holders at the acknowledgement,
    events = [isr(0, [1, 2, 3]), isr(1.005, [2])]
    assert lost(events, [power(5, "n1", "n2", "n3")]) == (0, [1, 2, 3], [(5.0, ["n2"])])
    # but once left out of the ISR (out of sync, never elected cleanly) their copies do
    # not count: the power of n2, the ISR's one member, takes the write (seed 60103).
    assert lost(events, [power(5, "n2")]) == (0, [1, 2, 3], [(5.0, ["n2"])])
    # The same for a change within the tolerance after the completion,
    assert lost([isr(0, [1, 2, 3]), isr(1.05, [2])], [power(5, "n2")]) is not None
    # and a member that rejoins counts again.
    back = [isr(0, [1, 2, 3]), isr(1.005, [2]), isr(3, [2, 3])]
    assert lost(back, [power(5, "n2")]) is None


def test_a_holder_the_isr_left_out_stops_counting() -> None:
    # n3 fell out of the ISR after the write: the ISR's members are the copies that count.
    found = lost([isr(0, [1, 2, 3]), isr(3, [1, 2])], [power(5, "n1", "n2", index=4)])
    assert found == (4, [1, 2, 3], [(5.0, ["n1", "n2"])])
    # An ISR that leaves out every holder (n1, elected after losing the write) is no loss
    # with power, whatever power losses follow.
    events = [isr(0, [1, 2, 3]), isr(5.5, [1])]
    assert lost(events, [power(5, "n1"), power(6, "n2", "n3")]) is None


def test_an_isr_of_one_well_before_the_write_is_its_only_holder() -> None:
    found = lost([isr(0, [1, 2, 3]), isr(0.5, [2])], [power(5, "n2", index=4)])
    assert found == (4, [2], [(5.0, ["n2"])])


def test_a_broker_powered_off_before_the_write_held_nothing() -> None:
    # n1 lost power at 0.5 s and had not rejoined: the ISR still naming it does not make it
    # a holder, so the later loss of n2 and n3 takes the write.
    found = lost([isr(0, [1, 2, 3])], [power(0.5, "n1", index=1), power(5, "n2", "n3", index=2)])
    assert found is not None and found[1] == [2, 3]


def shrink(at: float, members: Sequence[int], previous: Sequence[int],
           ends: dict[int, int], hw: int | None = None) -> ReplicationEvent:  # fmt: skip
    return ReplicationEvent(
        0, int(at * S), "isr-change", 1, 1, tuple(members), None, False,
        previous_isr=tuple(previous), log_end_offsets=ends, high_watermark=hw,
    )  # fmt: skip


def test_a_shrink_that_left_out_brokers_lacking_the_write_leaves_them_no_holders() -> None:
    """Written at offset 10, committed when n1's shrink left out n2 and n3 at log ends 8
    and 10: n1 alone held it when the leader committed it, and its power took it."""
    events = [isr(0, [1, 2, 3]), shrink(1.005, [1], [1, 2, 3], {1: 11, 2: 8, 3: 10})]
    found = HolderTimeline(events, [power(5, "n1", index=7)], SETTINGS).lost_with_power(
        1 * S, int(1.01 * S), 10
    )
    assert found is not None and sorted(found[1]) == [1]
    # A broker whose log the leader knew to hold the offset held it at the acknowledgement
    # (but, left out of the ISR, its copy no longer counts when n1's power goes),
    ends = {1: 11, 2: 8, 3: 11}
    held = HolderTimeline(
        [isr(0, [1, 2, 3]), shrink(1.005, [1], [1, 2, 3], ends)], [power(5, "n1")], SETTINGS
    ).lost_with_power(1 * S, int(1.01 * S), 10)
    assert held is not None and sorted(held[1]) == [1, 3]
    # unless the leader's high watermark shows the write was not committed before the shrink,
    uncommitted = [isr(0, [1, 2, 3]), shrink(1.005, [1], [1, 2, 3], ends, hw=10)]
    found = HolderTimeline(uncommitted, [power(5, "n1")], SETTINGS).lost_with_power(
        1 * S, int(1.01 * S), 10
    )
    assert found is not None and sorted(found[1]) == [1]
    committed = [isr(0, [1, 2, 3]), shrink(1.005, [1], [1, 2, 3], ends, hw=11)]
    found = HolderTimeline(committed, [power(5, "n1")], SETTINGS).lost_with_power(
        1 * S, int(1.01 * S), 10
    )
    assert found is not None and sorted(found[1]) == [1, 3]
    # and one brought back within the span keeps it, as does any broker when the offset is
    # unknown, until an ISR leaves it out.
    back = [*events, shrink(1.006, [1, 3], [1], {1: 11, 3: 11})]
    assert (
        HolderTimeline(back, [power(5, "n1")], SETTINGS).lost_with_power(1 * S, int(1.01 * S), 10)
        is None
    )
    assert lost(events, [power(5, "n1")]) == (0, [1, 2, 3], [(5.0, ["n1"])])


def test_without_isr_events_every_broker_held_it() -> None:
    assert lost([], [power(5, "n1", "n2")]) is None
    assert lost([], [power(5, "n1", "n2", "n3")]) is not None


def test_power_losses_from_nemesis_events() -> None:
    value = {"targets": ["n1", "n2", "n3"], "outcome": {"n1": "lost-power", "n2": "error"}}
    events = [
        (3, 5 * S, "power-loss", json.dumps(value)),
        (4, 6 * S, "power-loss", json.dumps({"targets": ["n3", "n9"]})),
        (5, 7 * S, "kill", json.dumps({"targets": ["n1"]})),
    ]
    found = power_losses(events, BROKERS)
    assert [(p.index, p.nodes, dict(p.brokers)) for p in found] == [
        (3, ("n1",), {"n1": 1}),
        (4, ("n3",), {"n3": 3}),
    ]
    assert power_losses(events, None) == ()


# --- end to end ------------------------------------------------------------------------------


def doc_for(min_insync: int, flush_messages: int, setting: str) -> dict[str, Any]:
    return {
        "topic": {
            "replication_factor": 3,
            "min_insync_replicas": min_insync,
            "unclean_leader_election": False,
            "flush_messages": flush_messages,
            "flush_ms": NEVER,
            "flush_setting": setting,
        },
        "workload": {"acks": -1, "producer_retries": 0},
        "brokers": BROKERS,
        "clock": {"tolerance_ns": MS // 2},
    }


def lose_power(b: HistoryBuilder, *nodes: str) -> None:
    b.nemesis("power-loss", {"targets": list(nodes), "outcome": dict.fromkeys(nodes, "lost-power")})


def four_acked_two_read_then_rack_power_loss(b: HistoryBuilder, k: str) -> int:
    """Four writes to `k` acknowledged by [1, 2, 3] (offsets 0-3), two of them read; then
    every replica loses power and the ISR is [1, 2, 3] again. Returns the producer."""
    b.isr_change(k, [1, 2, 3])
    p, c = b.process(), b.process()
    for i in range(4):
        b.send1(p, k, f"{k}-{i}", i)
    b.poll(c, {k: [(0, f"{k}-0"), (1, f"{k}-1")]})
    lose_power(b, "n1", "n2", "n3")
    b.tick(MS)
    b.isr_change(k, [1, 2, 3])
    return p


def rack(b: HistoryBuilder) -> None:
    """Key `rack`: four writes acknowledged by [1, 2, 3], two read; every replica loses
    power; the producer's next writes reuse offsets 2 and 3, and the final read sees them."""
    k = "rack"
    p = four_acked_two_read_then_rack_power_loss(b, k)
    for i in range(2, 5):
        b.send1(p, k, f"{k}-again-{i}", i)
    f = b.process()
    b.poll(f, {k: [(0, f"{k}-0"), (1, f"{k}-1")] + [(i, f"{k}-again-{i}") for i in range(2, 5)]},
           final=True)  # fmt: skip


def minority(b: HistoryBuilder) -> None:
    """Key `minority` (after `rack`): n1 alone loses power, and a write is gone all the same."""
    k = "minority"
    b.tick(MS)
    b.isr_change(k, [1, 2, 3])
    p = b.process()
    for i in range(3):
        b.send1(p, k, f"{k}-{i}", i)
    lose_power(b, "n1")
    f = b.process()
    b.poll(f, {k: [(0, f"{k}-0"), (2, f"{k}-2")]}, final=True)


def history(root: Path, test: dict[str, Any], *scenarios: Any) -> Path:
    b = HistoryBuilder(root, test_json=test)
    for scenario in scenarios:
        scenario(b)
    return b.close()


def cases(results: dict[str, Any], group: str, name: str, key: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for section in results["checkers"].values():
        found += [c for c in section.get(group, {}).get(name, []) if c.get("key") == key]
    return found


@pytest.fixture(scope="module")
def default_flush(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    test = doc_for(2, NEVER, "log.flush.interval.messages")
    run = history(tmp_path_factory.mktemp("flush-default"), test, rack, minority)
    return check_history(run, config=CheckConfig(sample=100))


def test_default_flush_expects_the_writes_lost_with_every_replica(
    default_flush: dict[str, Any],
) -> None:
    lost_acked = cases(default_flush, "expected", "lost-acked-write", "rack")
    assert sorted(c["value"] for c in lost_acked) == ["rack-2", "rack-3"]
    reason = lost_acked[0]["expected_because"]
    assert reason.startswith("lost with the power of n1, n2, n3 at ")
    assert reason.endswith(
        f"; log.flush.interval.messages={NEVER} (never) does not fsync before acknowledging"
    )
    for name in ("unseen", "lost-write", "inconsistent-offsets", "nonmonotonic-send"):
        assert cases(default_flush, "expected", name, "rack"), name
        assert not cases(default_flush, "anomalies", name, "rack"), name


def test_a_minority_power_loss_excuses_nothing(default_flush: dict[str, Any]) -> None:
    assert [
        c["value"] for c in cases(default_flush, "anomalies", "lost-acked-write", "minority")
    ] == ["minority-1"]
    assert not cases(default_flush, "expected", "lost-acked-write", "minority")
    assert default_flush["valid"] is False
    assert any(
        "does not fsync before acknowledging" in n for n in default_flush["config"]["allowances"]
    )


def test_flush_every_message_makes_them_anomalies(spark: Any, tmp_path: Path) -> None:
    run = history(tmp_path / "h", doc_for(2, 1, "flush.messages"), rack)
    results = check_history(run, config=CheckConfig(sample=100))
    assert results["valid"] is False
    assert sorted(c["value"] for c in cases(results, "anomalies", "lost-acked-write", "rack")) == [
        "rack-2",
        "rack-3",
    ]
    assert not cases(results, "expected", "lost-acked-write", "rack")
    assert any("fsyncs every message" in n for n in results["config"]["allowances"])
    assert results["config"]["test"]["fsyncs_before_ack"] is True


def alone(b: HistoryBuilder) -> None:
    """Key `alone`: n2 leads an ISR of one, acknowledges a write and loses power."""
    k = "alone"
    b.isr_change(k, [2])
    b.tick(10 * MS)
    p = b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1)
    lose_power(b, "n2")
    f = b.process()
    b.poll(f, {k: [(0, f"{k}-0")]}, final=True)


def test_min_insync_one_says_the_isr_of_one_acknowledged_it(spark: Any, tmp_path: Path) -> None:
    run = history(tmp_path / "h", doc_for(1, NEVER, "log.flush.interval.messages"), alone)
    results = check_history(run, config=CheckConfig(sample=100))
    unseen = cases(results, "expected", "unseen", "alone")
    assert [c["value"] for c in unseen] == ["alone-1"]
    assert unseen[0]["expected_because"].startswith(
        "acknowledged by n2 alone (ISR of one, min.insync.replicas=1); lost with the power "
        "of n2 at "
    )
    assert results["valid"] is True


def test_the_flush_policy_read_from_test_json(tmp_path: Path) -> None:
    path = tmp_path / "test.json"
    path.write_text(json.dumps(doc_for(2, NEVER, "log.flush.interval.messages")))
    settings = read_test_settings(path)
    assert settings.fsyncs_before_ack is False
    assert settings.flush_policy == f"log.flush.interval.messages={NEVER} (never)"
    path.write_text(json.dumps(doc_for(2, 1, "flush.messages")))
    assert read_test_settings(path).fsyncs_before_ack is True
    assert TestSettings().fsyncs_before_ack is None  # not known: nothing allowed
    for bad, message in ((0, "expected an integer >= 1"), ("1", "expected an integer")):
        path.write_text(json.dumps(doc_for(2, bad, "flush.messages")))  # type: ignore[arg-type]
        with pytest.raises(TestConfigError, match=message):
            read_test_settings(path)
    path.write_text(json.dumps(doc_for(2, 1, "log.flush")))
    with pytest.raises(TestConfigError, match=r"topic\.flush_setting"):
        read_test_settings(path)


def read_then_lost(b: HistoryBuilder, k: str = "read-lost", *, shrunk: bool = False) -> None:
    """Key `read-lost`: n2 leads an ISR of one; a send times out, but a consumer reads its
    record at offset 1; n2 loses power, and the next send lands at offset 1 again. `shrunk`:
    the ISR is [1, 2, 3] until n2 shrinks it to itself while the followers' logs end below
    the record, which commits it just before the read."""
    b.isr_change(k, [1, 2, 3] if shrunk else [2])
    b.tick(10 * MS)
    p, c = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", None, result="info")
    if shrunk:
        b.tick(200 * MS)
        b.isr_change(k, [2], previous_isr=[1, 2, 3], log_end_offsets={1: 1, 2: 2, 3: 1})
    b.poll(c, {k: [(0, f"{k}-0"), (1, f"{k}-1")]})
    lose_power(b, "n2")
    b.tick(MS)
    b.isr_change(k, [2])
    q = b.process()
    b.send1(q, k, f"{k}-again", 1)
    f = b.process()
    b.poll(f, {k: [(0, f"{k}-0"), (1, f"{k}-again")]}, final=True)


def test_a_timed_out_send_read_then_lost_with_power_explains_its_offset_reused(
    spark: Any, tmp_path: Path
) -> None:
    run = history(tmp_path / "h", doc_for(1, NEVER, "log.flush.interval.messages"), read_then_lost)
    results = check_history(run, config=CheckConfig(sample=100))
    assert not cases(results, "anomalies", "inconsistent-offsets", "read-lost")
    expected = cases(results, "expected", "inconsistent-offsets", "read-lost")
    assert len(expected) == 1
    assert expected[0]["expected_because"].startswith(
        "committed by n2 alone (ISR of one, min.insync.replicas=1); lost with the power of n2 at "
    )
    assert results["valid"] is True


def committed_by_a_shrink(b: HistoryBuilder) -> None:
    """Key `shrunk`: `read_then_lost`, the record committed by n2's shrink to itself."""
    read_then_lost(b, "shrunk", shrunk=True)


def test_a_record_committed_by_a_shrink_to_one_and_lost_with_its_power_is_that_settings(
    spark: Any, tmp_path: Path
) -> None:
    run = history(tmp_path / "h", doc_for(1, NEVER, "log.flush.interval.messages"),
                  committed_by_a_shrink)  # fmt: skip
    results = check_history(run, config=CheckConfig(sample=100))
    assert not cases(results, "anomalies", "inconsistent-offsets", "shrunk")
    expected = cases(results, "expected", "inconsistent-offsets", "shrunk")
    assert [c["offset"] for c in expected] == [1]
    assert expected[0]["expected_because"].startswith("committed by n2 alone (ISR of one")
    assert results["valid"] is True


def test_a_timed_out_send_read_then_lost_is_an_anomaly_when_every_message_is_fsynced(
    spark: Any, tmp_path: Path
) -> None:
    run = history(tmp_path / "h", doc_for(1, 1, "flush.messages"), read_then_lost)
    results = check_history(run, config=CheckConfig(sample=100))
    assert cases(results, "anomalies", "inconsistent-offsets", "read-lost")
    assert results["valid"] is False


def rack_tail(b: HistoryBuilder) -> None:
    """Key `racktail`: four writes acknowledged by [1, 2, 3], two read; every replica loses
    power before an fsync, and the log comes back ending at offset 2: the final read reads
    it to that end and records it (`log-ends`)."""
    k = "racktail"
    four_acked_two_read_then_rack_power_loss(b, k)
    f = b.process()
    b.assign(f, [k])
    b.poll(f, {k: [(0, f"{k}-0"), (1, f"{k}-1")]}, final=True)
    b.log_ends(f, {k: 2})


def test_a_tail_lost_with_every_replicas_power_is_judged_and_expected(
    spark: Any, tmp_path: Path
) -> None:
    """The lost tail is judged (the final read read the log to its recorded end): two
    lost-acked-writes placed `tail`, expected under a flush policy that does not fsync
    before acknowledging, and counted as acknowledged and allowed losses."""
    run = history(tmp_path / "h", doc_for(2, NEVER, "log.flush.interval.messages"), rack_tail)
    results = check_history(run, config=CheckConfig(sample=100))
    lost = cases(results, "expected", "lost-acked-write", "racktail")
    assert [(c["value"], c["placement"], c["log_end"]) for c in lost] == [
        ("racktail-2", "tail", 2),
        ("racktail-3", "tail", 2),
    ]
    assert lost[0]["expected_because"].startswith("lost with the power of n1, n2, n3 at ")
    assert not cases(results, "anomalies", "lost-acked-write", "racktail")
    assert results["checkers"]["delivery"]["details"]["keys_with_complete_final_read"] == 1
    assert results["summary"]["keys"]["racktail"] == {"acknowledged_lost": 2, "allowed_lost": 2}
    assert results["valid"] is True


def alone_read_then(b: HistoryBuilder, k: str, fault: str) -> None:
    """Key `k`: n2 leads an ISR of one and acknowledges a write a consumer reads; n2 then
    loses its power (`fault` "power-loss") or its process ("kill"), and the final read finds
    the log without the write, its offset handed out again."""
    b.isr_change(k, [2])
    b.tick(10 * MS)
    p, c = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.poll(c, {k: [(0, f"{k}-0")]})
    if fault == "power-loss":
        lose_power(b, "n2")
    else:
        b.nemesis("kill", {"targets": ["n2"]})
    b.tick(MS)
    b.isr_change(k, [2])
    q = b.process()
    b.send1(q, k, f"{k}-again", 0)
    f = b.process()
    b.poll(f, {k: [(0, f"{k}-again")]}, final=True)


@pytest.mark.parametrize(("fault", "allowed"), [("power-loss", True), ("kill", False)])
def test_min_insync_one_judges_an_acknowledged_write_a_complete_final_read_missed(
    spark: Any, tmp_path: Path, fault: str, allowed: bool
) -> None:
    """Under min.insync.replicas=1 a read write missing from a complete final read is
    judged and counted: the setting's loss when the ISR of one lost its power, an anomaly
    when nothing explains it (a kill loses nothing on disk)."""
    k = "alone-read"
    run = history(tmp_path / "h", doc_for(1, NEVER, "log.flush.interval.messages"),
                  lambda b: alone_read_then(b, k, fault))  # fmt: skip
    results = check_history(run, config=CheckConfig(sample=100))
    group = "expected" if allowed else "anomalies"
    lost = cases(results, group, "lost-acked-write", k)
    assert [c["value"] for c in lost] == [f"{k}-0"]
    assert results["checkers"]["delivery"]["details"]["lost_acked_write"] == "judged"
    assert results["summary"]["keys"][k] == {
        "acknowledged_lost": 1,
        "allowed_lost": 1 if allowed else 0,
    }
    assert results["valid"] is allowed
    if allowed:
        assert lost[0]["expected_because"].startswith(
            "acknowledged by n2 alone (ISR of one, min.insync.replicas=1); lost with the "
            "power of n2 at "
        )


def elected_from_the_elr_then_rack_power_loss(b: HistoryBuilder) -> None:
    """Key `elr` (safe, the bench's seed 50202): a write acknowledged by [1, 2, 3]; leader 3
    shrinks the ISR to itself, moving 1 and 2 (which hold the write) to the eligible leader
    replicas; 3 dies and 2 is elected from them; 1 and then 3 rejoin; every replica loses
    power, and the log comes back without the write."""
    k = "elr"
    b.isr_change(k, [1, 2, 3], leader=3)
    p = b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.tick(100 * MS)
    b.isr_change(k, [3], leader=3, previous_isr=[1, 2, 3], elr=[1, 2])
    b.nemesis("kill", {"targets": ["n3"]})
    b.isr_change(k, [2], leader=2, elr=[1])
    b.isr_change(k, [1, 2], leader=2)
    b.isr_change(k, [1, 2, 3], leader=2)
    lose_power(b, "n1", "n2", "n3")
    b.tick(MS)
    b.isr_change(k, [1, 2, 3], leader=1)
    q = b.process()
    b.send1(q, k, f"{k}-again", 0)
    f = b.process()
    b.poll(f, {k: [(0, f"{k}-again")]}, final=True)


def test_an_eligible_leader_replica_holds_what_it_held(spark: Any, tmp_path: Path) -> None:
    """A holder that a shrink moves to the eligible leader replicas keeps the write (a
    clean election may pick it, as here): the write is lost only with the power of all
    three, which Kafka's default flush policy allows."""
    run = history(tmp_path / "h", doc_for(2, NEVER, "log.flush.interval.messages"),
                  elected_from_the_elr_then_rack_power_loss)  # fmt: skip
    results = check_history(run, config=CheckConfig(sample=100))
    lost = cases(results, "expected", "lost-acked-write", "elr")
    assert [c["value"] for c in lost] == ["elr-0"]
    assert lost[0]["expected_because"].startswith("lost with the power of n1, n2, n3 at ")
    assert not cases(results, "anomalies", "lost-acked-write", "elr")
    assert results["valid"] is True


def isr_of_one_lost_then_read_from_the_deposed_leader(b: HistoryBuilder) -> None:
    """Key `zombie` (misr1, the bench's seed 60103): a write acknowledged by [1, 2, 3] under
    leader 3; 2 and 3 are paused, the controller elects 1 alone; 1 loses its power; 3,
    resumed and not yet told it was deposed, serves a read of the write; 1 is elected again
    with a log that lost it, and the offset is handed out again."""
    k = "zombie"
    b.isr_change(k, [1, 2, 3], leader=3)
    p, c = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.tick(100 * MS)
    b.nemesis("pause", {"targets": ["n2", "n3"]})
    b.election(k, unclean=False, leader=1, epoch=4)
    b.tick(100 * MS)
    lose_power(b, "n1")
    b.tick(300 * MS)
    b.poll(c, {k: [(0, f"{k}-0")]})
    b.tick(300 * MS)
    b.election(k, unclean=False, leader=1, epoch=5)
    q = b.process()
    b.send1(q, k, f"{k}-again", 0)
    f = b.process()
    b.poll(f, {k: [(0, f"{k}-again")]}, final=True)


def test_a_read_from_a_deposed_leader_after_the_power_loss_saves_nothing(
    spark: Any, tmp_path: Path
) -> None:
    """The write's last holder in the ISR lost its power; a read served afterwards by the
    deposed leader (out of the ISR, never to be elected cleanly) does not make the loss some
    other mechanism's: it is lost with the power of n1, as the flush policy allows."""
    run = history(tmp_path / "h", doc_for(1, NEVER, "log.flush.interval.messages"),
                  isr_of_one_lost_then_read_from_the_deposed_leader)  # fmt: skip
    results = check_history(run, config=CheckConfig(sample=100))
    lost = cases(results, "expected", "lost-acked-write", "zombie")
    assert [c["value"] for c in lost] == ["zombie-0"]
    assert lost[0]["expected_because"].startswith("lost with the power of n1 at ")
    assert not cases(results, "anomalies", "lost-acked-write", "zombie")
    assert results["valid"] is True


def test_a_read_once_the_key_is_led_again_is_a_surviving_copy() -> None:
    timeline = HolderTimeline([isr(0, [1, 2, 3]), isr(6, [1], index=1)], [power(5, "n1")], SETTINGS)
    assert timeline.led_again(5 * S) == 6 * S - SETTINGS.event_tolerance_ns
    assert HolderTimeline([isr(0, [1])], [], SETTINGS).led_again(5 * S) == 5 * S


def deposed_leader_read_committed_then_reset(b: HistoryBuilder) -> None:
    """The zombie sequence with a consumer that reads the write from the deposed leader and
    commits past it; the next consumer of the group, once n1 leads again, reads offset 0."""
    k = "zanchor"
    b.isr_change(k, [1, 2, 3], leader=3)
    p, c = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.tick(100 * MS)
    b.election(k, unclean=False, leader=1, epoch=4)
    b.tick(100 * MS)
    lose_power(b, "n1")
    b.tick(300 * MS)
    b.assign(c, [k])
    b.poll(c, {k: [(0, f"{k}-0")]})
    b.commit(c, {k: 1})
    b.tick(300 * MS)
    b.election(k, unclean=False, leader=1, epoch=5)
    q = b.process()
    b.send1(q, k, f"{k}-again", 0)
    d = b.process()
    b.assign(d, [k])
    b.poll(d, {k: [(0, f"{k}-again")]})


def test_a_commit_read_from_a_deposed_leader_is_below_what_the_power_loss_cut(
    spark: Any, tmp_path: Path
) -> None:
    """The group's offset came from reads of the deposed leader after the power loss: the
    next consumer's read from 0 is the allowed loss's doing, not an anomaly (seed 60103)."""
    run = history(tmp_path / "h", doc_for(1, NEVER, "log.flush.interval.messages"),
                  deposed_leader_read_committed_then_reset)  # fmt: skip
    results = check_history(run, config=CheckConfig(sample=100))
    below = cases(results, "expected", "poll-below-anchor", "zanchor")
    assert len(below) == 1
    assert below[0]["expected_because"].startswith("offset 0 lost with the power of n1 at ")
    assert not cases(results, "anomalies", "poll-below-anchor", "zanchor")
    assert results["valid"] is True


def positions_read_before_a_rack_power_loss_committed_after(b: HistoryBuilder) -> None:
    """Key `stale` (confluent-kafka's seeds 62023 and 62044): a member reads offsets 0-1;
    every replica loses power and the log restarts at 0; two new writes land at 0-1; the
    member then commits position 2, read before the loss, past the new records, which no
    member reads (the final read, not a member's, does)."""
    k = "stale"
    b.isr_change(k, [1, 2, 3], leader=1)
    p, c = b.process(), b.process()
    b.send1(p, k, f"{k}-0", 0)
    b.send1(p, k, f"{k}-1", 1)
    b.subscribe(c, [k])
    b.poll(c, {k: [(0, f"{k}-0"), (1, f"{k}-1")]})
    b.tick(100 * MS)
    lose_power(b, "n1", "n2", "n3")
    b.tick(MS)
    b.isr_change(k, [1, 2, 3], leader=1)
    q = b.process()
    b.send1(q, k, f"{k}-again-0", 0)
    b.send1(q, k, f"{k}-again-1", 1)
    b.commit(c, {k: 2})
    f = b.process()
    b.poll(f, {k: [(0, f"{k}-again-0"), (1, f"{k}-again-1")]}, final=True)


@pytest.mark.parametrize("flush_messages", [NEVER, 1])
def test_a_commit_of_positions_read_before_a_rack_power_loss_is_that_losss(
    spark: Any, tmp_path: Path, flush_messages: int
) -> None:
    """The group committed past the new records because its position was read before the
    power loss cut the log below it: expected where the flush policy allows that loss, an
    anomaly where every message is fsynced."""
    test = doc_for(2, flush_messages, "log.flush.interval.messages")
    run = history(tmp_path / "h", test, positions_read_before_a_rack_power_loss_committed_after)
    results = check_history(run, config=CheckConfig(sample=100))
    allowed = flush_messages == NEVER
    found = cases(
        results, "expected" if allowed else "anomalies", "at-least-once-violation", "stale"
    )
    assert [(c["value"], c["committed"]) for c in found] == [
        ("stale-again-0", 2),
        ("stale-again-1", 2),
    ]
    if allowed:
        assert found[0]["expected_because"].startswith(
            "the commit's offset 2 was read before offset 0 lost with the power of n1, n2, n3"
        )
        assert not cases(results, "anomalies", "at-least-once-violation", "stale")
        assert results["valid"] is True
    else:
        assert results["valid"] is False
