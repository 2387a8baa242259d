"""``squall roundtrip``: a real produce / crash / consume round trip on a standalone broker."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from squall.cluster.broker_process import BrokerProcess
from squall.exit_codes import ExitCode
from squall.perf import LatencyRecorder, percentile
from system_under_test.client import AdminClient, Consumer, Producer

TOPIC = "roundtrip"
PARTITIONS = 3


@dataclass
class DemoOutcome:
    """What the round trip sent, what was acknowledged, and what came back after the crash."""

    sent: int
    acknowledged: dict[tuple[int, int], bytes]
    read_back: dict[tuple[int, int], bytes]
    produce_seconds: float
    latencies_ms: list[float]

    @property
    def lost(self) -> list[tuple[int, int]]:
        return sorted(k for k in self.acknowledged if k not in self.read_back)

    @property
    def changed(self) -> list[tuple[int, int]]:
        return sorted(
            k
            for k, v in self.acknowledged.items()
            if k in self.read_back and self.read_back[k] != v
        )


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def run_roundtrip(*, records: int, record_size: int, workdir: Path | None = None) -> ExitCode:
    """Run the round trip; SUCCESS when every acknowledged record survived the crash, else ANOMALIES."""
    console = Console()
    with tempfile.TemporaryDirectory(prefix="squall-roundtrip-") as tmp:
        root = workdir or Path(tmp)
        broker = BrokerProcess(root / "broker", settings={"log.segment.bytes": 4 * 1024 * 1024})
        console.print(
            Panel.fit(
                "A standalone broker of squall's replicated log, a producer with acks=1, a SIGKILL "
                "of the broker, a restart with log recovery, and a full read back.",
                title="squall roundtrip",
            )
        )
        console.print(f"starting broker on {broker.bootstrap} (data in {broker.data_dir})")
        broker.start()
        try:
            outcome = _produce_crash_consume(console, broker, records, record_size)
        finally:
            broker.stop()
    _summarise(console, outcome, record_size)
    return ExitCode.SUCCESS if not outcome.lost and not outcome.changed else ExitCode.ANOMALIES


def _produce_crash_consume(
    console: Console, broker: BrokerProcess, records: int, record_size: int
) -> DemoOutcome:
    admin = AdminClient(broker.bootstrap)
    admin.create_topic(TOPIC, PARTITIONS)
    admin.close()

    recorder = LatencyRecorder()
    acknowledged: dict[tuple[int, int], bytes] = {}
    pad = b"." * max(0, record_size - 16)
    futures = []
    with _progress(console) as bar:
        task = bar.add_task("producing (acks=1, async)", total=records)
        start = time.perf_counter()
        with Producer(
            broker.bootstrap,
            acks=1,
            mode="async",
            config={"batch.num.messages": 500, "queue.buffering.max.ms": 5},
        ) as producer:
            for i in range(records):
                value = f"{i:015d}:".encode() + pad
                future = producer.send(TOPIC, value)
                future.add_callback(recorder.completion(time.perf_counter()))
                futures.append((value, future))
                if i % 500 == 0:
                    bar.update(task, completed=i)
            producer.flush()
        produce_seconds = time.perf_counter() - start
        bar.update(task, completed=records)
    for value, future in futures:
        if future.exception() is None:
            meta = future.result()
            acknowledged[(meta.partition, meta.offset)] = value

    console.print("[bold]SIGKILL[/] the broker, then restart it (unclean shutdown: log recovery)")
    broker.kill()
    broker.start()

    read_back: dict[tuple[int, int], bytes] = {}
    consumer = Consumer(broker.bootstrap)
    try:
        consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])
        for p in range(PARTITIONS):
            consumer.seek_to_beginning(TOPIC, p)
        with _progress(console) as bar:
            task = bar.add_task("consuming from offset 0", total=len(acknowledged))
            idle_since = time.monotonic()
            while len(read_back) < len(acknowledged) and time.monotonic() - idle_since < 5:
                batch = consumer.poll(500)
                if batch:
                    idle_since = time.monotonic()
                for record in batch:
                    read_back[(record.partition, record.offset)] = record.value or b""
                bar.update(task, completed=min(len(read_back), len(acknowledged)))
    finally:
        consumer.close()
    return DemoOutcome(records, acknowledged, read_back, produce_seconds, recorder.latencies_ms)


def _summarise(console: Console, outcome: DemoOutcome, record_size: int) -> None:
    latencies = sorted(outcome.latencies_ms)
    rate = outcome.sent / outcome.produce_seconds if outcome.produce_seconds else 0.0
    table = Table(title="round trip", show_header=False)
    table.add_row("records sent", f"{outcome.sent:,}")
    table.add_row("acknowledged (acks=1)", f"{len(outcome.acknowledged):,}")
    table.add_row("read back after SIGKILL + restart", f"{len(outcome.read_back):,}")
    table.add_row("produce rate", f"{rate:,.0f} records/s, {rate * record_size / 2**20:,.1f} MB/s")
    table.add_row(
        "produce latency p50 / p99 / p99.9",
        " / ".join(f"{percentile(latencies, q):.1f} ms" for q in (0.5, 0.99, 0.999)),
    )
    table.add_row("acknowledged but lost", str(len(outcome.lost)))
    table.add_row("acknowledged but changed", str(len(outcome.changed)))
    console.print(table)
    if outcome.lost or outcome.changed:
        console.print(f"[bold red]INVALID[/]: first lost (partition, offset): {outcome.lost[:5]}")
    else:
        console.print("[bold green]VALID[/]: every acknowledged record survived the crash")
