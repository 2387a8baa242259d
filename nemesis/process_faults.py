"""Process faults: kill, start, bounce, pause and resume daemons; freeze whole nodes.

The daemon of a node is the system's own (its broker, or ZooKeeper on the ZooKeeper node),
reached through the cluster's ``Daemons``. Freezing pauses the whole node (sshd too), so it
needs a runtime that offers a ``Freezer``. Each function acts on all named nodes in
parallel and returns (outcome by node, failure by node); outcomes are short words for the
history (``killed``, ``not-running``, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

from nemesis.errors import UnsupportedFaultError
from nemesis.fanout import on_each_node
from nemesis.protocols import FREEZE_RUNTIMES, FaultableCluster, Freezer

Outcomes = tuple[dict[str, str], dict[str, BaseException]]


def _known(cluster: FaultableCluster, name: str) -> str:
    cluster.node(name)  # KeyError naming the known nodes
    return name


def kill(cluster: FaultableCluster, names: Sequence[str]) -> Outcomes:
    """SIGKILL (a crash; a paused process is continued first so it dies at once)."""
    daemons = cluster.daemons
    return on_each_node(
        names, lambda name: "killed" if daemons.kill(_known(cluster, name)) else "not-running"
    )


def start(cluster: FaultableCluster, names: Sequence[str], *, timeout_s: float = 60.0) -> Outcomes:
    """Start daemons that are not running and wait until they serve.

    ZooKeeper, when named, starts first: brokers need it to register.
    """
    daemons = cluster.daemons

    def start_one(name: str) -> str:
        if daemons.is_running(_known(cluster, name)):
            return "already-running"
        daemons.start(name, timeout_s=timeout_s)
        return "started"

    zookeeper = cluster.zookeeper.name
    first, failures = on_each_node([n for n in names if n == zookeeper], start_one)
    rest, more_failures = on_each_node([n for n in names if n != zookeeper], start_one)
    return {**first, **rest}, {**failures, **more_failures}


def bounce(
    cluster: FaultableCluster,
    names: Sequence[str],
    *,
    stop_timeout_s: float = 30.0,
    start_timeout_s: float = 60.0,
) -> Outcomes:
    """Kafka's clean bounce: SIGTERM, wait for exit (SIGKILL after stop_timeout_s), start."""
    daemons = cluster.daemons

    def bounce_one(name: str) -> str:
        was_running = daemons.is_running(_known(cluster, name))
        daemons.stop(name, timeout_s=stop_timeout_s)
        daemons.start(name, timeout_s=start_timeout_s)
        return "bounced" if was_running else "started"

    return on_each_node(names, bounce_one)


def pause(cluster: FaultableCluster, names: Sequence[str]) -> Outcomes:
    """SIGSTOP the daemon: it keeps its sockets and sessions but answers nothing."""
    daemons = cluster.daemons
    return on_each_node(
        names, lambda name: "paused" if daemons.pause(_known(cluster, name)) else "not-running"
    )


def resume(cluster: FaultableCluster, names: Sequence[str]) -> Outcomes:
    """SIGCONT the daemon (harmless if it was not stopped)."""
    daemons = cluster.daemons
    return on_each_node(
        names, lambda name: "resumed" if daemons.resume(_known(cluster, name)) else "not-running"
    )


def require_freezer(cluster: FaultableCluster) -> Freezer:
    """The cluster's freezer, or UnsupportedFaultError naming the runtimes that can freeze."""
    freezer = cluster.freezer
    if freezer is None or not cluster.capabilities.freeze:
        raise UnsupportedFaultError(
            f"freezing a whole node needs the {' or '.join(FREEZE_RUNTIMES)} runtime; this "
            f"cluster runs on {cluster.capabilities.runtime}. Use pause to stop only the "
            "broker process."
        )
    return freezer


def freeze(cluster: FaultableCluster, names: Sequence[str]) -> Outcomes:
    """Freeze whole nodes (every process on them, sshd included)."""
    freezer = require_freezer(cluster)

    def freeze_one(name: str) -> str:
        freezer.freeze(_known(cluster, name))
        return "frozen"

    return on_each_node(names, freeze_one)


def unfreeze(cluster: FaultableCluster, names: Sequence[str]) -> Outcomes:
    """Thaw whole nodes (nodes that are not frozen are left alone)."""
    freezer = require_freezer(cluster)

    def unfreeze_one(name: str) -> str:
        freezer.unfreeze(_known(cluster, name))
        return "unfrozen"

    return on_each_node(names, unfreeze_one)
