"""``squall cluster up | status | down`` and ``squall clean``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from squall.cluster.cluster import Cluster, ClusterState, ClusterStateError
from squall.cluster.runtimes import (
    RUNTIMES,
    RuntimeUnavailableError,
    attach,
    default_runtime,
    docker_available,
    new_run_id,
    runtime_named,
)
from squall.commands._common import fail, stderr
from squall.commands.choices import RuntimeName
from squall.exit_codes import ExitCode
from system_under_test.config import ConfigError, parse_assignments

cluster_app = typer.Typer(
    help="Bring a cluster of nodes up, inspect it, tear it down.", no_args_is_help=True
)


RunIdOption = typer.Option(
    None, "--run-id", metavar="ID", help="The cluster.  [default: the current one]"
)


@cluster_app.command("up")
def up(
    runtime: RuntimeName | None = typer.Option(
        None,
        "--runtime",
        metavar="|".join(RUNTIMES),
        help="Where the nodes run.  [default: docker where an engine answers, else local]",
    ),
    nodes: int = typer.Option(
        3, "--nodes", min=1, max=32, metavar="N", help="Brokers n1..nN (plus zk1)."
    ),
    inventory: Path | None = typer.Option(
        None,
        "--inventory",
        metavar="FILE",
        help="Hosts file; required for --runtime ssh, and for external (the running cluster).",
    ),
    settings: list[str] = typer.Option(
        [],
        "--set",
        metavar="KEY=VALUE",
        help="A setting for every broker, Kafka's names; repeatable.",
    ),
    run_id: str | None = typer.Option(
        None, "--run-id", metavar="ID", help="Name the run.  [default: random]"
    ),
    lazy_disk: bool | None = typer.Option(
        None,
        "--lazy-disk/--no-lazy-disk",
        help="The brokers' data on lazyfs, disks that can lose what was not fsynced.  "
        "[default: on for docker, off for ssh and local]",
    ),
    kafka_listener: bool = typer.Option(
        False,
        "--kafka-listener",
        help="Every broker also speaks Kafka's own protocol, on port 9093, for Kafka clients.",
    ),
) -> None:
    """Provision nodes, deploy ZooKeeper and the brokers; the cluster becomes the current one."""
    try:
        overrides = parse_assignments(settings)
    except ConfigError as err:
        fail(str(err), ExitCode.USAGE)
    chosen = runtime or default_runtime()
    if chosen in ("ssh", "external") and inventory is None:
        fail(f"--runtime {chosen} needs --inventory FILE naming the hosts", ExitCode.USAGE)
    run = run_id or new_run_id()
    try:
        implementation = runtime_named(chosen)
        with stderr.status(f"bringing up a {chosen} cluster {run}") as status:
            progress = lambda message: status.update(f"{run}: {message}")  # noqa: E731
            cluster = implementation.up(
                run,
                None if chosen in ("ssh", "external") else nodes,
                inventory=inventory,
                settings=overrides,
                progress=progress,
                lazy_disk=lazy_disk,
                kafka_listener=kafka_listener,
                kept=True,
            )
    except (RuntimeUnavailableError, ValueError) as err:  # an inventory's errors among them
        fail(str(err), ExitCode.USAGE)
    except (OSError, RuntimeError) as err:
        fail(
            f"cluster {run} did not come up: {err}; `squall clean` removes what was left",
            ExitCode.INFRASTRUCTURE,
        )
    print(
        json.dumps(
            {
                "run_id": cluster.run_id,
                "runtime": cluster.runtime,
                "bootstrap": cluster.bootstrap,
                "zookeeper": cluster.zookeeper_connect,
                "lazy_disk": cluster.state.lazy_disk,
                "kafka_bootstrap": cluster.kafka_bootstrap,
            }
        )
    )


def _status(run_id: str | None) -> dict[str, Any]:
    from squall.cluster.lazy_disk import LazyDiskError
    from system_under_test.zookeeper import ClusterMetadataStore

    cluster = attach(run_id)
    if not cluster.deployed:
        return _external_status(cluster)
    nodes = []
    for name in cluster.brokers:
        broker = cluster.broker(name)
        node: dict[str, Any] = {
            "node": name,
            "address": cluster.brokers[name].address,
            "broker_running": broker.is_running(),
        }
        if cluster.state.lazy_disk:
            try:
                node["lazy_disk"] = {"alive": True, **cluster.lazy_disk(name).unsynced().to_json()}
            except LazyDiskError as err:
                node["lazy_disk"] = {"alive": False, "error": str(err)}
        nodes.append(node)
    zk = cluster.zookeeper_service()
    nodes.append(
        {
            "node": cluster.zookeeper.name,
            "address": cluster.zookeeper.address,
            "zookeeper_running": zk.is_running(),
        }
    )
    doc: dict[str, Any] = {
        "run_id": cluster.run_id,
        "runtime": cluster.runtime,
        "bootstrap": cluster.bootstrap,
        "nodes": nodes,
    }
    try:
        store = ClusterMetadataStore(cluster.zookeeper_connect, connection_timeout_ms=3000)
        store.start(create_layout=False)
        try:
            doc["controller"] = store.controller_id()
            doc["registered_brokers"] = store.broker_ids()
            partitions = []
            # ZooKeeper holds the controller's decisions: the truth even when brokers are cut off.
            for topic in store.topics():
                for number, replicas in sorted((store.topic_assignment(topic) or {}).items()):
                    found = store.partition_state(topic, number)
                    state = found[0] if found else None
                    partitions.append(
                        {
                            "topic": topic,
                            "partition": number,
                            "replicas": replicas,
                            "leader": state.leader if state else -1,
                            "leader_epoch": state.leader_epoch if state else -1,
                            "isr": list(state.isr) if state else [],
                        }
                    )
            doc["partitions"] = partitions
        finally:
            store.close()
    except Exception as err:
        doc["zookeeper_error"] = str(err)
    return doc


def _external_status(cluster: Cluster) -> dict[str, Any]:
    """A cluster squall did not deploy: its brokers' processes by the inventory's running
    command, its roles by Kafka's metadata."""
    from squall.cluster.external import ExternalCluster

    assert isinstance(cluster, ExternalCluster)
    daemons = cluster.daemons
    doc: dict[str, Any] = {
        "run_id": cluster.run_id,
        "runtime": cluster.runtime,
        "bootstrap": cluster.bootstrap,
        "nodes": [
            {"node": name, "address": node.address, "broker_running": daemons.is_running(name)}
            for name, node in sorted(cluster.brokers.items())
        ],
    }
    try:
        doc.update(cluster.roles.status())
    except Exception as err:
        doc["metadata_error"] = str(err)
    return doc


@cluster_app.command("status")
def status(
    run_id: str | None = RunIdOption,
    as_json: bool = typer.Option(False, "--json", help="Print the status as one JSON object."),
) -> None:
    """Nodes, which brokers run, the controller, and every partition's leader and ISR."""
    try:
        doc = _status(run_id)
    except ClusterStateError as err:
        fail(str(err), ExitCode.USAGE)
    if as_json:
        print(json.dumps(doc))
        return
    console = Console()
    console.print(
        f"cluster [bold]{doc['run_id']}[/] on {doc['runtime']}, controller: "
        f"{doc.get('controller', '?')}, registered brokers: {doc.get('registered_brokers', '?')}"
    )
    nodes = Table("node", "address", "process", "lazy disk")
    for n in doc["nodes"]:
        running = n.get("broker_running", n.get("zookeeper_running"))
        disk = n.get("lazy_disk")
        if disk is None:
            shown = "-"
        elif disk["alive"]:
            shown = f"[green]mounted[/], {disk['bytes']:,} bytes unsynced"
        else:
            shown = "[red]its daemon died[/]"
        nodes.add_row(
            n["node"], n["address"], "[green]running[/]" if running else "[red]down[/]", shown
        )
    console.print(nodes)
    if doc.get("partitions"):
        parts = Table("partition", "leader", "epoch", "replicas", "isr")
        for p in doc["partitions"]:
            parts.add_row(
                f"{p['topic']}-{p['partition']}",
                str(p["leader"]),
                str(p["leader_epoch"]),
                ",".join(map(str, p["replicas"])),
                ",".join(map(str, p["isr"])),
            )
        console.print(parts)
    for key in ("zookeeper_error", "metadata_error"):
        if key in doc:
            console.print(f"[yellow]{key.replace('_', ' ')}:[/] {doc[key]}")


@cluster_app.command("down")
def down(run_id: str | None = RunIdOption) -> None:
    """Stop every process and remove the cluster's nodes."""
    try:
        state = ClusterState.load(run_id)
        removed = runtime_named(state.runtime).down(state)
    except ClusterStateError as err:
        fail(str(err), ExitCode.USAGE)
    except RuntimeUnavailableError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)
    print(json.dumps({"run_id": state.run_id, "removed": removed}))


def clean() -> None:
    """Remove everything squall left behind: containers, networks, rules, qdiscs, processes."""
    removed: list[str] = []
    problems: list[str] = []
    try:  # ssh clusters whose owner is gone: daemons stopped, squall's host changes undone
        removed += runtime_named("ssh").clean(kept_too=True)
    except Exception as err:
        problems.append(f"ssh: {err}")
    removed += runtime_named("local").clean(kept_too=True)
    if docker_available() is None:
        removed += runtime_named("docker").clean(kept_too=True)
    for line in removed:
        stderr.print(f"removed {line}")
    print(json.dumps({"removed": removed, "problems": problems}))
    if problems:
        raise typer.Exit(ExitCode.INFRASTRUCTURE)
