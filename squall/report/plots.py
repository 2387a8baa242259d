"""PNG plots of a run: latency and throughput over time with fault intervals shaded, and
anomalies per key. Read from the Parquet form of the history, so large runs plot quickly."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pyarrow.parquet as pq

COLORS = {"ok": "#2e7d32", "fail": "#f9a825", "info": "#c62828"}
FAULT_STARTS = {
    "kill": "start",
    "pause": "resume",
    "freeze": "unfreeze",
    "start-partition": "stop-partition",
    "start-netem": "stop-netem",
}


@dataclass(frozen=True)
class FaultInterval:
    """A stretch of time during which a fault was in force (seconds since the test began)."""

    name: str
    start_s: float
    end_s: float


def fault_intervals(events: Any, end_s: float) -> list[FaultInterval]:
    """Pair each fault with the op that healed it; unhealed faults run to the end."""
    rows = sorted(
        (int(t), str(f))
        for t, f, p in zip(events["time"], events["f"], events["process"], strict=True)
        if p == "nemesis"
    )
    open_faults: dict[str, float] = {}
    out: list[FaultInterval] = []
    heals = {v: k for k, v in FAULT_STARTS.items()}
    for time_ns, f in rows:
        if f in FAULT_STARTS and f not in open_faults:
            open_faults[f] = time_ns / 1e9
        elif f in heals and heals[f] in open_faults:
            out.append(FaultInterval(heals[f], open_faults.pop(heals[f]), time_ns / 1e9))
    out += [FaultInterval(f, start, end_s) for f, start in open_faults.items()]
    return out


def _shade(ax: Any, intervals: list[FaultInterval]) -> None:
    palette = {
        "kill": "#ef9a9a",
        "start-partition": "#90caf9",
        "pause": "#ffe082",
        "freeze": "#ce93d8",
        "start-netem": "#a5d6a7",
    }
    seen: set[str] = set()
    for interval in intervals:
        label = interval.name if interval.name not in seen else None
        seen.add(interval.name)
        ax.axvspan(
            interval.start_s,
            interval.end_s,
            color=palette.get(interval.name, "#e0e0e0"),
            alpha=0.35,
            label=label,
            lw=0,
        )


def write_plots(
    parquet_dir: Path, out_dir: Path, results: Mapping[str, Any] | None = None
) -> list[Path]:
    """latency.png, rate.png and (when anomalies name keys) anomalies.png; their paths."""
    ops = pq.read_table(
        parquet_dir / "ops.parquet", columns=["time", "type", "f", "latency_ns", "process"]
    ).to_pydict()
    events = pq.read_table(
        parquet_dir / "events.parquet", columns=["time", "f", "process"]
    ).to_pydict()
    times = [t / 1e9 for t in ops["time"]]
    end_s = max(times, default=0.0)
    intervals = fault_intervals(events, end_s)
    written: list[Path] = []

    fig, ax = plt.subplots(figsize=(11, 4))
    for kind, color in COLORS.items():
        xs = [
            t
            for t, ty, lat, f in zip(times, ops["type"], ops["latency_ns"], ops["f"], strict=True)
            if ty == kind and lat is not None and f in ("send", "poll")
        ]
        ys = [
            lat / 1e6
            for ty, lat, f in zip(ops["type"], ops["latency_ns"], ops["f"], strict=True)
            if ty == kind and lat is not None and f in ("send", "poll")
        ]
        if xs:
            ax.scatter(xs, ys, s=3, color=color, label=kind, alpha=0.6)
    _shade(ax, intervals)
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the test began")
    ax.set_ylabel("latency (ms)")
    ax.set_title("operation latency (send, poll), faults shaded")
    ax.legend(loc="upper right", fontsize=8, markerscale=3)
    fig.tight_layout()
    written.append(out_dir / "latency.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(11, 3.5))
    for kind, color in COLORS.items():
        buckets = Counter(int(t) for t, ty in zip(times, ops["type"], strict=True) if ty == kind)
        if buckets:
            xs = list(range(int(end_s) + 1))
            ax.plot(xs, [buckets.get(x, 0) for x in xs], color=color, label=kind, lw=1.2)
    _shade(ax, intervals)
    ax.set_xlabel("seconds since the test began")
    ax.set_ylabel("completions / s")
    ax.set_title("throughput by outcome, faults shaded")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    written.append(out_dir / "rate.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    per_key: Counter[tuple[str, str]] = Counter()
    for checker in (results or {}).get("checkers", {}).values():
        for anomaly, samples in checker.get("anomalies", {}).items():
            for sample in samples:
                if isinstance(sample, Mapping) and "key" in sample:
                    per_key[(str(sample["key"]), anomaly)] += 1
    if per_key:
        keys = sorted({k for k, _ in per_key})
        anomalies = sorted({a for _, a in per_key})
        fig, ax = plt.subplots(figsize=(11, 3.5))
        bottom = [0] * len(keys)
        for anomaly in anomalies:
            heights = [per_key.get((k, anomaly), 0) for k in keys]
            ax.bar(keys, heights, bottom=bottom, label=anomaly)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set_ylabel("anomalies (sampled)")
        ax.set_title("anomalies per key")
        ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(out_dir / "anomalies.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written
