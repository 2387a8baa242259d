"""History statistics: counts, throughput and latency over time, availability during faults.

- counts: client operations (`ops` = invocations, `ok`/`fail`/`info` by completion,
  `pending` never completed), per `f`, and nemesis/SUT events;
- latency: completion time - invocation time, per `f`, percentiles in milliseconds. Each
  is a latency the history holds, at most 0.55% above the exact percentile: latencies
  are counted in buckets 0.55% wide, and a percentile is the largest latency of the
  bucket holding its rank (the rank of percentile p among n latencies is ceil(p * n));
- windows: per time window (about 100 over the run unless set), completions per second by
  type and latency percentiles of `ok` completions;
- faults: intervals from nemesis events (`start-X` .. `stop-X`, `kill` .. `start`,
  `pause` .. `resume`; a heal naming targets closes the intervals of the nodes it names, one
  without targets every interval of its kind; an interval never stopped runs to the end of
  the history), each with the `ok` fraction of send/poll/txn completions inside it;
  other nemesis events are listed as instantaneous;
- live_rate: given the SUT's leader elections, the `ok` sends per second per key whose
  leader is alive during fault intervals and outside them, and the `ok` polls per second
  (`checkers.live_rate`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from checkers.fault_intervals import FaultInterval, fault_intervals
from checkers.key_log import ReplicationEvent
from checkers.live_rate import live_leader_rate

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
PERCENTILES = (0.5, 0.9, 0.99, 0.999)
DATA_FS = ("send", "poll", "txn")
_BUCKETS_PER_DOUBLING = 128


def _ms(value: Any) -> float | None:
    return None if value is None else round(float(value) / NS_PER_MS, 3)


def _percentiles(histogram: list[tuple[int, int]]) -> dict[str, float | None]:
    """PERCENTILES (ms) of a latency histogram: (count, max) per bucket, in bucket order."""
    values = _ranked(histogram, PERCENTILES)
    return {f"p{_label(p)}": _ms(v) for p, v in zip(PERCENTILES, values, strict=True)}


def _ranked(histogram: list[tuple[int, int]], fractions: tuple[float, ...]) -> list[int | None]:
    """For each fraction p, the largest latency of the bucket holding the ceil(p * n)-th
    smallest latency; `histogram` is (count, max) per bucket, in bucket order."""
    total = sum(count for count, _ in histogram)
    if total == 0:
        return [None for _ in fractions]
    out: list[int | None] = []
    for fraction in fractions:
        rank = max(1, math.ceil(round(fraction * total, 9)))
        seen = 0
        for count, largest in histogram:
            seen += count
            if seen >= rank:
                out.append(largest)
                break
    return out


def _label(p: float) -> str:
    return f"{p * 100:g}".replace(".", "")


def _bucket(latency: Column) -> Column:
    """A latency's histogram bucket: 128 per doubling (each spans 0.55%); -1 for <= 0."""
    return F.when(latency > 0, F.floor(F.log2(latency) * _BUCKETS_PER_DOUBLING)).otherwise(-1)


def operation_counts(ops: DataFrame) -> dict[str, Any]:
    """Client operations by completion type and by f; nemesis and SUT events; the first and
    last time (`start`, `end`, removed by `history_stats`)."""
    event = F.col("process_id").isNull()
    # Grouped by process only for nemesis and SUT events: a long history has thousands of
    # client processes.
    rows = ops.groupBy(
        F.when(event, F.col("process")).alias("process"), event.alias("event"), "f", "type"
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.count(F.when((F.col("type") == "invoke") & F.col("complete_type").isNull(), 1)).alias(
            "pending"
        ),
        # A completion without invoke was invoked at its own index (histories.pairing).
        F.count(
            F.when((F.col("type") != "invoke") & (F.col("invoke_index") == F.col("index")), 1)
        ).alias("uninvoked"),
        F.min("time").alias("start"),
        F.max("time").alias("end"),
    )
    by_f: dict[str, dict[str, int]] = {}
    events: dict[str, int] = {}
    totals = {"ops": 0, "ok": 0, "fail": 0, "info": 0, "pending": 0}
    lines = 0
    starts, ends = [], []
    for row in rows.collect():
        lines += row["n"]
        starts.append(row["start"])
        ends.append(row["end"])
        if row["event"]:
            events[row["process"]] = events.get(row["process"], 0) + row["n"]
            continue
        entry = by_f.setdefault(row["f"], {"ops": 0, "ok": 0, "fail": 0, "info": 0, "pending": 0})
        name = "ops" if row["type"] == "invoke" else row["type"]
        entry[name] += row["n"]
        totals[name] += row["n"]
        entry["ops"] += row["uninvoked"]
        totals["ops"] += row["uninvoked"]
        entry["pending"] += row["pending"]
        totals["pending"] += row["pending"]
    return {
        **totals,
        "lines": lines,
        "events": events,
        "by_f": dict(sorted(by_f.items())),
        "start": min(starts, default=None),
        "end": max(ends, default=None),
    }


def latency_and_windows(
    ops: DataFrame, start: int, end: int, width_s: float | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Latency percentiles (ms) per f and completion type; and per time window, completions
    per second by type and percentiles of `ok` latencies (with the totals `ok` and
    `completions`, removed by `history_stats`). One scan: each completion counts in three
    grouping sets of one aggregation, latencies as histograms (`_bucket`)."""
    duration = max(end - start, 1)
    width = int(width_s * NS_PER_S) if width_s else max(NS_PER_S, math.ceil(duration / 100))
    latency = F.col("latency_ns")
    data = F.col("process_id").isNotNull() & F.col("f").isin(*DATA_FS)
    ok = F.col("type") == "ok"
    window = F.floor((F.col("time") - F.lit(start)) / F.lit(width)).cast("long")
    rows = ops.filter(F.col("type") != "invoke").select(
        "f",
        "type",
        latency,
        F.when(latency.isNotNull(), _bucket(latency)).alias("bucket"),
        F.when(data, window).alias("window"),
        F.when(data & ok & latency.isNotNull(), _bucket(latency)).alias("ok_bucket"),
    )
    by_f_set, window_set, ok_set = (
        ("f", "type", "bucket"),
        ("window", "type"),
        ("window", "ok_bucket"),
    )
    columns = ("f", "type", "bucket", "window", "ok_bucket")

    def set_id(grouped: tuple[str, ...]) -> int:
        """Spark's grouping id: a bit per column, 1 where it is not grouped, first column first."""
        return sum(1 << (len(columns) - 1 - i) for i, c in enumerate(columns) if c not in grouped)

    by_f_id, window_id, ok_id = set_id(by_f_set), set_id(window_set), set_id(ok_set)
    groups = rows.groupingSets([by_f_set, window_set, ok_set], *columns).agg(
        F.grouping_id().alias("set"),
        F.count(F.lit(1)).alias("n"),
        F.max(latency).alias("max"),
    )
    histograms: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    counts: dict[int, dict[str, int]] = {}
    ok_histograms: dict[int, list[tuple[int, int, int]]] = {}
    for row in groups.collect():
        if row["set"] == by_f_id and row["bucket"] is not None:
            histograms.setdefault((row["f"], row["type"]), []).append(
                (row["bucket"], row["n"], row["max"])
            )
        elif row["set"] == window_id and row["window"] is not None:
            counts.setdefault(row["window"], {})[row["type"]] = row["n"]
        elif row["set"] == ok_id and row["window"] is not None and row["ok_bucket"] is not None:
            ok_histograms.setdefault(row["window"], []).append(
                (row["ok_bucket"], row["n"], row["max"])
            )
    by_f: dict[str, Any] = {}
    for (f, kind), buckets in sorted(histograms.items()):
        histogram = [(n, largest) for _, n, largest in sorted(buckets)]
        by_f.setdefault(f, {})[kind] = {
            "count": sum(n for n, _ in histogram),
            **_percentiles(histogram),
            "max": _ms(histogram[-1][1]),
        }
    seconds = width / NS_PER_S
    windows = []
    ok_total = completions = 0
    for number, by_type in sorted(counts.items()):
        ok_n, fail_n, info_n = (by_type.get(kind, 0) for kind in ("ok", "fail", "info"))
        ok_total += ok_n
        completions += ok_n + fail_n + info_n
        histogram = [(n, largest) for _, n, largest in sorted(ok_histograms.get(number, []))]
        p50, p99 = _ranked(histogram, (0.5, 0.99))
        windows.append(
            {
                "start_s": round(number * seconds, 3),
                "ok_per_s": round(ok_n / seconds, 3),
                "fail_per_s": round(fail_n / seconds, 3),
                "info_per_s": round(info_n / seconds, 3),
                "latency_ms": {"p50": _ms(p50), "p99": _ms(p99)},
            }
        )
    throughput = {"width_s": seconds, "windows": windows, "ok": ok_total,
                  "completions": completions}  # fmt: skip
    return by_f, throughput


def fault_availability(
    spark: SparkSession, ops: DataFrame, intervals: list[FaultInterval], end: int
) -> list[dict[str, Any]]:
    """Each fault interval with the ok fraction of send/poll/txn completions inside it."""
    if not intervals:
        return []
    rows = [
        (number, interval.start, interval.end if interval.end is not None else end)
        for number, interval in enumerate(intervals)
    ]
    spans = spark.createDataFrame(rows, "interval long, start long, end long").withColumn(
        "second",
        F.explode(F.sequence(F.floor(F.col("start") / NS_PER_S), F.floor(F.col("end") / NS_PER_S))),
    )
    done = ops.filter(
        (F.col("type") != "invoke") & F.col("process_id").isNotNull() & F.col("f").isin(*DATA_FS)
    ).select("time", "type", F.floor(F.col("time") / NS_PER_S).alias("second"))
    counts = (
        done.join(F.broadcast(spans), "second")
        .filter((F.col("time") >= F.col("start")) & (F.col("time") <= F.col("end")))
        .groupBy("interval")
        .agg(
            F.count(F.when(F.col("type") == "ok", 1)).alias("ok"),
            F.count(F.lit(1)).alias("total"),
        )
        .collect()
    )
    by_interval = {row["interval"]: (row["ok"], row["total"]) for row in counts}
    out = []
    for number, interval in enumerate(intervals):
        ok, total = by_interval.get(number, (0, 0))
        out.append(
            {
                "fault": interval.fault,
                "start_index": interval.start_index,
                "end_index": interval.end_index,
                "start_s": round(interval.start / NS_PER_S, 3),
                "end_s": None if interval.end is None else round(interval.end / NS_PER_S, 3),
                "value": interval.value,
                "completions": total,
                "ok": ok,
                "availability": None if total == 0 else round(ok / total, 4),
            }
        )
    return out


def history_stats(
    spark: SparkSession,
    ops: DataFrame,
    nemesis: list[tuple[int, int, str, str | None]],
    *,
    window_s: float | None = None,
    replication: Mapping[str, Sequence[ReplicationEvent]] | None = None,
    mops: DataFrame | None = None,
    min_isr: int | None = None,
) -> dict[str, Any]:
    """The `stats` section of results.json (`nemesis`: the nemesis events as
    `checkers.events` collects them; `replication`: its SUT events by key, `mops`: its
    micro-operations, and `min_isr`: the ISR an acks=-1 write needs, for `live_rate`)."""
    counts = operation_counts(ops)
    start, end = counts.pop("start"), counts.pop("end")
    if start is None:
        return {**counts, "duration_s": 0.0}
    intervals, instants = fault_intervals(nemesis)
    latency, throughput = latency_and_windows(ops, start, end, window_s)
    ok, total = throughput.pop("ok"), throughput.pop("completions")
    live = (
        live_leader_rate(spark, ops, intervals, replication, mops, min_isr) if replication else None
    )
    return {
        **counts,
        "duration_s": round((end - start) / NS_PER_S, 3),
        "availability": None if not total else round(ok / total, 4),
        "latency_ms": latency,
        "throughput": throughput,
        "faults": fault_availability(spark, ops, intervals, end),
        "instant_faults": instants,
        **({"live_rate": live} if live is not None else {}),
    }
