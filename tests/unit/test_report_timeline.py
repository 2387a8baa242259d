"""The report's timeline, consumer lag and unseen values, and failures by error, from small
hand-written histories whose answers are worked out by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from histories import HistoryWriter, read_history, write_parquet
from squall.report.consumption import consumption, read_mops
from squall.report.failures import failures_by_error, normalise_error
from squall.report.timeline import (
    FaultBar,
    Mark,
    ScenarioSpan,
    build_timeline,
    event_rows,
    lane_order,
    natural_key,
    nodes_of_test,
)

S = 1_000_000_000


def nemesis(t: float, f: str, **value: Any) -> dict[str, Any]:
    return {"time": int(t * S), "process": "nemesis", "type": "info", "f": f, "value": value}


def sut(t: float, f: str, **value: Any) -> dict[str, Any]:
    return {"time": int(t * S), "process": "sut", "type": "info", "f": f, "value": value}


EVENTS: list[Any] = [  # the odd ones at the end are skipped or shown as they are
    sut(0, "controller-elected", broker=1, controller=1, controller_epoch=1),
    sut(0, "leader-election", broker=1, key="q-0", leader=2, leader_epoch=0, isr=[2, 1, 3],
        previous_leader=-1, unclean=False, reason="new partition"),
    nemesis(1, "kill", targets=["n1"], outcome={"n1": "killed"}, scenario="leader-loss"),
    sut(2, "leader-election", broker=2, key="q-10", leader=-1, leader_epoch=1, isr=[1],
        previous_leader=1, unclean=False),
    sut(2.5, "controller-elected", broker=3, controller=3, controller_epoch=2),
    nemesis(3, "start", targets=["n1"], outcome={"n1": "started"}, scenario="leader-loss"),
    sut(3.5, "truncation", broker=1, key="q-10", from_offset=9, to_offset=7,
        reason="high-watermark"),
    nemesis(4, "pause", targets=["n2", "n3"], scenario="pauses"),
    sut(4.5, "isr-change", broker=3, key="q-0", isr=[3], leader=3, leader_epoch=2),
    nemesis(5, "resume", targets=["n2"], scenario="pauses"),
    nemesis(6, "kill", targets=["n3"], scenario="pauses"),  # ends n3's pause too
    sut(6.5, "leader-election", broker=3, key="q-10", leader=1, leader_epoch=2, isr=[1],
        previous_leader=-1, unclean=True),
    nemesis(7, "start-partition", shape="halves", grudge={"n1": ["n2"], "n2": ["n1"]}),
    nemesis(8, "start-partition", shape="isolate", targets=["zk1"],
            grudge={"zk1": ["n1", "n2"], "n1": ["zk1"], "n2": ["zk1"]}),  # replaces halves
    nemesis(9, "stop-partition", healed={"zk1": ["n1", "n2"]}),
    nemesis(9.5, "bounce", targets=["n2"], scenario="rolling"),
    nemesis(10, "pause", targets=["n1"], error="the runtime cannot pause"),  # not applied
    nemesis(10, "freeze", targets=["n1", "n2"], error={"n2": "no such container"}),
    {"time": "soon", "process": "nemesis", "f": "kill", "value": {"targets": ["n9"]}},
    "not an event",
]  # fmt: skip


def test_faults_are_paired_into_intervals_per_node() -> None:
    timeline = build_timeline(EVENTS, nodes=["n1", "n2", "n3", "zk1"], end_s=12.0)
    assert set(timeline.bars) == {
        FaultBar("n1", "kill", 1.0, 3.0, "leader-loss"),
        FaultBar("n2", "pause", 4.0, 5.0, "pauses"),
        FaultBar("n3", "pause", 4.0, 6.0, "pauses"),
        FaultBar("n3", "kill", 6.0, None, "pauses"),  # never healed: to the end
        FaultBar("n1", "start-partition", 7.0, 8.0, None),  # halves: every node it names,
        FaultBar("n2", "start-partition", 7.0, 8.0, None),  # until the next grudge
        FaultBar("zk1", "start-partition", 8.0, 9.0, None),  # isolated: its targets
        FaultBar("n1", "freeze", 10.0, None, None),  # its failure on n2 left n2 alone
    }
    assert [b.start_s for b in timeline.bars] == sorted(b.start_s for b in timeline.bars)
    assert timeline.nodes == ("n1", "n2", "n3", "zk1")
    assert timeline.end_s == 12.0
    assert timeline.scenarios == (
        ScenarioSpan("leader-loss", 1.0, 3.0),
        ScenarioSpan("pauses", 4.0, 6.0),
        ScenarioSpan("rolling", 9.5, 9.5),
    )


def test_sut_events_are_marked_on_the_nodes_they_concern() -> None:
    timeline = build_timeline(EVENTS)
    assert list(timeline.marks) == [
        Mark("controller", "n1", 0.0),
        Mark("election", "n2", 0.0, "q-0"),  # on the new leader
        Mark("offline", "n1", 2.0, "q-10"),  # on the leader it lost
        Mark("controller", "n3", 2.5),
        Mark("truncation", "n1", 3.5, "q-10", 2),  # on the replica that truncated, 2 removed
        Mark("isr-change", "n3", 4.5, "q-0"),  # on the leader
        Mark("unclean-election", "n1", 6.5, "q-10"),
        Mark("instant-fault", "n2", 9.5),
    ]
    assert timeline.keys == ["q-0", "q-10"]
    # Without test.json the lanes are the nodes the events name.
    assert timeline.nodes == ("n1", "n2", "n3", "zk1")


def test_lanes_and_keys_in_natural_order() -> None:
    assert lane_order(["zk1", "n10", "n2", "n1"]) == ["n1", "n2", "n10", "zk1"]
    assert sorted(["q-10", "q-2", "q-1"], key=natural_key) == ["q-1", "q-2", "q-10"]
    assert nodes_of_test({"nodes": 3}) == ["n1", "n2", "n3", "zk1"]
    assert nodes_of_test({"nodes": 5, "nemesis": {"brokers": ["n1", "n2"]}}) == [
        "n1",
        "n2",
        "zk1",
    ]
    assert nodes_of_test({"nodes": "<script>"}) == [] and nodes_of_test(None) == []


def test_event_rows_describe_each_event_in_words() -> None:
    rows = {(r.f, r.time): r for r in event_rows(EVENTS)}
    unclean = rows[("leader-election", int(6.5 * S))]
    assert (unclean.nodes, unclean.key) == ("n1", "q-10")
    assert unclean.detail == "UNCLEAN: leader n1, epoch 2, was none; ISR [1]"
    offline = rows[("leader-election", 2 * S)]
    assert offline.detail.startswith("offline (no leader), epoch 1, was n1")
    assert rows[("truncation", int(3.5 * S))].detail == "log end 9 -> 7 (high-watermark)"
    assert rows[("controller-elected", int(2.5 * S))].detail == "controller n3, epoch 2"
    halves = rows[("start-partition", 7 * S)]
    assert halves.nodes == "n1, n2" and "grudge: n1 drops n2; n2 drops n1" in halves.detail
    assert rows[("kill", "soon")].nodes == "n9"  # shown as it is, time and all
    assert rows[("pause", 10 * S)].nodes == ""  # not applied anywhere


def test_consumer_lag_and_unseen_values(tmp_path: Path) -> None:
    consumed = consumption(read_mops(_small_history(tmp_path)))
    # t-0 acknowledged offsets 0@1.1 1@2.1 2@4.1 3@6.1 5@7.5 4@7.6; polls read up to
    # 0@3.1 2@5.1 0@6.6 (a consumer started again) 5@7.4; the final read is left out.
    lag = consumed.lag["t-0"]
    assert lag.time_s == pytest.approx([1.1, 2.1, 3.1, 4.1, 5.1, 6.1, 6.6, 7.4, 7.5, 7.6])
    assert lag.values.tolist() == [1, 2, 1, 2, 0, 1, 3, 0, 0, 0]
    assert consumed.lag["t-1"].values.tolist() == [1, 0]
    assert list(consumed.lag) == ["t-0", "t-1"]
    # Unseen: 10 1.1-3.1, 11 2.1-5.1, 12 4.1-5.1, 13 6.1-8.1 (final read), 14 from 7.6 on;
    # 15 was read (7.4) before its acknowledgement (7.5): never unseen. t-1: 20 1.6-5.1.
    unseen = consumed.unseen["t-0"]
    assert unseen.time_s == pytest.approx([1.1, 2.1, 3.1, 4.1, 5.1, 5.1, 6.1, 7.6, 8.1])
    assert unseen.values.tolist() == [1, 2, 1, 2, 1, 0, 1, 2, 1]
    total = consumed.unseen_total
    assert total.values.tolist() == [1, 2, 3, 2, 3, 2, 1, 0, 1, 2, 1]
    assert total.time_s[1] == pytest.approx(1.6)
    assert isinstance(total.values, np.ndarray)


def test_failures_grouped_by_normalised_error(tmp_path: Path) -> None:
    _small_history(tmp_path)
    groups = failures_by_error(read_history(tmp_path / "history.jsonl"))
    summary = [(g.f, g.error, g.fail, g.info, g.first_s, g.last_s) for g in groups]
    assert summary == [
        ("send", "NETWORK_EXCEPTION: cannot connect to broker <addr>", 2, 1, 2.5, 4.5),
        ("crash", "(no error given)", 0, 1, 5.5, 5.5),
        ("poll", "BrokerUnavailableError: broker N of squall-queue-N at <addr>", 1, 0, 6.3, 6.3),
    ]  # fmt: skip
    assert groups[0].example == "NETWORK_EXCEPTION: cannot connect to broker 10.0.0.1:9092"
    assert groups[0].count == 3


def test_normalise_error_takes_out_numbers_and_addresses() -> None:
    assert normalise_error("timeout_ms=30000 after 1.5 s to host-a.example:9092") == (
        "timeout_ms=N after N s to <addr>"
    )
    assert normalise_error("[::1]:9092 id 0x1f 123e4567-e89b-12d3-a456-426614174000") == (
        "<addr> id N <id>"
    )
    kept = "n2 and n10 stay; log4j2 v1.2 NOT_ENOUGH_REPLICAS"
    assert normalise_error(kept) == kept


def _small_history(directory: Path) -> Path:
    """The history the lag, unseen and failures tests work out by hand; its Parquet tables."""
    writer = HistoryWriter(directory / "history.jsonl")

    def at(seconds: float) -> int:
        return round(seconds * S)

    def send(process: int, key: str, value: int, start: float) -> Any:
        return writer.write(process, "invoke", "send", [["send", key, value]], time=at(start))

    def sent(invoke: Any, key: str, offset: int, value: int, end: float) -> None:
        writer.complete(invoke, "ok", [["send", key, [offset, value]]], time=at(end))

    def poll(process: int, start: float, end: float, read: dict[str, Any], **kw: Any) -> None:
        invoke = writer.write(process, "invoke", "poll", [["poll"]], time=at(start), **kw)
        writer.complete(invoke, "ok", [["poll", read]], time=at(end))

    def failed(process: int, f: str, kind: str, end: float, error: str | None) -> None:
        invoke = writer.write(process, "invoke", f, None if f == "crash" else [["poll"]]
                              if f == "poll" else [["send", "t-0", 99]], time=at(end - 0.05))  # fmt: skip
        fields = {} if error is None else {"error": error}
        writer.complete(invoke, kind, None, time=at(end), **fields)

    sent(send(0, "t-0", 10, 1.0), "t-0", 0, 10, 1.1)
    sent(send(4, "t-1", 20, 1.5), "t-1", 0, 20, 1.6)
    sent(send(0, "t-0", 11, 2.0), "t-0", 1, 11, 2.1)
    failed(5, "send", "fail", 2.5, "NETWORK_EXCEPTION: cannot connect to broker 10.0.0.1:9092")
    poll(1, 3.0, 3.1, {"t-0": [[0, 10]]})
    failed(6, "send", "fail", 3.5, "NETWORK_EXCEPTION: cannot connect to broker 10.0.0.2:9092")
    sent(send(0, "t-0", 12, 4.0), "t-0", 2, 12, 4.1)
    failed(7, "send", "info", 4.5, "NETWORK_EXCEPTION: cannot connect to broker 10.0.0.3:9092")
    poll(1, 5.0, 5.1, {"t-0": [[1, 11], [2, 12]], "t-1": [[0, 20]]})
    failed(8, "crash", "info", 5.5, None)
    sent(send(0, "t-0", 13, 6.0), "t-0", 3, 13, 6.1)
    failed(
        9,
        "poll",
        "fail",
        6.3,
        "BrokerUnavailableError: broker 3 of squall-queue-12 at 10.0.0.3:9092",
    )
    poll(1, 6.5, 6.6, {"t-0": [[0, 10]]})
    fourteen = send(0, "t-0", 14, 7.0)
    fifteen = send(2, "t-0", 15, 7.2)
    poll(1, 7.3, 7.4, {"t-0": [[5, 15]]})
    sent(fifteen, "t-0", 5, 15, 7.5)
    sent(fourteen, "t-0", 4, 14, 7.6)
    poll(3, 8.0, 8.1, {"t-0": [[0, 10], [1, 11], [2, 12], [3, 13]]}, final=True)
    writer.close()
    write_parquet(directory / "history.jsonl", directory / "history.parquet")
    return directory / "history.parquet"


def test_a_storage_fault_that_crashes_a_broker_keeps_it_down_until_started() -> None:
    events = [
        nemesis(1, "corrupt-file", targets=["n2"], killed=["n2"], outcome={"n2": "corrupted"}),
        nemesis(2, "snapshot", targets=["n3"], name="snap-0", outcome={"n3": "taken"}),
        nemesis(3, "truncate-file", targets=["n1"], killed=[], outcome={"n1": "truncated"}),
        nemesis(4, "start", targets=["n2"], outcome={"n2": "started"}),
    ]
    timeline = build_timeline(events)
    assert timeline.bars == (FaultBar("n2", "kill", 1.0, 4.0, None),)
    assert [(m.kind, m.node, m.time_s) for m in timeline.marks] == [
        ("instant-fault", "n2", 1.0),
        ("instant-fault", "n3", 2.0),
        ("instant-fault", "n1", 3.0),
    ]
