"""``squall topic create | describe | elect-leaders``: topics, as Kafka's kafka-topics does."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from squall.commands._client import BootstrapOption, client_errors
from squall.commands._common import fail
from squall.exit_codes import ExitCode
from system_under_test.config import ConfigError, parse_assignments

topic_app = typer.Typer(help="Create and describe topics.", no_args_is_help=True)


@topic_app.command("create")
def create(
    topic: str = typer.Option(
        ..., "--topic", metavar="NAME", help="Topic name: letters, digits, '.', '_', '-'."
    ),
    partitions: int = typer.Option(1, "--partitions", min=1, metavar="N", help="Partitions."),
    replication_factor: int = typer.Option(
        1, "--replication-factor", min=1, metavar="N", help="Replicas of each partition."
    ),
    min_insync_replicas: int | None = typer.Option(
        None,
        "--min-insync-replicas",
        min=1,
        metavar="N",
        help="ISR size an acks=-1 produce needs.  [default: the broker's]",
    ),
    unclean_leader_election: bool = typer.Option(
        False, "--unclean-leader-election", help="Allow out-of-sync replicas to become leader."
    ),
    topic_config: list[str] = typer.Option(
        [],
        "--config",
        metavar="KEY=VALUE",
        help="A topic setting, e.g. segment.bytes=1048576; repeatable.",
    ),
    bootstrap: str = BootstrapOption,
) -> None:
    """Create a topic; prints one JSON line."""
    from system_under_test.client import AdminClient

    try:
        configs = parse_assignments(topic_config, "--config")
    except ConfigError as err:
        fail(str(err), ExitCode.USAGE)
    if min_insync_replicas is not None:
        configs["min.insync.replicas"] = str(min_insync_replicas)
    if unclean_leader_election:
        configs["unclean.leader.election.enable"] = "true"
    with client_errors():
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
def describe(
    topic: list[str] = typer.Option(
        [], "--topic", metavar="NAME", help="A topic to describe; repeatable.  [default: all]"
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON line per partition."),
    bootstrap: str = BootstrapOption,
) -> None:
    """Leader, leader epoch, replicas and ISR of every partition."""
    from system_under_test.client import AdminClient

    with client_errors():
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
def elect_leaders(
    zookeeper: str = typer.Option(
        ...,
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help="The cluster's ZooKeeper.",
    ),
    topic: str | None = typer.Option(
        None, "--topic", metavar="NAME", help="Only this topic.  [default: all]"
    ),
    partition: list[int] = typer.Option(
        [], "--partition", metavar="N", help="Only this partition; repeatable.  [default: all]"
    ),
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
                    fail(f"topic {name!r} does not exist", ExitCode.USAGE)
                wanted += [(name, p) for p in sorted(assignment) if not partition or p in partition]
            store.request_preferred_election(wanted)
        finally:
            store.close()
    except MetadataError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)
    print(json.dumps({"requested": [f"{t}-{p}" for t, p in wanted]}))
