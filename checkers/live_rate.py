"""The rate the workload kept during faults on the keys whose leader was alive.

A fault that takes one leader away should not stop the others: this compares the `ok` sends
per second per live key during fault intervals with the same figure outside them, the
records that `ok` polls read per second per live key likewise, and the `ok` polls per second
(a poll reads every key, so polls themselves are not split by key; an empty one waits out its
timeout, so the records read say more about the readers).

A key's leader is known from the SUT's `leader-election` events (the last one at or before
the moment; none yet: taken as alive); it is not alive while it is -1 (offline) or while its
broker's node (broker N on node nN) is killed (`kill`, `power-loss`, or a crash to damage its
files, .. `start`) or paused (`pause` .. `resume`): such a broker's partitions are alive
again once another leader is elected or the node is back. Fault intervals are the statistics'
(`checkers.fault_intervals`), merged; the span is the workload's, from the first to
the last client operation outside the final read. Operations count at their completion.

Given `min_isr` (test.json's min.insync.replicas, for acks=-1 writes), the same figures are
also taken on the keys that were writable: a live leader whose ISR, as the last
`leader-election` or `isr-change` event said it, had at least `min_isr` members, none of them
down. A leader below the minimum refuses acks=-1 sends (NOT_ENOUGH_REPLICAS) and holds its
high watermark, and one whose ISR still lists a dead or paused member waits for it until the
lag time shrinks it out, as the configuration promises: a key in either state is live but
cannot be written, and its stall is the configuration's, not the workload's. (A member cut
off by a partition, or slowed, is not told apart: it still counts as up.)
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from checkers.fault_intervals import FaultInterval
from checkers.key_log import ReplicationEvent

NS_PER_S = 1_000_000_000

DOWN_FAULTS = frozenset({"kill", "pause", "power-loss", "corrupt-file", "truncate-file"})
"""Fault intervals during which the targeted nodes' brokers are not alive."""
OFFLINE = -1

Span = tuple[int, int]


def merged(spans: Sequence[Span]) -> list[Span]:
    """Overlapping or touching spans joined, in order."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        elif end > start:
            out.append((start, end))
    return out


def _clip(spans: Sequence[Span], lo: int, hi: int) -> list[Span]:
    return [(max(s, lo), min(e, hi)) for s, e in spans if min(e, hi) > max(s, lo)]


def _covered(spans: Sequence[Span], at: int) -> bool:
    """Whether `at` lies in one of the merged, ordered `spans`."""
    i = bisect.bisect_right(spans, (at, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= at < spans[i][1]


def down_nodes(intervals: Sequence[FaultInterval], end: int) -> dict[str, list[Span]]:
    """Per node, when a kill or pause held it down (merged)."""
    spans: dict[str, list[Span]] = {}
    for interval in intervals:
        if interval.fault not in DOWN_FAULTS or not isinstance(interval.value, Mapping):
            continue
        targets = interval.value.get("targets")
        if not isinstance(targets, list):
            continue
        stop = interval.end if interval.end is not None else end
        for node in targets:
            spans.setdefault(str(node), []).append((interval.start, stop))
    return {node: merged(s) for node, s in spans.items()}


Segment = tuple[str, int, int, bool, bool]
"""(key, start, end, in a fault, writable) of a stretch in which the key's leader was alive."""


def live_segments(
    keys: Sequence[str],
    replication: Mapping[str, Sequence[ReplicationEvent]],
    faults: Sequence[Span],
    down: Mapping[str, Sequence[Span]],
    span: Span,
    min_isr: int | None = None,
) -> list[Segment]:
    """(key, start, end, in a fault, writable) for every stretch of `span` in which the
    key's leader was alive, cut wherever a fault starts or ends, a leader is elected, the
    ISR changes or a node goes down or comes back; writable: `min_isr` is None, no event
    has said the key's ISR yet, or the ISR had at least `min_isr` members and none of them
    was down."""
    lo, hi = span
    cuts = {lo, hi}
    for spans in (faults, *down.values()):
        for start, stop in spans:
            cuts.update(t for t in (start, stop) if lo < t < hi)
    out: list[Segment] = []
    for key in keys:
        events = replication.get(key, ())
        elections = sorted(
            (e.time, e.leader if e.leader is not None else OFFLINE)
            for e in events
            if e.f == "leader-election"
        )
        times = [t for t, _ in elections]
        isrs = sorted((e.time, e.index, e.isr) for e in events if e.isr is not None)
        isr_times = [t for t, _, _ in isrs]
        points = sorted(cuts | {t for t in (*times, *isr_times) if lo < t < hi})
        for start, stop in itertools.pairwise(points):
            at = bisect.bisect_right(times, start) - 1
            leader = elections[at][1] if at >= 0 else None
            if leader == OFFLINE:
                continue
            if leader is not None and _covered(list(down.get(f"n{leader}", ())), start):
                continue
            said = bisect.bisect_right(isr_times, start) - 1
            writable = min_isr is None or said < 0 or _isr_up(isrs[said][2], min_isr, down, start)
            out.append((key, start, stop, _covered(list(faults), start), writable))
    return out


def _isr_up(isr: Sequence[int], min_isr: int, down: Mapping[str, Sequence[Span]], at: int) -> bool:
    """Whether an ISR can commit an acks=-1 write at `at`: at least `min_isr` members, and
    none of them down (a member down and not yet shrunk out holds every commit)."""
    return len(isr) >= min_isr and not any(
        _covered(list(down.get(f"n{broker}", ())), at) for broker in isr
    )


def live_leader_rate(
    spark: SparkSession,
    ops: DataFrame,
    intervals: Sequence[FaultInterval],
    replication: Mapping[str, Sequence[ReplicationEvent]],
    mops: DataFrame | None = None,
    min_isr: int | None = None,
) -> dict[str, Any] | None:
    """The `live_rate` section of the statistics (`mops`: the history's micro-operations, for
    the records polls read; `min_isr`: for the figures on writable keys); None without
    sends, keys or faults."""
    client = F.col("process_id").isNotNull() & ~F.coalesce(F.col("final"), F.lit(False))
    row = (
        ops.filter(client)
        .agg(
            F.min("time").alias("start"),
            F.max("time").alias("end"),
            F.collect_set(F.when(F.col("f") == "send", F.col("key"))).alias("keys"),
        )
        .collect()[0]
    )
    if row["start"] is None or not row["keys"] or not intervals:
        return None
    span: Span = (int(row["start"]), int(row["end"]) + 1)
    keys = sorted(str(k) for k in row["keys"])
    faults = _clip(
        merged([(i.start, i.end if i.end is not None else span[1]) for i in intervals]), *span
    )
    if not faults:
        return None
    segments = live_segments(
        keys, replication, faults, down_nodes(intervals, span[1]), span, min_isr
    )
    fault_s = sum(e - s for s, e in faults) / NS_PER_S
    free_s = (span[1] - span[0]) / NS_PER_S - fault_s
    live_s = {True: 0.0, False: 0.0}
    writable_s = {True: 0.0, False: 0.0}
    for _, start, stop, in_fault, writable in segments:
        live_s[in_fault] += (stop - start) / NS_PER_S
        if writable:
            writable_s[in_fault] += (stop - start) / NS_PER_S
    live = [(k, s, e, f) for k, s, e, f, _ in segments]
    writable_only = [(k, s, e, f) for k, s, e, f, w in segments if w]
    sends = _count_in(spark, ops, "send", live)
    polled = mops.filter(F.col("op_f") == "poll") if mops is not None else None
    reads = _count_in(spark, polled, "poll", live) if polled is not None else None
    if min_isr is not None:
        writable_sends = _count_in(spark, ops, "send", writable_only)
        writable_reads = (
            _count_in(spark, polled, "poll", writable_only) if polled is not None else None
        )
    polls = _count_in(
        spark, ops, "poll", [(None, s, e, True) for s, e in faults] + _gaps(faults, span)
    )

    def part(in_fault: bool, seconds: float) -> dict[str, Any]:
        key_s = live_s[in_fault]
        return {
            "seconds": round(seconds, 3),
            "live_keys": _per_s(key_s, seconds),
            "send_ok": sends[in_fault],
            "send_per_s_per_live_key": _per_s(sends[in_fault], key_s),
            **(
                {}
                if reads is None
                else {
                    "read_ok": reads[in_fault],
                    "read_per_s_per_live_key": _per_s(reads[in_fault], key_s),
                }
            ),
            "poll_ok": polls[in_fault],
            "poll_per_s": _per_s(polls[in_fault], seconds),
            **({} if min_isr is None else writable_part(in_fault, seconds)),
        }

    def writable_part(in_fault: bool, seconds: float) -> dict[str, Any]:
        key_s = writable_s[in_fault]
        return {
            "writable_keys": _per_s(key_s, seconds),
            "writable_send_ok": writable_sends[in_fault],
            "send_per_s_per_writable_key": _per_s(writable_sends[in_fault], key_s),
            **(
                {}
                if writable_reads is None
                else {
                    "writable_read_ok": writable_reads[in_fault],
                    "read_per_s_per_writable_key": _per_s(writable_reads[in_fault], key_s),
                }
            ),
        }

    during, free = part(True, fault_s), part(False, free_s)
    writable_kept = (
        {}
        if min_isr is None
        else {
            "send_writable": _ratio(
                during["send_per_s_per_writable_key"], free["send_per_s_per_writable_key"]
            ),
            **(
                {}
                if writable_reads is None
                else {
                    "read_writable": _ratio(
                        during["read_per_s_per_writable_key"],
                        free["read_per_s_per_writable_key"],
                    )
                }
            ),
        }
    )
    return {
        "keys": len(keys),
        **({} if min_isr is None else {"min_isr": min_isr}),
        "during_faults": during,
        "fault_free": free,
        "kept": {
            "send": _ratio(during["send_per_s_per_live_key"], free["send_per_s_per_live_key"]),
            **(
                {}
                if reads is None
                else {
                    "read": _ratio(
                        during["read_per_s_per_live_key"], free["read_per_s_per_live_key"]
                    )
                }
            ),
            "poll": _ratio(during["poll_per_s"], free["poll_per_s"]),
            **writable_kept,
        },
    }


def _gaps(faults: Sequence[Span], span: Span) -> list[tuple[None, int, int, bool]]:
    out: list[tuple[None, int, int, bool]] = []
    at = span[0]
    for start, stop in faults:
        if start > at:
            out.append((None, at, start, False))
        at = max(at, stop)
    if span[1] > at:
        out.append((None, at, span[1], False))
    return out


def _per_s(count: float, seconds: float) -> float | None:
    """`count` per second of `seconds` (None without time)."""
    return None if seconds <= 0 else round(count / seconds, 3)


def _ratio(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else round(part / whole, 3)


def _count_in(
    spark: SparkSession,
    ops: DataFrame,
    f: str,
    segments: Sequence[tuple[str | None, int, int, bool]],
) -> dict[bool, int]:
    """`ok` completions of `f` (outside the final read) inside the segments, by whether
    the segment is in a fault; a keyed segment counts only its key's operations."""
    counts = {True: 0, False: 0}
    if not segments:
        return counts
    rows = [(n, key, start, stop, in_fault) for n, (key, start, stop, in_fault) in
            enumerate(segments)]  # fmt: skip
    spans = spark.createDataFrame(
        rows, "segment long, seg_key string, start long, stop long, in_fault boolean"
    ).withColumn(
        "second",
        F.explode(
            F.sequence(F.floor(F.col("start") / NS_PER_S), F.floor(F.col("stop") / NS_PER_S))
        ),
    )
    done = ops.filter(
        (F.col("type") == "ok")
        & (F.col("f") == f)
        & F.col("process_id").isNotNull()
        & ~F.coalesce(F.col("final"), F.lit(False))
    ).select("time", "key", F.floor(F.col("time") / NS_PER_S).alias("second"))
    joined = (
        done.join(F.broadcast(spans), "second")
        .filter(
            (F.col("time") >= F.col("start"))
            & (F.col("time") < F.col("stop"))
            & (F.col("seg_key").isNull() | (F.col("seg_key") == F.col("key")))
        )
        .groupBy("in_fault")
        .agg(F.count(F.lit(1)).alias("n"))
        .collect()
    )
    for result in joined:
        counts[bool(result["in_fault"])] = int(result["n"])
    return counts
