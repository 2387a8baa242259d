"""Queue workload rate: sustained ops/s with the history writer on, and the writer's cost per op.

Three measurements:

1. Recorder micro-benchmark (no cluster): the time to record one send (invoke + ok
   completion through `OperationRecorder`) into a sink that keeps nothing, into a
   `HistoryWriter` on /dev/null (encoding and a write(2) that costs nothing), and into a
   `HistoryWriter` on a real file. The difference between the last two is what the file
   itself costs; between the first and the last, the whole writer.
2. End to end: a local cluster (ZooKeeper and three brokers as processes, topic with RF 3,
   min.insync.replicas 2, acks=-1) runs the workload flat out (no rate limit) for
   `--seconds`, alternately writing the history to /dev/null and to a real file, and reports
   completed ops/s, plus the wall and CPU time the workers spent inside the writer per
   operation (measured by wrapping the writer; the wall time includes waiting for the GIL
   while other workers run, the CPU time does not).
3. The default workload (`--workload default`): `WorkloadSpec()` as `squall run` uses it
   (its rate, producers, consumers, async sends in flight, op mix), against a cluster of
   three brokers with a default test's broker settings, no faults, the history written to a
   real file; reports the achieved ops/s overall and per f, and the operations in flight
   (sampled every 50 ms). `--runtime docker` brings the cluster up as `squall run` does
   (the base image is built on first use). `--clients squall,confluent-kafka` runs it
   through each client in turn (docs/clients.md), side by side on one cluster; `--rate`
   asks for another rate (0: none), to see the capacity beyond the default's.

Prints one JSON line per measurement, then a table.

    .venv/bin/python bench/workload_rate.py [--seconds 15] [--repeat 2] [--mode sync|async]
    .venv/bin/python bench/workload_rate.py --workload default --runtime docker \
        --seconds 30 --repeat 1 --skip-micro
    .venv/bin/python bench/workload_rate.py --workload default --runtime docker \
        --seconds 60 --repeat 2 --skip-micro --clients squall,confluent-kafka,kafka-python
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from histories import HistoryWriter, Operation, Process, make_operation
from squall.cluster.cluster import Cluster
from squall.cluster.runtimes import Runtime, runtime_named
from squall.spec import TestSpec
from workloads import OperationRecorder, OpMix, QueueWorkload, WorkloadCounters, WorkloadSpec
from workloads.client import SendResult
from workloads.clients import client_factory, speaks_kafka

BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    "replica.fetch.wait.max.ms": "100",
}


class NullSink:
    """Keeps nothing and builds nothing: returns one prebuilt operation per (f, type), so
    what remains is the recorder's own cost."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], Operation] = {}

    def invoke(self, process: int, f: str, value: Any, **fields: Any) -> Operation:
        return self._op(process, "invoke", f, value, fields)

    def complete(self, invocation: Operation, op_type: str, value: Any, **fields: Any) -> Operation:
        return self._op(invocation.process, op_type, invocation.f, value, fields)

    def _op(
        self, process: Process, op_type: str, f: str, value: Any, fields: dict[str, Any]
    ) -> Operation:
        op = self._made.get((f, op_type))
        if op is None:
            op = self._made[(f, op_type)] = make_operation(
                0, 0, process, op_type, f, value, **fields
            )
        return op


class TimedSink:
    """Wraps a writer; adds up the wall time and the CPU time (of the calling thread) spent
    inside it, over all threads, and counts the errors of completions that were not ok."""

    def __init__(self, writer: HistoryWriter) -> None:
        self.writer = writer
        self.wall_s = 0.0
        self.cpu_s = 0.0
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()

    def invoke(self, process: int, f: str, value: Any, **fields: Any) -> Operation:
        wall, cpu = time.perf_counter(), time.thread_time()
        op = self.writer.invoke(process, f, value, **fields)
        self._add(time.perf_counter() - wall, time.thread_time() - cpu)
        return op

    def complete(self, invocation: Operation, op_type: str, value: Any, **fields: Any) -> Operation:
        wall, cpu = time.perf_counter(), time.thread_time()
        op = self.writer.complete(invocation, op_type, value, **fields)
        self._add(time.perf_counter() - wall, time.thread_time() - cpu)
        if op_type != "ok":
            error = str(fields.get("error", "")).split(":")[0]
            with self._lock:
                self.errors[f"{invocation.f} {op_type} {error}".strip()] += 1
        return op

    def _add(self, wall_s: float, cpu_s: float) -> None:
        with self._lock:
            self.wall_s += wall_s
            self.cpu_s += cpu_s


def close_writer(writer: HistoryWriter) -> None:
    """Close a writer; on /dev/null the final fsync fails with EINVAL (the fd still closes)."""
    with contextlib.suppress(OSError):
        writer.close()


def recorder_cost_us(sink: Any, sends: int) -> float:
    """Microseconds to record one acknowledged send (invoke + completion)."""
    recorder = OperationRecorder(sink)
    client = recorder.new_client()
    acknowledged = SendResult(0)
    started = time.perf_counter()
    for value in range(sends):
        pending = recorder.invoke_send(client, "bench-0", value, acks=-1, node="n1")
        recorder.complete_send(pending, acknowledged)
    return (time.perf_counter() - started) / sends * 1e6


def micro(args: argparse.Namespace, tmp: Path, results: list[dict[str, Any]]) -> None:
    for _ in range(args.repeat):
        for sink_name in ("none", "/dev/null", "file"):
            if sink_name == "none":
                cost = recorder_cost_us(NullSink(), args.micro_sends)
            else:
                path = Path(os.devnull) if sink_name == "/dev/null" else tmp / "micro.jsonl"
                if sink_name == "file":
                    path.unlink(missing_ok=True)
                writer = HistoryWriter(path)
                try:
                    cost = recorder_cost_us(writer, args.micro_sends)
                finally:
                    close_writer(writer)
            result = {"measure": "recorder", "sink": sink_name, "us_per_send_op": round(cost, 2)}
            results.append(result)
            print(json.dumps(result), flush=True)


@contextlib.contextmanager
def cluster_of_three(
    args: argparse.Namespace, settings: dict[str, str], *, kafka_listener: bool = False
) -> Any:
    """Three brokers and ZooKeeper on `args.runtime`, taken down again afterwards."""
    runtime: Runtime = runtime_named(args.runtime)
    started = time.monotonic()
    cluster = runtime.up(
        f"bench-{uuid.uuid4().hex[:8]}", 3, settings=settings, kafka_listener=kafka_listener
    )
    print(
        f"{args.runtime} cluster of 3 brokers up in {time.monotonic() - started:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    try:
        yield cluster
    finally:
        runtime.down(cluster.state)
        cluster.close()


def end_to_end(args: argparse.Namespace, tmp: Path, results: list[dict[str, Any]]) -> None:
    with cluster_of_three(args, BROKER_SETTINGS) as cluster:
        flat_out(args, cluster, tmp, results)


def flat_out(
    args: argparse.Namespace, cluster: Cluster, tmp: Path, results: list[dict[str, Any]]
) -> None:
    for round_number in range(args.repeat):
        for sink_name in ("/dev/null", "file"):
            topic = f"bench-{round_number}-{'null' if sink_name == '/dev/null' else 'file'}"
            spec = WorkloadSpec(
                topic=topic,
                partitions=args.partitions,
                replication_factor=3,
                topic_config={"min.insync.replicas": "2"},
                acks=-1,
                producer_mode=args.mode,
                in_flight=args.in_flight,
                rate=None,
                producers=args.producers,
                consumers=args.consumers,
                mix=OpMix(send=1.0, poll=1.0, commit=0.1, crash=0.0, producer_crash=0.0),
            )
            workload = QueueWorkload(spec)
            workload.prepare(cluster.bootstrap)
            path = Path(os.devnull) if sink_name == "/dev/null" else tmp / f"{topic}.jsonl"
            writer = HistoryWriter(path)
            try:
                sink = TimedSink(writer)
                summary = workload.run(
                    cluster.bootstrap,
                    cluster.zookeeper_connect,
                    sink,
                    stop_event=threading.Event(),
                    time_limit_s=args.seconds,
                    rng=random.Random(round_number),
                )
            finally:
                close_writer(writer)
            counters = summary.counters
            by_f = counters.by_f
            ops = counters.completed
            result = {
                "measure": "workload",
                "sink": sink_name,
                "mode": args.mode,
                "seconds": round(summary.duration_s, 2),
                "ops_per_s": round(ops / summary.duration_s, 1),
                "sends_per_s": round(_done(by_f, "send") / summary.duration_s, 1),
                "polls_per_s": round(_done(by_f, "poll") / summary.duration_s, 1),
                "writer_wall_us_per_op": round(sink.wall_s / max(ops, 1) * 1e6, 1),
                "writer_cpu_us_per_op": round(sink.cpu_s / max(ops, 1) * 1e6, 1),
                "writer_cpu_share": round(sink.cpu_s / summary.duration_s, 4),
                "ok": counters.ok,
                "fail": counters.fail,
                "info": counters.info,
                "abandoned": summary.abandoned,
                "not_ok": dict(sink.errors),
                "history_bytes": path.stat().st_size if sink_name == "file" else 0,
            }
            results.append(result)
            print(json.dumps(result), flush=True)


def default_workload(args: argparse.Namespace, tmp: Path, results: list[dict[str, Any]]) -> None:
    """The default WorkloadSpec against three brokers with a default test's settings, through
    each client of `--clients` in turn, round after round."""
    clients = args.clients.split(",")
    settings = TestSpec(name="bench").broker_settings()
    with cluster_of_three(
        args, settings, kafka_listener=any(map(speaks_kafka, clients))
    ) as cluster:
        for round_number, client in itertools.product(range(args.repeat), clients):
            spec = WorkloadSpec(topic=f"bench-default-{round_number}-{client}", client=client)
            if args.rate is not None:
                spec = spec.model_copy(update={"rate": args.rate or None})
            bootstrap = cluster.kafka_bootstrap if speaks_kafka(client) else cluster.bootstrap
            workload = QueueWorkload(spec, client_factory=client_factory(client))
            workload.prepare(bootstrap)
            path = tmp / f"{spec.topic}.jsonl"
            writer = HistoryWriter(path)
            sampler = InFlightSampler(workload.counters)
            sampler.start()
            try:
                sink = TimedSink(writer)
                summary = workload.run(
                    bootstrap,
                    cluster.zookeeper_connect,
                    sink,
                    stop_event=threading.Event(),
                    time_limit_s=args.seconds,
                    rng=random.Random(round_number),
                )
            finally:
                sampler.stop()
                close_writer(writer)
            counters = summary.counters
            seconds = summary.duration_s
            result = {
                "measure": "default-workload",
                "runtime": args.runtime,
                "client": client,
                "rate_target": spec.rate,
                "producer_mode": spec.producer_mode,
                "producers": spec.producers,
                "in_flight_per_partition": spec.in_flight,
                "consumers": spec.consumers,
                "producer_retries": spec.producer_retries,
                "seconds": round(seconds, 2),
                "ops_per_s": round(counters.completed / seconds, 1),
                "per_f_ops_per_s": {
                    f: round(_done(counters.by_f, f) / seconds, 1) for f in sorted(counters.by_f)
                },
                "by_f": counters.by_f,
                "in_flight_mean": round(statistics.mean(sampler.samples or [0]), 1),
                "in_flight_max": max(sampler.samples or [0]),
                "ok": counters.ok,
                "fail": counters.fail,
                "info": counters.info,
                "abandoned": summary.abandoned,
                "not_ok": dict(sink.errors),
                "writer_cpu_share": round(sink.cpu_s / seconds, 4),
                "history_bytes": path.stat().st_size,
            }
            results.append(result)
            print(json.dumps(result), flush=True)


class InFlightSampler:
    """Samples the operations in flight (invoked, not completed) every 50 ms."""

    def __init__(self, counters: WorkloadCounters) -> None:
        self.counters = counters
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="in-flight", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.samples.append(self.counters.snapshot().in_flight)


def _done(by_f: dict[str, dict[str, int]], f: str) -> int:
    counts = by_f.get(f, {})
    return counts.get("ok", 0) + counts.get("fail", 0) + counts.get("info", 0)


def print_table(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print("\nrecorder: one acknowledged send recorded (invoke + completion), microseconds")
    for sink in ("none", "/dev/null", "file"):
        costs = [
            r["us_per_send_op"] for r in results if r["measure"] == "recorder" and r["sink"] == sink
        ]
        if costs:
            print(f"  {sink:<10} {statistics.median(costs):>8.2f} us/op")
    for run in (r for r in results if r["measure"] == "default-workload"):
        per_f = ", ".join(f"{f} {rate:,.0f}" for f, rate in run["per_f_ops_per_s"].items())
        print(
            f"\ndefault workload through {run['client']} on {run['runtime']} (3 brokers, no "
            f"faults), {run['seconds']:g} s: "
            f"{run['ops_per_s']:,.0f} ops/s of "
            f"{'no limit' if run['rate_target'] is None else format(run['rate_target'], ',.0f')} "
            "asked "
            f"({run['producer_mode']} producers x{run['producers']} with up to "
            f"{run['in_flight_per_partition']} in flight per partition, "
            f"consumers x{run['consumers']})"
        )
        print(f"  per f (ops/s): {per_f}")
        print(
            f"  in flight: mean {run['in_flight_mean']:g}, max {run['in_flight_max']}; "
            f"ok {run['ok']:,}, fail {run['fail']:,}, info {run['info']:,}"
        )
    runs = [r for r in results if r["measure"] == "workload"]
    if not runs:
        return
    print(
        f"\nworkload flat out ({args.mode} producers x{args.producers}, consumers x"
        f"{args.consumers}, {args.partitions} partitions, RF 3, acks=-1), {args.seconds:g} s each"
    )
    print(
        f"  {'history':<10} {'ops/s':>8} {'sends/s':>8} {'polls/s':>8} "
        f"{'writer wall us/op':>18} {'writer cpu us/op':>17} {'writer cpu %':>13}"
    )
    for sink in ("/dev/null", "file"):
        mine = [r for r in runs if r["sink"] == sink]
        if mine:
            print(
                f"  {sink:<10} {statistics.mean(r['ops_per_s'] for r in mine):>8.0f} "
                f"{statistics.mean(r['sends_per_s'] for r in mine):>8.0f} "
                f"{statistics.mean(r['polls_per_s'] for r in mine):>8.0f} "
                f"{statistics.mean(r['writer_wall_us_per_op'] for r in mine):>18.1f} "
                f"{statistics.mean(r['writer_cpu_us_per_op'] for r in mine):>17.1f} "
                f"{100 * statistics.mean(r['writer_cpu_share'] for r in mine):>12.2f}%"
            )


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each run")
    parser.add_argument("--repeat", type=int, default=2, help="runs per history sink")
    parser.add_argument("--mode", choices=("sync", "async"), default="sync")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument(
        "--in-flight", type=int, default=8, help="async: sends in flight per partition and producer"
    )
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--micro-sends", type=int, default=100_000)
    parser.add_argument("--skip-cluster", action="store_true", help="only the micro-benchmark")
    parser.add_argument("--skip-micro", action="store_true", help="no recorder micro-benchmark")
    parser.add_argument(
        "--workload",
        choices=("flat-out", "default"),
        default="flat-out",
        help="flat-out: the configured workload without a rate limit, history to /dev/null and "
        "a file; default: WorkloadSpec() as squall run uses it",
    )
    parser.add_argument("--runtime", choices=("local", "docker"), default="local")
    parser.add_argument(
        "--rate",
        type=float,
        help="--workload default: the ops/s asked instead of the default's 1,000 (0: no limit), "
        "to see what the cluster and the client could do beyond it",
    )
    parser.add_argument(
        "--clients",
        default="squall",
        help="--workload default: the clients to run it through, in turn, comma-separated "
        "(squall, confluent-kafka, kafka-python)",
    )
    return parser.parse_args()


def main() -> int:
    args = _parse_args()
    home = Path(tempfile.mkdtemp(prefix="squall-workload-bench-"))
    os.environ.setdefault("SQUALL_HOME", str(home / "squall-home"))
    results: list[dict[str, Any]] = []
    try:
        if not args.skip_micro:
            micro(args, home, results)
        if not args.skip_cluster:
            if args.workload == "default":
                default_workload(args, home, results)
            else:
                end_to_end(args, home, results)
    except KeyboardInterrupt:
        print("interrupted; the cluster was taken down", file=sys.stderr)
        return 130
    finally:
        print_table(results, args)
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
