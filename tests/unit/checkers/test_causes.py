"""Causes (`checkers.causes`): each loss tied to the log's own events, on hand-written
histories, one scenario per key: a truncation then the truncated replica's election; an
unclean election alone; a loss no event explains; two keys whose elections came at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from checkers.causes import KeyCauses, explain_samples
from checkers.fault_intervals import FaultInterval
from checkers.key_log import ReplicationEvent
from checkers.results import Collected
from tests.unit.checkers.history_builder import HistoryBuilder

S = 1_000_000_000
NO_LOSS = {
    "topic": {"replication_factor": 3, "min_insync_replicas": 2, "unclean_leader_election": False},
    "workload": {"acks": -1},
}


def write(b: HistoryBuilder, key: str, count: int) -> list[str]:
    """`count` acknowledged writes at offsets 0.. and a poll that reads the first two."""
    values = [f"{key}-{i}" for i in range(count)]
    p = b.process()
    for offset, value in enumerate(values):
        b.send1(p, key, value, offset, acks=-1)
    b.poll(b.process(), {key: [(0, values[0]), (1, values[1])]})
    return values


def truncation(
    b: HistoryBuilder, key: str, broker: int, cut: tuple[int, int], rule: str = "high-watermark"
) -> None:
    b.writer.event(
        "truncation",
        {
            "key": key,
            "from_offset": cut[0],
            "to_offset": cut[1],
            "leader_epoch": 6,
            "reason": rule,
            "broker": broker,
        },
        process="sut",
        node=f"n{broker}",
        time=b.tick(),
    )


def rewritten(b: HistoryBuilder, key: str, values: list[str], at: int) -> None:
    """The new leader takes new writes from `at` to past the old log's end; the final read
    reads the whole log."""
    p = b.process()
    new = [(offset, f"{key}-new-{offset}") for offset in range(at, len(values) + 1)]
    for offset, value in new:
        b.send1(p, key, value, offset, acks=-1)
    b.poll(b.process(), {key: list(enumerate(values[:at])) + new}, final=True)


def truncated_then_led(b: HistoryBuilder) -> None:
    """n3 cuts 6 -> 3 under the high-watermark rule while it is killed and restarted,
    then is elected: offsets 3 to 5 are lost."""
    k = "hw"
    values = write(b, k, 6)
    b.nemesis("kill", {"targets": ["n3"]})
    b.nemesis("start", {"targets": ["n3"]})
    truncation(b, k, 3, (6, 3))
    b.election(k, unclean=False, leader=3, epoch=7)
    rewritten(b, k, values, 3)


def unclean_election(b: HistoryBuilder) -> None:
    """A replica outside the ISR is elected; no truncation event: offsets 2 and 3 lost."""
    k = "unclean"
    values = write(b, k, 4)
    b.election(k, unclean=True, leader=2, epoch=2)
    rewritten(b, k, values, 2)


def unexplained(b: HistoryBuilder) -> None:
    """Offset 2 is missing from the final read, and no event of the key says why."""
    k = "silent"
    values = write(b, k, 4)
    b.poll(b.process(), {k: [(0, values[0]), (1, values[1]), (3, values[3])]}, final=True)


def simultaneous(b: HistoryBuilder) -> None:
    """Two keys cut by different replicas, then both elected at once (one controller
    moment, consecutive lines): each key's loss names its own election."""
    a, z = "twin-a", "twin-b"
    values_a = write(b, a, 4)
    values_z = write(b, z, 4)
    truncation(b, a, 1, (4, 2), rule="leader-epoch")
    truncation(b, z, 2, (4, 1), rule="leader-epoch")
    time = b.tick()
    for key, leader, epoch in ((a, 1, 4), (z, 2, 9)):
        b.writer.event(
            "leader-election",
            {
                "key": key,
                "leader": leader,
                "leader_epoch": epoch,
                "isr": [leader],
                "previous_leader": 3,
                "unclean": False,
            },
            process="sut",
            time=time,
        )
    rewritten(b, a, values_a, 2)
    rewritten(b, z, values_z, 1)


def recovered_then_led(b: HistoryBuilder) -> None:
    """n2's log recovery, after a crash, loads the key only up to offset 2; then n2 leads."""
    k = "q-rec"
    values = write(b, k, 4)
    b.writer.event(
        "log-recovery",
        {"key": k, "log_end_offset": 2, "clean_shutdown": False, "truncated_bytes": 140,
         "problem": "bad CRC at offset 2", "broker": 2},
        process="sut",
        node="n2",
        time=b.tick(),
    )  # fmt: skip
    b.election(k, unclean=False, leader=2, epoch=3)
    rewritten(b, k, values, 2)


SCENARIOS = (truncated_then_led, unclean_election, unexplained, simultaneous, recovered_then_led)


@pytest.fixture(scope="module")
def results(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root: Path = tmp_path_factory.mktemp("causes")
    builder = HistoryBuilder(root, test_json=NO_LOSS)
    for scenario in SCENARIOS:
        scenario(builder)
    return check_history(builder.close(), config=CheckConfig(sample=100))


def cases(results: dict[str, Any], checker: str, anomaly: str, key: str) -> list[dict[str, Any]]:
    found = results["checkers"][checker]
    listed = found["anomalies"].get(anomaly, []) + found.get("expected", {}).get(anomaly, [])
    return [case for case in listed if case["key"] == key]


def lines_of(history: Path, f: str, key: str) -> list[int]:
    """The history.jsonl lines (1-based) of the SUT events `f` of `key`."""
    found = []
    for number, line in enumerate(history.read_text().splitlines(), start=1):
        op = json.loads(line)
        if op["f"] == f and isinstance(op["value"], dict) and op["value"].get("key") == key:
            found.append(number)
    return found


def test_a_truncation_then_the_truncated_replicas_election(results: dict[str, Any]) -> None:
    lost = cases(results, "delivery", "lost-acked-write", "hw")
    assert sorted(case["offset"] for case in lost) == [3, 4, 5]
    history = Path(results["history"]["path"]) / "history.jsonl"
    for case in lost:
        cause = case["cause"]
        assert cause["kind"] == "truncation-then-election"
        cut, led = cause["events"]
        assert (cut["kind"], cut["node"], cut["broker"]) == ("truncation", "n3", 3)
        assert (cut["from_offset"], cut["to_offset"], cut["rule"], cut["removed"]) == (
            6, 3, "high-watermark", 3,
        )  # fmt: skip
        assert [cut["line"]] == lines_of(history, "truncation", "hw")
        assert [led["line"]] == lines_of(history, "leader-election", "hw")
        assert (led["node"], led["leader_epoch"], led["unclean"]) == ("n3", 7, False)
        assert cause["text"].startswith(
            f"n3 truncated hw 6→3 (high-watermark rule) at {cut['time_s']:.1f} s, "
            f"then led it (epoch 7, clean) at {led['time_s']:.1f} s; faults: kill n3"
        )
        assert [f["fault"] for f in cause["faults"]] == ["kill"]
    # The same cause on every name the loss shows under.
    for name in ("lost-write", "unseen"):
        assert {c["cause"]["kind"] for c in cases(results, "delivery", name, "hw")} == {
            "truncation-then-election"
        }


def test_an_unclean_election(results: dict[str, Any]) -> None:
    lost = cases(results, "delivery", "lost-acked-write", "unclean")
    assert sorted(case["offset"] for case in lost) == [2, 3]
    for case in lost:
        cause = case["cause"]
        assert cause["kind"] == "unclean-election"
        (election,) = cause["events"]
        assert (election["node"], election["leader_epoch"], election["unclean"]) == ("n2", 2, True)
        assert cause["text"].startswith("n2 was elected leader of unclean (epoch 2, unclean) at ")
    window = cases(results, "unclean", "unclean-loss-window", "unclean")
    assert window[0]["cause"]["kind"] == "unclean-election"


def test_a_loss_no_event_explains_says_so(results: dict[str, Any]) -> None:
    (lost,) = cases(results, "delivery", "lost-acked-write", "silent")
    assert lost["offset"] == 2
    assert lost["cause"] is None
    assert lost["no_cause"].startswith("no truncation, log recovery or unclean election")
    explained = results["explanations"]["lost-acked-write"]["cases"]
    assert all("cause" in case for case in explained)


def test_simultaneous_elections_of_two_keys_are_told_apart(results: dict[str, Any]) -> None:
    a = cases(results, "delivery", "lost-acked-write", "twin-a")
    z = cases(results, "delivery", "lost-acked-write", "twin-b")
    assert sorted(c["offset"] for c in a) == [2, 3]
    assert sorted(c["offset"] for c in z) == [1, 2, 3]
    (a_cut, a_led), (z_cut, z_led) = a[0]["cause"]["events"], z[0]["cause"]["events"]
    assert (a_cut["node"], a_led["node"], a_led["leader_epoch"]) == ("n1", "n1", 4)
    assert (z_cut["node"], z_led["node"], z_led["leader_epoch"]) == ("n2", "n2", 9)
    assert a_led["time_s"] == z_led["time_s"]
    assert a_led["line"] + 1 == z_led["line"]


def test_a_log_recovery_that_loaded_less_then_the_recovered_replicas_election(
    results: dict[str, Any],
) -> None:
    lost = cases(results, "delivery", "lost-acked-write", "q-rec")
    assert sorted(case["offset"] for case in lost) == [2, 3]
    recovery, led = lost[0]["cause"]["events"]
    assert recovery["kind"] == "log-recovery"
    assert (recovery["node"], recovery["log_end_offset"]) == ("n2", 2)
    assert recovery["problem"] == "bad CRC at offset 2"
    assert (led["node"], led["leader_epoch"]) == ("n2", 3)
    assert lost[0]["cause"]["text"].startswith(
        "n2 recovered q-rec to log end 2 (bad CRC at offset 2) at "
    )


def event(index: int, f: str, **fields: Any) -> ReplicationEvent:
    defaults: dict[str, Any] = dict(
        leader=None, leader_epoch=None, isr=None, previous_leader=None, unclean=False
    )
    defaults.update(fields)
    return ReplicationEvent(index, index * S, f, **defaults)


def test_a_deposed_leaders_truncation_follows_the_election_that_deposed_it() -> None:
    causes = KeyCauses.of(
        "k",
        [
            event(10, "leader-election", leader=2, leader_epoch=3, unclean=True),
            event(12, "truncation", from_offset=9, to_offset=4, broker=1, reason="leader-epoch"),
        ],
        None,
    )
    found = causes.explain(5, after=3)["cause"]
    assert found["kind"] == "election-then-truncation"
    assert found["text"] == (
        "n2 was elected leader of k (epoch 3, unclean) at 10.0 s, "
        "n1 then truncated it 9→4 (leader-epoch rule) at 12.0 s"
    )
    # Acknowledged after both: they cannot explain it.
    assert "no_cause" in causes.explain(5, after=13)
    # An offset the truncation kept: the unclean election alone explains it.
    assert causes.explain(3, after=3)["cause"]["kind"] == "unclean-election"


def test_a_step_back_no_cut_explains_names_the_leadership_changes_between() -> None:
    causes = KeyCauses.of(
        "k",
        [
            event(10, "leader-election", leader=-1, leader_epoch=2),
            event(12, "leader-election", leader=1, leader_epoch=3),
            event(30, "leader-election", leader=2, leader_epoch=4),
        ],
        None,
    )
    step = causes.explain(1020, after=5, before=20)
    assert step == {
        "no_cause": "no truncation, log recovery or unclean election of the key explains it "
        "(offset 1020); between the two operations its leadership changed: offline at 10.0 s "
        "(line 11); n1 elected (epoch 3, clean) at 12.0 s (line 13)"
    }


def test_a_log_recovery_below_the_offset_then_the_recovered_replicas_election() -> None:
    causes = KeyCauses.of(
        "k",
        [
            event(
                4, "log-recovery", to_offset=7, broker=3, reason="bad CRC at offset 7", node="n3"
            ),
            event(6, "leader-election", leader=3, leader_epoch=5),
        ],
        {"n3": 3},
    )
    found = causes.explain(8, after=1)["cause"]
    assert found["kind"] == "truncation-then-election"
    assert found["text"] == (
        "n3 recovered k to log end 7 (bad CRC at offset 7) at 4.0 s, "
        "then led it (epoch 5, clean) at 6.0 s"
    )


def diverged_after_a_cut() -> tuple[dict[str, Any], dict[str, list[ReplicationEvent]]]:
    """A diverged replica's case on key k, and k's events: n2 cut its log 3823→3288 by the
    high-watermark rule at 3 s, then led it (epoch 6) at 5 s."""
    case: dict[str, Any] = {"key": "k", "broker": 1, "offsets": [3288, 3822]}
    replication = {
        "k": [
            event(3, "truncation", from_offset=3823, to_offset=3288, broker=2,
                  reason="high-watermark", node="n2"),
            event(5, "leader-election", leader=2, leader_epoch=6),
        ]
    }  # fmt: skip
    return case, replication


def test_a_replica_divergence_is_explained_on_the_driver_with_the_faults_in_force() -> None:
    case, replication = diverged_after_a_cut()
    paused = FaultInterval("pause", 2 * S, 9 * S, 1, 8, {"targets": ["n3"]})
    killed = FaultInterval("kill", 2 * S, 4 * S, 1, 4, {"targets": ["n2"]})
    explain_samples(
        {("replicas", "replica-divergence", False): Collected(1, [case])},
        replication,
        None,
        [paused, killed],
    )
    cause = case["cause"]
    assert cause["kind"] == "truncation-then-election"
    # The fault on the cause's own node first.
    assert [f["fault"] for f in cause["faults"]] == ["kill", "pause"]
    assert cause["text"] == (
        "n2 truncated k 3823→3288 (high-watermark rule) at 3.0 s, then led it (epoch 6, clean) "
        "at 5.0 s; faults: kill n2 (2.0 s to 4.0 s); pause n3 (2.0 s to 9.0 s)"
    )


def test_a_restart_just_before_the_cut_is_named_and_a_kill_ends_a_pause() -> None:
    case, replication = diverged_after_a_cut()
    restarted = FaultInterval("kill", S // 2, 2 * S, 1, 2, {"targets": ["n2"]})
    elsewhere = FaultInterval("kill", S // 2, 2 * S, 1, 2, {"targets": ["n1"]})
    paused = FaultInterval("pause", S, None, 2, None, {"targets": ["n3"]})
    killed = FaultInterval("kill", 4 * S, None, 4, None, {"targets": ["n3"]})
    explain_samples(
        {("replicas", "replica-divergence", False): Collected(1, [case])},
        replication,
        None,
        [restarted, elsewhere, paused, killed],
    )
    assert case["cause"]["text"].endswith(
        "; faults: kill n2 (0.5 s to 2.0 s); pause n3 (1.0 s to 4.0 s); kill n3 (from 4.0 s, "
        "never healed)"
    )
