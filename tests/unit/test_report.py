"""report.html and the plots, from a results document and a small Parquet history."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from histories import HistoryWriter, write_parquet
from squall.report.consumption import Series
from squall.report.failures import FailureGroup
from squall.report.html import render_html
from squall.report.plots import (
    anomaly_totals,
    decimate,
    fault_intervals,
    loss_windows,
    lost_per_key,
    write_plots,
)
from squall.runner import write_reports
from squall.store import RunStore

S = 1_000_000_000
WINDOW = {
    "key": "t-0",
    "election": 7,
    "time": 3 * S,
    "offsets": [4, 9],
    "lost": 6,
    "window": [2 * S, 3 * S],
    "lost_values": [4, 5],
    "expected_because": "test.json allows unclean leader election",
}
RESULTS: dict[str, Any] = {
    "valid": False,
    "anomaly_types": ["lost-write"],
    "checkers": {
        "delivery": {
            "valid": False,
            "anomalies": {"lost-write": [{"key": "t-1", "value": 3, "offset": 1}]},
            "counts": {"lost-write": 1, "unseen": 0},
            "expected": {"unseen": [{"key": "t-0", "value": 5, "expected_because": "x"}]},
            "expected_counts": {"unseen": 2},
        },
        "unclean": {
            "valid": True,
            "anomalies": {},
            "counts": {"unclean-loss-window": 0},
            "expected": {"unclean-loss-window": [WINDOW]},
            "expected_counts": {"unclean-loss-window": 1},
        },
    },
    "stats": {
        "ops": 4,
        "ok": 4,
        "fail": 0,
        "info": 0,
        "pending": 0,
        "duration_s": 4.0,
        "availability": 0.75,
        "by_f": {"send": {"ops": 2, "ok": 2, "fail": 0, "info": 0, "pending": 0}},
        "latency_ms": {
            "send": {
                "ok": {"count": 2, "p50": 1.5, "p90": 2.0, "p99": 2.0, "p999": 2.0, "max": 2.0}
            }
        },
        "faults": [
            {
                "fault": "pause",
                "start_s": 1.0,
                "end_s": 2.5,
                "value": {"targets": ["n3"]},
                "completions": 4,
                "ok": 3,
                "availability": 0.75,
            },
            {
                "fault": "kill",
                "start_s": 3.0,
                "end_s": None,
                "value": {"targets": ["n1"]},
                "completions": 0,
                "ok": 0,
                "availability": None,
            },
        ],
    },
    "notes": ["a note <for> the reader"],
}


def test_html_shows_anomalies_expected_losses_and_statistics() -> None:
    page = render_html(RESULTS, test={"name": "demo", "seed": 3}, images=["windows.png"])
    assert 'demo: <span class="invalid">INVALID</span>' in page
    assert "lost-write (1) from delivery" in page
    assert "A write known to have happened was never read" in page  # its meaning
    assert "docs/anomalies/lost-write.md" in page
    assert "key t-1: value 3 written at offset 1" in page  # each case in a sentence
    assert "unseen (2) from delivery (expected loss: the configuration allows it)" in page
    assert "unclean-loss-window (1) from unclean (expected loss" in page
    assert "<img src='windows.png'>" in page
    assert "Availability during each fault" in page and "<td>n3</td>" in page
    assert "a note &lt;for&gt; the reader" in page
    assert "<td>1.5</td>" in page


def test_plot_inputs() -> None:
    assert [(i.name, i.start_s, i.end_s) for i in fault_intervals(RESULTS, 9.0)] == [
        ("pause", 1.0, 2.5),
        ("kill", 3.0, 9.0),
    ]
    assert lost_per_key(RESULTS) == {}
    counted = {**RESULTS, "summary": {"keys": {"t-0": {"acknowledged_lost": 2}, "t-1": {}}}}
    assert lost_per_key(counted) == {"t-0": {"acknowledged_lost": 2}}
    assert [w["expected"] for w in loss_windows(RESULTS)] == [True]


def test_plots_are_written(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "history.jsonl")
    for second in range(4):
        invoke = writer.write(1, "invoke", "send", [["send", "t-0", second]], time=second * S)
        writer.complete(invoke, "ok", [["send", "t-0", [second, second]]], time=second * S + 10**6)
    writer.close()
    write_parquet(tmp_path / "history.jsonl", tmp_path / "history.parquet")
    written = write_plots(tmp_path / "history.parquet", tmp_path, RESULTS)
    assert [p.name for p in written] == [
        "timeline.png",
        "latency.png",
        "rate.png",
        "lag.png",  # acknowledged, never read: lagging all along
        "unseen.png",
        "anomalies.png",
        "windows.png",
    ]
    assert all(p.stat().st_size > 5000 for p in written)


TEST_JSON: dict[str, Any] = {
    "name": "demo",
    "seed": 7,
    "runtime": "docker",
    "nodes": 3,
    "profile": "kafka-2.4",
    "time_limit_s": 60.0,
    "git_commit": "abc123",
    "versions": {"python": "3.11.7", "squall": "0.1.0"},
    "workload": {"topic": "t", "acks": -1, "mix": {"send": 1.0, "poll": 1.0}},
    "topic": {"name": "t", "partitions": 2, "replication_factor": 3, "min_insync_replicas": 2},
    "broker": {"replica.truncation": "leader-epoch"},
    "nemesis": {"generator": "default", "brokers": ["n1", "n2", "n3"], "seed": 1234567},
}
EVENTS: list[dict[str, Any]] = [
    {"time": 1 * S, "process": "nemesis", "f": "kill",
     "value": {"targets": ["n1"], "scenario": "leader-loss"}},
    {"time": 2 * S, "process": "sut", "f": "leader-election",
     "value": {"key": "t-0", "leader": 2, "leader_epoch": 1, "isr": [2, 3], "previous_leader": 1,
               "unclean": False, "reason": "broker change"}},
    {"time": 3 * S, "process": "sut", "f": "isr-change",
     "value": {"key": "t-0", "isr": [2], "leader": 2, "leader_epoch": 1}},
    {"time": 4 * S, "process": "nemesis", "f": "start", "value": {"targets": ["n1"]}},
]  # fmt: skip


def test_html_shows_how_to_replay_the_run_its_versions_spec_and_files(tmp_path: Path) -> None:
    run = tmp_path / "my run"
    (run / "nodes" / "n1").mkdir(parents=True)
    (run / "nodes" / "zk1").mkdir()
    for name in ("history.jsonl", "results.json", "junit.xml", "nodes/n1/broker.log"):
        (run / name).write_text("x")
    page = render_html(RESULTS, test=TEST_JSON, run_dir=run)
    assert f"<code>squall replay &#x27;{run}&#x27;</code>" in page  # quoted for the shell
    assert "<th>seed</th><td>7</td>" in page and "<th>profile</th><td>kafka-2.4</td>" in page
    assert "<th>git commit</th><td>abc123</td>" in page
    assert "<th>versions</th><td>python 3.11.7 · squall 0.1.0</td>" in page
    assert "topic t (2 partitions, RF 3, min.insync 2)" in page
    # The resolved spec as tables, numbers as written.
    assert "<h3>workload</h3>" in page and "<th>acks</th><td>-1</td>" in page
    assert "<th>mix</th><td><table class='kv'><tr><th>send</th><td>1</td>" in page
    assert "<th>seed</th><td>1234567</td>" in page
    links = re.findall(r"href='([^'#][^']*)'", page)
    assert links == ["history.jsonl", "results.json", "junit.xml", "nodes/n1/broker.log"]
    assert all((run / link).is_file() for link in links)
    # Without a run directory: the replay command of test.json's, and no links.
    page = render_html(RESULTS, test={**TEST_JSON, "run_dir": "store/demo/1"})
    assert "<code>squall replay store/demo/1</code>" in page and "href='h" not in page


def test_html_renders_tables_not_json() -> None:
    page = render_html(RESULTS, test=TEST_JSON, faults=EVENTS[::3])
    assert '{"' not in page and "{&quot;" not in page
    # A sample per row, a column per field; nanoseconds shown as seconds, operations by
    # their history line as the sentences name them (index 7: line 8).
    assert "<th>key</th><th>election</th><th>time</th><th>offsets</th><th>lost</th>" in page
    assert (
        "<td>t-0</td><td>line 8</td><td>3 s</td><td>[4, 9]</td><td>6</td><td>[2 s, 3 s]</td>"
        in page
    )
    assert "<td>lost-write 1</td>" in page  # the checkers' counts
    assert "<th>width_s</th>" not in page  # no throughput in these stats
    stats = {**RESULTS["stats"], "events": {"nemesis": 2}, "throughput": {"width_s": 1.0,
             "windows": [{"start_s": 0.0, "ok_per_s": 3.0, "latency_ms": {"p50": 1.5}}]}}  # fmt: skip
    page = render_html({**RESULTS, "stats": stats})
    assert "<th>start_s</th><th>ok_per_s</th><th>latency_ms</th>" in page
    assert "<td>0</td><td>3</td><td>{p50: 1.5}</td>" in page
    assert "{&quot;" not in page


def test_html_timeline_section_lists_the_events() -> None:
    page = render_html(RESULTS, test=TEST_JSON, faults=EVENTS[::3], events=EVENTS,
                       images=["timeline.png", "lag.png"])  # fmt: skip
    timeline = page[page.index("<h2 id='timeline'>") : page.index("<h2 id='plots'>")]
    assert "<img src='timeline.png'>" in timeline
    assert (
        "<details><summary>the 4 events: 2 faults applied, 1 leader elections (0 unclean), "
        "1 ISR changes</summary>"
    ) in timeline
    assert (
        "<tr><td>2</td><td>sut</td><td>leader-election</td><td>n2</td><td>t-0</td>"
        "<td>leader n2, epoch 1, was n1; ISR [2, 3] (broker change)</td></tr>"
    ) in timeline
    assert "<td>1</td><td>nemesis</td><td>kill</td><td>n1</td><td></td>" in timeline
    assert "<h3>lag</h3><img src='lag.png'>" in page and "Consumer lag per key" in page


def test_html_failures_by_error() -> None:
    groups = [FailureGroup("send", "NOT_ENOUGH_REPLICAS: broker N", 3, 1, 2.0, 9.5, "x 2")]
    page = render_html(RESULTS, failures=groups)
    assert "<h2 id='failures'>Failures by error</h2>" in page
    assert (
        "<tr><td>send</td><td>NOT_ENOUGH_REPLICAS: broker N</td><td>3</td><td>1</td>"
        "<td>2</td><td>9.5</td><td>x 2</td></tr>"
    ) in page


def test_html_escapes_hostile_values_everywhere(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    run = tmp_path / "<u>run"
    (run / "nodes" / "<i>n1").mkdir(parents=True)
    (run / "nodes" / "<i>n1" / "a'b.log").write_text("x")
    results = {
        **RESULTS,
        "checkers": {
            "delivery": {
                "valid": False,
                "anomalies": {evil: [{"key": evil, evil: {"nested": [evil]}}, evil]},
                "counts": {evil: evil},
            }
        },
        "config": {evil: evil},
    }
    test = {**TEST_JSON, "seed": evil, "versions": {evil: evil}, "workload": {evil: [evil]}}
    events: list[dict[str, Any]] = [
        {"time": 1, "process": "sut", "f": "leader-election",
         "value": {"key": evil, "leader": 1, "reason": evil}},
        {"time": evil, "process": evil, "f": evil, "value": {"targets": [evil], "scenario": evil}},
    ]  # fmt: skip
    failures = [FailureGroup(evil, evil, 1, 0, 1.0, 1.0, evil)]
    page = render_html(results, test=test, events=events, failures=failures, run_dir=run)
    assert "<script>" not in page and "<u>" not in page and "<i>" not in page
    assert "seed &lt;script&gt;" in page and "<th>seed</th><td>&lt;script&gt;" in page
    assert "href='nodes/%3Ci%3En1/a%27b.log'>nodes/&lt;i&gt;n1/a&#x27;b.log</a>" in page


def test_anomalies_plot_counts_all_found() -> None:
    assert anomaly_totals(RESULTS) == {
        "lost-write": 1,
        "unseen": 0,
        "unseen (expected)": 2,
        "unclean-loss-window": 0,
        "unclean-loss-window (expected)": 1,
    }


def test_long_series_are_decimated_keeping_their_extremes() -> None:
    values = np.zeros(10_000, np.int64)
    values[1234], values[5678] = 50, -7
    series = Series(np.linspace(0.0, 100.0, 10_000), values)
    thin = decimate(series, buckets=100)
    assert len(thin.time_s) <= 400 and thin.values.max() == 50 and thin.values.min() == -7
    assert thin.time_s[0] == 0.0 and thin.time_s[-1] == 100.0
    assert list(thin.time_s) == sorted(thin.time_s)
    assert decimate(thin) is thin  # short enough already


def test_write_reports_renders_a_run_directory(tmp_path: Path) -> None:
    run = tmp_path / "demo" / "20260101T000000"
    (run / "nodes" / "n1").mkdir(parents=True)
    (run / "nodes" / "n1" / "broker.log").write_text("started\n")
    (run / "test.json").write_text(json.dumps(TEST_JSON))
    writer = HistoryWriter(run / "history.jsonl")
    for event in EVENTS:
        writer.event(event["f"], event["value"], process=event["process"], time=event["time"])
        invoke = writer.write(1, "invoke", "send", [["send", "t-0", event["time"]]],
                              time=event["time"])  # fmt: skip
        writer.complete(invoke, "fail", None, time=event["time"] + 10**6,
                        error="NETWORK_EXCEPTION: cannot connect to 10.0.0.1:9092")  # fmt: skip
    writer.close()
    write_parquet(run / "history.jsonl", run / "history.parquet")
    write_reports(RunStore.open(run), RESULTS)
    page = (run / "report.html").read_text()
    assert "<img src='timeline.png'>" in page and (run / "timeline.png").stat().st_size > 5000
    assert "href='junit.xml'" in page and (run / "junit.xml").is_file()
    assert "href='nodes/n1/broker.log'" in page
    assert f"<code>squall replay {run}</code>" in page
    assert "<td>NETWORK_EXCEPTION: cannot connect to &lt;addr&gt;</td><td>4</td>" in page
    assert "the 4 events: 2 faults applied, 1 leader elections (0 unclean)" in page


def test_the_consumer_groups_story_is_told_in_the_html_and_the_terminal() -> None:
    from rich.console import Console

    from squall.report.console import print_results

    details = {
        "generations": 14,
        "revocations": 83,
        "refused_commits": 13,
        "member_faults": {
            "counts": {"pause-member": 3, "resume-member": 3, "kill-member": 1},
            "paused_s": [15.191, 23.281, 17.777],
        },
    }
    results = {"valid": True, "checkers": {"generations": {"valid": True, "details": details}}}
    said = (
        "consumer group: 14 generations, 83 rebalances of a member (partitions revoked), 13 "
        "commits refused; members faulted: 3 paused (15.2-23.3 s each), 1 killed"
    )
    assert said in render_html(results)
    console = Console(record=True, width=400)
    print_results(results, console=console)
    assert said in console.export_text()
    quiet = Console(record=True, width=400)
    print_results({"valid": True, "checkers": {}}, console=quiet)
    assert "consumer group" not in quiet.export_text()
