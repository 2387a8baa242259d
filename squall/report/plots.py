"""PNG plots of a run: its timeline (faults per node, elections, ISR changes, controller
moves, truncations), latency and throughput, consumer lag and acknowledged-but-unseen
values over time with fault intervals shaded, anomalies per key, and loss windows.

Read from the Parquet form of the history with vectorised passes, so large runs plot
quickly; its columns are named by the history's schema (`histories.parquet_schema`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from histories.parquet_schema import EVENTS_SCHEMA, OPS_SCHEMA
from squall.report.causes import anomaly_marks
from squall.report.consumption import Consumption, Series, consumption, read_mops
from squall.report.timeline import (
    FAULT_NAMES,
    Mark,
    Timeline,
    build_timeline,
    natural_key,
    nodes_of_test,
)

COLORS = {"ok": "#2e7d32", "fail": "#f9a825", "info": "#c62828"}
FAULT_COLORS = {
    "kill": "#e53935",
    "start-partition": "#1e88e5",
    "pause": "#fdd835",
    "freeze": "#8e24aa",
    "start-netem": "#43a047",
    "start-slow": "#fb8c00",
}
X_LABEL = "seconds since the test began"

# The ops columns plotted, looked up in the history's schema: a column renamed there fails
# here, on import, rather than in pyarrow on some run's Parquet.
_INDEX, _TIME, _TYPE, _F, _LATENCY_NS = (
    OPS_SCHEMA.field(name).name for name in ("index", "time", "type", "f", "latency_ns")
)
_EVENT_COLUMNS = [EVENTS_SCHEMA.field(n).name for n in ("time", "process", "f", "value_json")]


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
    seen: set[str] = set()
    for interval in intervals:
        label = FAULT_NAMES.get(interval.name, interval.name) if interval.name not in seen else None
        seen.add(interval.name)
        ax.axvspan(
            interval.start_s,
            interval.end_s,
            color=FAULT_COLORS.get(interval.name, "#9e9e9e"),
            alpha=0.15,
            label=label,
            lw=0,
        )


def key_colors(keys: Sequence[str]) -> dict[str, Any]:
    """A qualitative colour per key, in the order given."""
    cmap = plt.get_cmap("tab10" if len(keys) <= 10 else "tab20")
    return {key: cmap(i % cmap.N) for i, key in enumerate(keys)}


def read_events(parquet_dir: Path) -> list[dict[str, Any]]:
    """The nemesis operations and SUT events of `events.parquet`, as history objects."""
    table = pq.read_table(parquet_dir / "events.parquet", columns=_EVENT_COLUMNS).to_pydict()
    out = []
    for time, process, f, text in zip(*(table[c] for c in _EVENT_COLUMNS), strict=True):
        try:
            value = json.loads(text) if text is not None else None
        except ValueError:
            value = None
        out.append({"time": time, "process": process, "f": f, "value": value})
    return out


def write_plots(
    parquet_dir: Path,
    out_dir: Path,
    results: Mapping[str, Any] | None = None,
    *,
    events: Sequence[Mapping[str, Any]] | None = None,
    test: Mapping[str, Any] | None = None,
) -> list[Path]:
    """timeline.png, latency.png, rate.png, lag.png (when a send was acknowledged with an
    offset), unseen.png (when a send was acknowledged), and where results have them
    anomalies.png (per key) and windows.png (loss windows on a time line); their paths.

    `events`: the history's nemesis operations and SUT events (else read from
    `events.parquet`); `test`: test.json, which names the nodes of the timeline's lanes."""
    ops = pq.read_table(
        parquet_dir / "ops.parquet", columns=[_INDEX, _TIME, _TYPE, _F, _LATENCY_NS]
    )
    seconds = np.asarray(ops[_TIME].to_numpy(), np.float64) / 1e9
    end_s = float(seconds.max()) if len(seconds) else 0.0
    intervals = fault_intervals(results, end_s)
    if events is None:
        events = read_events(parquet_dir)
    timeline = build_timeline(
        events, nodes=nodes_of_test(test), end_s=end_s, anomalies=anomaly_marks(results)
    )
    end_s = max(end_s, timeline.end_s)
    mops = read_mops(parquet_dir)
    read_records = pc.unique(
        mops.filter(
            pc.and_(
                pc.and_(pc.equal(mops["type"], "ok"), pc.equal(mops["f"], "poll")),
                pc.is_valid(mops["offset"]),
            )
        )["index"]
    )
    latency = _latency_plot(ops, seconds, intervals, end_s, read_records)
    written = [
        _save(_timeline_plot(timeline), out_dir / "timeline.png"),
        _save(latency, out_dir / "latency.png"),
        _save(_rate_plot(ops, seconds, intervals, end_s), out_dir / "rate.png"),
    ]
    used = consumption(mops)
    if used.lag:
        written.append(_save(_lag_plot(used, intervals, end_s), out_dir / "lag.png"))
    if used.acknowledged:
        written.append(_save(_unseen_plot(used, intervals, end_s), out_dir / "unseen.png"))
    totals = anomaly_totals(results)
    lost = lost_per_key(results)
    if any(totals.values()) or lost:
        written.append(_save(_anomalies_plot(totals, lost), out_dir / "anomalies.png"))
    windows = loss_windows(results)
    if windows:
        written.append(_save(_windows_plot(windows, end_s, intervals), out_dir / "windows.png"))
    return written


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _legend_outside(ax: Any, **options: Any) -> Any:
    """A legend to the right of the axes, where it covers nothing (none: nothing to name)."""
    if "handles" not in options and not ax.get_legend_handles_labels()[0]:
        return None
    return ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, **options)


def _time_axis(ax: Any, end_s: float) -> None:
    ax.set_xlim(0, max(end_s, 1.0))
    ax.set_xlabel(X_LABEL)
    ax.grid(axis="x", color="#eeeeee", lw=0.6)


def _latency_plot(
    ops: Any, seconds: Any, intervals: list[FaultInterval], end_s: float, read_records: Any
) -> Any:
    """Sends above, polls below, by outcome; an `ok` poll that read nothing (it waited out
    its timeout: its latency is the timeout, not the log's) drawn apart, in grey."""
    fig, (sends, polls) = plt.subplots(2, 1, figsize=(12, 6), sharex=True)
    latency_ms = np.asarray(pc.fill_null(ops[_LATENCY_NS], 0).to_numpy(), np.float64) / 1e6
    timed = pc.is_valid(ops[_LATENCY_NS])
    empty = pc.and_(
        pc.equal(ops[_TYPE], "ok"), pc.invert(pc.is_in(ops[_INDEX], value_set=read_records))
    )
    for ax, f in ((sends, "send"), (polls, "poll")):
        of_f = pc.and_(timed, pc.equal(ops[_F], f))
        series = [(kind, color, pc.equal(ops[_TYPE], kind)) for kind, color in COLORS.items()]
        if f == "poll":
            series[0] = ("ok", COLORS["ok"], pc.and_(series[0][2], pc.invert(empty)))
            series.append(("ok, read nothing (waited out its timeout)", "#9e9e9e", empty))
        drawn = 0
        for label, color, which in series:
            mask = np.asarray(pc.fill_null(pc.and_(of_f, which), False).to_numpy(), bool)
            if mask.any():
                drawn += int(mask.sum())
                # Markers of a line draw far faster than a scatter's.
                ax.plot(seconds[mask], latency_ms[mask], ls="", marker=".", ms=2.5, mew=0,
                        color=color, alpha=0.5, label=f"{label} ({int(mask.sum()):,})")  # fmt: skip
        _shade(ax, intervals)
        if drawn:
            ax.set_yscale("log")
        ax.set_ylabel(f"{f} latency (ms)")
        ax.set_title(f"{f} latency by outcome, faults shaded", fontsize=10)
        _legend_outside(ax, markerscale=4)
    _time_axis(polls, end_s)
    return fig


def _rate_plot(ops: Any, seconds: Any, intervals: list[FaultInterval], end_s: float) -> Any:
    fig, ax = plt.subplots(figsize=(12, 3.5))
    buckets = seconds.astype(np.int64)
    width = int(end_s) + 1
    for kind, color in COLORS.items():
        mask = np.asarray(pc.equal(ops[_TYPE], kind).to_numpy(), bool)
        if mask.any():
            counts = np.bincount(buckets[mask], minlength=width)
            ax.plot(np.arange(len(counts)), counts, color=color, label=kind, lw=1.2)
    _shade(ax, intervals)
    _time_axis(ax, end_s)
    ax.set_ylabel("completions / s")
    ax.set_title("throughput by outcome, faults shaded")
    _legend_outside(ax)
    return fig


_MARKS = {
    # kind: (label, marker, size, y offset in the lane, colour by key?)
    "controller": ("controller moved here", "D", 42, -0.3, False),
    "election": ("leader elected (colour: key)", "o", 30, -0.1, True),
    "unclean-election": ("UNCLEAN leader election", "*", 160, -0.1, True),
    "offline": ("partition offline (no leader)", "X", 50, -0.1, True),
    "isr-change": ("ISR change (colour: key)", "|", 50, 0.12, True),
    "truncation": ("log truncated here (size: records removed)", "v", 34, 0.3, False),
    "instant-fault": ("bounce / other fault", "P", 50, 0.0, False),
    "acknowledged": ("lost write acknowledged (colour: key)", "^", 44, 0.0, True),
    "lost": ("lost write's cause (colour: key)", "s", 60, 0.3, True),
}
_BY_KEY_SPREAD = frozenset({"election", "unclean-election", "offline", "lost"})
"""Marks drawn a little apart per key, so that one moment's elections of several keys (a
controller moving every partition at once) stay apart."""
_MARK_COLORS = {"controller": "#37474f", "truncation": "#6d4c41", "instant-fault": "#fb8c00"}


LABELLED_CUT = 10
"""Truncations of at least this many records carry their count on the timeline."""


def _size(mark: Mark, size: float) -> float:
    """A mark's area: a truncation's grows with the records it removed (a one-record cut
    stays small, a 700-record one stands out)."""
    if mark.kind != "truncation" or mark.size is None:
        return size
    return min(size + 14 * float(np.sqrt(mark.size)), 600.0)


def _label_cuts(ax: Any, timeline: Timeline, row: Mapping[str, int], end_s: float) -> None:
    """The records removed beside each truncation of at least `LABELLED_CUT`; the cuts of
    one lane close in time share one label (`-312, -183`) rather than overlap."""
    cuts = sorted(
        (m for m in timeline.marks if m.kind == "truncation" and (m.size or 0) >= LABELLED_CUT),
        key=lambda m: (m.node, m.time_s),
    )
    groups: list[list[Mark]] = []
    for mark in cuts:
        last = groups[-1][-1] if groups else None
        if last is not None and last.node == mark.node and mark.time_s - last.time_s < end_s / 60:
            groups[-1].append(mark)
        else:
            groups.append([mark])
    lower = False
    for previous, group in zip([[], *groups], groups, strict=False):
        # A label close after the one before on its lane goes on the other line.
        close = bool(previous) and previous[0].node == group[0].node
        lower = close and group[0].time_s - previous[-1].time_s < end_s / 8 and not lower
        text = ", ".join(f"-{m.size:,}" for m in group)
        ax.annotate(text, (group[-1].time_s, row[group[0].node] + 0.3), fontsize=7,
                    xytext=(5, -7 if lower else 3), textcoords="offset points",
                    color=_MARK_COLORS["truncation"])  # fmt: skip


def _spread(kind: str, key: str | None, keys: Sequence[str]) -> float:
    """The vertical shift of a mark of `key` among `keys` (0 for kinds drawn as they are)."""
    if kind not in _BY_KEY_SPREAD or key is None or key not in keys or len(keys) < 2:
        return 0.0
    slot = keys.index(key) % 4
    return (slot - (min(len(keys), 4) - 1) / 2) * 0.09


def _label_places(timeline: Timeline, end_s: float) -> list[tuple[float, float]]:
    """Where each scenario's name goes: above or below its bar, whichever it does not
    overlap the previous name on, and moved left to end inside the axes."""
    per_char = end_s / 9.5 * (7 * 0.56 / 72)  # 7 pt text on axes about 9.5 inches wide
    rows = [-1.62, -0.95, -1.95]
    free_from = [float("-inf")] * len(rows)
    places = []
    for span in timeline.scenarios:
        width = len(span.name) * per_char
        x = max(min(span.start_s, end_s - width), 0.0)
        row = next((i for i, free in enumerate(free_from) if x >= free), None)
        if row is None:
            row = min(range(len(rows)), key=free_from.__getitem__)
        free_from[row] = x + width + per_char
        places.append((x, rows[row]))
    return places


def _timeline_plot(timeline: Timeline) -> Any:
    lanes = list(timeline.nodes)
    row = {node: i for i, node in enumerate(lanes)}
    fig, ax = plt.subplots(figsize=(12, 1.9 + 0.55 * (len(lanes) + 1.5)))
    end_s = max(timeline.end_s, 1.0)
    for bar in timeline.bars:
        end = end_s if bar.end_s is None else bar.end_s
        ax.barh(
            row[bar.node], max(end - bar.start_s, end_s / 800), left=bar.start_s, height=0.7,
            color=FAULT_COLORS.get(bar.fault, "#9e9e9e"), alpha=0.4, lw=0.6,
            edgecolor=FAULT_COLORS.get(bar.fault, "#9e9e9e"),
            hatch="///" if bar.fault == "start-partition" else None,
        )  # fmt: skip
    for span, (x, y) in zip(timeline.scenarios, _label_places(timeline, end_s), strict=True):
        width = max(span.end_s - span.start_s, end_s / 400)
        ax.barh(-1.3, width, left=span.start_s, height=0.35, color="#78909c", alpha=0.8)
        ax.text(x, y, span.name, fontsize=7, va="center", ha="left", color="#37474f")
    colors = key_colors(timeline.keys)
    for kind, (_label, marker, size, offset, by_key) in _MARKS.items():
        marks = [m for m in timeline.marks if m.kind == kind]
        if not marks:
            continue
        ax.scatter(
            [m.time_s for m in marks],
            [row[m.node] + offset + _spread(kind, m.key, timeline.keys) for m in marks],
            marker=marker,
            s=[_size(m, size) for m in marks],
            c=[colors.get(m.key or "", "#616161") if by_key else _MARK_COLORS[kind] for m in marks],
            edgecolors="#b71c1c" if kind in ("unclean-election", "lost") else None,
            linewidths=1.2 if kind in ("unclean-election", "isr-change") else 0.5,
            zorder=3,
            clip_on=False,
        )
    _label_cuts(ax, timeline, row, end_s)
    if not (timeline.bars or timeline.marks or timeline.scenarios):
        ax.text(0.5, 0.5, "no faults or SUT events in the history", transform=ax.transAxes,
                ha="center", va="center", color="#616161")  # fmt: skip
    ax.set_yticks([-1.3, *range(len(lanes))], ["scenario", *lanes])
    ax.set_ylim(len(lanes) - 0.4, -2.2)
    _time_axis(ax, end_s)
    ax.set_title("timeline: faults per node (bars), SUT events (markers)")
    handles: list[Any] = [
        Patch(facecolor=FAULT_COLORS.get(f, "#9e9e9e"), alpha=0.5,
              hatch="///" if f == "start-partition" else None, label=FAULT_NAMES.get(f, f))
        for f in [*FAULT_COLORS, *sorted({b.fault for b in timeline.bars} - set(FAULT_COLORS))]
        if any(b.fault == f for b in timeline.bars)
    ]  # fmt: skip
    present = {m.kind for m in timeline.marks}
    handles += [
        Line2D([], [], ls="", marker=marker, markersize=7 if kind != "unclean-election" else 11,
               color=_MARK_COLORS.get(kind, "#616161"), label=label,
               markeredgecolor="#b71c1c" if kind == "unclean-election" else None)
        for kind, (label, marker, _s, _o, _k) in _MARKS.items() if kind in present
    ]  # fmt: skip
    handles += [
        Line2D([], [], ls="", marker="o", markersize=6, color=color, label=key)
        for key, color in colors.items()
    ]
    if handles:
        _legend_outside(ax, handles=handles, ncols=1 if len(handles) <= 14 else 2)
    return fig


def decimate(series: Series, buckets: int = 2000) -> Series:
    """At most about 4 points per bucket of time: the first, lowest, highest and last of
    each, which draw the same line at the plot's resolution (the series is in time order)."""
    time, values = series.time_s, series.values
    if len(time) <= 4 * buckets:
        return series
    span = max(float(time[-1] - time[0]), 1e-9)
    bucket = ((time - time[0]) / span * (buckets - 1)).astype(np.int64)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(bucket)) + 1])
    ends = np.concatenate([starts[1:], [len(time)]]) - 1
    by_value = np.lexsort((values, bucket))  # each bucket keeps its positions, by value
    keep = np.unique(np.concatenate([starts, ends, by_value[starts], by_value[ends]]))
    return Series(time[keep], values[keep])


def _step_to_end(series: Series, end_s: float) -> tuple[Any, Any]:
    """A step function from 0 at the start to its last value at `end_s`."""
    series = decimate(series)
    xs = np.concatenate([[0.0], series.time_s, [max(end_s, *series.time_s[-1:])]])
    ys = np.concatenate([[0], series.values, series.values[-1:] if len(series.values) else [0]])
    return xs, ys


def _lag_plot(used: Consumption, intervals: list[FaultInterval], end_s: float) -> Any:
    fig, ax = plt.subplots(figsize=(12, 3.5))
    colors = key_colors(list(used.lag))
    for key, series in used.lag.items():
        ax.step(*_step_to_end(series, end_s), where="post", color=colors[key], lw=0.9, label=key)
    _shade(ax, intervals)
    _time_axis(ax, end_s)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("offsets behind")
    ax.set_title(
        "consumer lag per key: highest acknowledged offset minus the highest offset the "
        "latest poll read (final read left out), faults shaded",
        fontsize=10,
    )
    _legend_outside(ax)
    return fig


def _unseen_plot(used: Consumption, intervals: list[FaultInterval], end_s: float) -> Any:
    fig, ax = plt.subplots(figsize=(12, 3.5))
    colors = key_colors(list(used.unseen))
    for key, series in used.unseen.items():
        if len(series.time_s):
            ax.step(*_step_to_end(series, end_s), where="post", color=colors[key], lw=0.9,
                    label=key)  # fmt: skip
    if len(used.unseen) > 1:
        ax.step(*_step_to_end(used.unseen_total, end_s), where="post", color="black", lw=1.3,
                label="all keys")  # fmt: skip
    _shade(ax, intervals)
    _time_axis(ax, end_s)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("values")
    final = int(used.unseen_total.values[-1]) if len(used.unseen_total.values) else 0
    ax.set_title(
        f"acknowledged writes not yet read by any poll ({final} never read), faults shaded",
        fontsize=10,
    )
    _legend_outside(ax)
    return fig


def _anomalies_plot(totals: Mapping[str, int], lost: Mapping[str, Mapping[str, int]]) -> Any:
    """Left: every case found per anomaly type (complete counts; hatched: expected losses).
    Right, when results count them: the acknowledged writes lost per key, each once
    (hatched: the ones the configuration allows)."""
    found = {name: n for name, n in totals.items() if n}
    names = sorted(found, key=lambda n: (n.endswith("(expected)"), n))
    fig, axes = plt.subplots(
        1, 2 if lost else 1, figsize=(12, max(2.6, 1.2 + 0.32 * len(names))), squeeze=False
    )
    ax = axes[0][0]
    positions = np.arange(len(names))
    expected = [name.endswith("(expected)") for name in names]
    bars = ax.barh(
        positions, [found[n] for n in names], 0.6,
        color=["#ef6c00" if e else "#c62828" for e in expected],
        hatch=None, edgecolor="white", lw=0.5,
    )  # fmt: skip
    for bar, is_expected in zip(bars, expected, strict=True):
        if is_expected:
            bar.set_hatch("//")
    ax.bar_label(bars, labels=[f"{found[n]:,}" for n in names], padding=3, fontsize=8)
    ax.set_yticks(positions, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(found.values(), default=1) * 1.18)
    ax.set_xlabel("cases found (hatched: expected losses)")
    ax.set_title("cases per anomaly type; one lost write shows under several", fontsize=10)
    if lost:
        _lost_per_key(axes[0][1], lost)
    return fig


def _lost_per_key(ax: Any, lost: Mapping[str, Mapping[str, int]]) -> None:
    keys = sorted(lost, key=natural_key)
    allowed = np.asarray([int(lost[k].get("allowed_lost", 0)) for k in keys], np.float64)
    total = np.asarray([int(lost[k].get("acknowledged_lost", 0)) for k in keys], np.float64)
    positions = np.arange(len(keys))
    ax.bar(positions, total - allowed, 0.6, color="#c62828", label="not allowed")
    ax.bar(
        positions, allowed, 0.6, bottom=total - allowed, color="#ef6c00", hatch="//",
        edgecolor="white", lw=0.5, label="allowed by the configuration",
    )  # fmt: skip
    for x, height in zip(positions, total, strict=True):
        ax.text(float(x), height, f"{int(height):,}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(positions, keys)
    ax.set_ylim(0, max(total.max(), 1) * 1.15)
    ax.set_ylabel("writes")
    ax.set_title(
        f"acknowledged writes lost per key, each once: {int(total.sum()):,} in all", fontsize=10
    )
    ax.legend(fontsize=8)
    if len(keys) > 6:
        ax.tick_params(axis="x", labelrotation=30)


def _windows_plot(
    windows: list[dict[str, Any]], end_s: float, intervals: list[FaultInterval]
) -> Any:
    keys = sorted({str(w["key"]) for w in windows}, key=natural_key)
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.5 * len(keys)))
    for window in windows:
        row = keys.index(str(window["key"]))
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


def lost_per_key(results: Mapping[str, Any] | None) -> dict[str, Mapping[str, int]]:
    """results.json `summary.keys`: per key that lost any, its acknowledged writes lost and
    allowed (empty for results that do not count them)."""
    summary = (results or {}).get("summary")
    keys = summary.get("keys") if isinstance(summary, Mapping) else None
    if not isinstance(keys, Mapping):
        return {}
    return {
        str(key): lost
        for key, lost in keys.items()
        if isinstance(lost, Mapping) and lost.get("acknowledged_lost")
    }


def anomaly_totals(results: Mapping[str, Any] | None) -> dict[str, int]:
    """Every case found per anomaly (results' `counts`, `expected_counts`), expected losses
    named "NAME (expected)"."""
    totals: Counter[str] = Counter()
    for checker in (results or {}).get("checkers", {}).values():
        if not isinstance(checker, Mapping):
            continue
        for group, suffix in (("counts", ""), ("expected_counts", " (expected)")):
            counts = checker.get(group)
            for anomaly, n in counts.items() if isinstance(counts, Mapping) else ():
                if isinstance(n, int) and not isinstance(n, bool):
                    totals[anomaly + suffix] += n
    return dict(totals)


def loss_windows(results: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Every unclean-loss window sample, with `expected` saying which group it came from."""
    section = (results or {}).get("checkers", {}).get("unclean", {})
    out = []
    for group, expected in (("anomalies", False), ("expected", True)):
        for window in section.get(group, {}).get("unclean-loss-window", []):
            if isinstance(window, Mapping) and len(window.get("window") or []) == 2:
                out.append({**window, "expected": expected})
    return out
