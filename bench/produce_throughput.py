"""Producer throughput and latency against a standalone broker, via `squall perf produce`.

Starts one broker process, then runs the perf tool (a separate process, as a user would) for
each acks and mode; prints one JSON line per case and a table. 1 KB records, one partition.

    .venv/bin/python bench/produce_throughput.py [--records 200000] [--sync-records 20000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from squall.cluster.broker_process import BrokerProcess
from system_under_test.client import AdminClient


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000, help="records per async case")
    parser.add_argument("--sync-records", type=int, default=20_000, help="records per sync case")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument(
        "--flush-every", type=int, default=0, help="log.flush.interval.messages; 0 = never"
    )
    args = parser.parse_args()

    results = []
    with tempfile.TemporaryDirectory(prefix="squall-bench-") as tmp:
        settings: dict[str, object] = {}
        if args.flush_every:
            settings["log.flush.interval.messages"] = args.flush_every
        with BrokerProcess(Path(tmp), settings=settings) as broker:
            admin = AdminClient(broker.bootstrap)
            for mode in ("async", "sync"):
                for acks in (0, 1, -1):
                    topic = f"perf-{mode}-{'all' if acks == -1 else acks}"
                    admin.create_topic(topic, 1)
                    records = args.records if mode == "async" else args.sync_records
                    out = subprocess.run(
                        [
                            sys.executable,
                            "-m",
                            "squall",
                            "perf",
                            "produce",
                            "--bootstrap",
                            broker.bootstrap,
                            "--topic",
                            topic,
                            "--records",
                            str(records),
                            "--record-size",
                            str(args.record_size),
                            "--acks",
                            str(acks),
                            "--mode",
                            mode,
                            "--no-progress",
                        ],
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    if out.returncode != 0:
                        print(out.stderr, file=sys.stderr)
                    result = json.loads(out.stdout.strip().splitlines()[-1])
                    print(json.dumps(result), flush=True)
                    results.append(result)
            admin.close()
    print(
        f"\n{'mode':<6} {'acks':>4} {'records/s':>11} {'MB/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'p999 ms':>8}"
    )
    for r in results:
        lat = r["latency_ms"]
        print(
            f"{r['mode']:<6} {r['acks']:>4} {r['records_per_sec']:>11,.0f} {r['mb_per_sec']:>7.1f} "
            f"{lat['p50']:>8.2f} {lat['p99']:>8.2f} {lat['p999']:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
