"""What the lazy disk costs: the default workload on brokers whose log.dirs are on lazyfs,
side by side with the same workload on plain disks.

Two docker clusters of three brokers (a default test's broker settings), one with lazy disks
and one without, are up at once; the default workload (``WorkloadSpec()`` as ``squall run``
uses it, no faults) runs against them for ``--seconds``: ``--mode concurrent`` against both
at the same time (both see the same machine, each with half of it: the harsher measure, as
every write then waits for a daemon that competes for a CPU), ``--mode alternate`` against
one, then the other (each with the whole machine, as a test has it). Prints one JSON line
per cluster and run (ops/s overall and per f, the CPU seconds the lazyfs daemons used), then
the ratio of ops/s with to without. ``--same`` is the control: both clusters on plain disks,
which shows how far the bench itself (which cluster starts first, placement) skews the ratio.
Run it under the shared lock:

    flock /tmp/squall-heavy.lock .venv/bin/python bench/lazy_disk_cost.py \
        [--seconds 60] [--mode concurrent|alternate] [--same]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from histories import HistoryWriter
from squall.cluster.cluster import Cluster
from squall.cluster.docker import DockerRuntime
from squall.spec import TestSpec
from workloads import QueueWorkload, WorkloadSpec


def run_workload(cluster: Cluster, seconds: float, seed: int, history: Path) -> dict[str, Any]:
    spec = WorkloadSpec()
    workload = QueueWorkload(spec)
    workload.prepare(cluster.bootstrap)
    writer = HistoryWriter(history)
    try:
        summary = workload.run(
            cluster.bootstrap,
            cluster.zookeeper_connect,
            writer,
            stop_event=threading.Event(),
            time_limit_s=seconds,
            rng=random.Random(seed),
        )
    finally:
        writer.close()
    counters = summary.counters
    return {
        "lazy_disk": cluster.state.lazy_disk,
        "seconds": round(summary.duration_s, 2),
        "rate_target": spec.rate,
        "ops": counters.completed,
        "ops_per_s": round(counters.completed / summary.duration_s, 1),
        "per_f_ops_per_s": {
            f: round(sum(counts.get(t, 0) for t in ("ok", "fail", "info")) / summary.duration_s, 1)
            for f, counts in sorted(counters.by_f.items())
        },
        "ok": counters.ok,
        "fail": counters.fail,
        "info": counters.info,
    }


def lazyfs_cpu_seconds(cluster: Cluster) -> float:
    """CPU seconds (user + system) the lazyfs daemons of the brokers used so far."""
    total = 0.0
    for name in cluster.brokers:
        disk = cluster.lazy_disk(name)
        output = (
            cluster.node(name)
            .run(f"cat /proc/$(cat {disk.pidfile})/stat", check=False, timeout=10)
            .output
        )
        fields = output.rsplit(")", 1)[-1].split()
        if len(fields) > 13:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return round(total, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the workload")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--mode",
        choices=("concurrent", "alternate"),
        default="concurrent",
        help="both workloads at once (default), or one after the other",
    )
    parser.add_argument(
        "--same",
        action="store_true",
        help="a control: both clusters on plain disks, to see what the bench itself skews",
    )
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="squall-lazy-disk-bench-"))
    os.environ["SQUALL_HOME"] = str(home / "squall-home")
    runtime = DockerRuntime()
    settings = TestSpec(name="bench").broker_settings()
    sides = {"first": not args.same, "second": False}
    """Which clusters have lazy disks: the first (unless --same), never the second."""
    run_ids = {side: f"bench-{side}-{secrets.token_hex(2)}" for side in sides}
    clusters: dict[str, Cluster] = {}
    results: dict[str, dict[str, Any]] = {}
    errors: list[BaseException] = []
    try:
        for side, lazy in sides.items():
            clusters[side] = runtime.up(run_ids[side], 3, settings=settings, lazy_disk=lazy)

        def measure(side: str) -> None:
            try:
                results[side] = run_workload(
                    clusters[side], args.seconds, args.seed, home / f"history-{side}.jsonl"
                )
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=measure, args=(side,)) for side in sides]
        for thread in threads:
            thread.start()
            if args.mode == "alternate":
                thread.join()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        if sides["first"]:
            results["first"]["lazyfs_cpu_s"] = lazyfs_cpu_seconds(clusters["first"])
        for side in sides:
            print(json.dumps({"cluster": side, **results[side]}), flush=True)
        first, second = results["first"]["ops_per_s"], results["second"]["ops_per_s"]
        what = "plain disks (control)" if args.same else "lazy disks"
        print(
            f"default workload, {args.seconds:g} s, {args.mode} on docker: {first:,.0f} ops/s "
            f"on {what}, {second:,.0f} ops/s on plain disks; ratio {first / second:.3f}"
            + ("" if args.same else " (goal >= 0.80)")
        )
    except KeyboardInterrupt:
        print("interrupted; the clusters are taken down", file=sys.stderr)
        return 130
    finally:
        for cluster in clusters.values():
            cluster.close()
        for run_id in run_ids.values():
            runtime.clean(run_id)
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
