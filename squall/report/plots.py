"""PNG plots of a run: latency and throughput over time with fault intervals shaded, and
anomalies per key. Read from the Parquet form of the history, so large runs plot quickly;
its columns are named by the history's schema (`histories.parquet_schema`)."""

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

from histories.parquet_schema import OPS_SCHEMA

COLORS = {"ok": "#2e7d32", "fail": "#f9a825", "info": "#c62828"}

# The ops columns plotted, looked up in the history's schema: a column renamed there fails
# here, on import, rather than in pyarrow on some run's Parquet.
_TIME, _TYPE, _F, _LATENCY_NS = (
    OPS_SCHEMA.field(name).name for name in ("time", "type", "f", "latency_ns")
)


@dataclass(frozen=True)
class FaultInterval:
    """A stretch of time during which a fault was in force (seconds since the test began)."""

    name: str
    start_s: float
    end_s: float


def fault_intervals(results: Mapping[str, Any] | None, end_s: float) -> list[FaultInterval]:
    """The fault intervals the checkers paired (results' `stats.faults`); open ones run to
    the end."""
    out = []
    for fault in (results or {}).get("stats", {}).get("faults", []):
        end = fault.get("end_s")
        out.append(
            FaultInterval(
                str(fault["fault"]), float(fault["start_s"]), end_s if end is None else float(end)
            )
        )
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
    """latency.png, rate.png, and where results have them anomalies.png (per key) and
    windows.png (loss windows on a time line); their paths."""
    ops = pq.read_table(
        parquet_dir / "ops.parquet", columns=[_TIME, _TYPE, _F, _LATENCY_NS]
    ).to_pydict()
    latency: dict[str, tuple[list[float], list[float]]] = {kind: ([], []) for kind in COLORS}
    per_second: dict[str, Counter[int]] = {kind: Counter() for kind in COLORS}
    end_s = 0.0
    for time_ns, kind, f, latency_ns in zip(
        ops[_TIME], ops[_TYPE], ops[_F], ops[_LATENCY_NS], strict=True
    ):
        seconds = time_ns / 1e9
        end_s = max(end_s, seconds)
        if kind not in COLORS:
            continue
        per_second[kind][int(seconds)] += 1
        if latency_ns is not None and f in ("send", "poll"):
            latency[kind][0].append(seconds)
            latency[kind][1].append(latency_ns / 1e6)
    intervals = fault_intervals(results, end_s)
    written = [
        _save(_latency_plot(latency, intervals), out_dir / "latency.png"),
        _save(_rate_plot(per_second, end_s, intervals), out_dir / "rate.png"),
    ]
    per_key = anomalies_per_key(results)
    if per_key:
        written.append(_save(_anomalies_plot(per_key), out_dir / "anomalies.png"))
    windows = loss_windows(results)
    if windows:
        written.append(_save(_windows_plot(windows, end_s, intervals), out_dir / "windows.png"))
    return written


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _latency_plot(
    latency: Mapping[str, tuple[list[float], list[float]]], intervals: list[FaultInterval]
) -> Any:
    fig, ax = plt.subplots(figsize=(11, 4))
    for kind, (xs, ys) in latency.items():
        if xs:
            ax.scatter(xs, ys, s=3, color=COLORS[kind], label=kind, alpha=0.6)
    _shade(ax, intervals)
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the test began")
    ax.set_ylabel("latency (ms)")
    ax.set_title("operation latency (send, poll), faults shaded")
    ax.legend(loc="upper right", fontsize=8, markerscale=3)
    return fig


def _rate_plot(
    per_second: Mapping[str, Counter[int]], end_s: float, intervals: list[FaultInterval]
) -> Any:
    fig, ax = plt.subplots(figsize=(11, 3.5))
    xs = list(range(int(end_s) + 1))
    for kind, buckets in per_second.items():
        if buckets:
            ax.plot(xs, [buckets.get(x, 0) for x in xs], color=COLORS[kind], label=kind, lw=1.2)
    _shade(ax, intervals)
    ax.set_xlabel("seconds since the test began")
    ax.set_ylabel("completions / s")
    ax.set_title("throughput by outcome, faults shaded")
    ax.legend(loc="upper right", fontsize=8)
    return fig


def _anomalies_plot(per_key: Counter[tuple[str, str]]) -> Any:
    keys = sorted({k for k, _ in per_key})
    fig, ax = plt.subplots(figsize=(11, 3.5))
    bottom = [0] * len(keys)
    for name in sorted({a for _, a in per_key}):
        heights = [per_key.get((k, name), 0) for k in keys]
        hatch = "//" if name.endswith("(expected)") else None
        ax.bar(keys, heights, bottom=bottom, label=name, hatch=hatch)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_ylabel("anomalies (sampled)")
    ax.set_title("anomalies and expected losses per key")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelrotation=30)
    return fig


def _windows_plot(
    windows: list[dict[str, Any]], end_s: float, intervals: list[FaultInterval]
) -> Any:
    keys = sorted({w["key"] for w in windows})
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.5 * len(keys)))
    for window in windows:
        row = keys.index(window["key"])
        start, end = (t / 1e9 for t in window["window"])
        color = "#ef6c00" if window["expected"] else "#c62828"
        ax.barh(row, max(end - start, 0.05), left=start, height=0.5, color=color, alpha=0.8)
        ax.plot([window["time"] / 1e9], [row], marker="v", color="black")
        ax.annotate(
            f"election {window['election']}: {window['lost']} lost", (start, row + 0.3), fontsize=8
        )
    _shade(ax, intervals)
    ax.set_yticks(range(len(keys)), keys)
    ax.set_xlim(0, max(end_s, 1.0))
    ax.set_xlabel(
        "seconds since the test began (bars: first lost acknowledgement to last; "
        "triangle: the unclean election)"
    )
    ax.set_title("unclean-election loss windows, faults shaded")
    return fig


def anomalies_per_key(results: Mapping[str, Any] | None) -> Counter[tuple[str, str]]:
    """(key, anomaly) -> sampled count, expected losses labelled "NAME (expected)"."""
    per_key: Counter[tuple[str, str]] = Counter()
    for checker in (results or {}).get("checkers", {}).values():
        for group, suffix in (("anomalies", ""), ("expected", " (expected)")):
            for anomaly, samples in checker.get(group, {}).items():
                for sample in samples:
                    if isinstance(sample, Mapping) and "key" in sample:
                        per_key[(str(sample["key"]), anomaly + suffix)] += 1
    return per_key


def loss_windows(results: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Every unclean-loss window sample, with `expected` saying which group it came from."""
    section = (results or {}).get("checkers", {}).get("unclean", {})
    out = []
    for group, expected in (("anomalies", False), ("expected", True)):
        for window in section.get(group, {}).get("unclean-loss-window", []):
            if isinstance(window, Mapping) and len(window.get("window") or []) == 2:
                out.append({**window, "expected": expected})
    return out
