"""Throughput of the storage engine: appends (with and without fsync per batch) and reads.

Prints one JSON line per case. Batches (RecordBatch v2) are encoded before timing starts
(encoding is the producer's work); an append still checks each batch's CRC-32C and decodes
every record, as a leader does, and assigns the offsets.

    .venv/bin/python bench/log_throughput.py --records 200000 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

from system_under_test.config import NEVER
from system_under_test.log import Log, LogConfig
from system_under_test.log.record import encode_records

MB = 1_000_000


def make_batches(args: argparse.Namespace) -> list[bytearray]:
    """A few distinct batches, cycled through (append rewrites their offsets in place)."""
    batches = []
    for b in range(8):
        value = bytes([65 + b]) * args.value_size
        items = [(None, value, 1_700_000_000_000 + i) for i in range(args.batch)]
        batches.append(bytearray(encode_records(items)))
    return batches


def record_bytes(args: argparse.Namespace) -> int:
    """Bytes per record on disk, the batch header shared out."""
    items = [(None, b"v" * args.value_size, 1_700_000_000_000 + i) for i in range(args.batch)]
    return len(encode_records(items)) // args.batch


def open_log(directory: Path, config: LogConfig) -> Log:
    return Log.open(directory, config, recovery_point=0, clean_shutdown=True)


def run_appends(log: Log, batches: list[bytearray], count: int) -> float:
    start = time.perf_counter()
    for i in range(count):
        log.append(batches[i % len(batches)])
    return time.perf_counter() - start


def report(case: str, records: int, record_bytes: int, seconds: float, **extra: object) -> None:
    line = {
        "case": case,
        "records": records,
        "record_bytes": record_bytes,
        "seconds": round(seconds, 4),
        "records_per_s": round(records / seconds),
        "mb_per_s": round(records * record_bytes / seconds / MB, 1),
        **extra,
    }
    print(json.dumps(line), flush=True)


def bench_append(args: argparse.Namespace, root: Path, *, fsync: bool) -> Log:
    config = LogConfig(
        segment_bytes=args.segment_bytes, flush_messages=args.batch if fsync else NEVER
    )
    name = "append-fsync" if fsync else "append"
    log = open_log(root / f"{name}-0", config)
    count = max(1, (args.fsync_records if fsync else args.records) // args.batch)
    seconds = run_appends(log, make_batches(args), count)
    report(
        name,
        count * args.batch,
        record_bytes(args),
        seconds,
        batch_records=args.batch,
        segments=len(log.segments),
        fsync_per_batch=fsync,
    )
    return log


def profile_append(args: argparse.Namespace, root: Path) -> None:
    """cProfile one append run (not timed: profiling slows Python code down) to stderr."""
    log = open_log(root / "profile-0", LogConfig(segment_bytes=args.segment_bytes))
    batches = make_batches(args)
    profiler = cProfile.Profile()
    profiler.enable()
    run_appends(log, batches, max(1, args.records // args.batch))
    profiler.disable()
    log.close()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
    print(out.getvalue(), file=sys.stderr)


def bench_read(args: argparse.Namespace, log: Log) -> None:
    batch_bytes = len(make_batches(args)[0])  # every appended batch has this size
    offset, end, fetches = log.log_start_offset, log.log_end_offset, 0
    start = time.perf_counter()
    while offset < end:
        fetched = log.read(offset, args.max_bytes)
        # Batches have one size here, so the next offset needs no decoding.
        offset += len(fetched.records) // batch_bytes * args.batch
        fetches += 1
    seconds = time.perf_counter() - start
    report("read", end, record_bytes(args), seconds, max_bytes=args.max_bytes, fetches=fetches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--records", type=int, default=200_000, help="records to append without fsync"
    )
    parser.add_argument(
        "--fsync-records",
        type=int,
        default=50_000,
        help="records to append with an fsync per batch",
    )
    parser.add_argument("--value-size", type=int, default=1024, help="bytes of each record's value")
    parser.add_argument("--batch", type=int, default=500, help="records per append")
    parser.add_argument("--max-bytes", type=int, default=1 << 20, help="max_bytes of each read")
    parser.add_argument("--segment-bytes", type=int, default=1 << 30, help="segment.bytes")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the append path to stderr")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        log = bench_append(args, root, fsync=False)
        bench_read(args, log)
        log.close()
        bench_append(args, root, fsync=True).close()
        if args.profile:
            profile_append(args, root)


if __name__ == "__main__":
    main()
