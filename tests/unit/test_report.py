"""report.html and the plots, from a results document and a small Parquet history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from histories import HistoryWriter, write_parquet
from squall.report.html import render_html
from squall.report.plots import anomalies_per_key, fault_intervals, loss_windows, write_plots

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
    assert anomalies_per_key(RESULTS) == {
        ("t-1", "lost-write"): 1,
        ("t-0", "unseen (expected)"): 1,
        ("t-0", "unclean-loss-window (expected)"): 1,
    }
    assert [w["expected"] for w in loss_windows(RESULTS)] == [True]


def test_plots_are_written(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "history.jsonl")
    for second in range(4):
        invoke = writer.write(1, "invoke", "send", [["send", "t-0", second]], time=second * S)
        writer.complete(invoke, "ok", [["send", "t-0", [second, second]]], time=second * S + 10**6)
    writer.close()
    write_parquet(tmp_path / "history.jsonl", tmp_path / "history.parquet")
    written = write_plots(tmp_path / "history.parquet", tmp_path, RESULTS)
    assert [p.name for p in written] == ["latency.png", "rate.png", "anomalies.png", "windows.png"]
    assert all(p.stat().st_size > 5000 for p in written)
