"""Process faults: kill, start, bounce, pause and resume daemons; freeze whole nodes.

The daemon on a broker node is its broker, on the ZooKeeper node ZooKeeper; signals go to
the pidfile's process over the node's own channel (SSH, or locally). Freezing pauses the
whole node (``docker pause``: sshd too), so it needs a runtime that offers a ``NodeFreezer``.
Each function acts on all named nodes in parallel and returns (outcome by node, failure by
node); outcomes are short words for the history (``killed``, ``not-running``, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from squall.cluster.cluster import Cluster, UnsupportedFaultError
from squall.cluster.fanout import on_each_node
from system_under_test.deploy import BrokerDeployment, ZooKeeperDeployment

FREEZE_RUNTIMES = ("docker",)
Outcomes = tuple[dict[str, str], dict[str, BaseException]]


@runtime_checkable
class NodeFreezer(Protocol):
    """Freezes and thaws whole nodes (the docker runtime: ``docker pause``/``unpause``).

    ``unfreeze`` of a node that is not frozen must do nothing, so that healing can thaw
    every node without knowing which are frozen.
    """

    def freeze(self, node_name: str) -> None: ...

    def unfreeze(self, node_name: str) -> None: ...


def daemon_of(cluster: Cluster, name: str) -> BrokerDeployment | ZooKeeperDeployment:
    """The daemon squall runs on node name: ZooKeeper on the ZooKeeper node, else the broker."""
    if name == cluster.zookeeper.name:
        return cluster.zookeeper_service()
    cluster.node(name)  # KeyError naming the known nodes
    return cluster.broker(name)


def kill(cluster: Cluster, names: Sequence[str]) -> Outcomes:
    """SIGKILL (a crash; a paused process is continued first so it dies at once)."""
    return on_each_node(
        names, lambda name: "killed" if daemon_of(cluster, name).kill() else "not-running"
    )


def start(cluster: Cluster, names: Sequence[str], *, timeout_s: float = 60.0) -> Outcomes:
    """Start daemons that are not running and wait until they listen.

    ZooKeeper, when named, starts first: brokers need it to register.
    """

    def start_one(name: str) -> str:
        daemon = daemon_of(cluster, name)
        if daemon.is_running():
            return "already-running"
        daemon.start(timeout=timeout_s)
        return "started"

    zookeeper = cluster.zookeeper.name
    first, failures = on_each_node([n for n in names if n == zookeeper], start_one)
    rest, more_failures = on_each_node([n for n in names if n != zookeeper], start_one)
    return {**first, **rest}, {**failures, **more_failures}


def bounce(
    cluster: Cluster,
    names: Sequence[str],
    *,
    stop_timeout_s: float = 30.0,
    start_timeout_s: float = 60.0,
) -> Outcomes:
    """Kafka's clean bounce: SIGTERM, wait for exit (SIGKILL after stop_timeout_s), start."""

    def bounce_one(name: str) -> str:
        daemon = daemon_of(cluster, name)
        was_running = daemon.is_running()
        daemon.stop(timeout=stop_timeout_s)
        daemon.start(timeout=start_timeout_s)
        return "bounced" if was_running else "started"

    return on_each_node(names, bounce_one)


def pause(cluster: Cluster, names: Sequence[str]) -> Outcomes:
    """SIGSTOP the daemon: it keeps its sockets and sessions but answers nothing."""
    return on_each_node(
        names, lambda name: "paused" if daemon_of(cluster, name).pause() else "not-running"
    )


def resume(cluster: Cluster, names: Sequence[str]) -> Outcomes:
    """SIGCONT the daemon (harmless if it was not stopped)."""
    return on_each_node(
        names, lambda name: "resumed" if daemon_of(cluster, name).resume() else "not-running"
    )


def require_freezer(cluster: Cluster, freezer: NodeFreezer | None) -> NodeFreezer:
    """The freezer, or UnsupportedFaultError naming the runtimes that can freeze."""
    if freezer is None or not cluster.supports_freeze:
        raise UnsupportedFaultError(
            f"freezing a whole node needs the {' or '.join(FREEZE_RUNTIMES)} runtime (and its "
            f"freezer given to the Nemesis); this cluster runs on {cluster.runtime}. "
            "Use pause to stop only the broker process."
        )
    return freezer


def freeze(cluster: Cluster, freezer: NodeFreezer | None, names: Sequence[str]) -> Outcomes:
    """Freeze whole nodes (every process on them, sshd included)."""
    checked = require_freezer(cluster, freezer)
    return on_each_node(names, lambda name: _freeze(checked, cluster, name))


def unfreeze(cluster: Cluster, freezer: NodeFreezer | None, names: Sequence[str]) -> Outcomes:
    """Thaw whole nodes (nodes that are not frozen are left alone)."""
    checked = require_freezer(cluster, freezer)
    return on_each_node(names, lambda name: _unfreeze(checked, cluster, name))


def _freeze(freezer: NodeFreezer, cluster: Cluster, name: str) -> str:
    cluster.node(name)
    freezer.freeze(name)
    return "frozen"


def _unfreeze(freezer: NodeFreezer, cluster: Cluster, name: str) -> str:
    cluster.node(name)
    freezer.unfreeze(name)
    return "unfrozen"
