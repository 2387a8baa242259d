"""Anomalies as data: every checker returns its findings as DataFrames of one shape.

A finding frame has one row per anomaly: `checker`, `anomaly` (the HISTORY.md name),
`key`, `order` (a long that orders samples: an operation index or an offset), `expected`
(an allowed loss, see `checkers.losses`), and `detail`, the anomaly's fields as JSON text.
Fields holding history values (JSON text in Parquet) are named in `json_fields` and decoded
when samples are collected, so `"value": 17` reads as in the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

FINDING_COLUMNS = ("checker", "anomaly", "key", "order", "expected", "detail")


@dataclass(frozen=True)
class Finding:
    """One anomaly type found (or looked for) by one checker."""

    checker: str
    anomaly: str
    frame: DataFrame
    json_fields: tuple[str, ...] = ()
    allowed: bool = False


def finding(
    checker: str,
    anomaly: str,
    rows: DataFrame,
    *,
    order: Column | str,
    detail: Sequence[Column | str],
    expected: Column | None = None,
    json_fields: Sequence[str] = ("value",),
    allowed: bool = False,
) -> Finding:
    """Shape `rows` (one per anomaly) into a finding frame; `detail` columns become JSON."""
    fields = [F.col(item) if isinstance(item, str) else item for item in detail]
    if expected is None:
        expected_column = F.lit(False)
    else:
        # `rows` then carries `expected_reason`, saying which allowance applies.
        expected_column = F.coalesce(expected, F.lit(False))
        fields.append(F.when(expected_column, F.col("expected_reason")).alias("expected_because"))
    frame = rows.select(
        F.lit(checker).alias("checker"),
        F.lit(anomaly).alias("anomaly"),
        F.col("key").cast("string").alias("key"),
        (F.col(order) if isinstance(order, str) else order).cast("long").alias("order"),
        expected_column.alias("expected"),
        F.to_json(F.struct(*fields)).alias("detail"),
    )
    return Finding(checker, anomaly, frame, tuple(json_fields), allowed)
