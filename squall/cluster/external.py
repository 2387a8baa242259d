"""Clusters squall did not deploy: a Kafka-compatible cluster already running (Kafka with
ZooKeeper or KRaft, Redpanda, our own brokers started by hand), reached through its bootstrap
servers, its brokers' hosts over SSH, and the commands that kill, start, stop, pause and
resume each broker there.

The inventory is a TOML file, the ssh runtime's host tables plus ``[kafka]`` and
``[commands]``::

    [kafka]
    bootstrap = "10.0.0.11:9092,10.0.0.12:9092,10.0.0.13:9092"

    [commands]        # shell commands run on a broker's host, as its SSH user
    running = "systemctl is-active --quiet kafka"   # exit 0 while the broker's process exists
    kill = "systemctl kill --signal=KILL kafka"
    start = "systemctl start kafka"
    stop = "systemctl stop kafka"
    pause = "systemctl kill --signal=STOP kafka"
    resume = "systemctl kill --signal=CONT kafka"

    [network]
    partitions = true # squall may cut the network between brokers (iptables; default off)

    [defaults]
    user = "root"
    key_file = "~/.ssh/id_ed25519"
    known_hosts = "~/.ssh/known_hosts"

    [[brokers]]
    name = "n1"       # n<broker id>: Kafka's broker.id (node.id under KRaft)
    host = "10.0.0.11"
    # [brokers.commands] overrides any command for this broker

A command may name ``{name}``, ``{id}`` and ``{host}`` (the broker's node name, id and
host). squall never installs, configures, stops for good or removes anything on these
hosts (but its own iptables chain, where partitions are allowed): ``down`` forgets the
cluster, and a run ends with every broker resumed and started.
There is no ZooKeeper node: faults on ``zk1`` cannot be applied, and roles come from Kafka's
Metadata (``squall.cluster.kafka_roles``).
"""

from __future__ import annotations

import socket
import string
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import field_validator

from nemesis.partitioner import CHAIN, Partitioner
from nemesis.protocols import Capabilities
from squall.cluster.cluster import ZOOKEEPER_NODE, Cluster, ClusterState, NodeState, broker_id_of
from squall.cluster.inventory import (
    BrokerHost,
    HostEntry,
    HostResolver,
    HostSettings,
    InventoryError,
)
from squall.cluster.kafka_roles import KafkaRoles
from squall.cluster.node import Command, CommandResult, DaemonSpec, Node, NodeError
from squall.cluster.owner import owner_label
from squall.cluster.services import BrokerService
from squall.cluster.ssh import SshNode
from squall.config import ConfigModel, Text, read_toml, validate

RUNTIME = "external"
OPERATIONS = ("running", "kill", "start", "stop", "pause", "resume")
PLACEHOLDERS = frozenset({"name", "id", "host"})
NOT_DEPLOYED = "a cluster squall did not deploy keeps its own disks and network"
_FORMAT_HINT = (
    "; pass the TOML file that describes the cluster (format: squall/cluster/external.py)"
)


def check_command(command: str) -> str:
    """``command`` if it is a usable shell command template; ValueError otherwise."""
    if not command.strip():
        raise ValueError("must not be empty")
    if "\0" in command:
        raise ValueError("must not contain a NUL character")
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(command) if name is not None}
    except ValueError as err:
        raise ValueError(
            f"is not a valid template ({err}); write {{{{ and }}}} for braces"
        ) from None
    unknown = sorted(n for n in names if n not in PLACEHOLDERS)
    if unknown:
        raise ValueError(
            f"names {', '.join('{' + n + '}' for n in unknown)}; only {{name}}, {{id}} and "
            "{host} are filled in (write {{ and }} for literal braces)"
        )
    return command


class CommandTable(ConfigModel):
    """``[commands]``: how to act on a broker's process on its host."""

    running: Text | None = None
    """Exits 0 while the broker's process exists (a paused one included)."""
    kill: Text | None = None
    """Kills the broker's process at once (SIGKILL: a crash)."""
    start: Text | None = None
    """Starts the broker; squall then waits until the cluster's metadata lists it."""
    stop: Text | None = None
    """Stops the broker cleanly."""
    pause: Text | None = None
    """Pauses the broker's process (SIGSTOP)."""
    resume: Text | None = None
    """Resumes it (SIGCONT)."""

    @field_validator(*OPERATIONS)
    @classmethod
    def _template(cls, command: str | None) -> str | None:
        return None if command is None else check_command(command)


class KafkaTable(ConfigModel):
    """``[kafka]``: where Kafka clients connect."""

    bootstrap: Text
    """Comma-separated host:port of some of the brokers' Kafka listeners."""

    @field_validator("bootstrap")
    @classmethod
    def _servers(cls, bootstrap: str) -> str:
        servers = [s.strip() for s in bootstrap.split(",")]
        for server in servers:
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{server!r} is not host:port; write host:port[,host:port...]")
        return ",".join(servers)


class NetworkTable(ConfigModel):
    """``[network]``: what squall may do to the hosts' network."""

    partitions: bool = False
    """Cut the network between brokers with iptables: squall adds a chain of its own,
    SQUALL, jumped to from INPUT, and removes it when the cluster is taken down. Needs
    iptables and a user allowed to change its rules on every host, and brokers that reach
    one another at the inventory's host addresses."""


class ExternalBroker(BrokerHost):
    """``[[brokers]]``: one broker's host, and its own commands where they differ."""

    commands: CommandTable | None = None
    """This broker's own commands, over [commands]."""


class ExternalInventoryFile(ConfigModel):
    """The inventory of a cluster squall did not deploy."""

    kafka: KafkaTable
    """The [kafka] table: the bootstrap servers."""
    commands: CommandTable = CommandTable()
    """Commands for every broker; a broker's own table overrides them."""
    network: NetworkTable = NetworkTable()
    """What squall may do to the hosts' network (nothing by default)."""
    defaults: HostSettings = HostSettings()
    """How to log in to every host (the ssh runtime's host settings)."""
    brokers: list[ExternalBroker]
    """One [[brokers]] table per broker (name = "n<broker id>", host = ...)."""


@dataclass(frozen=True)
class BrokerCommands:
    """One broker's commands, filled in."""

    running: str
    kill: str
    start: str
    stop: str
    pause: str
    resume: str


@dataclass(frozen=True)
class ExternalInventory:
    """A cluster squall did not deploy: its bootstrap servers, its brokers' hosts and
    commands."""

    bootstrap: str
    brokers: tuple[HostEntry, ...]
    commands: Mapping[str, BrokerCommands]
    source: str
    partitions: bool = False
    """The inventory lets squall cut the network between brokers (``[network]``)."""

    def cluster_state(self, run_id: str, *, kept: bool = False) -> ClusterState:
        return ClusterState(
            run_id=run_id,
            runtime=RUNTIME,
            brokers=[b.node_state() for b in self.brokers],
            zookeeper=NodeState(name=ZOOKEEPER_NODE, address=""),
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            owner=owner_label(kept=kept),
            kafka_listener=True,
            inventory=self.source,
        )


def load_external_inventory(path: Path) -> ExternalInventory:
    """Read and check the inventory of an external cluster; InventoryError saying what to
    fix."""
    doc = read_toml(path, what="the inventory", hint=_FORMAT_HINT, error=InventoryError)
    return external_inventory(doc, source=str(path), base_dir=Path(path).resolve().parent)


def external_inventory(doc: Mapping[str, Any], *, source: str, base_dir: Path) -> ExternalInventory:
    if not doc.get("brokers"):
        raise InventoryError(
            f'{source}: no [[brokers]]; list each broker\'s host (name = "n<broker id>", '
            "host = ...)"
        )
    parsed = validate(ExternalInventoryFile, doc, source=source, error=InventoryError)
    resolver = HostResolver(source, base_dir, parsed.defaults)
    entries: list[HostEntry] = []
    commands: dict[str, BrokerCommands] = {}
    shared = parsed.commands.model_dump(exclude_none=True)
    for at, broker in enumerate(parsed.brokers):
        if broker.name in commands:
            raise InventoryError(
                f"{source}: brokers[{at}] ({broker.name}): named twice; every broker needs "
                "its own n<broker id>"
            )
        entry = resolver.entry(f"brokers[{at}]", broker)
        entries.append(entry)
        own = broker.commands.model_dump(exclude_none=True) if broker.commands else {}
        merged = {**shared, **own}
        missing = [op for op in OPERATIONS if op not in merged]
        if missing:
            raise InventoryError(
                f"{source}: brokers[{at}] ({broker.name}): no command to "
                f"{', '.join(missing)} it; give them in [commands] (for every broker) or "
                "[brokers.commands]"
            )
        fill = {"name": broker.name, "id": str(broker_id_of(broker.name)), "host": entry.host}
        commands[broker.name] = BrokerCommands(
            **{op: merged[op].format(**fill) for op in OPERATIONS}
        )
    return ExternalInventory(
        parsed.kafka.bootstrap, tuple(entries), commands, source, parsed.network.partitions
    )


class AbsentNode:
    """The ZooKeeper node of a cluster whose inventory names none: every use says so."""

    def __init__(self, name: str = ZOOKEEPER_NODE) -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def address(self) -> str:
        return ""

    def _absent(self) -> NodeError:
        return NodeError(
            f"{self._name}: this cluster was not deployed by squall and its inventory names "
            "no ZooKeeper node; faults on it cannot be applied"
        )

    def run(self, command: Command, *, timeout: float = 0, check: bool = True) -> CommandResult:
        raise self._absent()

    def upload(self, local: Path, remote: str) -> None:
        raise self._absent()

    def download(self, remote: str, local: Path) -> None:
        raise self._absent()

    def start_daemon(self, spec: DaemonSpec) -> int:
        raise self._absent()

    def signal_daemon(self, pidfile: str, signal_name: str) -> bool:
        raise self._absent()

    def daemon_running(self, pidfile: str) -> bool:
        raise self._absent()

    def close(self) -> None:
        pass


class CommandDaemons:
    """Each broker's process, acted on by the inventory's commands over SSH: an
    implementation of ``nemesis.protocols.Daemons``."""

    def __init__(
        self,
        nodes: Mapping[str, Node],
        commands: Mapping[str, BrokerCommands],
        roles: KafkaRoles,
        *,
        command_timeout_s: float = 60.0,
    ) -> None:
        self._nodes = nodes
        self._commands = commands
        self._roles = roles
        self._timeout_s = command_timeout_s

    def _run(self, node: str, op: str, *, timeout_s: float | None = None) -> CommandResult:
        if node not in self._commands:
            raise NodeError(
                f"{node}: not a broker of this cluster's inventory "
                f"({', '.join(sorted(self._commands))}); it has no commands"
            )
        command = getattr(self._commands[node], op)
        return self._nodes[node].run(command, timeout=timeout_s or self._timeout_s, check=False)

    def _act(self, node: str, op: str, *, timeout_s: float | None = None) -> None:
        result = self._run(node, op, timeout_s=timeout_s)
        if not result.ok:
            tail = "\n".join(result.output.splitlines()[-10:])
            raise NodeError(
                f"{node}: the inventory's {op} command `{result.command}` exited with "
                f"{result.exit_code}:\n{tail}"
            )

    def is_running(self, node: str) -> bool:
        """Whether the broker's process exists; never, for a node the inventory does not
        name (zk1: faults on it find nothing to act on)."""
        if node not in self._commands:
            return False
        return self._run(node, "running").ok

    def kill(self, node: str) -> bool:
        if not self.is_running(node):
            return False
        self._act(node, "kill")
        return True

    def start(self, node: str, *, timeout_s: float) -> None:
        """Start the broker, then wait until it serves: the cluster's metadata lists it and
        its advertised listener accepts connections (a killed broker may stay listed until
        its session expires, its port closed until the new process binds it)."""
        deadline = time.monotonic() + timeout_s
        self._act(node, "start", timeout_s=timeout_s)
        broker = broker_id_of(node)
        last = "not listed yet"
        while time.monotonic() < deadline:
            try:
                listener = self._roles.listener(broker, timeout_s=2.0)
                if listener is None:
                    last = "not listed in the cluster's metadata"
                else:
                    with socket.create_connection(listener, timeout=1.0):
                        return
            except Exception as err:  # the cluster may not answer while it recovers
                last = str(err)
            time.sleep(0.2)
        raise NodeError(
            f"{node}: started, but broker {broker} did not serve within {timeout_s:.0f} s ({last})"
        )

    def stop(self, node: str, *, timeout_s: float) -> None:
        self._act(node, "stop", timeout_s=timeout_s)

    def pause(self, node: str) -> bool:
        if not self.is_running(node):
            return False
        self._act(node, "pause")
        return True

    def resume(self, node: str) -> bool:
        if not self.is_running(node):
            return False
        self._act(node, "resume")
        return True


class ExternalCluster(Cluster):
    """A running cluster squall did not deploy: SSH nodes for its brokers' hosts, the
    inventory's commands for their processes, Kafka's metadata for roles."""

    deployed = False

    def __init__(self, state: ClusterState, inventory: ExternalInventory) -> None:
        brokers = {b.name: SshNode.from_state(b) for b in state.brokers}
        super().__init__(
            state,
            brokers,
            AbsentNode(),
            capabilities=Capabilities(
                runtime=RUNTIME,
                partitions=inventory.partitions,
                freeze=False,
                netem=False,
                netem_missing=NOT_DEPLOYED,
                disks=False,
                lazy_disk=False,
                lazy_disk_missing=NOT_DEPLOYED,
                zookeeper=False,
            ),
        )
        self.inventory = inventory
        self._roles = KafkaRoles(
            brokers=list(brokers), zookeeper=ZOOKEEPER_NODE, bootstrap=inventory.bootstrap
        )
        self._daemons = CommandDaemons(self.brokers, inventory.commands, self._roles)

    def node(self, name: str) -> Node:
        try:
            return self.brokers[name]
        except KeyError:
            raise KeyError(
                f"no node {name!r} in cluster {self.run_id} (not deployed by squall: its "
                f"brokers only); nodes: {', '.join(sorted(self.brokers))}"
            ) from None

    def all_nodes(self) -> list[Node]:
        return list(self.brokers.values())

    def broker(self, name: str) -> BrokerService:
        raise NodeError(
            f"{name}: this cluster was not deployed by squall; its brokers are acted on by "
            "the inventory's commands, and their logs stay on their hosts"
        )

    @property
    def daemons(self) -> CommandDaemons:  # type: ignore[override]
        return self._daemons

    @property
    def roles(self) -> KafkaRoles:  # type: ignore[override]
        return self._roles

    @property
    def bootstrap(self) -> str:
        return self.inventory.bootstrap

    @property
    def kafka_bootstrap(self) -> str:
        return self.inventory.bootstrap

    @property
    def zookeeper_connect(self) -> str:
        return ""


def _check_iptables(cluster: ExternalCluster) -> None:
    """NodeError unless iptables lists its rules on every host (partitions were allowed)."""
    failed = []
    for name, node in sorted(cluster.brokers.items()):
        result = node.run("iptables -w -n -L INPUT >/dev/null", check=False)
        if not result.ok:
            failed.append(f"{name}: {result.output.strip()[-200:] or f'exit {result.exit_code}'}")
    if failed:
        raise NodeError(
            "[network] partitions = true, but iptables does not answer on "
            f"{'; '.join(failed)}; install iptables and log in as a user that may change its "
            "rules, or leave partitions off"
        )


class ExternalRuntime:
    """Attaches to a cluster that is already running; never deploys, stops or removes it."""

    name = RUNTIME

    def up(
        self,
        run_id: str,
        nodes: int | None = None,
        *,
        inventory: Path | None = None,
        settings: Mapping[str, object] | None = None,
        progress: Any = None,
        lazy_disk: bool | None = None,
        kafka_listener: bool = False,
        kept: bool = False,
    ) -> ExternalCluster:
        """Check that every broker's host answers over SSH, that its broker runs and that
        the cluster's metadata lists it; state saved. Nothing on the hosts changes."""
        if inventory is None:
            raise ValueError(
                "the external runtime needs the cluster's inventory (--inventory FILE)"
            )
        if lazy_disk:
            raise ValueError(f"lazy disks cannot be used: {NOT_DEPLOYED}")
        say = progress or (lambda _message: None)
        described = load_external_inventory(inventory)
        if nodes is not None and nodes != len(described.brokers):
            raise ValueError(
                f"{inventory} lists {len(described.brokers)} brokers, but {nodes} were asked for"
            )
        state = described.cluster_state(run_id, kept=kept)
        state.inventory = str(Path(inventory).resolve())  # attached from any directory
        cluster = ExternalCluster(state, described)
        try:
            say(f"connecting to {len(cluster.brokers)} brokers' hosts")
            stopped = [
                name for name in sorted(cluster.brokers) if not cluster.daemons.is_running(name)
            ]
            if stopped:
                raise NodeError(
                    f"the inventory's running command says {', '.join(stopped)} not running; "
                    "start the cluster before testing it"
                )
            say(f"reading the cluster's metadata from {described.bootstrap}")
            view = cluster.roles.observe((), controller=True, timeout_s=15.0)
            listed = set(view.live or ())
            absent = [n for n in sorted(cluster.brokers) if broker_id_of(n) not in listed]
            if absent:
                raise NodeError(
                    f"the cluster's metadata lists brokers {sorted(listed)}, not "
                    f"{', '.join(absent)} of the inventory; name each broker n<its broker.id>"
                )
            if described.partitions:
                say("checking that iptables answers on every host")
                _check_iptables(cluster)
            state.save()
        except BaseException:
            cluster.close()
            raise
        return cluster

    def attach(self, state: ClusterState) -> ExternalCluster:
        if not state.inventory:
            raise ValueError(f"cluster {state.run_id} has no inventory in its state")
        return ExternalCluster(state, load_external_inventory(Path(state.inventory)))

    def down(self, state: ClusterState) -> list[str]:
        """Forget the cluster; it keeps running, as it was before squall came (squall's
        iptables chain removed from its hosts, where partitions were allowed)."""
        removed: list[str] = []
        cluster = self.attach(state)
        try:
            if cluster.capabilities.partitions:
                failures = Partitioner(cluster).remove_chain()
                if failures:
                    listing = "; ".join(f"{n}: {e}" for n, e in sorted(failures.items()))
                    raise NodeError(f"squall's iptables chain not removed: {listing}")
                removed = [f"iptables chain {CHAIN} on {n}" for n in sorted(cluster.brokers)]
        finally:
            cluster.close()
        state.forget()
        return removed

    def clean(self, run_id: str | None = None, *, kept_too: bool = False) -> list[str]:
        """Nothing to remove: squall left nothing on the hosts."""
        return []
