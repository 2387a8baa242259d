"""The dense offset index: per key, the distinct offsets that hold any value, numbered from 0.

Kafka offsets may have holes (transaction markers, truncation), so checkers compare
positions by dense index instead: two reads one dense index apart read neighbouring
records. The index is computed once over all evidence rows with a window partitioned by
key (`dense_rank() - 1` over the offset), so every evidence row carries its own `didx`
without a join; rows with the same offset share it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F


def with_dense_index(evidence: DataFrame) -> DataFrame:
    """`evidence` (columns key, offset, ...) plus `didx`, the offset's dense index in its key."""
    by_offset = Window.partitionBy("key").orderBy("offset")
    return evidence.withColumn("didx", F.dense_rank().over(by_offset) - 1)


def value_positions(indexed: DataFrame) -> DataFrame:
    """Per (key, value): first and last dense index and offset, and the offsets holding it."""
    return (
        indexed.groupBy("key", "value")
        .agg(
            F.min("didx").alias("first_idx"),
            F.max("didx").alias("last_idx"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.array_sort(F.collect_set("offset")).alias("offsets"),
        )
        .withColumn("offset_count", F.size("offsets"))
    )


def offset_contents(indexed: DataFrame) -> DataFrame:
    """Per (key, offset): its dense index, the distinct values seen there, how many."""
    return indexed.groupBy("key", "offset").agg(
        F.min("didx").alias("didx"),
        F.array_sort(F.collect_set("value")).alias("values"),
    )


def key_offsets(indexed: DataFrame) -> DataFrame:
    """The dense index itself: distinct (key, offset, didx)."""
    return indexed.select("key", "offset", "didx").distinct()
