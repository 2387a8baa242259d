"""The achieved ops/s of a run in the terminal report and report.html, from results.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from squall.report.console import print_results
from squall.report.html import render_html
from squall.report.throughput import achieved_rate, describe_live_rate

RESULTS: dict[str, Any] = {
    "valid": True,
    "anomaly_types": [],
    "checkers": {},
    "stats": {
        "ops": 61000,
        "ok": 60000,
        "fail": 400,
        "info": 100,
        "pending": 0,
        "duration_s": 75.0,
        "by_f": {
            "send": {"ops": 30000, "ok": 29500, "fail": 300, "info": 100, "pending": 0},
            "poll": {"ops": 27000, "ok": 26900, "fail": 100, "info": 0, "pending": 0},
            "commit": {"ops": 3000, "ok": 3000, "fail": 0, "info": 0, "pending": 0},
            "crash": {"ops": 0, "ok": 0, "fail": 0, "info": 0, "pending": 0},
        },
    },
}


def test_the_rate_is_over_the_workloads_time_limit_when_test_json_says_it() -> None:
    rate = achieved_rate(RESULTS, {"time_limit_s": 60})
    assert rate is not None and rate.seconds == 60 and rate.basis == "the workload's time limit"
    assert rate.completed == 59900 and round(rate.ops_per_s) == 998
    assert list(rate.by_f) == ["send", "poll", "commit"]  # busiest first, none for 0
    assert rate.by_f["send"] == 29900 / 60
    assert rate.describe_by_f() == "send 498/s, poll 450/s, commit 50/s"
    # Without test.json, or for an interrupted run, the history's whole span.
    bare = achieved_rate(RESULTS)
    assert bare is not None and bare.seconds == 75.0 and bare.basis == "the history's span"
    interrupted = achieved_rate({**RESULTS, "interrupted": True}, {"time_limit_s": 60})
    assert interrupted is not None and interrupted.seconds == 75.0
    assert achieved_rate({"valid": "unknown", "stats": {"duration_s": 0.0}}) is None


def test_the_terminal_summary_shows_the_achieved_rate(tmp_path: Path) -> None:
    (tmp_path / "test.json").write_text(json.dumps({"name": "t", "time_limit_s": 60}))
    console = Console(record=True, width=200)
    print_results(RESULTS, console=console, run_dir=tmp_path)
    text = console.export_text()
    assert "achieved 998 ops/s (59,900 completed in 60 s, the workload's time limit)" in text
    assert "send 498/s, poll 450/s, commit 50/s" in text


def test_report_html_shows_the_achieved_rate_overall_and_per_f() -> None:
    page = render_html(RESULTS, test={"name": "t", "time_limit_s": 60})
    assert "achieved <b>998 ops/s</b>" in page
    assert "<th>completed/s</th>" in page
    assert "<td>send</td><td>30,000</td><td>29,500</td><td>300</td><td>100</td><td>0</td>" in page
    assert "<td>498.3</td>" in page  # sends completed per second (29,900 / 60 s)


def test_the_rate_kept_during_faults_is_described_next_to_the_fault_free_rate() -> None:
    stats = {
        "live_rate": {
            "keys": 3,
            "during_faults": {"seconds": 40.0, "live_keys": 2.5, "send_ok": 9000,
                              "send_per_s_per_live_key": 90.0, "poll_ok": 8000,
                              "poll_per_s": 200.0},
            "fault_free": {"seconds": 50.0, "live_keys": 3.0, "send_ok": 15000,
                           "send_per_s_per_live_key": 100.0, "poll_ok": 12500,
                           "poll_per_s": 250.0},
            "kept": {"send": 0.9, "poll": 0.8},
        }
    }  # fmt: skip
    line = describe_live_rate(stats)
    assert line is not None
    assert "2.5 of 3 keys live" in line
    assert "ok sends 90.0/s per live key (90% of fault-free), fault-free 100.0/s" in line
    assert "ok polls 200.0/s (80% of fault-free), fault-free 250.0/s" in line
    assert "records read" not in line  # results written before reads were counted
    assert describe_live_rate({}) is None


def test_the_records_read_on_live_keys_are_described_when_counted() -> None:
    stats = {
        "live_rate": {
            "keys": 3,
            "during_faults": {"seconds": 40.0, "live_keys": 2.5, "send_per_s_per_live_key": 90.0,
                              "read_per_s_per_live_key": 60.0, "poll_per_s": 200.0},
            "fault_free": {"seconds": 50.0, "live_keys": 3.0, "send_per_s_per_live_key": 100.0,
                           "read_per_s_per_live_key": 100.0, "poll_per_s": 250.0},
            "kept": {"send": 0.9, "read": 0.6, "poll": 0.8},
        }
    }  # fmt: skip
    line = describe_live_rate(stats)
    assert line is not None
    assert "records read 60.0/s per live key (60% of fault-free), fault-free 100.0/s" in line


def test_the_rate_on_writable_keys_is_described_when_judged() -> None:
    stats = {
        "live_rate": {
            "keys": 3,
            "min_isr": 2,
            "during_faults": {"seconds": 40.0, "live_keys": 2.5, "send_ok": 900,
                              "send_per_s_per_live_key": 9.0, "poll_ok": 8000,
                              "poll_per_s": 200.0, "writable_keys": 1.5,
                              "send_per_s_per_writable_key": 60.0,
                              "read_per_s_per_writable_key": 55.0},
            "fault_free": {"seconds": 50.0, "live_keys": 3.0, "send_ok": 15000,
                           "send_per_s_per_live_key": 100.0, "poll_ok": 12500,
                           "poll_per_s": 250.0, "send_per_s_per_writable_key": 100.0,
                           "read_per_s_per_writable_key": 100.0},
            "kept": {"send": 0.09, "poll": 0.8, "send_writable": 0.6, "read_writable": 0.55},
        }
    }  # fmt: skip
    line = describe_live_rate(stats)
    assert line is not None
    assert (
        "on writable keys (ISR of at least min.insync.replicas=2, 1.5 on average): "
        "ok sends 60.0/s (60% of fault-free), records read 55.0/s (55% of fault-free)"
    ) in line
