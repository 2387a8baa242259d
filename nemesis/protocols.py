"""What the nemesis needs from a cluster, as small protocols (Jepsen's split between the
nemesis and the database): nodes it can run commands on, the system's daemons by node, a
freezer for whole nodes, the brokers' disks, the roles it targets, and what the runtime can
do.

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
LAZY_DISK_MISSING = (
    "a power loss needs the brokers' log dirs on lazy disks (lazyfs, which can lose what was "
    "not fsynced), and this cluster's brokers write to plain disks; bring it up with "
    "--lazy-disk (the default on docker; the local runtime needs root and FUSE)"
)
"""Why power-loss is refused on a cluster without lazy disks."""


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


@runtime_checkable
class GroupMembers(Protocol):
    """The consumer-group members of the workload, each a client process of its own, by name
    (``consumer-0``...): the nemesis pauses them (a member stopped past its session timeout
    wakes up as a zombie), kills them and makes them leave their group. The workload
    implements it; a member that is not running answers False."""

    def running(self) -> list[str]:
        """The members whose process runs now (paused ones too), sorted."""
        ...

    def pause(self, member: str) -> bool:
        """SIGSTOP the member's process; True if it was running."""
        ...

    def resume(self, member: str) -> bool:
        """SIGCONT the member's process; True if it was running."""
        ...

    def kill(self, member: str) -> bool:
        """SIGKILL the member's process, as a crash; True if it was running."""
        ...

    def leave(self, member: str, *, timeout_s: float) -> bool:
        """Make the member leave its group cleanly and close; True if it did within
        ``timeout_s``."""
        ...


@dataclass(frozen=True)
class StoredFile:
    """A file of a broker's data directory: its path relative to that directory, its size."""

    path: str
    size: int


class Disks(Protocol):
    """Each broker node's data directory (the broker's log dir), by node name: its files,
    damaged in place, snapshots of it restored, and what its filesystem has not synced
    dropped (where it is on a lazy disk: lazyfs). Paths are relative to the data directory;
    implementations raise ``ClusterError`` subclasses for a node without a broker, a missing
    file or a failed command. squall's implementation is ``squall.cluster.disks.NodeDisks``
    (``cluster.disks``)."""

    def files(self, node: str, kind: str, key: str | None) -> list[StoredFile]:
        """The node's files of one kind (``nemesis.storage.FILE_KINDS``) of the partition
        ``key`` (``TOPIC-PARTITION``; None for the data directory's own checkpoints), in the
        log's order: segments by base offset, the active one last. [] when there is none."""
        ...

    def flip_bits(self, node: str, path: str, flips: Sequence[tuple[int, int]]) -> int:
        """Invert bit ``bit`` (0-7) of the byte at ``offset`` for each ``(offset, bit)``, in
        place; offsets past the file's end are skipped. How many bits were flipped."""
        ...

    def truncate(self, node: str, path: str, size: int) -> int:
        """Cut the file to ``size`` bytes (never longer); its size before."""
        ...

    def snapshot(self, node: str, name: str) -> int:
        """Copy the data directory as snapshot ``name`` (replacing one of that name), its
        event log left out; the bytes copied."""
        ...

    def restore(self, node: str, name: str) -> None:
        """Replace the data directory's contents by snapshot ``name`` (the event log kept);
        the broker must be down."""
        ...

    def drop_snapshots(self, node: str) -> list[str]:
        """Remove every snapshot of the node; their names."""
        ...

    def lose_unsynced(self, node: str) -> Mapping[str, int]:
        """Drop, at once, everything on the node's lazy disk not fsynced, as a power loss
        would; what was dropped (``files``, ``bytes``, ``entries_removed``,
        ``entries_restored``), for the history."""
        ...

    def unsynced(self, node: str) -> Mapping[str, int]:
        """What a power loss would take now (``files``, ``bytes``, ``directories``,
        ``entries``)."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """What a cluster's runtime can do beyond process faults, and why not where it cannot."""

    runtime: str
    partitions: bool
    freeze: bool
    netem: bool
    netem_missing: str = ""
    """Why netem is unavailable on a runtime that would have it (the kernel lacks sch_netem)."""
    disks: bool = False
    """Whether the brokers' files can be damaged, snapshotted and rolled back."""
    lazy_disk: bool = False
    """The brokers' data is on disks that can lose what was not fsynced (lazyfs): storage
    faults such as a power loss can be applied."""
    lazy_disk_missing: str = LAZY_DISK_MISSING
    """Why power loss is unavailable (when ``lazy_disk`` is false)."""
    zookeeper: bool = True
    """The cluster has a ZooKeeper node faults can reach (not so on a cluster the framework
    did not deploy): partitions may cut it off, and ``among = "all"`` includes it."""


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
    def disks(self) -> Disks | None:
        """The brokers' disks, or None where they cannot be reached."""
        ...

    @property
    def roles(self) -> RoleObserver: ...

    def node(self, name: str) -> RemoteNode:
        """The node called ``name``; KeyError naming the known nodes otherwise."""
        ...

    def all_nodes(self) -> Sequence[RemoteNode]:
        """The brokers, then the ZooKeeper node."""
        ...
