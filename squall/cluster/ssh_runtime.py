"""The ssh runtime: existing hosts from an inventory, and what it shares with docker.

Deploying the SUT and ZooKeeper over SSH, checking that the nodes can take faults
(iptables, netem), stopping daemons: the docker runtime uses the same code on its
containers, minus provisioning.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shlex
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from nemesis.fanout import on_each_node
from nemesis.protocols import Capabilities, Freezer
from squall.cluster.cluster import (
    ZOOKEEPER_NODE,
    Cluster,
    ClusterState,
    ClusterStateError,
    state_dir,
)
from squall.cluster.node import NodeError
from squall.cluster.services import Daemon
from squall.cluster.ssh import Progress, SshNode

CAPABILITIES_DIR = "capabilities"
_ROUTE_DEV = re.compile(r"\bdev\s+(\S+)")
log = logging.getLogger(__name__)


class FaultSupportError(RuntimeError):
    """A node lacks what the nemeses need (iptables for partitions)."""


class SutImportError(RuntimeError):
    """The SUT or its vendored dependencies do not import with a node's Python."""


def _quiet(_message: str) -> None:
    pass


def vendored_packages() -> list[Path]:
    """Pure-Python packages the SUT needs beside the standard library, uploaded to each broker.

    kazoo imports only the standard library (gevent and eventlet are optional handlers), so
    it alone is enough on Debian's python3.
    """
    import kazoo

    return [Path(kazoo.__file__).parent]


def ssh_cluster(state: ClusterState, *, freezer: Freezer | None = None) -> Cluster:
    """A Cluster of SshNodes for a saved state (docker and ssh runtimes alike); it can
    freeze nodes when given a freezer."""
    brokers = {n.name: SshNode.from_state(n) for n in state.brokers}
    netem_missing = _load_netem_missing(state.run_id)
    capabilities = Capabilities(
        runtime=state.runtime,
        partitions=True,
        freeze=freezer is not None,
        netem=not netem_missing,
        netem_missing=netem_missing,
    )
    return Cluster(
        state,
        brokers,
        SshNode.from_state(state.zookeeper),
        capabilities=capabilities,
        freezer=freezer,
    )


def _capabilities_file(run_id: str) -> Path:
    return state_dir() / CAPABILITIES_DIR / f"{run_id}.json"


def _load_netem_missing(run_id: str) -> str:
    """Why netem failed on this cluster's nodes when it was brought up, or '' (it works)."""
    try:
        doc = json.loads(_capabilities_file(run_id).read_text())
    except (OSError, ValueError):
        return ""
    if not isinstance(doc, dict) or doc.get("netem", True):
        return ""
    missing = doc.get("netem_missing") or {}
    return "; ".join(f"{node}: {why}" for node, why in sorted(missing.items())) or "unavailable"


def forget_capabilities(run_id: str) -> None:
    _capabilities_file(run_id).unlink(missing_ok=True)


def check_fault_support(cluster: Cluster, say: Progress = _quiet) -> None:
    """iptables must work on every node (partitions); netem is optional: without it the
    cluster's capabilities say so, remembered for later ``attach``es."""
    names = [n.name for n in cluster.all_nodes()]
    results, failures = on_each_node(names, lambda name: _probe(cluster, name))
    if failures:
        raise next(iter(failures.values()))
    missing = {name: why for name, why in results.items() if why}
    cluster.capabilities = replace(
        cluster.capabilities,
        netem=not missing,
        netem_missing="; ".join(f"{n}: {why}" for n, why in sorted(missing.items())),
    )
    path = _capabilities_file(cluster.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"netem": not missing, "netem_missing": missing}) + "\n")
    if missing:
        first = next(iter(missing.values()))
        message = (
            f"network shaping (tc netem) is unavailable on {', '.join(sorted(missing))}: {first}. "
            "The kernel needs sch_netem (CONFIG_NET_SCH_NETEM; `modprobe sch_netem` where it is "
            "a module); netem faults will be refused, everything else works"
        )
        log.warning(message)
        say(message)


def _probe(cluster: Cluster, name: str) -> str:
    """Check iptables (falling back to the legacy backend); why netem fails, or ''."""
    node = cluster.node(name)
    probe = node.run("iptables -w -L -n", timeout=30, check=False)
    if not probe.ok:
        legacy = node.run(
            "update-alternatives --set iptables /usr/sbin/iptables-legacy >/dev/null 2>&1 && "
            "iptables -w -L -n",
            timeout=30,
            check=False,
        )
        if not legacy.ok:
            raise FaultSupportError(
                f"{name}: iptables does not work (nf_tables: {probe.output.strip()[-300:]}; "
                f"legacy: {legacy.output.strip()[-300:]}); partitions need iptables and root "
                "with CAP_NET_ADMIN on the node"
            )
    # The interface that reaches the other nodes (a lone node reaches itself over lo).
    other = next((n for n in cluster.all_nodes() if n.name != name), node)
    route = node.run(f"ip -o route get {shlex.quote(other.address)}", timeout=30, check=False)
    match = _ROUTE_DEV.search(route.output)
    if not route.ok or match is None:
        return f"cannot find the interface to {other.address}: {route.output.strip()}"
    dev = shlex.quote(match.group(1))
    netem = node.run(
        f"tc qdisc add dev {dev} root netem delay 1ms && tc qdisc del dev {dev} root",
        timeout=30,
        check=False,
    )
    return (
        ""
        if netem.ok
        else f"`tc qdisc add dev {match.group(1)} root netem` said {netem.output.strip()!r}"
    )


def _raise_first(failures: Mapping[str, BaseException]) -> None:
    for error in failures.values():
        raise error


def deploy_system_under_test(cluster: Cluster, say: Progress = _quiet) -> None:
    """ZooKeeper on zk1, then the SUT (with kazoo vendored) installed and started on every
    broker node; installs run in parallel with ZooKeeper's start."""
    sources = vendored_packages()
    zookeeper = cluster.zookeeper_service()

    def start_zookeeper() -> None:
        zookeeper.configure()
        zookeeper.start()

    def install(name: str) -> None:
        broker = cluster.broker(name)
        broker.install(sources)
        node = cluster.node(name)
        sut = shlex.quote(str(broker.root / "sut"))
        check = node.run(
            f"cd {sut} && PYTHONPATH={sut} {broker.python} -c "
            "'import kazoo.client, system_under_test.server'",
            check=False,
        )
        if not check.ok:
            raise SutImportError(
                f"{name}: the SUT or kazoo does not import with the node's {broker.python} "
                f"(it must be Python 3.11+):\n{check.output.strip()}"
            )
        broker.configure()

    say("starting ZooKeeper on zk1, installing the SUT on the brokers")
    names = ["zk1", *cluster.brokers]
    _, failures = on_each_node(names, lambda n: start_zookeeper() if n == "zk1" else install(n))
    _raise_first(failures)
    say(f"starting brokers {', '.join(cluster.brokers)}")
    _, failures = on_each_node(list(cluster.brokers), lambda n: cluster.broker(n).start())
    _raise_first(failures)


def stop_daemons(cluster: Cluster) -> list[str]:
    """Stop squall's daemons on every node by pidfile (TERM, then KILL); what was stopped."""

    def stop(name: str) -> list[str]:
        root = cluster.state.zookeeper.root if name == ZOOKEEPER_NODE else cluster.broker(name).root
        stopped = []
        for daemon in ("broker", "zookeeper"):
            handle = Daemon(cluster.node(name), str(root), daemon)
            if handle.is_running():
                handle.stop(timeout=15)
                stopped.append(f"{daemon} on {name} ({cluster.node(name).address})")
        return stopped

    results, failures = on_each_node([n.name for n in cluster.all_nodes()], stop)
    _raise_first(failures)
    return [line for lines in results.values() for line in lines]


class SshRuntime:
    """Existing hosts from an inventory file: the docker runtime's path minus provisioning."""

    name = "ssh"

    def up(
        self,
        run_id: str,
        nodes: int | None = None,
        *,
        inventory: Path | None = None,
        settings: Mapping[str, object] | None = None,
        progress: Progress | None = None,
    ) -> Cluster:
        """Reach every host of the inventory, check iptables/netem, stop leftovers, deploy;
        state saved. ``nodes``, when given, must match the inventory's brokers."""
        from squall.cluster.inventory import load_inventory

        say = progress or _quiet
        if inventory is None:
            raise ValueError("the ssh runtime needs an inventory of hosts (--inventory FILE)")
        state = load_inventory(inventory).cluster_state(run_id, settings=settings)
        if nodes is not None and nodes != len(state.brokers):
            raise ValueError(
                f"{inventory} lists {len(state.brokers)} brokers, but {nodes} were asked for"
            )
        cluster = ssh_cluster(state)
        try:
            say(f"connecting to {len(cluster.all_nodes())} hosts")
            _, failures = on_each_node(
                [n.name for n in cluster.all_nodes()], lambda n: cluster.node(n).run("true")
            )
            _raise_first(failures)
            state.save()
            check_fault_support(cluster, say)
            say("stopping squall daemons left from earlier runs")
            stop_daemons(cluster)
            for node_state in [*state.brokers, state.zookeeper]:
                directories = " ".join(
                    shlex.quote(f"{node_state.root}/{d}") for d in ("data", "logs", "run", "config")
                )
                cluster.node(node_state.name).run(f"rm -rf {directories}")
            deploy_system_under_test(cluster, say)
        except BaseException:
            cluster.close()
            raise
        return cluster

    def attach(self, state: ClusterState) -> Cluster:
        return ssh_cluster(state)

    def down(self, state: ClusterState) -> list[str]:
        """Stop the brokers and ZooKeeper; the hosts, their files and logs stay."""
        cluster = self.attach(state)
        try:
            stopped = stop_daemons(cluster)
        finally:
            cluster.close()
        state.forget()
        forget_capabilities(state.run_id)
        return stopped

    def clean(self, run_id: str | None = None) -> list[str]:
        """``down`` for the ssh cluster(s) with saved state (one run, or all); unreachable
        hosts are reported, not fatal."""
        removed: list[str] = []
        for state in _saved_states(self.name, run_id):
            try:
                removed += self.down(state)
            except (NodeError, OSError) as err:
                removed.append(f"ssh cluster {state.run_id}: could not stop its daemons ({err})")
        return removed


def _saved_states(runtime: str, run_id: str | None) -> list[ClusterState]:
    directory = state_dir() / "clusters"
    ids = [run_id] if run_id else sorted(p.stem for p in directory.glob("*.json"))
    states = []
    for candidate in ids:
        with contextlib.suppress(ClusterStateError):
            state = ClusterState.load(candidate)
            if state.runtime == runtime:
                states.append(state)
    return states
