"""What a history says about each key's log: the reads, the writes, and which writes committed.

- reads: every record returned by a completed poll (any completion type), with its offset;
  polls in Kafka return only what the log held, whatever happened to the operation after.
- writes: one row per send micro-op, with the operation's completion (`status` ok, fail
  or info; a send never completed counts as info, `pending`) and the offset if known.
- committed: a write that must have happened: `ok`, or `info` with one of its
  operation's sent values read by an `ok` operation (Jepsen's `must-have-committed?`).
- evidence of what sits at an offset: all reads and the committed writes with an offset,
  kept as distinct (key, offset, value) `contents`; its offsets define the dense index
  (`checkers.dense`), looked up only where a verdict or a sample needs it.

Frames used by several checkers are computed once and kept (`_persist`) until
`release()`. The record-sized ones (reads, sends, writes) are partitioned by key, and every
join and aggregation after them groups by key, so they are shuffled once: later joins on
(value, key) or (offset, key) find both sides already partitioned. Join keys put the
many-valued column first, so the sorts of sort-merge joins compare it, not the few keys.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.dense import look_up, with_dense_index
from checkers.key_log import READ_COLUMNS
from checkers.session import is_connect


class Evidence:
    """Reads, writes, commitment and the dense index of one history, built lazily."""

    def __init__(self, ops: DataFrame, mops: DataFrame) -> None:
        self.ops = ops
        self.mops = mops
        self._persisted: list[DataFrame] = []
        self._kept: dict[str, DataFrame] = {}

    def _persist(self, frame: DataFrame) -> DataFrame:
        """`frame`, computed now and kept in memory (spilling to disk). Its plan becomes a scan
        of the kept rows that knows their partitioning: later plans neither re-analyse its
        lineage nor shuffle it again, and nothing is compressed into a columnar cache."""
        kept = frame.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK_DESER)
        self._persisted.append(kept)
        return kept

    def keep(self, name: str, build: Callable[[], DataFrame]) -> DataFrame:
        """A checker's own frame, built and persisted once under `name`, released with the rest."""
        if name not in self._kept:
            self._kept[name] = self._persist(build())
        return self._kept[name]

    def release(self) -> None:
        """Drop every persisted frame."""
        for frame in self._persisted:
            # The kept rows belong to the plan's RDD, which the DataFrame API does not release.
            # A Spark Connect server releases a frame when its last reference here goes.
            if not is_connect(frame):
                frame._jdf.queryExecution().logical().rdd().unpersist(False)
        self._persisted.clear()
        self._kept.clear()

    @cached_property
    def reads(self) -> DataFrame:
        """Every record read by a completed poll: key, offset, value, and the operation's fields."""
        polls = self.mops.filter(
            (F.col("type") != "invoke") & (F.col("f") == "poll") & F.col("offset").isNotNull()
        )
        return self._persist(
            polls.select(
                "key",
                *(
                    F.coalesce(F.col(name), F.lit(False)).alias(name) if name == "final" else name
                    for name in READ_COLUMNS
                ),
            ).repartition("key")
        )

    @cached_property
    def read_records(self) -> DataFrame:
        """Per (key, offset, value) read by any completed poll: how often an `ok` poll read
        it, the first such reader and the last such read's time (null: no `ok` read)."""
        ok = F.col("type") == "ok"
        return self._persist(
            self.reads.groupBy("key", "offset", "value").agg(
                F.count(F.when(ok, 1)).alias("reads"),
                F.min(F.when(ok, F.col("index"))).alias("first_reader"),
                F.max(F.when(ok, F.col("time"))).alias("last_read_time"),
            )
        )

    @cached_property
    def read_values(self) -> DataFrame:
        """Per (key, value) read by an `ok` operation: how often, first reader, last read time."""
        return (
            self.read_records.filter(F.col("reads") > 0)
            .groupBy("key", "value")
            .agg(
                F.sum("reads").alias("reads"),
                F.min("first_reader").alias("first_reader"),
                F.max("last_read_time").alias("last_read_time"),
            )
        )

    @cached_property
    def sends(self) -> DataFrame:
        """Every send micro-op, invoked or completed."""
        return self._persist(
            self.mops.filter(F.col("f") == "send")
            .select(
                "key",
                "value",
                "offset",
                "type",
                "invoke_index",
                "index",
                "mop_index",
                "process_id",
                "acks",
                "time",
                "op_f",
            )
            .repartition("key")
        )

    @cached_property
    def writes(self) -> DataFrame:
        """One row per send micro-op, with its status, offset, and whether it committed."""
        sends = self.sends
        ok = sends.filter(F.col("type") == "ok").select(
            "key",
            "value",
            "offset",
            F.lit("ok").alias("status"),
            F.lit(False).alias("pending"),
            "invoke_index",
            F.col("index").alias("complete_index"),
            "mop_index",
            "process_id",
            F.col("acks").cast("int").alias("acks"),
            F.col("time").alias("complete_time"),
            "op_f",
        )
        # Operations that did not complete ok (fail, info, never) are few; their completion
        # may carry no value, so their sends come from the invocation. A completion without
        # invoke is its own invocation (its invoke_index is its own index).
        invoked = (F.col("type") == "invoke") | (F.col("invoke_index") == F.col("index"))
        unsettled = F.broadcast(
            self.ops.filter(
                invoked
                & F.col("f").isin("send", "txn")
                & (F.col("complete_type").isNull() | (F.col("complete_type") != "ok"))
            ).select(
                F.col("index").alias("invoke_index"),
                F.col("complete_type").alias("op_type"),
                F.col("complete_index").alias("op_complete_index"),
                (F.col("time") + F.col("latency_ns")).alias("op_complete_time"),
            )
        )
        reported = sends.filter(F.col("type").isin("fail", "info")).select(
            "invoke_index",
            "mop_index",
            F.col("value").alias("done_value"),
            F.col("offset").alias("done_offset"),
            F.col("acks").alias("done_acks"),
        )
        others = (
            sends.filter(invoked)
            .join(unsettled, "invoke_index")
            .join(reported, ["invoke_index", "mop_index"], "left")
            .select(
                "key",
                F.coalesce("done_value", "value").alias("value"),
                F.col("done_offset").alias("offset"),
                F.coalesce("op_type", F.lit("info")).alias("status"),
                F.col("op_type").isNull().alias("pending"),
                "invoke_index",
                F.col("op_complete_index").alias("complete_index"),
                "mop_index",
                "process_id",
                F.coalesce("done_acks", "acks").cast("int").alias("acks"),
                F.col("op_complete_time").alias("complete_time"),
                "op_f",
            )
            .repartition("key")  # few rows; the union then keeps the partitioning by key
        )
        writes = ok.unionByName(others)
        read = self.read_values.select(
            "key", "value", "reads", "last_read_time", "first_reader", F.lit(True).alias("was_read")
        )
        writes = self._persist(
            writes.join(read, ["value", "key"], "left").withColumn(
                "was_read", F.coalesce(F.col("was_read"), F.lit(False))
            )
        )
        # Read from the persisted frame: the join with the reads runs once.
        seen_ops = F.broadcast(
            writes.filter((F.col("status") == "info") & F.col("was_read"))
            .select("invoke_index")
            .distinct()
            .withColumn("op_seen", F.lit(True))
        )
        writes = writes.join(seen_ops, "invoke_index", "left").withColumn(
            "committed",
            (F.col("status") == "ok")
            | ((F.col("status") == "info") & F.coalesce(F.col("op_seen"), F.lit(False))),
        )
        return self._persist(writes.drop("op_seen"))

    @cached_property
    def contents(self) -> DataFrame:
        """Distinct (key, offset, value) of the evidence: what each offset was seen holding."""
        committed = self.writes.filter(F.col("committed") & F.col("offset").isNotNull())
        seen = self.read_records.select("key", "offset", "value").unionByName(
            committed.select("key", "offset", "value")
        )
        return self._persist(seen.distinct())

    @cached_property
    def offset_index(self) -> DataFrame:
        """Per (key, offset) in the evidence: its dense index `didx`, and `value_count`, how
        many distinct values were seen there."""
        per_offset = self.contents.groupBy("key", "offset").agg(
            F.count(F.lit(1)).alias("value_count")
        )
        return self._persist(with_dense_index(per_offset))

    def dense_index(self, rows: DataFrame, offset: str, into: str) -> DataFrame:
        """`rows` (with `key`) plus `into`, the dense index of their `offset` column."""
        return look_up(rows, self.offset_index, offset, into)

    @cached_property
    def values(self) -> DataFrame:
        """Per (key, value) in the evidence: first and last offset, at how many offsets."""
        return self.contents.groupBy("key", "value").agg(
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.count(F.lit(1)).alias("offset_count"),
        )

    def offsets_of(self, values: DataFrame) -> DataFrame:
        """Per (key, value) of `values`: the sorted offsets holding it (for samples)."""
        return self._listed(values, "value", "offset", "offsets")

    def values_at(self, offsets: DataFrame) -> DataFrame:
        """Per (key, offset) of `offsets`: the sorted distinct values seen there (for samples)."""
        return self._listed(offsets, "offset", "value", "values")

    def sends_of(self, values: DataFrame) -> DataFrame:
        """Per (key, value) of `values` that some send micro-op sent: its send operations
        in history order, as `sends` (for evidence): `invoke_index`, `index` (the
        completion's; absent while pending), `type` (ok, fail or info), `error`, and the
        `offset` the completion reported."""
        writes = self.writes.join(values.select("key", "value"), ["value", "key"], "left_semi")
        # Only the completions of these sends: few rows, so the ops are scanned, not shuffled.
        completions = F.broadcast(
            writes.filter(F.col("complete_index").isNotNull()).select(
                F.col("complete_index").alias("index")
            )
        )
        errors = (
            self.ops.filter((F.col("type") != "invoke") & F.col("error").isNotNull())
            .join(completions, "index", "left_semi")
            .select(F.col("index").alias("complete_index"), "error")
        )
        send = F.struct(
            "invoke_index",
            F.col("complete_index").alias("index"),
            F.col("status").alias("type"),
            "error",
            "offset",
            F.when(F.col("pending"), F.lit(True)).alias("pending"),
        )
        return (
            writes.join(errors, "complete_index", "left")
            .groupBy("key", "value")
            .agg(F.array_sort(F.collect_list(send)).alias("sends"))
        )

    def _listed(self, rows: DataFrame, by: str, listed: str, into: str) -> DataFrame:
        """Per (key, `by`) of `rows`: the sorted `listed` of the contents, as `into`."""
        return (
            self.contents.join(rows.select("key", by), [by, "key"], "left_semi")
            .groupBy("key", by)
            .agg(F.array_sort(F.collect_list(listed)).alias(into))
        )

    @cached_property
    def located_writes(self) -> DataFrame:
        """The writes with their value's first and last offset (null: not in the log)."""
        positions = self.values.select("key", "value", "first_offset", "last_offset")
        return self._persist(self.writes.join(positions, ["value", "key"], "left"))

    @cached_property
    def read_bounds(self) -> DataFrame:
        """Per key: the highest offset an `ok` read reached."""
        return (
            self.reads.filter(F.col("type") == "ok")
            .groupBy("key")
            .agg(F.max("offset").alias("max_read_offset"))
        )
