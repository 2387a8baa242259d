"""The floor of a Spark check: the least work any check of a history must do, timed.

Issue 18 asks for 10M lines from `history.jsonl` to `results.json` in 60 s on `local[2]`.
This bench times, on one history, the steps that the checkers' design (the per-key pass,
docs/architecture.md) cannot skip, each in its cheapest form:

1. `to_parquet`: history.jsonl to Parquet with the bulk converter (the fastest we have);
2. `spark_start`: a local SparkSession;
3. `ops_scan`: one scan and one aggregation of the operations (what the statistics need at
   least);
4. `pass_input`: the per-key pass's own input (its query: the micro-operations joined with
   their operations' completions and with which indeterminate sends were read), shuffled
   by key and handed to a Python function per partition that only counts the rows: the
   pass without its checks.

Nothing here looks for an anomaly, so the sum is a lower bound for a check of this design,
not an estimate. `--check` also runs the real check on the same Parquet tables: what it
takes beyond the floor is the checks' Python per key and the statistics. Prints one JSON
document.

    .venv/bin/python bench/check_scale.py --lines 10000000 --keep --dir /tmp/s10m
    .venv/bin/python bench/spark_floor.py /tmp/s10m/squall-check-scale-10000000 --check
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from checkers import CheckConfig, SparkSettings, check_history, get_spark
from checkers.key_pass import _prepared  # the pass's input, as it builds it
from histories.bulk_parquet import write_parquet_bulk

GOAL_S = 60.0


def _timed(figures: dict[str, float], name: str, step: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = step()
    figures[name] = round(time.perf_counter() - started, 2)
    return result


def _counted_by_key(frame: DataFrame) -> int:
    """How many rows `frame` has, counted in Python per partition after one shuffle by key
    (the per-key pass's shape, without its checks)."""

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"n": [sum(batch.num_rows for batch in batches)]})

    counted = frame.repartition("key").mapInArrow(count, schema="n long").toArrow()
    return int(sum(counted.column("n").to_pylist()))


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
        assign = spark.read.parquet(str(parquet / "assign.parquet"))
        _timed(
            figures,
            "pass_input",
            lambda: _counted_by_key(_prepared(mops, assign)),
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
