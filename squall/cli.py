"""The ``squall`` command line.

Exit codes follow HISTORY.md: 0 success, 1 anomalies found, 2 invalid input or usage,
3 infrastructure failure (a broker, ZooKeeper or a node could not be reached or run).
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from squall.commands.check import check as check_command
from squall.commands.cluster import clean as clean_command
from squall.commands.cluster import cluster_app
from squall.commands.nemesis import nemesis_app
from squall.commands.run import campaign as campaign_command
from squall.commands.run import replay as replay_command
from squall.commands.run import report as report_command
from squall.commands.run import run as run_command
from system_under_test.client.exceptions import (
    ClientConfigError,
    ClientError,
    NoOffsetForPartitionError,
)
from system_under_test.config import BrokerConfig, ConfigError, parse_assignments
from system_under_test.errors import BrokerError

EXIT_USAGE = 2
EXIT_INFRASTRUCTURE = 3

app = typer.Typer(
    name="squall",
    help="Jepsen-style fault injection for a Kafka-style replicated log.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
topic_app = typer.Typer(help="Create and describe topics.", no_args_is_help=True)
perf_app = typer.Typer(
    help="Measure the broker, as Kafka's perf-test tools do.", no_args_is_help=True
)
app.add_typer(topic_app, name="topic")
app.add_typer(perf_app, name="perf")
app.add_typer(cluster_app, name="cluster")
app.add_typer(nemesis_app, name="nemesis")
app.command("clean")(clean_command)
app.command("run")(run_command)
app.command("replay")(replay_command)
app.command("report")(report_command)
app.command("campaign")(campaign_command)
app.command("check")(check_command)

stderr = Console(stderr=True, soft_wrap=True)

BootstrapOption = typer.Option(
    "127.0.0.1:9092", "--bootstrap", "--bootstrap-server", help="HOST:PORT[,HOST:PORT] of brokers."
)


def _fail(message: str, code: int) -> NoReturn:
    stderr.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


@contextmanager
def _client_errors() -> Iterator[None]:
    """Turn client-side failures into clear messages and HISTORY.md exit codes."""
    try:
        yield
    except (ConfigError, ClientConfigError, NoOffsetForPartitionError) as err:
        _fail(str(err), EXIT_USAGE)
    except ClientError as err:
        _fail(str(err), EXIT_INFRASTRUCTURE)
    except BrokerError as err:
        _fail(str(err), EXIT_INFRASTRUCTURE if err.retriable else EXIT_USAGE)
    except (ConnectionError, TimeoutError, OSError) as err:
        _fail(str(err), EXIT_INFRASTRUCTURE)


def _acks(value: str) -> int:
    if value.lower() == "all":
        return -1
    try:
        acks = int(value)
    except ValueError:
        _fail(f"--acks {value!r}: expected 0, 1, -1 or all", EXIT_USAGE)
    if acks not in (0, 1, -1):
        _fail(f"--acks {value!r}: expected 0, 1, -1 or all", EXIT_USAGE)
    return acks


def _mode(value: str) -> Literal["sync", "async"]:
    if value == "sync":
        return "sync"
    if value == "async":
        return "async"
    _fail(f"--mode {value!r}: expected sync or async", EXIT_USAGE)


@app.command()
def broker(
    config_file: Path | None = typer.Option(
        None, "--config", help="A server.properties-style file."
    ),
    settings: list[str] = typer.Option([], "--set", help="key=value, Kafka's names; repeatable."),
    standalone: bool = typer.Option(False, "--standalone", help="Run without ZooKeeper."),
) -> None:
    """Run one broker of the replicated log in the foreground (SIGTERM shuts it down cleanly)."""
    from system_under_test.server import run_broker

    try:
        config = BrokerConfig.load(config_file, settings)
    except ConfigError as err:
        _fail(str(err), EXIT_USAGE)
    raise typer.Exit(run_broker(config, standalone=standalone or config.standalone))


@topic_app.command("create")
def topic_create(
    topic: str = typer.Option(..., "--topic", help="Topic name: letters, digits, '.', '_', '-'."),
    partitions: int = typer.Option(1, "--partitions", min=1),
    replication_factor: int = typer.Option(1, "--replication-factor", min=1),
    min_insync_replicas: int | None = typer.Option(None, "--min-insync-replicas", min=1),
    unclean_leader_election: bool = typer.Option(
        False, "--unclean-leader-election", help="Allow out-of-sync replicas to become leader."
    ),
    topic_config: list[str] = typer.Option(
        [], "--config", help="Topic key=value, e.g. segment.bytes=1048576."
    ),
    bootstrap: str = BootstrapOption,
) -> None:
    """Create a topic; prints one JSON line."""
    from system_under_test.client import AdminClient

    try:
        configs = parse_assignments(topic_config, "--config")
    except ConfigError as err:
        _fail(str(err), EXIT_USAGE)
    if min_insync_replicas is not None:
        configs["min.insync.replicas"] = str(min_insync_replicas)
    if unclean_leader_election:
        configs["unclean.leader.election.enable"] = "true"
    with _client_errors():
        admin = AdminClient(bootstrap)
        try:
            admin.create_topic(
                topic, partitions, replication_factor=replication_factor, config=configs
            )
        finally:
            admin.close()
    print(
        json.dumps(
            {"created": topic, "partitions": partitions, "replication_factor": replication_factor}
        )
    )


@topic_app.command("describe")
def topic_describe(
    topic: list[str] = typer.Option([], "--topic", help="Topics to describe; all when omitted."),
    as_json: bool = typer.Option(False, "--json", help="One JSON line per partition."),
    bootstrap: str = BootstrapOption,
) -> None:
    """Leader, leader epoch, replicas and ISR of every partition."""
    from system_under_test.client import AdminClient

    with _client_errors():
        admin = AdminClient(bootstrap)
        try:
            topics = admin.describe_topics(topic or None)
        finally:
            admin.close()
    if as_json:
        for description in topics:
            for p in description.partitions:
                line = {
                    "topic": description.name,
                    "partition": p.partition,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                }
                print(json.dumps(line, separators=(",", ":")))
        return
    table = Table(title="Topics")
    for column in ("topic", "partition", "leader", "epoch", "replicas", "isr"):
        table.add_column(column)
    for description in topics:
        for p in description.partitions:
            table.add_row(
                description.name,
                str(p.partition),
                str(p.leader),
                str(p.leader_epoch),
                ",".join(map(str, p.replicas)),
                ",".join(map(str, p.isr)),
            )
    Console().print(table)


@topic_app.command("elect-leaders")
def topic_elect_leaders(
    zookeeper: str = typer.Option(..., "--zookeeper", help="HOST:PORT[/chroot] of the cluster."),
    topic: str | None = typer.Option(None, "--topic", help="Only this topic (default: all)."),
    partition: list[int] = typer.Option([], "--partition", help="Only these partitions."),
) -> None:
    """Preferred-leader election: move leadership back to each partition's first replica."""
    from system_under_test.zookeeper import ClusterMetadataStore, MetadataError

    store = ClusterMetadataStore(zookeeper, connection_timeout_ms=5000)
    try:
        store.start()
        try:
            topics = [topic] if topic else store.topics()
            wanted: list[tuple[str, int]] = []
            for name in topics:
                assignment = store.topic_assignment(name)
                if assignment is None:
                    _fail(f"topic {name!r} does not exist", EXIT_USAGE)
                wanted += [(name, p) for p in sorted(assignment) if not partition or p in partition]
            store.request_preferred_election(wanted)
        finally:
            store.close()
    except MetadataError as err:
        _fail(str(err), EXIT_INFRASTRUCTURE)
    print(json.dumps({"requested": [f"{t}-{p}" for t, p in wanted]}))


@app.command()
def produce(
    topic: str = typer.Option(..., "--topic"),
    partition: int | None = typer.Option(
        None, "--partition", min=0, help="Default: by key, else round robin."
    ),
    acks: str = typer.Option("1", "--acks", help="0, 1, -1 (all)."),
    mode: str = typer.Option("sync", "--mode", help="sync: one request at a time; async: batched."),
    key: str | None = typer.Option(None, "--key", help="The key of every record."),
    key_separator: str | None = typer.Option(
        None, "--key-separator", help="Split each line into KEY<sep>VALUE."
    ),
    bootstrap: str = BootstrapOption,
) -> None:
    """Send one record per stdin line; print {"partition":P,"offset":O} or {"error":..} per line."""
    from squall.console_tools import produce_lines

    if key is not None and key_separator is not None:
        _fail("--key and --key-separator exclude each other", EXIT_USAGE)
    with _client_errors():
        _ok, failed = produce_lines(
            sys.stdin,
            sys.stdout,
            bootstrap=bootstrap,
            topic=topic,
            partition=partition,
            acks=_acks(acks),
            mode=_mode(mode),
            key=key,
            key_separator=key_separator,
        )
    if failed:
        raise typer.Exit(1)


@app.command()
def consume(
    topic: str = typer.Option(..., "--topic"),
    partition: int = typer.Option(0, "--partition", min=0),
    from_offset: str | None = typer.Option(
        None,
        "--from-offset",
        help="An offset, earliest or latest; when given it wins over a group's committed "
        "offset. Default: with --group the group's committed offset, or where "
        "auto.offset.reset says (earliest unless --consumer-config sets it) if it has none; "
        "without --group earliest.",
    ),
    max_records: int | None = typer.Option(None, "--max-records", min=1),
    timeout_ms: int | None = typer.Option(
        None, "--timeout-ms", min=0, help="Stop after this long without a record."
    ),
    print_key: bool = typer.Option(False, "--print-key"),
    print_timestamp: bool = typer.Option(False, "--print-timestamp"),
    group: str | None = typer.Option(
        None,
        "--group",
        help="Consume as this consumer group, whose offsets are kept in ZooKeeper "
        "(needs --zookeeper).",
    ),
    zookeeper: str | None = typer.Option(
        None,
        "--zookeeper",
        help="HOST:PORT or HOST:PORT/chroot of the ZooKeeper holding --group's offsets.",
    ),
    commit: bool = typer.Option(
        False,
        "--commit",
        help="After each batch printed, commit for --group the offset after the last record "
        "printed, so that the next run resumes there.",
    ),
    consumer_config: list[str] = typer.Option(
        [],
        "--consumer-config",
        help="Consumer key=value, Kafka 0.8 names, e.g. auto.offset.reset=latest; repeatable.",
    ),
    bootstrap: str = BootstrapOption,
) -> None:
    """Print {"offset":O,"value":"..."} per record of one partition."""
    from squall.console_tools import OffsetSpec, consume_records

    start: OffsetSpec | None = None
    if from_offset in ("earliest", "latest"):
        start = "earliest" if from_offset == "earliest" else "latest"
    elif from_offset is not None:
        try:
            start = int(from_offset)
        except ValueError:
            _fail(
                f"--from-offset {from_offset!r}: expected a number, earliest or latest", EXIT_USAGE
            )
        if start < 0:
            _fail(f"--from-offset {start}: offsets start at 0", EXIT_USAGE)
    if commit and group is None:
        _fail("--commit needs --group: offsets are committed for a consumer group", EXIT_USAGE)
    if zookeeper is not None and group is None:
        _fail("--zookeeper needs --group: it holds a consumer group's offsets", EXIT_USAGE)
    try:
        config: dict[str, object] = dict(parse_assignments(consumer_config, "--consumer-config"))
    except ConfigError as err:
        _fail(str(err), EXIT_USAGE)
    if group is not None:
        # Our own error message names the ZooKeeper; kazoo's retry chatter would only add noise.
        logging.getLogger("kazoo").setLevel(logging.ERROR)
    with _client_errors():
        consume_records(
            sys.stdout,
            bootstrap=bootstrap,
            topic=topic,
            partition=partition,
            from_offset=start,
            max_records=max_records,
            timeout_ms=timeout_ms,
            print_key=print_key,
            print_timestamp=print_timestamp,
            group=group,
            zookeeper=zookeeper,
            commit=commit,
            consumer_config=config,
        )


@perf_app.command("produce")
def perf_produce(
    topic: str = typer.Option(..., "--topic"),
    records: int = typer.Option(100_000, "--records", min=1),
    record_size: int = typer.Option(1024, "--record-size", min=0),
    acks: str = typer.Option("1", "--acks"),
    mode: str = typer.Option("async", "--mode", help="sync or async."),
    partition: int = typer.Option(0, "--partition", min=0),
    producer_config: list[str] = typer.Option(
        [], "--producer-config", help="Producer key=value, e.g. batch.num.messages=500."
    ),
    progress: bool = typer.Option(
        True, "--progress/--no-progress", help="A progress bar on stderr."
    ),
    bootstrap: str = BootstrapOption,
) -> None:
    """Send records as fast as the producer can; print rate and latency percentiles as JSON."""
    from rich.progress import Progress

    from squall.perf import run_producer_perf

    try:
        config: dict[str, object] = dict(parse_assignments(producer_config, "--producer-config"))
    except ConfigError as err:
        _fail(str(err), EXIT_USAGE)
    run = functools.partial(
        run_producer_perf,
        bootstrap,
        topic,
        records=records,
        record_size=record_size,
        acks=_acks(acks),
        mode=_mode(mode),
        partition=partition,
        producer_config=config,
    )
    with _client_errors():
        if progress and stderr.is_terminal:
            with Progress(console=stderr, transient=True) as bar:
                task = bar.add_task(f"producing to {topic}", total=records)
                result = run(on_progress=lambda n: bar.update(task, completed=n))
        else:
            result = run()
    print(json.dumps(result.as_dict()))
    if result.errors:
        raise typer.Exit(1)


@app.command()
def demo(
    records: int = typer.Option(20_000, "--records", min=1),
    record_size: int = typer.Option(1024, "--record-size", min=1),
    workdir: Path | None = typer.Option(None, "--workdir", help="Default: a temporary directory."),
) -> None:
    """A real round trip on a standalone broker: produce, consume back, verify, summarise."""
    from squall.demo import run_demo

    raise typer.Exit(run_demo(records=records, record_size=record_size, workdir=workdir))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``squall`` script."""
    try:
        code = app(args=argv, standalone_mode=False)
    except typer.Exit as done:
        return int(done.exit_code)
    except typer.Abort:
        stderr.print("aborted")
        return 130
    except typer.TyperException as err:  # usage errors: unknown option, missing value...
        show = getattr(err, "show", None)
        if callable(show):
            show(file=sys.stderr)
        else:
            stderr.print(f"error: {err.message}", highlight=False)
        return EXIT_USAGE
    return code if isinstance(code, int) else 0
