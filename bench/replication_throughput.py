"""Replicated producer throughput: one ZooKeeper, three brokers, `squall perf produce`.

Starts a real ZooKeeper and `--brokers` brokers in ZooKeeper mode in a temporary directory.
For every case (acks in {1, -1} x replication factor in {1, 2, 3} x min.insync.replicas in
{1, 2}, where min.insync <= RF) it creates a fresh single-partition topic, runs the perf tool
as a separate process with one producer (1 KB records by default), then checks with
describe_topics that the ISR still holds every replica. Prints one JSON line per case, then a
table beside the seeds' Kafka figures (single partition, one producer, 1 KB records).

    .venv/bin/python bench/replication_throughput.py [--records 100000] [--mode async]

Every process it starts is stopped on exit, on Ctrl-C and on SIGTERM. `--keep` keeps the
temporary directory (broker logs, event logs, ZooKeeper log) for investigation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from squall.cluster.broker_process import BrokerProcess, BrokerStartError
from squall.cluster.zookeeper_server import ZooKeeperServer, ZooKeeperServerError
from system_under_test.client import AdminClient, ClientError
from system_under_test.errors import BrokerError

# The seeds' Kafka figures: single partition, one producer, 1 KB records, records/s.
SEED_KAFKA: dict[tuple[int, int], int] = {
    (-1, 1): 18_641,
    (-1, 2): 9_739,
    (-1, 4): 9_006,
    (1, 2): 20_404,
}
READY_TIMEOUT_S = 60.0


class BenchError(Exception):
    """The cluster could not be brought up or a case could not be set up."""


class _Interrupted(BaseException):
    """SIGTERM or SIGHUP: unwind like Ctrl-C so that every process is stopped."""


@dataclass(frozen=True)
class Case:
    acks: int
    replication_factor: int
    min_insync: int

    @property
    def key(self) -> str:
        return f"{self.acks}:{self.replication_factor}:{self.min_insync}"

    @property
    def topic(self) -> str:
        acks = "all" if self.acks == -1 else str(self.acks)
        return f"rep-acks{acks}-rf{self.replication_factor}-min{self.min_insync}"


def cases(brokers: int) -> list[Case]:
    return [
        Case(acks, rf, min_insync)
        for acks in (1, -1)
        for rf in (1, 2, 3)
        if rf <= brokers
        for min_insync in (1, 2)
        if min_insync <= rf
    ]


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    raise _Interrupted(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def _stop_on_exit(what: str, stop: Any) -> Iterator[None]:
    """Run ``stop`` however the block ends; a second Ctrl-C cannot cut the cleanup short."""
    try:
        yield
    finally:
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            stop()
        except Exception as err:
            print(f"warning: stopping {what} failed: {err}", file=sys.stderr)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def wait_for_brokers(admin: AdminClient, count: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    seen: list[int] = []
    while time.monotonic() < deadline:
        with contextlib.suppress(ClientError, BrokerError, OSError):
            seen = [b.id for b in admin.brokers()]
            if len(seen) >= count:
                return
        time.sleep(0.2)
    raise BenchError(
        f"only brokers {seen} registered within {READY_TIMEOUT_S:.0f}s, expected {count}"
    )


def describe(admin: AdminClient, topic: str) -> tuple[int, list[int], list[int]]:
    """(leader, replicas, isr) of partition 0 of ``topic``."""
    [description] = admin.describe_topics([topic])
    p = description.partitions[0]
    return p.leader, sorted(p.replicas), sorted(p.isr)


def wait_until_ready(admin: AdminClient, topic: str, rf: int) -> None:
    """Until the partition has a leader, ``rf`` replicas and all of them in the ISR."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    state: tuple[int, list[int], list[int]] | str = "not described yet"
    while time.monotonic() < deadline:
        with contextlib.suppress(ClientError, BrokerError, OSError, ValueError, IndexError):
            state = describe(admin, topic)
            leader, replicas, isr = state
            if leader >= 0 and len(replicas) == rf and isr == replicas:
                return
        time.sleep(0.1)
    raise BenchError(f"{topic} not ready within {READY_TIMEOUT_S:.0f}s: {state}")


def isr_events(brokers: list[BrokerProcess], topic: str) -> list[str]:
    """The ISR changes the brokers' event logs record for partition 0 of ``topic``."""
    out = []
    for broker in brokers:
        path = broker.event_log
        with contextlib.suppress(OSError):
            for line in path.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if event.get("type") == "isr-change" and event.get("key") == f"{topic}-0":
                        out.append(f"broker {event.get('broker')}: {event.get('reason')}")
    return out


def run_perf(
    bootstrap: str, topic: str, args: argparse.Namespace, acks: int
) -> tuple[dict[str, Any] | None, str]:
    """The perf tool's JSON result (None if it printed none) and its stderr."""
    command = [
        sys.executable,
        "-m",
        "squall",
        "perf",
        "produce",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--records",
        str(args.records),
        "--record-size",
        str(args.record_size),
        "--acks",
        str(acks),
        "--mode",
        args.mode,
        "--no-progress",
    ]
    for item in args.producer_config:
        command += ["--producer-config", item]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with _stop_on_exit("the perf tool", lambda: _kill(proc)):
        try:
            stdout, stderr = proc.communicate(timeout=args.case_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            stderr += f"\nperf tool killed after {args.case_timeout:.0f}s"
    for line in reversed(stdout.strip().splitlines()):
        with contextlib.suppress(ValueError):
            result = json.loads(line)
            if isinstance(result, dict) and "records_per_sec" in result:
                return result, stderr
    return None, stderr or f"perf tool exited with {proc.returncode} and printed no result"


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def run_case(
    case: Case, admin: AdminClient, brokers: list[BrokerProcess], args: argparse.Namespace
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "acks": case.acks,
        "replication_factor": case.replication_factor,
        "min_insync_replicas": case.min_insync,
        "topic": case.topic,
    }
    admin.create_topic(
        case.topic,
        1,
        replication_factor=case.replication_factor,
        config={"min.insync.replicas": str(case.min_insync)},
    )
    wait_until_ready(admin, case.topic, case.replication_factor)
    leader, replicas, _isr = describe(admin, case.topic)
    out["leader"] = leader
    out["replicas"] = replicas
    result, stderr = run_perf(brokers[0].bootstrap, case.topic, args, case.acks)
    if result is None:
        out["failed"] = stderr.strip().splitlines()[-5:]
    else:
        out["perf"] = result
        if result.get("errors"):
            out["perf_stderr"] = stderr.strip().splitlines()[-5:]
    # The controller learns ISR changes through a ZooKeeper notification: give it a moment.
    time.sleep(args.settle)
    leader_after, replicas_after, isr_after = describe(admin, case.topic)
    out["leader_after"] = leader_after
    out["isr_after"] = isr_after
    out["isr_full"] = isr_after == replicas_after
    out["isr_changes"] = isr_events(brokers, case.topic)
    return out


def _fmt_int(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def print_table(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    header = (
        f"{'acks':>4} {'RF':>2} {'min.isr':>7} {'records/s':>10} {'MB/s':>6} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'p999 ms':>8} {'errors':>6} {'ISR full':>8} {'Kafka rec/s':>11}  vs Kafka"
    )
    print(
        f"\n{args.brokers} brokers + ZooKeeper, 1 partition, 1 producer, {args.records:,} records "
        f"of {args.record_size} B, mode={args.mode}, {os.cpu_count()} CPUs"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        seed = SEED_KAFKA.get((r["acks"], r["replication_factor"]))
        perf = r.get("perf")
        if perf is None:
            cells = f"{'FAILED':>10} {'-':>6} {'-':>8} {'-':>8} {'-':>8} {'-':>6}"
            verdict = "failed" if seed else ""
        else:
            lat = perf["latency_ms"]
            rate = perf["records_per_sec"]
            errors = sum(perf.get("errors", {}).values())
            cells = (
                f"{rate:>10,.0f} {perf['mb_per_sec']:>6.1f} {lat['p50']:>8.2f} "
                f"{lat['p99']:>8.2f} {lat['p999']:>8.2f} {errors:>6}"
            )
            verdict = "" if seed is None else ("at/above" if rate >= seed else "below")
            if seed is not None:
                verdict += f" ({rate / seed:.0%})"
        isr = "yes" if r.get("isr_full") else f"NO {r.get('isr_after')}"
        print(
            f"{r['acks']:>4} {r['replication_factor']:>2} {r['min_insync_replicas']:>7} {cells} "
            f"{isr:>8} {_fmt_int(seed):>11}  {verdict}"
        )
    if args.brokers < 4:
        print(
            f"{-1:>4} {4:>2} {'-':>7} {'n/a':>10} {'':>6} {'':>8} {'':>8} {'':>8} {'':>6} "
            f"{'':>8} {_fmt_int(SEED_KAFKA[(-1, 4)]):>11}  not possible: RF 4 needs 4 brokers, "
            f"this cluster has {args.brokers}"
        )
    print(
        "Kafka figures: the seeds' single-partition, one-producer, 1 KB runs (min.insync.replicas "
        "not given there), shown beside both of our min.insync rows."
    )


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000, help="records per case")
    parser.add_argument("--record-size", type=int, default=1024, help="bytes per record")
    parser.add_argument("--mode", choices=("async", "sync"), default="async")
    parser.add_argument("--brokers", type=int, default=3, help="brokers in the cluster")
    parser.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra broker setting (repeatable), e.g. replica.fetch.wait.max.ms=100",
    )
    parser.add_argument(
        "--producer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to the perf tool's --producer-config (repeatable)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ACKS:RF:MIN",
        help="run only this case (repeatable), e.g. all:3:2 (or --only=-1:3:2)",
    )
    parser.add_argument("--case-timeout", type=float, default=900.0, help="seconds per case")
    parser.add_argument(
        "--settle", type=float, default=1.0, help="seconds to wait before the ISR check"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    if args.brokers < 1:
        parser.error("--brokers must be at least 1")
    args.only = [item.replace("all", "-1") for item in args.only]
    known = {case.key for case in cases(args.brokers)}
    for item in args.only:
        if item not in known:
            parser.error(f"--only {item!r}: not a case; cases are {', '.join(sorted(known))}")
    for item in args.broker_config:
        if "=" not in item:
            parser.error(f"--broker-config {item!r}: expected KEY=VALUE")
    return args


def run(args: argparse.Namespace, tmp: Path, results: list[dict[str, Any]]) -> None:
    """Bring the cluster up, run every case (appending to ``results``), stop everything."""
    zk = ZooKeeperServer(tmp / "zookeeper")
    try:
        zk.start()
    except ZooKeeperServerError as err:
        raise BenchError(f"ZooKeeper did not start: {err}") from None
    with _stop_on_exit("ZooKeeper", zk.stop):
        settings: dict[str, object] = {"zookeeper.connect": zk.connect_string}
        for item in args.broker_config:
            key, value = item.split("=", 1)
            settings[key] = value
        brokers: list[BrokerProcess] = []
        with contextlib.ExitStack() as stack:
            for i in range(args.brokers):
                broker = BrokerProcess(
                    tmp / f"broker-{i}", broker_id=i, standalone=False, settings=settings
                )
                # Registered before start: a broker that fails half-way is stopped too.
                stack.enter_context(_stop_on_exit(f"broker {i}", broker.stop))
                brokers.append(broker)
                try:
                    broker.start()
                except BrokerStartError as err:
                    raise BenchError(f"broker {i} did not start: {err}") from None
            bootstrap = [b.bootstrap for b in brokers]
            with AdminClient(bootstrap) as admin:
                wait_for_brokers(admin, args.brokers)
                for case in cases(args.brokers):
                    if args.only and case.key not in args.only:
                        continue
                    for i, broker in enumerate(brokers):
                        if not broker.is_running():
                            raise BenchError(
                                f"broker {i} exited with {broker.process and broker.process.poll()}; "
                                f"last lines of {broker.log_path}:\n{broker.log_tail()}"
                            )
                    try:
                        result = run_case(case, admin, brokers, args)
                    except (BenchError, BrokerError, ClientError) as err:
                        result = {
                            "acks": case.acks,
                            "replication_factor": case.replication_factor,
                            "min_insync_replicas": case.min_insync,
                            "topic": case.topic,
                            "failed": [str(err)],
                        }
                    print(json.dumps(result), flush=True)
                    results.append(result)


def main() -> int:
    args = _parse_args()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_interrupted)
    tmp = Path(tempfile.mkdtemp(prefix="squall-repl-bench-"))
    print(f"working directory: {tmp}", file=sys.stderr, flush=True)
    results: list[dict[str, Any]] = []
    status = 0
    try:
        run(args, tmp, results)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        status = 1
    except (KeyboardInterrupt, _Interrupted):
        print("interrupted; every process was stopped", file=sys.stderr)
        status = 130
    finally:
        if args.keep or status == 1:
            print(f"kept {tmp} (broker and ZooKeeper logs)", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if results:
        print_table(results, args)
    if status == 0 and any("failed" in r or not r.get("isr_full") for r in results):
        status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
