"""The per-key pass's cost per key, against its floor: where a key's milliseconds go.

A history over many keys costs the per-key pass (`checkers.key_pass`) a fixed amount of
Python per key, whatever the key's size (issue 34). This bench builds the pass's input of
a history as the check does (one Spark job), then, in this process and without Spark, runs
the pass's function on every key one after the other and times its parts per key:

- `floor`: the least any per-key Python does (pick the key's rows out of the table and
  hand them to pandas), the per-key floor a faster design is measured against;
- `key_log`: building the key's `KeyLog`;
- `losses`: the key's unclean-election and power losses (`KeyLosses`);
- one figure per per-key checker (`check_key`);
- `function`: the whole function of the pass, as a task runs it (with sampling and causes).

Prints one JSON document (milliseconds per key; the quartiles of the keys' rows).

    .venv/bin/python bench/check_scale.py --lines 200000 --shape jepsen --keys 2000 --keep
    .venv/bin/python bench/key_pass_cost.py /tmp/squall-check-scale-200000-jepsen-2000
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from checkers import SparkSettings, get_spark
from checkers.config import find_test_settings
from checkers.disk_faults import disk_faults
from checkers.events import collect_events
from checkers.key_log import KeyLog
from checkers.key_pass import (
    KeyCheck,
    _key_function,
    _prepared,
    shared_facts,
    told_operations,
)
from checkers.load import load_history
from checkers.losses import KeyLosses, LossRules
from checkers.power_losses import key_power_lost, power_losses
from checkers.registry import REGISTRY
from checkers.unclean import key_unclean_lost


def key_tables(table: pa.Table) -> list[pa.Table]:
    """Each key's rows of the pass's input, keys in order of first appearance."""
    column = table.column("key")
    return [table.filter(pc.equal(column, key)) for key in pc.unique(column).to_pylist()]


def cost(run: Path, master: str, sample: int, limit: int | None = None) -> dict[str, Any]:
    """Milliseconds per key of the pass's parts on the history of `run` (its first `limit`
    keys)."""
    spark = get_spark(SparkSettings(master=master))
    loaded = load_history(spark, run)
    settings = find_test_settings(loaded.location.run_dir)
    events = collect_events(loaded.events)
    rules = replace(
        LossRules(settings, frozenset()),
        power_losses=power_losses(events.nemesis, settings.brokers),
        disk_faults=disk_faults(events.nemesis, settings.brokers),
    )
    shared = shared_facts(loaded.ops, loaded.mops, loaded.assign)
    told = None
    if shared.told is None:
        told = told_operations(loaded.ops).withColumn(
            "op_seen", F.col("invoke_index").isin(*shared.seen)
        )
    keys = key_tables(_prepared(loaded.mops, loaded.assign, told).toArrow())[:limit]
    checks = [check for check in REGISTRY if isinstance(check, KeyCheck)]
    function = _key_function(checks, rules, shared, events.replication, sample)

    spent: dict[str, float] = defaultdict(float)

    def timed(part: str, started: float) -> float:
        now = time.perf_counter()
        spent[part] += now - started
        return now

    for rows in keys:
        key = rows.column("key")[0].as_py()
        at = time.perf_counter()
        rows.drop_columns(["key"]).to_pandas()
        at = timed("floor", at)
        log = KeyLog(key, rows, shared, events.replication.get(key, []))
        at = timed("key_log", at)
        losses = KeyLosses(
            rules, key_unclean_lost(log), key_power_lost(log, rules.power_losses, rules.settings)
        )
        at = timed("losses", at)
        for check in checks:
            list(check.check_key(log, losses))
            at = timed(check.name, at)
        function(rows)
        timed("function", at)
    count = len(keys)
    return {
        "history": str(run),
        "keys": count,
        "ms_per_key": {part: round(1000 * s / max(count, 1), 2) for part, s in spent.items()},
        "function_s": round(spent["function"], 2),
        "rows_per_key_quartiles": [
            round(statistics.quantiles([rows.num_rows for rows in keys], n=4)[i]) for i in range(3)
        ]
        if len(keys) > 1
        else [],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run directory (bench/check_scale.py --keep)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--sample", type=int, default=100_000, help="as check_scale.py samples")
    parser.add_argument("--limit", type=int, default=None, help="time only the first N keys")
    args = parser.parse_args()
    print(json.dumps(cost(args.run, args.master, args.sample, args.limit), indent=2))


if __name__ == "__main__":
    main()
