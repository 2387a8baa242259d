"""Real Kafka clients against our brokers' Kafka listeners: exactness and throughput.

    .venv/bin/python bench/kafka_clients.py [--records 100000] [--clients a,b] [--out FILE]
        [--perf-records 50000] [--perf-sync-records 5000] [--skip-exact] [--skip-perf]

1. Exactness (issue 32's first goal): each client (kafka-python, confluent-kafka, aiokafka),
   with its own defaults (kafka-python's idempotent producer on, with acks=all), produces
   `--records` records of 100 bytes with acks 0, 1 and all to one partition, against a
   standalone broker and against a 3-broker cluster (ZooKeeper, replication factor 3,
   min.insync.replicas 2, Kafka's default flush policy), and reads them back with `assign`
   from offset 0. A case is exact when every record comes back once, in order, at offsets
   0..n-1, and (acks 1, all) the producer was told exactly those offsets.
2. Throughput beside the seeds' table (one producer, 1 KB records, 12 partitions; acks=0 and 1
   against one broker, acks=-1 against two brokers with replication factor 2): confluent-kafka,
   async (librdkafka's batching) and sync (each record flushed before the next).

One JSON line per case on stdout, tables at the end, everything in --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the clients' adapters and the cluster live with the tests

from squall.cluster.broker_process import BrokerProcess  # noqa: E402
from squall.cluster.zookeeper_server import ZooKeeperServer, free_port  # noqa: E402
from tests.integration.cluster import LocalCluster  # noqa: E402
from tests.integration.kafka_client_adapters import CLIENTS  # noqa: E402

HOST = "127.0.0.1"
NEVER = 9_223_372_036_854_775_807
"""log.flush.interval.messages that never flushes: Kafka's default."""
SEEDS = {"0": 76_696, "1": 19_489, "all": 9_739}
"""The seeds' table: records/s, one producer, sync sends, 1 KB records, 12 partitions."""


@contextmanager
def standalone(root: Path) -> Iterator[str]:
    port = free_port(HOST)
    settings = {"kafka.listeners": f"{HOST}:{port}"}
    with BrokerProcess(root, settings=settings):
        yield f"{HOST}:{port}"


@contextmanager
def cluster(root: Path, brokers: int) -> Iterator[str]:
    ports = {i: free_port(HOST) for i in range(1, brokers + 1)}
    with ZooKeeperServer(root / "zookeeper") as zookeeper:
        local = LocalCluster(
            root,
            zookeeper,
            brokers,
            per_broker=lambda i: {"kafka.listeners": f"{HOST}:{ports[i]}"},
            **{"log.flush.interval.messages": NEVER, "zookeeper.session.timeout.ms": 6000},
        )
        local.start()
        try:
            yield ",".join(f"{HOST}:{p}" for p in ports.values())
        finally:
            local.stop()


def create_topic(bootstrap: str, name: str, partitions: int, replication: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        configs = {"min.insync.replicas": "2"} if replication >= 3 else {}
        admin.create_topics([NewTopic(name, partitions, replication, topic_configs=configs)])
    finally:
        admin.close()


def exactness(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    chosen = [c for c in CLIENTS if not args.clients or c.name in args.clients]
    rows = []
    for target in ("standalone", "3 brokers"):
        where = root / target.replace(" ", "-")
        with standalone(where) if target == "standalone" else cluster(where, 3) as bootstrap:
            for client in chosen:
                for acks in (0, 1, "all"):
                    topic = f"{client.name}-{acks}"
                    create_topic(bootstrap, topic, 1, 1 if target == "standalone" else 3)
                    values = [b"%08d" % i + b"x" * 92 for i in range(args.records)]
                    started = time.perf_counter()
                    sent = client.produce(bootstrap, topic, values, acks, {})
                    produce_s = time.perf_counter() - started
                    started = time.perf_counter()
                    got = client.read(bootstrap, topic, args.records, 120)
                    read_s = time.perf_counter() - started
                    told = acks == 0 or sent.offsets == list(range(args.records))
                    row = {
                        "part": "exactness",
                        "target": target,
                        "client": client.name,
                        "acks": str(acks),
                        "records": args.records,
                        "errors": len(sent.errors),
                        "read": len(got),
                        "exact": told and not sent.errors and got == list(enumerate(values)),
                        "produce_per_s": round(args.records / produce_s),
                        "read_per_s": round(len(got) / read_s) if read_s else None,
                    }
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    return rows


def confluent_rate(bootstrap: str, topic: str, records: int, acks: str, sync: bool) -> float:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0 if sync else 5}
    )
    value = b"x" * 1024
    failed: list[Any] = []

    def report(err: Any, _message: Any) -> None:
        if err is not None:
            failed.append(err)

    producer.produce(topic, value=value, on_delivery=report)  # connects and learns metadata
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        if sync:
            producer.flush(30)
        else:
            producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{len(failed)} records failed, first: {failed[0]}")
    return records / elapsed


def throughput(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    rows = []
    for acks, brokers in (("0", 1), ("1", 1), ("all", 2)):
        where = root / f"perf-{acks}"
        with cluster(where, brokers) as bootstrap:
            for sync in (False, True):
                topic = f"perf-{acks}-{'sync' if sync else 'async'}"
                create_topic(bootstrap, topic, 12, brokers)
                records = args.perf_sync_records if sync else args.perf_records
                rate = confluent_rate(bootstrap, topic, records, acks, sync)
                row = {
                    "part": "throughput",
                    "client": "confluent-kafka",
                    "acks": acks,
                    "replication_factor": brokers,
                    "mode": "sync" if sync else "async",
                    "records": records,
                    "records_per_s": round(rate),
                    "seeds_sync_records_per_s": SEEDS[acks],
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--clients", type=lambda s: s.split(","), default=None)
    parser.add_argument("--perf-records", type=int, default=50_000)
    parser.add_argument("--perf-sync-records", type=int, default=5_000)
    parser.add_argument("--skip-exact", action="store_true")
    parser.add_argument("--skip-perf", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory(prefix="squall-kafka-clients-") as tmp:
        exact = [] if args.skip_exact else exactness(args, Path(tmp))
        perf = [] if args.skip_perf else throughput(args, Path(tmp))
    if exact:
        table = Table(title=f"{args.records:,} records each, read back with assign")
        for name in ("target", "client", "acks", "errors", "read", "exact", "produce/s", "read/s"):
            table.add_column(name)
        for r in exact:
            table.add_row(
                r["target"], r["client"], r["acks"], str(r["errors"]), f"{r['read']:,}",
                "yes" if r["exact"] else "NO", f"{r['produce_per_s']:,}", f"{r['read_per_s']:,}",
            )  # fmt: skip
        console.print(table)
    if perf:
        table = Table(title="confluent-kafka, 1 KB records, 12 partitions (records/s)")
        for name in ("acks", "RF", "async", "sync", "seeds (sync)"):
            table.add_column(name)
        for acks in ("0", "1", "all"):
            got = {r["mode"]: r for r in perf if r["acks"] == acks}
            table.add_row(
                acks, str(got["async"]["replication_factor"]),
                f"{got['async']['records_per_s']:,}", f"{got['sync']['records_per_s']:,}",
                f"{SEEDS[acks]:,}",
            )  # fmt: skip
        console.print(table)
    if args.out:
        args.out.write_text(json.dumps({"exactness": exact, "throughput": perf}, indent=2) + "\n")
    return 0 if all(r["exact"] for r in exact) else 1


if __name__ == "__main__":
    sys.exit(main())
