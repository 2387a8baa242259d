"""``squall produce`` and ``squall consume``: the console producer and consumer, as Kafka's
console tools, with JSON lines on stdout (the logic is squall.console_tools)."""

from __future__ import annotations

import logging
import sys

import typer

from squall.commands._client import AcksOption, BootstrapOption, client_errors
from squall.commands._common import fail
from squall.commands.choices import Acks, ProducerMode
from squall.console_tools import OffsetSpec, consume_records, produce_lines
from squall.exit_codes import ExitCode
from system_under_test.config import ConfigError, parse_assignments


def produce(
    topic: str = typer.Option(..., "--topic", metavar="NAME", help="The topic to send to."),
    partition: int | None = typer.Option(
        None,
        "--partition",
        min=0,
        metavar="N",
        help="The partition.  [default: by key, else round robin]",
    ),
    acks: Acks = AcksOption,
    mode: ProducerMode = typer.Option(
        ProducerMode.SYNC,
        "--mode",
        metavar="sync|async",
        help="sync: one request at a time; async: batched.",
    ),
    key: str | None = typer.Option(None, "--key", metavar="KEY", help="The key of every record."),
    key_separator: str | None = typer.Option(
        None, "--key-separator", metavar="SEP", help="Split each line into KEY<SEP>VALUE."
    ),
    bootstrap: str = BootstrapOption,
) -> None:
    """Send one record per stdin line; print {"partition":P,"offset":O} or {"error":..} per line."""
    if key is not None and key_separator is not None:
        fail("--key and --key-separator exclude each other", ExitCode.USAGE)
    with client_errors():
        tally = produce_lines(
            sys.stdin,
            sys.stdout,
            bootstrap=bootstrap,
            topic=topic,
            partition=partition,
            acks=int(acks),
            mode=mode.literal,
            key=key,
            key_separator=key_separator,
        )
    if tally.cluster_unreachable:
        fail(
            f"{tally.first_unreachable}; nothing was sent. Start the cluster, or point "
            "--bootstrap-server at it",
            ExitCode.INFRASTRUCTURE,
        )
    if tally.failed:
        raise typer.Exit(ExitCode.ANOMALIES)


def consume(
    topic: str = typer.Option(..., "--topic", metavar="NAME", help="The topic to read."),
    partition: int = typer.Option(0, "--partition", min=0, metavar="N", help="The partition."),
    from_offset: str | None = typer.Option(
        None,
        "--from-offset",
        metavar="N|earliest|latest",
        help="An offset, earliest or latest; when given it wins over a group's committed "
        "offset. Default: with --group the group's committed offset, or where "
        "auto.offset.reset says (earliest unless --consumer-config sets it) if it has none; "
        "without --group earliest.",
    ),
    max_records: int | None = typer.Option(
        None, "--max-records", min=1, metavar="N", help="Stop after N records."
    ),
    timeout_ms: int | None = typer.Option(
        None,
        "--timeout-ms",
        min=0,
        metavar="MS",
        help="Stop after this long without a record.  [default: never]",
    ),
    print_key: bool = typer.Option(False, "--print-key", help="Add each record's key."),
    print_timestamp: bool = typer.Option(
        False, "--print-timestamp", help="Add each record's timestamp."
    ),
    group: str | None = typer.Option(
        None,
        "--group",
        metavar="NAME",
        help="Consume as this consumer group, whose offsets are kept in ZooKeeper "
        "(needs --zookeeper).",
    ),
    zookeeper: str | None = typer.Option(
        None,
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help="The ZooKeeper holding --group's offsets.",
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
        metavar="KEY=VALUE",
        help="Consumer key=value, Kafka 0.8 names, e.g. auto.offset.reset=latest; repeatable.",
    ),
    bootstrap: str = BootstrapOption,
) -> None:
    """Print {"offset":O,"value":"..."} per record of one partition."""
    start = _start_offset(from_offset)
    if commit and group is None:
        fail("--commit needs --group: offsets are committed for a consumer group", ExitCode.USAGE)
    if zookeeper is not None and group is None:
        fail("--zookeeper needs --group: it holds a consumer group's offsets", ExitCode.USAGE)
    try:
        config: dict[str, object] = dict(parse_assignments(consumer_config, "--consumer-config"))
    except ConfigError as err:
        fail(str(err), ExitCode.USAGE)
    if group is not None:
        # Our own error message names the ZooKeeper; kazoo's retry chatter would only add noise.
        logging.getLogger("kazoo").setLevel(logging.ERROR)
    with client_errors():
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


def _start_offset(text: str | None) -> OffsetSpec | None:
    """--from-offset: earliest, latest or an offset; None when not given."""
    if text is None:
        return None
    if text == "earliest":
        return "earliest"
    if text == "latest":
        return "latest"
    try:
        offset = int(text)
    except ValueError:
        fail(f"--from-offset {text!r}: expected a number, earliest or latest", ExitCode.USAGE)
    if offset < 0:
        fail(f"--from-offset {offset}: offsets start at 0", ExitCode.USAGE)
    return offset
