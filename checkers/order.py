"""Ordering: how reads and sends move through each key's log, by dense index (docs/anomalies.md).

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

from checkers.checker import CheckContext
from checkers.evidence import Evidence
from checkers.findings import Finding, finding
from checkers.losses import LossRules
from checkers.results import CheckerReport

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


def _steps(rows: DataFrame, order: tuple[str, ...], counted: Column, position: Column) -> DataFrame:
    """Each row with the `position` of the row before it (same operation: `inner`), and for
    an operation's first row, the last `counted` row's position before it and whether a
    reset came after that one (`follows`)."""
    ordered = Window.partitionBy("process_id", "key").orderBy(*order)
    before = ordered.rowsBetween(Window.unboundedPreceding, -1)
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
            "follows",
            ~F.col("inner")
            & F.col("prev_counted").isNotNull()
            & (F.col("last_reset").isNull() | (F.col("last_reset") < F.col("prev_counted.index"))),
        )
    )


def _index_deltas(evidence: Evidence, steps: DataFrame) -> DataFrame:
    """The steps with a `prev_pos` that are not one position forward, with `delta` in dense
    index.

    Positions are offsets (`pos`), and the dense index is increasing in the offset: a step
    of one offset is one index (never an anomaly) and a step back is a step back, so only
    the remaining steps look up their two indices.
    """
    stepped = steps.filter(
        F.col("pos").isNotNull()
        & F.col("prev_pos").isNotNull()
        & (F.col("pos") - F.col("prev_pos") != 1)
    )
    stepped = evidence.dense_index(stepped, "pos", "didx")
    stepped = evidence.dense_index(stepped, "prev_pos", "prev_didx")
    return stepped.withColumn("delta", F.col("didx") - F.col("prev_didx"))


def _poll_runs(evidence: Evidence) -> DataFrame:
    """Per completed poll micro-op and key: its records as one run, with the first and last
    position (offset at the first and last `poll_seq`) and whether every record sits one
    offset after the one before it (`consecutive`: no step inside the run can be an
    anomaly). Records of one poll are stored together, so this aggregates mostly before
    any shuffle."""
    drift = F.col("offset") - F.col("poll_seq")
    return evidence.reads.groupBy("process_id", "key", "index", "mop_index", "type").agg(
        F.min_by("offset", "poll_seq").alias("first_pos"),
        F.max_by("offset", "poll_seq").alias("last_pos"),
        F.max("poll_seq").alias("last_seq"),
        (F.min(drift) == F.max(drift)).alias("consecutive"),
    )


def _steps_inside_runs(evidence: Evidence, runs: DataFrame) -> DataFrame:
    """Steps between neighbouring records of the polls whose runs are not consecutive."""
    uneven = runs.filter(~F.col("consecutive")).select("index", "mop_index", "key")
    records = evidence.reads.join(F.broadcast(uneven), ["index", "mop_index", "key"], "left_semi")
    in_run = Window.partitionBy("index", "mop_index", "key").orderBy("poll_seq")
    previous = F.lag(F.struct("index", "offset", "value")).over(in_run)
    return records.select(
        "process_id",
        "key",
        "index",
        "type",
        F.col("offset").alias("pos"),
        "offset",
        "value",
        F.lit(True).alias("inner"),
        previous.alias("before"),
        previous.getField("offset").alias("prev_pos"),
    )


def _steps_between_runs(runs: DataFrame, assign: DataFrame) -> DataFrame:
    """Steps into each run from the run before it in the same operation (`inner`), or from
    the end of the process's previous `ok` read of the key (`follows`), without values."""
    rows = runs.select(
        "process_id",
        "key",
        "index",
        "mop_index",
        "type",
        "first_pos",
        F.col("last_pos").alias("pos"),
        F.col("last_seq").alias("seq"),
        F.lit("read").alias("kind"),
    )
    ok_read = (F.col("kind") == "read") & (F.col("type") == "ok")
    end = F.struct("index", "mop_index", "pos", "seq")
    steps = _steps(_with_resets(rows, assign), ("index", "mop_index"), ok_read, end)
    return steps.select(
        "process_id",
        "key",
        "index",
        "type",
        F.col("first_pos").alias("pos"),
        "inner",
        F.col("mop_index").alias("first_mop"),
        F.when(F.col("inner"), F.col("prev"))
        .when(F.col("follows"), F.col("prev_counted"))
        .alias("origin"),
    ).withColumn("prev_pos", F.col("origin.pos"))


def _with_read_values(evidence: Evidence, steps: DataFrame) -> DataFrame:
    """Steps between runs (few: only those that are not one index forward) with the values
    and offsets of their two records, as `offset`, `value` and `before`."""
    wanted = steps.select(
        "key",
        F.col("origin.index").alias("index"),
        F.col("origin.mop_index").alias("mop_index"),
        F.col("origin.seq").alias("poll_seq"),
    ).unionByName(
        steps.select(
            "key", "index", F.col("first_mop").alias("mop_index"), F.lit(0).alias("poll_seq")
        )
    )
    columns = ["key", "index", "mop_index", "poll_seq"]
    found = evidence.keep(
        "uneven_read_records",
        lambda: evidence.reads.join(F.broadcast(wanted.distinct()), columns).select(
            *columns, "offset", "value"
        ),
    )
    earlier = found.select(
        F.col("key").alias("_k"),
        F.col("index").alias("_i"),
        F.col("mop_index").alias("_m"),
        F.col("poll_seq").alias("_s"),
        F.struct("index", "offset", "value").alias("before"),
    )
    later = found.filter(F.col("poll_seq") == 0).select(
        F.col("key").alias("_k"),
        F.col("index").alias("_i"),
        F.col("mop_index").alias("_m"),
        "offset",
        "value",
    )
    with_before = steps.join(
        earlier,
        (F.col("key") == F.col("_k"))
        & (F.col("origin.index") == F.col("_i"))
        & (F.col("origin.mop_index") == F.col("_m"))
        & (F.col("origin.seq") == F.col("_s")),
    ).drop("_k", "_i", "_m", "_s")
    return with_before.join(
        later,
        (F.col("key") == F.col("_k"))
        & (F.col("index") == F.col("_i"))
        & (F.col("first_mop") == F.col("_m")),
    ).drop("_k", "_i", "_m")


def read_steps(evidence: Evidence, assign: DataFrame) -> DataFrame:
    """Every step of a reader that is not one index forward: between neighbouring records of
    a poll, or into a poll's first record of a key from the record before it in the same
    operation (`inner`) or from the end of the process's previous `ok` read of the key
    (`follows`); `delta` in dense index, `before` the earlier record.

    Polls are taken as runs of records (`_poll_runs`): only the few runs whose offsets are
    not consecutive are looked at record by record."""
    runs = _poll_runs(evidence)
    inside = _index_deltas(evidence, _steps_inside_runs(evidence, runs))
    between = _index_deltas(
        evidence,
        _steps_between_runs(runs, assign),
    )
    # Kept: the value look-up reads these few rows three times.
    uneven = evidence.keep("uneven_read_steps", lambda: between.filter(F.col("delta") != 1))
    between = _with_read_values(evidence, uneven)
    columns = ["process_id", "key", "index", "type", "inner", "delta", "offset", "value", "before"]
    return inside.select(*columns).unionByName(between.select(*columns))


def send_steps(evidence: Evidence, assign: DataFrame) -> DataFrame:
    """Every completed send that is not one index after the send before it in its operation
    (`inner`) or, for an `ok`/`info` operation's first send to a key, after the last send of
    the process's previous such operation (`follows`); `delta` in dense index where both
    positions are known. A send's position is its value's first offset in the log."""
    sends = evidence.located_writes.filter(F.col("complete_index").isNotNull()).select(
        "process_id",
        "key",
        F.col("complete_index").alias("index"),
        "mop_index",
        "status",
        F.col("first_offset").alias("pos"),
        "offset",
        "value",
        F.lit("send").alias("kind"),
    )
    counted = (F.col("kind") == "send") & F.col("status").isin("ok", "info")
    position = F.struct("index", "pos", "offset", "value")
    steps = _steps(_with_resets(sends, assign), ("index", "mop_index"), counted, position)
    compared = F.col("inner") | (F.col("follows") & F.col("status").isin("ok", "info"))
    before = F.when(F.col("inner"), F.col("prev")).otherwise(F.col("prev_counted"))
    steps = steps.withColumn("before", F.when(compared, before))
    return _index_deltas(evidence, steps.withColumn("prev_pos", F.col("before.pos")))


def _step_detail(op_status: str) -> list[Column | str]:
    """Between operations: ops, values, offsets of the two; inside one: the op and the pair."""
    inner = F.col("inner")
    before = F.col("before")
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
        back & (F.col("before.value") == F.col("_value")) & (F.col("key") == F.col("_key")),
        "left",
    ).drop("_key", "_value")
    crossing = [
        F.when(
            back
            & (F.col("key") == key)
            & (F.col("before.index") < election)
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


class OrderChecker:
    """The `Checker` of this module."""

    name = CHECKER
    anomalies = ANOMALIES

    def check(self, context: CheckContext) -> CheckerReport:
        return CheckerReport(
            self.name, check_order(context.evidence, context.assign, context.losses)
        )
