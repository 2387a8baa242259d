"""Bulk Parquet conversion: seconds, lines/s and peak memory of `write_parquet_bulk`.

Converts a `history.jsonl` into a `history.parquet/` with the bulk converter and, with
`--exact`, with the exact one too, then checks that the two wrote the same tables. Each
converter runs in a process of its own, so that its peak RSS is its own. Prints one JSON
document (CPU seconds too: on a busy machine they say more than wall-clock seconds).

    .venv/bin/python bench/bulk_parquet.py /tmp/bulk10m/history.jsonl [--exact]
    .venv/bin/python bench/bulk_parquet.py /tmp/h.jsonl --generate 10000000   # make it first
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from histories import read_parquet_tables, write_parquet
from histories.bulk_parquet import write_parquet_bulk


def measure(converter: str, source: Path, out: Path) -> dict[str, Any]:
    """Run one converter in this process and measure it."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    figures: dict[str, Any] = {}
    if converter == "bulk":
        outcome = write_parquet_bulk(source, out)
        summary = outcome.summary
        figures.update(fallback=outcome.fallback, per_line=outcome.per_line)
    else:
        summary = write_parquet(source, out)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    lines = summary.ops if summary is not None else 0
    figures.update(
        seconds=round(seconds, 2),
        cpu_seconds=round(
            after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2
        ),
        lines_per_s=round(lines / seconds),
        peak_rss_mb=round(after.ru_maxrss / 1024),
        rows=None if summary is None else {
            "ops": summary.ops, "mops": summary.mops, "events": summary.events,
            "assign": summary.assign,
        },
    )  # fmt: skip
    return figures


def in_child(converter: str, source: Path, out: Path) -> dict[str, Any]:
    """`measure` in a fresh Python process."""
    done = subprocess.run(
        [sys.executable, __file__, str(source), "--measure", converter, "--out", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def generate(path: Path, lines: int, seed: int) -> None:
    """A synthetic history of about `lines` lines, as bench/check_scale.py makes them."""
    from check_scale import SyntheticHistory  # type: ignore[import-not-found]

    path.parent.mkdir(parents=True, exist_ok=True)
    SyntheticHistory(path, lines, seed).run(3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history", type=Path, help="a history.jsonl")
    parser.add_argument("--exact", action="store_true", help="also time write_parquet")
    parser.add_argument("--out", type=Path, help="output directory (default: beside it)")
    parser.add_argument("--generate", type=int, metavar="LINES", help="write the history first")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--measure", choices=("bulk", "exact"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    out: Path = args.out or args.history.with_name("history.parquet")
    if args.measure:
        print(json.dumps(measure(args.measure, args.history, out)))
        return
    if args.generate:
        generate(args.history, args.generate, args.seed)
    report: dict[str, Any] = {
        "history": str(args.history),
        "bytes": args.history.stat().st_size,
        "bulk": in_child("bulk", args.history, out / "bulk"),
    }
    if args.exact:
        report["exact"] = in_child("exact", args.history, out / "exact")
        report["speedup"] = round(report["exact"]["seconds"] / report["bulk"]["seconds"], 1)
        if report["bulk"]["fallback"] is None:
            bulk, exact = read_parquet_tables(out / "bulk"), read_parquet_tables(out / "exact")
            report["same_tables"] = all(
                bulk[name].equals(exact[name], check_metadata=True) for name in exact
            )
    shutil.rmtree(out, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
