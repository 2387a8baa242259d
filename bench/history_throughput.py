"""History throughput: writer (a flush to the OS per line), reader, and Parquet conversion.

Writes a synthetic Kafka-workload history (10 concurrent clients, sends and polls over 8
keys, polls reading ~4 records, 1% indeterminate completions, a nemesis event every 1000
operations) with `HistoryWriter`, reads it back with `read_history` and `iter_history`, and
converts it with `write_parquet` (reporting the peak memory, which stays flat however long
the history: it streams). Prints one JSON line per measurement, then a table.

    .venv/bin/python bench/history_throughput.py [--ops 1000000] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import timeit
from collections import defaultdict
from pathlib import Path
from typing import Any

from histories import HistoryWriter, Operation, iter_history, read_history


def write_synthetic(path: Path, ops: int, seed: int = 7) -> float:
    """Write a history of `ops` operations; return the seconds spent inside the writer."""
    rng = random.Random(seed)
    keys = [f"t-{i}" for i in range(8)]
    log: dict[str, list[int]] = defaultdict(list)  # key -> values at offsets 0, 1, ...
    read_upto: dict[int, dict[str, int]] = defaultdict(dict)
    outstanding: dict[int, Operation] = {}
    processes = list(range(10))
    next_process = 10
    next_value = 0
    clock = time.perf_counter
    spent = 0.0
    with HistoryWriter(path) as writer:
        while writer.next_index < ops:
            if writer.next_index % 1000 == 999:
                started = clock()
                writer.event("kill", {"n2": "killed"})
                spent += clock() - started
                continue
            slot = rng.randrange(len(processes))
            process = processes[slot]
            invoke = outstanding.pop(process, None)
            value: Any
            if invoke is None:
                if rng.random() < 0.5:
                    next_value += 1
                    value = [["send", rng.choice(keys), next_value]]
                    started = clock()
                    outstanding[process] = writer.invoke(process, "send", value, acks=-1)
                else:
                    started = clock()
                    outstanding[process] = writer.invoke(process, "poll", [["poll"]])
            elif rng.random() < 0.01:
                started = clock()
                writer.complete(invoke, "info", invoke.value, error="timeout")
                processes[slot] = next_process
                next_process += 1
            elif invoke.f == "send":
                _, key, sent = invoke.value[0]
                log[key].append(sent)
                value = [["send", key, [len(log[key]) - 1, sent]]]
                started = clock()
                writer.complete(invoke, "ok", value)
            else:
                results: dict[str, list[list[int]]] = {}
                for key in rng.sample(keys, 2):
                    start = read_upto[process].get(key, 0)
                    end = min(len(log[key]), start + 2)
                    results[key] = [[offset, log[key][offset]] for offset in range(start, end)]
                    read_upto[process][key] = end
                started = clock()
                writer.complete(invoke, "ok", [["poll", results]])
            spent += clock() - started
    return spent


def measure(name: str, ops: int, seconds: float, **extra: Any) -> dict[str, Any]:
    result = {"measure": name, "ops": ops, "seconds": round(seconds, 3)}
    result["ops_per_sec"] = round(ops / seconds)
    result.update(extra)
    print(json.dumps(result), flush=True)
    return result


_CONVERT = """
import json, resource, sys, time
from histories import write_parquet
started = time.perf_counter()
summary = write_parquet(sys.argv[1], sys.argv[2])
print(json.dumps({"ops": summary.ops, "mops": summary.mops, "events": summary.events,
                  "seconds": time.perf_counter() - started,
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))
"""


def _loads_us() -> float:
    """A yardstick for comparing figures across machines."""
    line = (
        b'{"index":1,"time":113994,"process":0,"type":"ok","f":"send",'
        b'"value":[["send","t-0",[0,1]]],"acks":-1}'
    )
    return timeit.timeit(lambda: json.loads(line), number=100_000) * 10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="squall-history-bench-", dir=args.dir) as tmp:
        path = Path(tmp) / "history.jsonl"
        started = time.perf_counter()
        spent = write_synthetic(path, args.ops)
        print(f"(generating and writing took {time.perf_counter() - started:.1f} s)", flush=True)
        size = path.stat().st_size
        results.append(measure("writer", args.ops, spent, bytes=size))

        # In a fresh interpreter, so that its peak memory is the conversion's own.
        child = subprocess.run(
            [sys.executable, "-c", _CONVERT, str(path), str(Path(tmp) / "history.parquet")],
            capture_output=True,
            text=True,
            check=True,
        )
        converted = json.loads(child.stdout)
        results.append(
            measure(
                "write_parquet",
                converted["ops"],
                converted["seconds"],
                mops=converted["mops"],
                events=converted["events"],
                peak_rss_mb=converted["peak_rss_mb"],
            )
        )

        started = time.perf_counter()
        count = sum(1 for _ in iter_history(path))
        results.append(measure("iter_history", count, time.perf_counter() - started))

        started = time.perf_counter()
        count = len(read_history(path))
        results.append(measure("read_history", count, time.perf_counter() - started))
    print(f"\nsynthetic history: {args.ops:,} operations, {size / 1e6:.1f} MB")
    print(f"this machine: json.loads of one 120-byte history line takes {_loads_us():.1f} us")
    print(f"{'measure':<14} {'ops/s':>10} {'seconds':>8}")
    for r in results:
        print(f"{r['measure']:<14} {r['ops_per_sec']:>10,} {r['seconds']:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
