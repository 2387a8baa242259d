"""What the nemesis needs from a cluster, as small protocols (Jepsen's split between the
nemesis and the database): nodes it can run commands on, the system's daemons by node, a
freezer for whole nodes, the roles it targets, and what the runtime can do.

``squall.cluster`` implements them for its runtimes; the nemesis imports only the standard
library and itself, so it knows no database and no runtime. Node names are plain strings
(``n1``..., ``zk1``); implementations raise ``nemesis.errors.ClusterError`` subclasses when
a node or daemon fails.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from nemesis.targets import ClusterView

FREEZE_RUNTIMES = ("docker",)
"""Runtimes whose nodes can be frozen whole (for messages)."""
NETWORK_RUNTIMES = ("docker", "ssh")
"""Runtimes whose nodes have a network stack of their own (partitions, netem)."""


class CommandOutput(Protocol):
    """What a command did on a node."""

    @property
    def command(self) -> str: ...

    @property
    def exit_code(self) -> int: ...

    @property
    def output(self) -> str: ...

    @property
    def ok(self) -> bool: ...


@runtime_checkable
class RemoteNode(Protocol):
    """A node the nemesis can reach and run shell commands on (iptables, tc, ip)."""

    @property
    def name(self) -> str: ...

    @property
    def address(self) -> str: ...

    def run(self, command: str, *, timeout: float = ..., check: bool = ...) -> CommandOutput:
        """Run a shell command; stdout and stderr merged; raise on failure when ``check``."""
        ...


class Daemons(Protocol):
    """The system's daemon on each node, by node name: its broker on a broker node, ZooKeeper
    on the ZooKeeper node."""

    def is_running(self, node: str) -> bool:
        """Whether the daemon's process exists (a paused one counts as running)."""
        ...

    def kill(self, node: str) -> bool:
        """SIGKILL, as a crash; True if it was running."""
        ...

    def start(self, node: str, *, timeout_s: float) -> None:
        """Start the daemon and wait until it serves."""
        ...

    def stop(self, node: str, *, timeout_s: float) -> None:
        """A clean shutdown (SIGTERM, then SIGKILL after ``timeout_s``)."""
        ...

    def pause(self, node: str) -> bool:
        """SIGSTOP; True if it was running."""
        ...

    def resume(self, node: str) -> bool:
        """SIGCONT; True if it was running."""
        ...


class Disks(Protocol):
    """The brokers' disks that can lose what was not fsynced (lazyfs), by node name: what a
    power loss needs besides killing the node's processes (``Daemons.kill``). squall's
    implementation is ``squall.cluster.lazy_disk.LazyDisks`` (``cluster.disks``, None on
    clusters without them; ``Capabilities.lazy_disk`` says which)."""

    def lose_unsynced(self, node: str) -> Mapping[str, int]:
        """Drop, at once, everything on the node's disk not fsynced; what was dropped
        (``files``, ``bytes``, ``entries_removed``, ``entries_restored``), for the history."""
        ...

    def unsynced(self, node: str) -> Mapping[str, int]:
        """What a power loss would take now (``files``, ``bytes``, ``directories``,
        ``entries``)."""
        ...


@runtime_checkable
class Freezer(Protocol):
    """Freezes and thaws whole nodes (every process, sshd included).

    ``unfreeze`` of a node that is not frozen does nothing, so that healing can thaw every
    node without knowing which are frozen.
    """

    def freeze(self, node: str) -> None: ...

    def unfreeze(self, node: str) -> None: ...


class RoleObserver(Protocol):
    """Reads the roles that targets name (partition leaders and ISRs, the controller) from
    the live cluster, at the moment a fault strikes."""

    def observe(self, keys: Collection[str], *, controller: bool, timeout_s: float) -> ClusterView:
        """The leadership of the partitions ``keys`` (``TOPIC-PARTITION``) and, if asked,
        the controller; ``TargetError`` when nothing answers."""
        ...


class EventSource(Protocol):
    """The SUT's own events (elections, ISR changes, truncations, controller moves) as its
    nodes log them, read during the run: each call returns those logged since the last one,
    as JSON objects with ``type`` and the node's ``wall_time_ns``."""

    def read(self) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Capabilities:
    """What a cluster's runtime can do beyond process faults, and why not where it cannot."""

    runtime: str
    partitions: bool
    freeze: bool
    netem: bool
    netem_missing: str = ""
    """Why netem is unavailable on a runtime that would have it (the kernel lacks sch_netem)."""
    lazy_disk: bool = False
    """The brokers' data is on disks that can lose what was not fsynced (lazyfs): storage
    faults such as a power loss can be applied."""


class FaultableCluster(Protocol):
    """Everything the nemesis touches: the nodes, their daemons, roles and capabilities."""

    @property
    def run_id(self) -> str: ...

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def brokers(self) -> Mapping[str, RemoteNode]:
        """The broker nodes by name."""
        ...

    @property
    def zookeeper(self) -> RemoteNode:
        """The ZooKeeper node."""
        ...

    @property
    def daemons(self) -> Daemons: ...

    @property
    def freezer(self) -> Freezer | None:
        """The runtime's freezer, or None where nodes cannot be frozen."""
        ...

    @property
    def roles(self) -> RoleObserver: ...

    def node(self, name: str) -> RemoteNode:
        """The node called ``name``; KeyError naming the known nodes otherwise."""
        ...

    def all_nodes(self) -> Sequence[RemoteNode]:
        """The brokers, then the ZooKeeper node."""
        ...
