"""Anomalies as data: every checker returns its findings as DataFrames of one shape.

A finding frame has one row per anomaly: `checker`, `anomaly` (the docs/anomalies.md name),
`key`, `order` (a long that orders samples: an operation index or an offset), `expected`
(an allowed loss, see `checkers.losses`), and `detail`, the anomaly's fields as JSON text.
Fields holding history values (JSON text in Parquet) are named in `json_fields` and decoded
when samples are collected, so `"value": 17` reads as in the history.

The per-key pass (`checkers.key_pass`) counts and samples its findings as it finds them:
its `Finding`s carry those `SampledRows` instead of a frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

FINDING_COLUMNS = ("checker", "anomaly", "key", "order", "expected", "detail")


FindingSlot = tuple[str, str, bool]
"""checker, anomaly, expected: what findings are counted and sampled by."""


def sample_order(order: int | None, key: str, detail: str) -> tuple[bool, int, str, str]:
    """Where a finding stands among its type's samples: as Spark orders the frames'
    (`order`, `key`, `detail`, ascending, nulls first)."""
    return (order is not None, order or 0, key, detail)


@dataclass(frozen=True)
class SampledRows:
    """Findings of one slot already counted: the complete `count`, and the first rows in
    sample order as (order, key, detail JSON), at least as many as are sampled."""

    count: int
    rows: tuple[tuple[int | None, str, str], ...]


@dataclass(frozen=True)
class Finding:
    """Anomaly types found (or looked for) by one checker: in one frame, or counted and
    sampled already (`sampled`, by (anomaly, expected); `frame` None)."""

    checker: str
    anomalies: tuple[str, ...]
    frame: DataFrame | None
    json_fields: tuple[str, ...] = ()
    allowed: frozenset[str] = frozenset()
    sampled: Mapping[tuple[str, bool], SampledRows] | None = None


def finding(
    checker: str,
    anomaly: str | Mapping[str, Column],
    rows: DataFrame,
    *,
    order: Column | str,
    detail: Sequence[Column | str],
    expected: Column | None = None,
    json_fields: Sequence[str] = ("value",),
    allowed: Iterable[str] = (),
) -> Finding:
    """Shape `rows` into a finding frame; `detail` columns become JSON (nulls left out).

    `anomaly` is a type name (every row is one), or types with the condition that makes a
    row one of them (the first that holds; rows matching none are dropped): one frame for
    several types computes what they share once.
    """
    fields = [F.col(item) if isinstance(item, str) else item for item in detail]
    if expected is None:
        expected_column = F.lit(False)
    else:
        # `rows` then carries `expected_reason`, saying which allowance applies.
        expected_column = F.coalesce(expected, F.lit(False))
        fields.append(F.when(expected_column, F.col("expected_reason")).alias("expected_because"))
    if isinstance(anomaly, str):
        names: tuple[str, ...] = (anomaly,)
        kind = F.lit(anomaly)
    else:
        names = tuple(anomaly)
        cases = iter(anomaly.items())
        first, condition = next(cases)
        kind = F.when(condition, F.lit(first))
        for name, condition in cases:
            kind = kind.when(condition, F.lit(name))
        rows = rows.withColumn("_anomaly", kind).filter(F.col("_anomaly").isNotNull())
        kind = F.col("_anomaly")
    frame = rows.select(
        F.lit(checker).alias("checker"),
        kind.alias("anomaly"),
        F.col("key").cast("string").alias("key"),
        (F.col(order) if isinstance(order, str) else order).cast("long").alias("order"),
        expected_column.alias("expected"),
        F.to_json(F.struct(*fields)).alias("detail"),
    )
    return Finding(checker, names, frame, tuple(json_fields), frozenset(allowed))
