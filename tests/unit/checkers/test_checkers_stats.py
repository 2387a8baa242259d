"""The `stats` section of results.json, figure by figure, on a history with known times."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history
from checkers.stats import PERCENTILES, _label, latency_and_windows
from histories import HistoryWriter

MS = 1_000_000
S = 1_000_000_000


def _history(path: Path) -> None:
    """Sends and polls around one partition (2 s to 4 s); times in ns from the start."""
    writer = HistoryWriter(path)

    def op(process: int, f: str, value: Any, at: int, done: str | None, after: int) -> None:
        invoke = writer.write(process, "invoke", f, value, time=at)
        if done is not None:
            result = [["poll", {"k": [[0, 1]]}]] if f == "poll" and done == "ok" else value
            writer.complete(invoke, done, result, time=at + after)

    leader = {"key": "k", "leader": 1, "leader_epoch": 0, "isr": [1], "previous_leader": -1,
              "unclean": False}  # fmt: skip
    writer.event("leader-election", leader, process="sut", time=S // 2)
    op(1, "send", [["send", "k", 1]], 1 * S, "ok", 10 * MS)
    op(2, "poll", [["poll"]], 1500 * MS, "ok", 20 * MS)
    writer.event("start-partition", {"targets": ["n1"]}, time=2 * S)
    op(1, "send", [["send", "k", 2]], 2500 * MS, "info", 1000 * MS)
    op(3, "send", [["send", "k", 3]], 3 * S, "fail", 40 * MS)
    writer.event("stop-partition", None, time=4 * S)
    op(2, "poll", [["poll"]], 5 * S, "ok", 30 * MS)
    op(4, "send", [["send", "k", 4]], 6 * S, None, 0)
    writer.close()


@pytest.fixture(scope="module")
def stats(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = tmp_path_factory.mktemp("stats")
    _history(run / "history.jsonl")
    return check_history(run, config=CheckConfig())["stats"]


def test_counts_by_completion_and_f(stats: dict[str, Any]) -> None:
    assert (stats["ops"], stats["ok"], stats["fail"], stats["info"], stats["pending"]) == (
        6,
        3,
        1,
        1,
        1,
    )
    assert stats["by_f"] == {
        "poll": {"ops": 2, "ok": 2, "fail": 0, "info": 0, "pending": 0},
        "send": {"ops": 4, "ok": 1, "fail": 1, "info": 1, "pending": 1},
    }
    assert stats["events"] == {"nemesis": 2, "sut": 1}
    assert stats["lines"] == 14
    assert stats["duration_s"] == 5.5
    assert stats["availability"] == 0.6


def test_latency_percentiles_by_f_and_completion(stats: dict[str, Any]) -> None:
    latency = stats["latency_ms"]
    assert set(latency) == {"poll", "send"}
    assert latency["poll"]["ok"] == {
        "count": 2,
        "p50": 20.0,
        "p90": 30.0,
        "p99": 30.0,
        "p999": 30.0,
        "max": 30.0,
    }
    assert set(latency["send"]) == {"ok", "fail", "info"}
    assert latency["send"]["info"]["p50"] == 1000.0 and latency["send"]["info"]["count"] == 1
    assert latency["send"]["fail"]["max"] == 40.0
    assert latency["send"]["ok"]["p99"] == 10.0


def test_throughput_windows_hold_only_windows_with_completions(stats: dict[str, Any]) -> None:
    throughput = stats["throughput"]
    assert throughput["width_s"] == 1.0
    # Windows of 1 s from the first line (0.5 s): completions at 1.01, 1.52, 3.04, 3.5, 5.03 s.
    rows = [
        (w["start_s"], w["ok_per_s"], w["fail_per_s"], w["info_per_s"])
        for w in throughput["windows"]
    ]
    assert rows == [
        (0.0, 1.0, 0.0, 0.0),
        (1.0, 1.0, 0.0, 0.0),
        (2.0, 0.0, 1.0, 0.0),
        (3.0, 0.0, 0.0, 1.0),
        (4.0, 1.0, 0.0, 0.0),
    ]
    assert throughput["windows"][1]["latency_ms"] == {"p50": 20.0, "p99": 20.0}
    assert throughput["windows"][2]["latency_ms"] == {"p50": None, "p99": None}


def test_availability_during_each_fault(stats: dict[str, Any]) -> None:
    (fault,) = stats["faults"]
    assert (fault["fault"], fault["start_s"], fault["end_s"]) == ("start-partition", 2.0, 4.0)
    assert (fault["completions"], fault["ok"], fault["availability"]) == (2, 0, 0.0)
    assert stats["instant_faults"] == []


def _exact(latencies: list[int], p: float) -> int:
    ordered = sorted(latencies)
    return ordered[max(1, math.ceil(round(p * len(ordered), 9))) - 1]


def test_percentiles_are_latencies_of_the_history_within_the_bucket_width(spark: Any) -> None:
    rng = random.Random(7)
    latencies = [max(1, int(rng.lognormvariate(14, 1.5))) for _ in range(3000)] + [0, 0, -5]
    rows = [(i, 1_000 * i, 1, "ok", "send", latency) for i, latency in enumerate(latencies)] + [
        (len(latencies), 0, None, "info", "start-kill", None)
    ]
    ops = spark.createDataFrame(
        rows, "index long, time long, process_id long, type string, f string, latency_ns long"
    )
    by_f, throughput = latency_and_windows(ops, 0, 1_000 * len(latencies), 2e-6)
    reported = by_f["send"]["ok"]
    assert reported["count"] == len(latencies)
    assert set(by_f) == {"send"}  # the nemesis event has no latency
    held = {round(latency / MS, 3) for latency in latencies}
    for p in PERCENTILES:
        exact = _exact(latencies, p) / MS
        value = reported[f"p{_label(p)}"]
        assert value in held
        assert exact <= value <= max(exact * 1.0055, exact + 1e-3), (p, exact, value)
    assert reported["max"] == round(max(latencies) / MS, 3)
    first = throughput["windows"][0]  # windows of 2 us: two completions each
    assert first["ok_per_s"] == 2 / throughput["width_s"]
    assert first["latency_ms"]["p99"] == round(max(latencies[:2]) / MS, 3)
