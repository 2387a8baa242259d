"""The floor of a Spark check: the least work any check of a history must do, timed.

Issue 6 asks for 10M lines from `history.jsonl` to `results.json` in 60 s on `local[2]`.
This bench times, on one history, the steps that no Spark check of docs/anomalies.md's anomalies
can skip, each in its cheapest form:

1. `to_parquet`: history.jsonl to Parquet with the bulk converter (the fastest we have);
2. `spark_start`: a local SparkSession;
3. `ops_scan`: one scan and one aggregation of the operations (what counts and latency
   statistics need at least);
4. `records_by_key`: the records (every send micro-op and every record read), with only
   the six columns every check compares (key, offset, value, process, index, type),
   brought together by key: one shuffle, kept in memory;
5. `dense_index`: each key's distinct offsets numbered in order (the dense index docs/anomalies.md
   compares positions by: one aggregation and one sort of the distinct offsets);
6. `by_process`: one sort of each key's records by process and operation (what the
   order checks need at least).

Nothing here looks for an anomaly, so the sum is a lower bound for a check built of Spark
DataFrame operations, not an estimate. `--check` also runs the real check on the same
Parquet tables for comparison. Prints one JSON document.

    .venv/bin/python bench/check_scale.py --lines 10000000 --keep --dir /tmp/s10m
    .venv/bin/python bench/spark_floor.py /tmp/s10m/squall-check-scale-10000000 --check
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checkers import CheckConfig, SparkSettings, check_history, get_spark
from histories.bulk_parquet import write_parquet_bulk

GOAL_S = 60.0


def _timed(figures: dict[str, float], name: str, step: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = step()
    figures[name] = round(time.perf_counter() - started, 2)
    return result


def _backward_steps(rows: DataFrame, by: list[str], order: list[str]) -> int:
    """How many rows sit at a lower offset than the row before them in `order` (forces the
    sort: the count depends on it)."""
    ordered = Window.partitionBy(*by).orderBy(*order)
    return int(
        rows.withColumn("_previous", F.lag("offset").over(ordered))
        .filter(F.col("_previous") > F.col("offset"))
        .count()
    )


def _dense_index_total(rows: DataFrame) -> int:
    """The sum of the dense indices of every key's distinct offsets (forces the numbering)."""
    offsets = rows.filter(F.col("offset").isNotNull()).select("key", "offset").distinct()
    numbered = offsets.withColumn(
        "didx", F.row_number().over(Window.partitionBy("key").orderBy("offset")) - 1
    )
    return int(numbered.select(F.sum("didx")).collect()[0][0] or 0)


def floor(history: Path, spark_settings: SparkSettings, *, check: bool) -> dict[str, Any]:
    """Time each unavoidable step on `history`; with `check`, the real check too."""
    figures: dict[str, float] = {}
    workdir = Path(tempfile.mkdtemp(prefix="squall-floor-"))
    try:
        parquet = workdir / "history.parquet"
        _timed(figures, "to_parquet", lambda: write_parquet_bulk(history, parquet))
        spark: SparkSession = _timed(figures, "spark_start", lambda: get_spark(spark_settings))
        ops = spark.read.parquet(str(parquet / "ops.parquet"))
        mops = spark.read.parquet(str(parquet / "mops.parquet"))
        _timed(
            figures,
            "ops_scan",
            lambda: ops.groupBy("f", "type").agg(F.count(F.lit(1)), F.max("latency_ns")).collect(),
        )
        records = mops.filter((F.col("f") == "send") | F.col("offset").isNotNull()).select(
            "key", "offset", "value", "process_id", "index", "type"
        )
        by_key = _timed(
            figures,
            "records_by_key",
            lambda: records.repartition("key").localCheckpoint(
                eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK_DESER
            ),
        )
        _timed(figures, "dense_index", lambda: _dense_index_total(by_key))
        _timed(
            figures,
            "by_process",
            lambda: _backward_steps(by_key, ["key", "process_id"], ["index"]),
        )
        out: dict[str, Any] = {"history": str(history), "seconds": figures}
        out["floor_s"] = round(sum(figures.values()), 2)
        out["goal_s"] = GOAL_S
        if check:
            started = time.perf_counter()
            check_history(parquet, config=CheckConfig(sample=5))
            out["check_s"] = round(time.perf_counter() - started, 2)
            out["check_end_to_end_s"] = round(
                figures["to_parquet"] + figures["spark_start"] + out["check_s"], 2
            )
        return out
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "run", type=Path, help="a run directory with history.jsonl, or a history.jsonl"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--check", action="store_true", help="run the real check too")
    args = parser.parse_args()
    history = args.run / "history.jsonl" if args.run.is_dir() else args.run
    if not history.is_file():
        parser.error(
            f"{history}: no history.jsonl there; make one with bench/check_scale.py --keep"
        )
    settings = SparkSettings(master=args.master, driver_memory=args.driver_memory)
    print(json.dumps(floor(history, settings, check=args.check), indent=2))


if __name__ == "__main__":
    main()
