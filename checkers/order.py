"""Ordering: how reads and sends move through each key's log, by dense index (HISTORY.md).

Between operations of one process, per key (Jepsen's poll-skip+nonmonotonic-cases and
nonmonotonic-send-cases):
- poll-skip / nonmonotonic-poll: a completed poll's first record of a key is more than
  one index after / at or before the last record of the process's previous `ok` read of
  that key. An `ok` or `info` assign/subscribe that drops the key (or whose keys are not
  known) resets the pairing.
- nonmonotonic-send: the first send of an `ok`/`info` operation to a key lands at or
  before the last send of the process's previous such operation to that key (same
  resets, as Jepsen does). A send's index is its value's first dense index.
Inside one completed operation, consecutive records/sends of a key:
- int-poll-skip / int-nonmonotonic-poll: more than one index apart / not forward.
- int-send-skip (allowed: another producer wrote between) / int-nonmonotonic-send.
Positions that are unknown (a value never seen in the log) are not compared.

A nonmonotonic-poll or nonmonotonic-send between operations is an expected consequence,
not an anomaly, when the previous position was a write whose loss the configuration allows
(`LossRules.truncated_positions`), or when an allowed unclean election that lost
acknowledged writes of the key came between the two operations: the log was truncated and
its offsets reused (a consumer past the new end resets, a producer lands lower).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.evidence import Evidence
from checkers.findings import Finding, finding
from checkers.losses import LossRules

CHECKER = "order"
ANOMALIES = (
    "poll-skip",
    "nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "nonmonotonic-send",
    "int-send-skip",
    "int-nonmonotonic-send",
)
ALLOWED = frozenset({"int-send-skip"})


def assignment_resets(assign: DataFrame, pairs: DataFrame) -> DataFrame:
    """(process_id, key, index) where an assign/subscribe of the process dropped the key.

    `pairs` holds the (process_id, key) pairs that matter. An `ok` or `info` completion
    resets every key not in its list; one whose list is unknown (null) resets them all.
    """
    changes = assign.filter(
        F.col("f").isin("assign", "subscribe") & F.col("type").isin("ok", "info")
    ).select("process_id", "index", "keys")
    return (
        pairs.join(changes, "process_id")
        .filter(F.col("keys").isNull() | ~F.array_contains(F.col("keys"), F.col("key")))
        .select("process_id", "key", "index")
    )


def _with_resets(rows: DataFrame, assign: DataFrame) -> DataFrame:
    """`rows` (kind "read"/"send") plus reset rows for their (process, key) pairs."""
    pairs = rows.select("process_id", "key").distinct()
    resets = assignment_resets(assign, pairs)
    for name, kind in rows.dtypes:
        if name not in ("process_id", "key", "index"):
            resets = resets.withColumn(name, F.lit(None).cast(kind))
    return rows.unionByName(resets.withColumn("kind", F.lit("reset")))


def _steps(rows: DataFrame, order: tuple[str, ...], counted: Column) -> DataFrame:
    """Each row with the row before it (same operation: `inner`), and for an operation's first
    row, the last `counted` row before it and whether a reset came after that one."""
    ordered = Window.partitionBy("process_id", "key").orderBy(*order)
    before = ordered.rowsBetween(Window.unboundedPreceding, -1)
    position = F.struct("index", "didx", "offset", "value")
    previous = F.lag(position).over(ordered)
    return (
        rows.withColumn("prev", previous)
        .withColumn("prev_kind", F.lag("kind").over(ordered))
        .withColumn("prev_counted", F.last(F.when(counted, position), True).over(before))
        .withColumn(
            "last_reset",
            F.last(F.when(F.col("kind") == "reset", F.col("index")), True).over(before),
        )
        .filter(F.col("kind") != "reset")
        .withColumn(
            "inner",
            F.coalesce(
                (F.col("prev_kind") == F.col("kind")) & (F.col("prev.index") == F.col("index")),
                F.lit(False),
            ),
        )
        .withColumn(
            "first_of_op",
            F.col("prev").isNull() | (F.col("prev.index") != F.col("index")),
        )
        .withColumn(
            "follows",
            F.col("first_of_op")
            & F.col("prev_counted").isNotNull()
            & (F.col("last_reset").isNull() | (F.col("last_reset") < F.col("prev_counted.index"))),
        )
    )


def read_steps(evidence: Evidence, assign: DataFrame) -> DataFrame:
    """Every record read, with the record before it in its poll (`inner`, `delta`), or for a
    poll's first record, the end of the process's previous `ok` read of the key (`follows`,
    `delta`), in dense index."""
    reads = evidence.indexed_reads.select(
        "process_id",
        "key",
        "index",
        "mop_index",
        "poll_seq",
        "type",
        "didx",
        "offset",
        "value",
        F.lit("read").alias("kind"),
    )
    ok_read = (F.col("kind") == "read") & (F.col("type") == "ok")
    steps = _steps(_with_resets(reads, assign), ("index", "mop_index", "poll_seq"), ok_read)
    return steps.withColumn(
        "delta",
        F.when(F.col("inner"), F.col("didx") - F.col("prev.didx")).when(
            F.col("follows"), F.col("didx") - F.col("prev_counted.didx")
        ),
    )


def send_steps(evidence: Evidence, assign: DataFrame) -> DataFrame:
    """Every completed send, with the send before it in its operation (`inner`), or for an
    `ok`/`info` operation's first send to a key, the last send of the process's previous
    such operation (`follows`); `delta` in dense index where both positions are known."""
    sends = evidence.indexed_writes.filter(F.col("complete_index").isNotNull()).select(
        "process_id",
        "key",
        F.col("complete_index").alias("index"),
        "mop_index",
        "status",
        F.col("first_idx").alias("didx"),
        "offset",
        "value",
        F.lit("send").alias("kind"),
    )
    counted = (F.col("kind") == "send") & F.col("status").isin("ok", "info")
    steps = _steps(_with_resets(sends, assign), ("index", "mop_index"), counted)
    return steps.withColumn(
        "delta",
        F.when(F.col("inner"), F.col("didx") - F.col("prev.didx")).when(
            F.col("follows") & F.col("status").isin("ok", "info"),
            F.col("didx") - F.col("prev_counted.didx"),
        ),
    )


def _step_detail(op_status: str) -> list[Column | str]:
    """Between operations: ops, values, offsets of the two; inside one: the op and the pair."""
    inner = F.col("inner")
    before = F.when(inner, F.col("prev")).otherwise(F.col("prev_counted"))
    return [
        "key",
        F.col("process_id").alias("process"),
        F.when(~inner, F.array(before.getField("index"), F.col("index"))).alias("ops"),
        F.when(inner, F.col("index")).alias("op"),
        F.when(inner, F.col(op_status)).alias(op_status),
        F.array(before.getField("value"), F.col("value")).alias("values"),
        F.array(before.getField("offset"), F.col("offset")).alias("offsets"),
        "delta",
    ]


def _after_truncation(
    steps: DataFrame, truncated: DataFrame, elections: list[tuple[str, int]]
) -> DataFrame:
    """`steps` plus `expected_reason` where a step back between operations follows a
    position the log lost, or crosses an allowed unclean election that lost data."""
    lost = truncated.select(
        F.col("key").alias("_key"), F.col("value").alias("_value"), "truncated_reason"
    )
    back = ~F.col("inner") & (F.col("delta") < 1)
    joined = steps.join(
        lost,
        back & (F.col("key") == F.col("_key")) & (F.col("prev_counted.value") == F.col("_value")),
        "left",
    ).drop("_key", "_value")
    crossing = [
        F.when(
            back
            & (F.col("key") == key)
            & (F.col("prev_counted.index") < election)
            & (F.col("index") > election),
            F.lit(
                "the unclean leader election at index "
                f"{election} truncated the log between the two operations"
            ),
        )
        for key, election in elections
    ]
    return joined.withColumn(
        "expected_reason", F.coalesce(F.col("truncated_reason"), *crossing)
    ).drop("truncated_reason")


def check_order(evidence: Evidence, assign: DataFrame, losses: LossRules) -> list[Finding]:
    """The findings of this checker: one frame for the reads, one for the sends."""
    truncated = losses.truncated_positions(evidence.writes)
    reads = read_steps(evidence, assign).withColumn(
        "skipped", F.when(~F.col("inner") & (F.col("delta") > 1), F.col("delta") - 1)
    )
    elections = losses.lossy_unclean_elections()
    reads = _after_truncation(reads, truncated, elections)
    sends = _after_truncation(send_steps(evidence, assign), truncated, elections)
    expected = F.col("expected_reason").isNotNull()
    inner, delta = F.col("inner"), F.col("delta")
    return [
        finding(
            CHECKER,
            {
                "int-poll-skip": inner & (delta > 1),
                "int-nonmonotonic-poll": inner & (delta < 1),
                "poll-skip": ~inner & (delta > 1),
                "nonmonotonic-poll": ~inner & (delta < 1),
            },
            reads,
            order="index",
            detail=[*_step_detail("type"), "skipped"],
            expected=expected,
            json_fields=("values",),
        ),
        finding(
            CHECKER,
            {
                "int-send-skip": inner & (delta > 1),
                "int-nonmonotonic-send": inner & (delta < 1),
                "nonmonotonic-send": ~inner & (delta < 1),
            },
            sends,
            order="index",
            detail=_step_detail("status"),
            expected=expected,
            json_fields=("values",),
            allowed=ALLOWED,
        ),
    ]
