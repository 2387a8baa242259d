"""``squall perf produce``: producer throughput and latency, as Kafka's
kafka-producer-perf-test measures them (the measuring is squall.perf)."""

from __future__ import annotations

import functools
import json

import typer
from rich.progress import Progress

from squall.commands._client import AcksOption, BootstrapOption, client_errors
from squall.commands._common import fail, stderr
from squall.commands.choices import Acks, ProducerMode
from squall.exit_codes import ExitCode
from squall.perf import run_producer_perf
from system_under_test.config import ConfigError, parse_assignments

perf_app = typer.Typer(
    help="Measure the broker, as Kafka's perf-test tools do.", no_args_is_help=True
)


@perf_app.command("produce")
def produce(
    topic: str = typer.Option(..., "--topic", metavar="NAME", help="The topic to send to."),
    records: int = typer.Option(100_000, "--records", min=1, metavar="N", help="Records to send."),
    record_size: int = typer.Option(
        1024, "--record-size", min=0, metavar="BYTES", help="Bytes of each record's value."
    ),
    acks: Acks = AcksOption,
    mode: ProducerMode = typer.Option(
        ProducerMode.ASYNC,
        "--mode",
        metavar="sync|async",
        help="sync: one request at a time; async: batched.",
    ),
    partition: int = typer.Option(0, "--partition", min=0, metavar="N", help="The partition."),
    producer_config: list[str] = typer.Option(
        [],
        "--producer-config",
        metavar="KEY=VALUE",
        help="A producer setting, e.g. batch.num.messages=500; repeatable.",
    ),
    progress: bool = typer.Option(
        True, "--progress/--no-progress", help="A progress bar on stderr."
    ),
    bootstrap: str = BootstrapOption,
) -> None:
    """Send records as fast as the producer can; print rate and latency percentiles as JSON."""
    try:
        config: dict[str, object] = dict(parse_assignments(producer_config, "--producer-config"))
    except ConfigError as err:
        fail(str(err), ExitCode.USAGE)
    run = functools.partial(
        run_producer_perf,
        bootstrap,
        topic,
        records=records,
        record_size=record_size,
        acks=int(acks),
        mode=mode.literal,
        partition=partition,
        producer_config=config,
    )
    with client_errors():
        if progress and stderr.is_terminal:
            with Progress(console=stderr, transient=True) as bar:
                task = bar.add_task(f"producing to {topic}", total=records)
                result = run(on_progress=lambda n: bar.update(task, completed=n))
        else:
            result = run()
    print(json.dumps(result.as_dict()))
    if result.errors:
        raise typer.Exit(ExitCode.ANOMALIES)
