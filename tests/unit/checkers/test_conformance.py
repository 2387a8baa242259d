"""Conformance rules (checkers.conformance) on hand-written histories: each fires where
the configuration's promise was broken per the SUT's events, and not on the edge cases
(an acknowledgement racing an ISR change, clock skew within the tolerance, no events, an
election just after an ISR change)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from tests.unit.checkers.history_builder import HistoryBuilder

MS = 1_000_000
TOLERANCE = 5 * MS
PROMISE = {
    "topic": {"replication_factor": 3, "min_insync_replicas": 2, "unclean_leader_election": False},
    "workload": {"acks": -1},
    "clock": {"tolerance_ns": TOLERANCE},
}


def election(
    b: HistoryBuilder,
    key: str,
    leader: int,
    isr: Sequence[int],
    epoch: int,
    *,
    unclean: bool = False,
    previous: int = -1,
    at: int | None = None,
    versions: dict[str, Any] | None = None,
) -> None:
    b.writer.event(
        "leader-election",
        {
            "key": key,
            "leader": leader,
            "leader_epoch": epoch,
            "isr": list(isr),
            "previous_leader": previous,
            "unclean": unclean,
            **(versions or {}),
        },
        process="sut",
        time=b.tick() if at is None else at,
    )


def isr_change(
    b: HistoryBuilder,
    key: str,
    leader: int,
    isr: Sequence[int],
    epoch: int,
    *,
    at: int | None = None,
    zk_version: int | None = None,
    elr: Sequence[int] | None = None,
) -> None:
    known: dict[str, Any] = {} if zk_version is None else {"zk_version": zk_version}
    if elr is not None:
        known["elr"] = list(elr)
    b.writer.event(
        "isr-change",
        {"key": key, "leader": leader, "leader_epoch": epoch, "isr": list(isr), **known},
        process="sut",
        time=b.tick() if at is None else at,
    )


def read_all(b: HistoryBuilder, key: str, values: Sequence[str]) -> None:
    b.poll(b.process(), {key: list(enumerate(values))})


def acked_below(b: HistoryBuilder) -> None:
    """ISR of one for 100 ms: a write invoked and acknowledged inside it breaks the promise."""
    k = "below"
    election(b, k, 1, [1, 2, 3], 0)
    p = b.process()
    b.send1(p, k, f"{k}-0", 0)
    isr_change(b, k, 1, [1], 0)
    b.tick(50 * MS)
    b.send1(p, k, f"{k}-1", 1)
    b.send1(p, k, f"{k}-2", 2, acks=1)  # acks=1: nothing promised
    b.tick(50 * MS)
    isr_change(b, k, 1, [1, 2], 0)
    b.send1(p, k, f"{k}-3", 3)
    read_all(b, k, [f"{k}-{i}" for i in range(4)])


def racing(b: HistoryBuilder) -> None:
    """Acknowledgements racing ISR changes (within the clock tolerance, or spanning one)
    are not judged."""
    k = "racing"
    election(b, k, 1, [1, 2], 0)
    p = b.process()
    isr_change(b, k, 1, [1], 0)  # the next send is invoked 1 ms later: within tolerance
    b.send1(p, k, f"{k}-0", 0)
    b.tick(50 * MS)
    invoke = b.writer.write(p, "invoke", "send", [["send", k, f"{k}-1"]], time=b.tick())
    isr_change(b, k, 1, [1, 2], 0, at=b.tick(20 * MS))  # the ISR grows while it is in flight
    b.writer.complete(invoke, "ok", [["send", k, [1, f"{k}-1"]]], time=b.tick(20 * MS))
    read_all(b, k, [f"{k}-0", f"{k}-1"])


def skewed_events(b: HistoryBuilder) -> None:
    """A leader's ISR shrink logged 3 ms after a send it raced (a clock off by less than
    the tolerance) is not judged, nor one invoked 1 ms after the ISR grew again."""
    k = "skew"
    election(b, k, 1, [1, 2], 0)
    p = b.process()
    b.tick(20 * MS)
    b.send1(p, k, f"{k}-0", 0)
    isr_change(b, k, 1, [1], 0, at=b.time - 3 * MS)
    b.tick(20 * MS)
    isr_change(b, k, 1, [1, 2], 0, at=b.time)
    b.tick(1 * MS)
    b.send1(p, k, f"{k}-1", 1)
    read_all(b, k, [f"{k}-0", f"{k}-1"])


def no_events(b: HistoryBuilder) -> None:
    """Without events nothing can be judged."""
    k = "noevents"
    p = b.process()
    b.send1(p, k, f"{k}-0", 0)
    read_all(b, k, [f"{k}-0"])


def written(b: HistoryBuilder, key: str) -> None:
    """One write and its read: the per-key pass checks the keys the operations name."""
    b.send1(b.process(), key, f"{key}-0", None, acks=1)
    read_all(b, key, [f"{key}-0"])


def elected_outside(b: HistoryBuilder) -> None:
    """After the ISR shrank to {1}, a clean election of 2 is outside it."""
    k = "outside"
    written(b, k)
    election(b, k, 1, [1, 2], 0)
    isr_change(b, k, 1, [1], 0)
    election(b, k, 2, [2], 1, previous=1)


def elected_from_elr(b: HistoryBuilder) -> None:
    """The ISR shrank to {1} below min.insync.replicas, naming 2 and 3 eligible leader
    replicas: a clean election of 2 is inside them. Elsewhere only 3 is eligible (2 left
    the ISR while it still had the minimum): a clean election of 2 is outside both."""
    k = "fromelr"
    written(b, k)
    election(b, k, 1, [1, 2, 3], 0)
    isr_change(b, k, 1, [1], 0, elr=[2, 3])
    election(b, k, 2, [2], 1, previous=1, versions={"elr": [3]})
    outside = "outsideelr"
    written(b, outside)
    election(b, outside, 1, [1, 2, 3], 0)
    isr_change(b, outside, 1, [1, 3], 0, elr=[])
    isr_change(b, outside, 1, [1], 0, elr=[3])
    election(b, outside, 2, [2], 1, previous=1)


def unclean_while_off(b: HistoryBuilder) -> None:
    """An unclean election, although test.json turned unclean election off."""
    k = "uncleanoff"
    written(b, k)
    election(b, k, 1, [1, 2], 0)
    isr_change(b, k, 1, [1], 0)
    election(b, k, 2, [2], 1, previous=1, unclean=True)


def elected_after_expand(b: HistoryBuilder) -> None:
    """An election of a replica the leader had just added to the ISR, logged by the
    controller before the leader logged the change (a later epoch): inside the ISR."""
    k = "justadded"
    written(b, k)
    election(b, k, 1, [1, 2], 0)
    isr_change(b, k, 1, [1], 0)
    b.tick(20 * MS)
    t = b.tick()
    isr_change(b, k, 1, [1, 3], 0, at=t + 2 * MS)
    election(b, k, 3, [3], 1, previous=1, at=t)
    offline = "offline"
    written(b, offline)
    election(b, offline, 1, [1, 2], 0)
    election(b, offline, -1, [1], 1, previous=1)
    election(b, offline, 1, [1], 2, previous=-1)


def elected_from_unlogged_write(b: HistoryBuilder) -> None:
    """The leader wrote ISR {1, 3} (version 2) and died before logging it; the controller
    elected 3 from that state: excused. Elsewhere a controller elects 2 from a state two
    writes old (a stale view: version 1 when 3 is the last one logged): not excused."""
    k = "unlogged"
    written(b, k)
    election(b, k, 1, [1, 2], 0, versions={"zk_version": 0})
    isr_change(b, k, 1, [1], 0, zk_version=1)
    election(
        b,
        k,
        3,
        [3],
        1,
        previous=1,
        versions={"previous_isr": [1, 3], "previous_zk_version": 2, "zk_version": 3},
    )
    stale = "staleview"
    written(b, stale)
    election(b, stale, 1, [1, 2], 0, versions={"zk_version": 0})
    isr_change(b, stale, 1, [1], 0, zk_version=1)
    isr_change(b, stale, 1, [1, 3], 0, zk_version=2)
    isr_change(b, stale, 1, [1], 0, zk_version=3)
    election(
        b,
        stale,
        2,
        [2],
        1,
        previous=1,
        versions={"previous_isr": [1, 2], "previous_zk_version": 0, "zk_version": 4},
    )


def leader_isr_change(
    b: HistoryBuilder, key: str, isr: Sequence[int], previous: Sequence[int], hw: int,
    ends: dict[int, int],
) -> None:  # fmt: skip
    """An ISR change by leader 1 with what it knew when it decided."""
    b.writer.event(
        "isr-change",
        {
            "key": key,
            "leader": 1,
            "leader_epoch": 0,
            "isr": list(isr),
            "previous_isr": list(previous),
            "high_watermark": hw,
            "log_end_offsets": {str(broker): end for broker, end in ends.items()},
        },
        process="sut",
        time=b.tick(),
    )


def joins(b: HistoryBuilder) -> None:
    """Broker 3 added while 12 records behind the high watermark; broker 2 added once it
    reached it; a shrink that keeps a member behind (it restarted with less) adds nobody."""
    k = "joins"
    written(b, k)
    election(b, k, 1, [1], 0)
    leader_isr_change(b, k, [1, 2], [1], 152, {1: 160, 2: 152, 3: 140})
    leader_isr_change(b, k, [1, 2, 3], [1, 2], 152, {1: 160, 2: 155, 3: 140})
    leader_isr_change(b, k, [1, 3], [1, 2, 3], 160, {1: 170, 2: 150, 3: 158})


def high_watermarks(b: HistoryBuilder) -> None:
    """Leader 1's high watermark goes back within epoch 0; a new leader (epoch 1) starting
    lower is not a regression."""
    k = "hw"
    written(b, k)
    election(b, k, 1, [1, 2], 0)
    leader_isr_change(b, k, [1], [1, 2], 318, {1: 358, 2: 318})
    leader_isr_change(b, k, [1, 2], [1], 310, {1: 360, 2: 360})
    election(b, k, 2, [2], 1, previous=1)
    b.writer.event(
        "isr-change",
        {"key": k, "leader": 2, "leader_epoch": 1, "isr": [1, 2], "previous_isr": [2],
         "high_watermark": 300, "log_end_offsets": {"1": 300, "2": 300}},
        process="sut",
        time=b.tick(),
    )  # fmt: skip


def build(b: HistoryBuilder) -> None:
    for scenario in (
        acked_below,
        racing,
        skewed_events,
        no_events,
        elected_outside,
        elected_from_elr,
        unclean_while_off,
        elected_after_expand,
        elected_from_unlogged_write,
        joins,
        high_watermarks,
    ):
        scenario(b)


@pytest.fixture(scope="module")
def results(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root: Path = tmp_path_factory.mktemp("conformance")
    builder = HistoryBuilder(root, test_json=PROMISE)
    build(builder)
    return check_history(builder.close(), config=CheckConfig(sample=100))


def cases(results: dict[str, Any], anomaly: str) -> list[dict[str, Any]]:
    return list(results["checkers"]["conformance"]["anomalies"].get(anomaly, []))


def test_ack_below_min_isr_fires_only_inside_the_stretch(results: dict[str, Any]) -> None:
    found = cases(results, "ack-below-min-isr")
    assert [(c["key"], c["value"]) for c in found] == [("below", "below-1")]
    case = found[0]
    assert case["isr"] == [1] and case["leader"] == 1 and case["min_insync_replicas"] == 2
    assert case["offset"] == 1 and case["acks"] == -1
    assert results["checkers"]["conformance"]["counts"]["ack-below-min-isr"] == 1


def test_election_outside_isr(results: dict[str, Any]) -> None:
    found = cases(results, "election-outside-isr")
    assert sorted((c["key"], c["unclean"]) for c in found) == [
        ("outside", False),
        ("outsideelr", False),
        ("staleview", False),
        ("uncleanoff", True),
    ]
    for case in found:
        assert case["leader"] == 2 and case["last_isr"] == [1]
    assert {c["key"]: c["last_elr"] for c in found}["outsideelr"] == [3]


def test_isr_join_behind_hw(results: dict[str, Any]) -> None:
    found = cases(results, "isr-join-behind-hw")
    assert [(c["key"], c["follower"], c["follower_log_end_offset"]) for c in found] == [
        ("joins", 3, 140)
    ]
    assert found[0]["high_watermark"] == 152 and found[0]["previous_isr"] == [1, 2]


def test_hw_regression(results: dict[str, Any]) -> None:
    found = cases(results, "hw-regression")
    assert [(c["key"], c["high_watermark"], c["earlier_high_watermark"]) for c in found] == [
        ("hw", 310, 318)
    ]


def test_the_verdict(results: dict[str, Any]) -> None:
    assert results["valid"] is False
    assert results["checkers"]["conformance"]["counts"] == {
        "ack-below-min-isr": 1,
        "election-outside-isr": 4,
        "isr-join-behind-hw": 1,
        "hw-regression": 1,
        "truncated-acknowledged": 0,
        "stale-isr-member": 0,
    }


def test_nothing_judged_without_min_insync(spark: Any, tmp_path: Path) -> None:
    builder = HistoryBuilder(tmp_path / "run", test_json={"topic": {"replication_factor": 3}})
    acked_below(builder)
    results = check_history(builder.close(), config=CheckConfig(sample=100))
    section = results["checkers"]["conformance"]
    assert section["counts"]["ack-below-min-isr"] == 0
    assert section["counts"]["isr-join-behind-hw"] == 0
    assert section["valid"] is True
    assert any("min_insync_replicas" in note for note in section["notes"])
