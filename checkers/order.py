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
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.evidence import Evidence
from checkers.findings import Finding, finding

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


def _pair(first: Column | str, second: Column | str) -> Column:
    return F.array(
        F.col(first) if isinstance(first, str) else first,
        F.col(second) if isinstance(second, str) else second,
    )


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


def internal_poll_steps(evidence: Evidence) -> DataFrame:
    """Consecutive records of a key inside one poll, with `delta` in dense index."""
    inside = Window.partitionBy("index", "key").orderBy("mop_index", "poll_seq")
    return (
        evidence.indexed_reads.withColumn("prev_idx", F.lag("didx").over(inside))
        .withColumn("prev_offset", F.lag("offset").over(inside))
        .withColumn("prev_value", F.lag("value").over(inside))
        .filter(F.col("prev_idx").isNotNull())
        .withColumn("delta", F.col("didx") - F.col("prev_idx"))
    )


def poll_steps(evidence: Evidence, assign: DataFrame) -> DataFrame:
    """Each completed poll of a key against the process's previous `ok` read of it."""
    position = F.struct("didx", "offset", "value")
    by_record = F.struct("mop_index", "poll_seq")
    per_op = (
        evidence.indexed_reads.groupBy("process_id", "key", "index")
        .agg(
            F.min_by(position, by_record).alias("start"),
            F.max_by(position, by_record).alias("end"),
            F.first("type").alias("type"),
        )
        .withColumn("kind", F.lit("read"))
    )
    pairs = per_op.select("process_id", "key").distinct()
    resets = assignment_resets(assign, pairs).select(
        "process_id",
        "key",
        "index",
        F.lit(None).cast(per_op.schema["start"].dataType).alias("start"),
        F.lit(None).cast(per_op.schema["end"].dataType).alias("end"),
        F.lit(None).cast("string").alias("type"),
        F.lit("reset").alias("kind"),
    )
    rows = per_op.unionByName(resets)
    before = (
        Window.partitionBy("process_id", "key")
        .orderBy("index")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    ok_read = (F.col("kind") == "read") & (F.col("type") == "ok")
    rows = (
        rows.withColumn("prev_index", F.last(F.when(ok_read, F.col("index")), True).over(before))
        .withColumn("prev_end", F.last(F.when(ok_read, F.col("end")), True).over(before))
        .withColumn(
            "last_reset",
            F.last(F.when(F.col("kind") == "reset", F.col("index")), True).over(before),
        )
    )
    return rows.filter(
        (F.col("kind") == "read")
        & F.col("prev_index").isNotNull()
        & (F.col("last_reset").isNull() | (F.col("last_reset") < F.col("prev_index")))
    ).withColumn("delta", F.col("start.didx") - F.col("prev_end.didx"))


def send_steps(evidence: Evidence, assign: DataFrame) -> DataFrame:
    """Each `ok`/`info` send operation's first send to a key against the previous one's last."""
    position = F.struct(F.col("first_idx").alias("didx"), "offset", "value")
    per_op = (
        evidence.indexed_writes.filter(
            F.col("status").isin("ok", "info") & F.col("complete_index").isNotNull()
        )
        .groupBy("process_id", "key", F.col("complete_index").alias("index"))
        .agg(
            F.min_by(position, F.col("mop_index")).alias("start"),
            F.max_by(position, F.col("mop_index")).alias("end"),
        )
        .withColumn("kind", F.lit("send"))
    )
    pairs = per_op.select("process_id", "key").distinct()
    resets = assignment_resets(assign, pairs).select(
        "process_id",
        "key",
        "index",
        F.lit(None).cast(per_op.schema["start"].dataType).alias("start"),
        F.lit(None).cast(per_op.schema["end"].dataType).alias("end"),
        F.lit("reset").alias("kind"),
    )
    ordered = Window.partitionBy("process_id", "key").orderBy("index")
    rows = (
        per_op.unionByName(resets)
        .withColumn("prev_kind", F.lag("kind").over(ordered))
        .withColumn("prev_index", F.lag("index").over(ordered))
        .withColumn("prev_end", F.lag("end").over(ordered))
    )
    return rows.filter(
        (F.col("kind") == "send")
        & (F.col("prev_kind") == "send")
        & F.col("start.didx").isNotNull()
        & F.col("prev_end.didx").isNotNull()
    ).withColumn("delta", F.col("start.didx") - F.col("prev_end.didx"))


def internal_send_steps(evidence: Evidence) -> DataFrame:
    """Consecutive sends to a key inside one completed operation, with `delta`."""
    inside = Window.partitionBy("invoke_index", "key").orderBy("mop_index")
    return (
        evidence.indexed_writes.filter(F.col("complete_index").isNotNull())
        .withColumn("prev_idx", F.lag("first_idx").over(inside))
        .withColumn("prev_value", F.lag("value").over(inside))
        .withColumn("prev_offset", F.lag("offset").over(inside))
        .filter(F.col("prev_idx").isNotNull() & F.col("first_idx").isNotNull())
        .withColumn("delta", F.col("first_idx") - F.col("prev_idx"))
    )


def check_order(evidence: Evidence, assign: DataFrame) -> list[Finding]:
    """The findings of this checker."""
    polls = poll_steps(evidence, assign)
    sends = send_steps(evidence, assign)
    inner_polls = internal_poll_steps(evidence)
    inner_sends = internal_send_steps(evidence)
    between_detail: list[Column | str] = [
        "key",
        F.col("process_id").alias("process"),
        _pair("prev_index", "index").alias("ops"),
        _pair("prev_end.value", "start.value").alias("values"),
        _pair("prev_end.offset", "start.offset").alias("offsets"),
        "delta",
    ]
    inner_poll_detail: list[Column | str] = [
        "key",
        F.col("process_id").alias("process"),
        F.col("index").alias("op"),
        "type",
        _pair("prev_value", "value").alias("values"),
        _pair("prev_offset", "offset").alias("offsets"),
        "delta",
    ]
    inner_send_detail: list[Column | str] = [
        "key",
        F.col("process_id").alias("process"),
        F.col("complete_index").alias("op"),
        "status",
        _pair("prev_value", "value").alias("values"),
        _pair("prev_offset", "offset").alias("offsets"),
        "delta",
    ]
    return [
        finding(
            CHECKER,
            "poll-skip",
            polls.filter(F.col("delta") > 1).withColumn("skipped", F.col("delta") - 1),
            order="index",
            detail=[*between_detail, "skipped"],
            json_fields=("values",),
        ),
        finding(
            CHECKER,
            "nonmonotonic-poll",
            polls.filter(F.col("delta") < 1),
            order="index",
            detail=between_detail,
            json_fields=("values",),
        ),
        finding(
            CHECKER,
            "int-poll-skip",
            inner_polls.filter(F.col("delta") > 1),
            order="index",
            detail=inner_poll_detail,
            json_fields=("values",),
        ),
        finding(
            CHECKER,
            "int-nonmonotonic-poll",
            inner_polls.filter(F.col("delta") < 1),
            order="index",
            detail=inner_poll_detail,
            json_fields=("values",),
        ),
        finding(
            CHECKER,
            "nonmonotonic-send",
            sends.filter(F.col("delta") < 1),
            order="index",
            detail=between_detail,
            json_fields=("values",),
        ),
        finding(
            CHECKER,
            "int-send-skip",
            inner_sends.filter(F.col("delta") > 1),
            order="complete_index",
            detail=inner_send_detail,
            json_fields=("values",),
            allowed=True,
        ),
        finding(
            CHECKER,
            "int-nonmonotonic-send",
            inner_sends.filter(F.col("delta") < 1),
            order="complete_index",
            detail=inner_send_detail,
            json_fields=("values",),
        ),
    ]
