"""The dense offset index: per key, the distinct offsets that hold any value, numbered from 0.

Kafka offsets may have holes (transaction markers, truncation), so checkers compare
positions by dense index instead: two reads one dense index apart read neighbouring
records. The index numbers the distinct offsets of the evidence once (a window per key
over distinct offsets, not over every record), and is looked up only where a verdict or a
sample needs it. The index is strictly increasing in the offset and both offsets of a
comparison are in it, so offsets alone decide most comparisons: one offset apart is one
index apart, and at or before is at or before. Only a step of two offsets or more needs
the index, to tell a skip from a hole.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F


def with_dense_index(offsets: DataFrame) -> DataFrame:
    """Distinct `offsets` (columns key, offset, ...) plus `didx`, the offset's dense index."""
    by_offset = Window.partitionBy("key").orderBy("offset")
    return offsets.withColumn("didx", F.row_number().over(by_offset) - 1)


def look_up(rows: DataFrame, index: DataFrame, offset: str, into: str) -> DataFrame:
    """`rows` (with `key`) plus `into`, the dense index of their `offset` column (null: none)."""
    found = index.select(
        F.col("key").alias("_lookup_key"),
        F.col("offset").alias("_lookup_offset"),
        F.col("didx").alias(into),
    )
    matches = (F.col(offset) == F.col("_lookup_offset")) & (F.col("key") == F.col("_lookup_key"))
    return rows.join(found, matches, "left").drop("_lookup_key", "_lookup_offset")
