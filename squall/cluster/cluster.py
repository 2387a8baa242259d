"""A Cluster: the nodes of one test, what runs on them, and what their runtime can do.

Brokers run on nodes ``n1..nN`` (broker id = the node's number), ZooKeeper on ``zk1``. The
cluster is described by a ``ClusterState`` saved as JSON where every command finds it
(``.squall/clusters/<run id>.json``, and ``.squall/current`` naming the active one), so
``squall cluster up`` in one shell and ``squall nemesis kill`` in another act on the same
nodes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from histories.atomic import atomic_file, write_json_atomically
from nemesis.protocols import Capabilities, Freezer
from squall.cluster.disks import NodeDisks
from squall.cluster.lazy_disk import LazyDisk
from squall.cluster.node import Node
from squall.cluster.roles import ClusterRoles
from squall.cluster.services import (
    BROKER_PORT,
    KAFKA_PORT,
    ZOOKEEPER_PORT,
    BrokerService,
    ServiceDaemons,
    ZooKeeperService,
)

STATE_DIR_ENV = "SQUALL_HOME"
RUN_ID = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,40}$")
"""A run id: it names containers, networks and files, so it is a plain name, never a path."""
ZOOKEEPER_NODE = "zk1"
__all__ = ["BROKER_PORT", "ZOOKEEPER_NODE", "ZOOKEEPER_PORT", "Cluster", "ClusterState"]


class ClusterStateError(RuntimeError):
    """No cluster is up, or its state file cannot be read."""


def check_run_id(run_id: str) -> str:
    """The run id if it has squall's shape; ClusterStateError naming what is allowed."""
    if not RUN_ID.match(run_id):
        raise ClusterStateError(
            f"run id {run_id!r}: use 1 to 41 letters, digits, '_', '.' or '-', starting with a "
            "letter or digit"
        )
    return run_id


def state_dir() -> Path:
    """Where cluster state lives: $SQUALL_HOME, else ./.squall."""
    return Path(os.environ.get(STATE_DIR_ENV, ".squall")).resolve()


@dataclass
class NodeState:
    """How to reach one node again from another process."""

    name: str
    address: str
    ssh_port: int = 22
    user: str = "root"
    key_file: str | None = None
    host_key: str | None = None
    """The pinned host public key, ``<type> <base64>``."""
    root: str = "/opt/squall"
    """Where squall keeps the SUT, data, pidfiles and logs on the node."""
    python: str = "python3"
    container: str | None = None


@dataclass
class ClusterState:
    """Everything needed to rebuild a Cluster in a new process."""

    run_id: str
    runtime: str
    brokers: list[NodeState]
    zookeeper: NodeState
    settings: dict[str, str] = field(default_factory=dict)
    network: str | None = None
    created: str = ""
    owner: str | None = None
    """The control process that brought it up (``squall.cluster.owner``); None: unknown."""
    lazy_disk: bool = False
    """The brokers' log.dirs are on lazyfs (``squall.cluster.lazy_disk``)."""
    kafka_listener: bool = False
    """Every broker also serves Kafka's own protocol, on ``KAFKA_PORT`` of its node."""
    inventory: str | None = None
    """The inventory file the cluster was described by (external runtime)."""

    def save(self) -> Path:
        check_run_id(self.run_id)
        directory = state_dir() / "clusters"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.run_id}.json"
        write_json_atomically(path, asdict(self))
        with atomic_file(state_dir() / "current") as current:
            current.write(f"{self.run_id}\n".encode())
        return path

    @classmethod
    def load(cls, run_id: str | None = None) -> ClusterState:
        base = state_dir()
        if run_id is None:
            current = base / "current"
            if not current.exists():
                raise ClusterStateError(
                    f"no cluster is up (no {current}); start one with `squall cluster up`"
                )
            run_id = current.read_text().strip()
        path = base / "clusters" / f"{check_run_id(run_id)}.json"
        try:
            doc: dict[str, Any] = json.loads(path.read_text())
            return cls(
                run_id=doc["run_id"],
                runtime=doc["runtime"],
                brokers=[NodeState(**n) for n in doc["brokers"]],
                zookeeper=NodeState(**doc["zookeeper"]),
                settings=dict(doc.get("settings", {})),
                network=doc.get("network"),
                created=doc.get("created", ""),
                owner=doc.get("owner"),
                lazy_disk=bool(doc.get("lazy_disk", False)),
                kafka_listener=bool(doc.get("kafka_listener", False)),
                inventory=doc.get("inventory"),
            )
        except FileNotFoundError:
            raise ClusterStateError(
                f"cluster {run_id} has no state file {path}; was it torn down? "
                "`squall cluster up` starts a new one"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ClusterStateError(
                f"cannot read {path}: {err}; remove it and run `squall clean`"
            ) from None

    def forget(self) -> None:
        check_run_id(self.run_id)
        base = state_dir()
        (base / "clusters" / f"{self.run_id}.json").unlink(missing_ok=True)
        current = base / "current"
        if current.exists() and current.read_text().strip() == self.run_id:
            current.unlink()


def current_run_id() -> str | None:
    """The run id of the cluster that is current (``.squall/current``), if one is."""
    try:
        return (state_dir() / "current").read_text().strip() or None
    except OSError:
        return None


@contextlib.contextmanager
def current_kept() -> Iterator[None]:
    """The cluster current before the block (one brought up by hand with ``squall cluster
    up``) is current again after it, while its state is saved: a test's run brings up and
    takes down its own cluster without taking that one's place."""
    before = current_run_id()
    try:
        yield
    finally:
        saved = before is not None and (state_dir() / "clusters" / f"{before}.json").is_file()
        if saved and current_run_id() != before:
            with atomic_file(state_dir() / "current") as current:
                current.write(f"{before}\n".encode())


def broker_id_of(node_name: str) -> int:
    """``n3`` -> 3."""
    if not node_name.startswith("n") or not node_name[1:].isdigit():
        raise ValueError(f"{node_name!r} is not a broker node name (n1, n2, ...)")
    return int(node_name[1:])


class Cluster:
    """The live nodes of one test, their services and their runtime's abilities: squall's
    implementation of ``nemesis.protocols.FaultableCluster``."""

    deployed = True
    """squall deployed the system under test here: its brokers' logs, events and data
    directories are squall's to read (not so on a cluster squall did not deploy)."""

    def __init__(
        self,
        state: ClusterState,
        brokers: Mapping[str, Node],
        zookeeper: Node,
        *,
        capabilities: Capabilities,
        freezer: Freezer | None = None,
    ) -> None:
        self.state = state
        self.brokers: dict[str, Node] = dict(brokers)
        self.zookeeper = zookeeper
        self.capabilities = capabilities
        self.freezer = freezer if capabilities.freeze else None

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def runtime(self) -> str:
        return self.state.runtime

    def node(self, name: str) -> Node:
        if name == self.zookeeper.name:
            return self.zookeeper
        try:
            return self.brokers[name]
        except KeyError:
            known = ", ".join([*sorted(self.brokers), self.zookeeper.name])
            raise KeyError(f"no node {name!r} in cluster {self.run_id}; nodes: {known}") from None

    def all_nodes(self) -> list[Node]:
        return [*self.brokers.values(), self.zookeeper]

    def node_for_broker(self, broker_id: int) -> Node:
        return self.node(f"n{broker_id}")

    def _node_state(self, name: str) -> NodeState:
        for node_state in [*self.state.brokers, self.state.zookeeper]:
            if node_state.name == name:
                return node_state
        raise KeyError(f"no node {name!r} in cluster {self.run_id}")

    def broker(self, name: str) -> BrokerService:
        """The broker service on node ``name`` (start, stop, kill, pause, resume, logs)."""
        node = self.node(name)
        return BrokerService(
            node,
            broker_id=broker_id_of(name),
            zookeeper_connect=self.zookeeper_connect,
            root=self._node_state(name).root,
            python=self._node_state(name).python,
            settings=self.state.settings,
            lazy_disk=self.state.lazy_disk,
            kafka_port=KAFKA_PORT if self.state.kafka_listener else None,
        )

    def lazy_disk(self, name: str) -> LazyDisk:
        """The lazy disk under broker ``name``'s data (mounted only if ``state.lazy_disk``)."""
        broker_id_of(name)  # ValueError for a node that is no broker
        node_state = self._node_state(name)
        return LazyDisk(self.node(name), root=node_state.root, python=node_state.python)

    def zookeeper_service(self) -> ZooKeeperService:
        """The ZooKeeper service on ``zk1``."""
        return ZooKeeperService(self.zookeeper, root=self.state.zookeeper.root)

    def service(self, name: str) -> BrokerService | ZooKeeperService:
        """The daemon squall runs on node ``name``: ZooKeeper on its node, else the broker."""
        if name == self.zookeeper.name:
            return self.zookeeper_service()
        self.node(name)  # KeyError naming the known nodes
        return self.broker(name)

    @property
    def daemons(self) -> ServiceDaemons:
        return ServiceDaemons(self.service)

    @property
    def disks(self) -> NodeDisks | None:
        """The brokers' data directories, where the runtime lets the nemesis damage them."""
        return NodeDisks(self) if self.capabilities.disks else None

    @property
    def roles(self) -> ClusterRoles:
        return ClusterRoles(
            brokers=list(self.brokers),
            zookeeper=self.zookeeper.name,
            bootstrap=self.bootstrap,
            zookeeper_connect=str(
                self.state.settings.get("zookeeper.connect") or self.zookeeper_connect
            ),
        )

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{n.address}:{BROKER_PORT}" for n in self.brokers.values())

    @property
    def kafka_bootstrap(self) -> str | None:
        """The brokers' Kafka-protocol listeners, for Kafka clients; None without them."""
        if not self.state.kafka_listener:
            return None
        return ",".join(f"{n.address}:{KAFKA_PORT}" for n in self.brokers.values())

    @property
    def zookeeper_connect(self) -> str:
        return f"{self.zookeeper.address}:{ZOOKEEPER_PORT}"

    def close(self) -> None:
        for node in self.all_nodes():
            node.close()
