"""The ssh runtime: existing hosts from an inventory, and what it shares with docker.

Deploying the SUT and ZooKeeper over SSH, checking that the nodes can take faults
(iptables, netem), stopping daemons: the docker runtime uses the same code on its
containers, minus provisioning.

On real hosts squall changes only what it set up, and undoes it on ``down`` and ``clean``:
its iptables chain and the INPUT jump to it, its netem qdisc (``nemesis.netem``), and the
iptables alternative when it had to switch a host to iptables-legacy (the previous one is
recorded in the cluster's capabilities file and restored). A node's ``root`` is squall's
only once it holds the marker file ``.squall-root``, written when squall first sets the
root up (in an empty or new directory, or one holding an earlier squall's ``sut``); squall
deletes nothing under a root without it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nemesis.errors import FaultError
from nemesis.fanout import on_each_node
from nemesis.netem import (
    QDISC_HANDLE,
    NetworkShaper,
    foreign_qdisc_guard,
    parse_route_interface,
    route_command,
)
from nemesis.partitioner import CHAIN, Partitioner
from nemesis.protocols import Capabilities, Freezer
from squall.cluster.cluster import (
    ZOOKEEPER_NODE,
    Cluster,
    ClusterState,
    ClusterStateError,
    state_dir,
)
from squall.cluster.inventory import check_root
from squall.cluster.lazy_disk import LazyDisk
from squall.cluster.node import NodeError
from squall.cluster.owner import is_leftover
from squall.cluster.services import ROOT_MARKER, Daemon
from squall.cluster.ssh import Progress, SshNode

CAPABILITIES_DIR = "capabilities"
"""The file that makes a node's root squall's: nothing is deleted under a root without it."""
RUN_DIRECTORIES = ("data", "logs", "run", "config")
"""What a new ssh cluster deletes under each root (``sut`` is uploaded over)."""
LEGACY_IPTABLES = "/usr/sbin/iptables-legacy"
NOT_SQUALLS = 3
_ALTERNATIVE_PATH = re.compile(r"^/[A-Za-z0-9_./+-]+$")
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
        disks=True,
        lazy_disk=state.lazy_disk,
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


def _load_capabilities(run_id: str) -> dict[str, Any]:
    try:
        doc = json.loads(_capabilities_file(run_id).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _load_netem_missing(run_id: str) -> str:
    """Why netem failed on this cluster's nodes when it was brought up, or '' (it works)."""
    doc = _load_capabilities(run_id)
    if doc.get("netem", True):
        return ""
    missing = doc.get("netem_missing") or {}
    return "; ".join(f"{node}: {why}" for node, why in sorted(missing.items())) or "unavailable"


def forget_capabilities(run_id: str) -> None:
    _capabilities_file(run_id).unlink(missing_ok=True)


def _load_alternatives(run_id: str) -> dict[str, Alternative]:
    """The iptables alternative each node had before squall switched it to legacy."""
    recorded = _load_capabilities(run_id).get("iptables_alternatives") or {}
    alternatives = {}
    for name, doc in recorded.items() if isinstance(recorded, dict) else ():
        with contextlib.suppress(TypeError, ValueError):
            alternatives[name] = Alternative(str(doc["status"]), str(doc["value"]))
    return alternatives


@dataclass(frozen=True)
class Alternative:
    """The iptables alternative of a node as ``update-alternatives --query`` reports it."""

    status: str
    """``auto`` or ``manual``."""
    value: str
    """The path it points to (``/usr/sbin/iptables-nft``)."""

    def __post_init__(self) -> None:
        if self.status not in ("auto", "manual") or not _ALTERNATIVE_PATH.match(self.value):
            raise ValueError(f"not an iptables alternative: {self.status} {self.value!r}")

    def restore_command(self) -> str:
        """Put the node's iptables alternative back as it was."""
        if self.status == "auto":
            return "update-alternatives --auto iptables"
        return f"update-alternatives --set iptables {shlex.quote(self.value)}"

    def describe(self) -> str:
        return f"{self.value} ({self.status})"


def parse_alternative(output: str) -> Alternative | None:
    """The ``Status:`` and ``Value:`` of ``update-alternatives --query iptables`` (the header
    stanza); None if the output has neither."""
    fields: dict[str, str] = {}
    for line in output.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    try:
        return Alternative(fields["Status"], fields["Value"])
    except (KeyError, ValueError):
        return None


def check_fault_support(cluster: Cluster, say: Progress = _quiet) -> None:
    """iptables must work on every node (partitions); netem is optional: without it the
    cluster's capabilities say so, remembered for later ``attach``es. The iptables
    alternatives squall switched are recorded there too, even when a node fails, so that
    ``down`` and ``clean`` put them back."""
    names = [n.name for n in cluster.all_nodes()]
    switched: dict[str, Alternative] = {}
    results, failures = on_each_node(names, lambda name: _probe(cluster, name, switched))
    missing = {name: why for name, why in results.items() if why}
    replaced = {n: {"status": a.status, "value": a.value} for n, a in sorted(switched.items())}
    path = _capabilities_file(cluster.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"netem": not missing, "netem_missing": missing, "iptables_alternatives": replaced}
    path.write_text(json.dumps(doc) + "\n")
    if failures:
        raise next(iter(failures.values()))
    cluster.capabilities = replace(
        cluster.capabilities,
        netem=not missing,
        netem_missing="; ".join(f"{n}: {why}" for n, why in sorted(missing.items())),
    )
    if missing:
        first = next(iter(missing.values()))
        hint = (
            ""
            if "did not set up" in first
            else "The kernel needs sch_netem (CONFIG_NET_SCH_NETEM; `modprobe sch_netem` where "
            "it is a module); "
        )
        message = (
            f"network shaping (tc netem) is unavailable on {', '.join(sorted(missing))}: {first}. "
            f"{hint}netem faults will be refused, everything else works"
        )
        log.warning(message)
        say(message)


def _probe(cluster: Cluster, name: str, switched: dict[str, Alternative]) -> str:
    """Check iptables (falling back to the legacy backend, the alternative it replaced put
    into ``switched`` at once); why netem fails, or ''."""
    node = cluster.node(name)
    probe = node.run("iptables -w -L -n", timeout=30, check=False)
    if not probe.ok:
        switched[name] = _switch_to_legacy(cluster, name, probe.output)
    # The interface that reaches the other nodes (a lone node reaches itself over lo).
    other = next((n for n in cluster.all_nodes() if n.name != name), node)
    route = node.run(route_command(other.address), timeout=30, check=False)
    try:
        if not route.ok:
            raise FaultError(route.output.strip())
        interface = parse_route_interface(route.output)
    except FaultError as err:
        return f"cannot find the interface to {other.address}: {err}"
    netem = node.run(netem_probe_command(interface), timeout=30, check=False)
    if netem.ok:
        return ""
    return f"`tc qdisc add dev {interface} root netem` said {netem.output.strip()!r}"


def netem_probe_command(interface: str) -> str:
    """Add squall's netem and delete it again, unless another root qdisc is there."""
    dev = shlex.quote(interface)
    return (
        f"{foreign_qdisc_guard(interface)}; "
        f"tc qdisc add dev {dev} root handle {QDISC_HANDLE} netem delay 1ms && "
        f"tc qdisc del dev {dev} root handle {QDISC_HANDLE}"
    )


def _switch_to_legacy(cluster: Cluster, name: str, nf_tables: str) -> Alternative:
    """Make iptables work with the legacy backend; the alternative it replaced. Switches
    only when the previous alternative can be read (so that it can be put back), and puts it
    back at once when legacy does not work either."""
    node = cluster.node(name)
    query = node.run("update-alternatives --query iptables", timeout=30, check=False)
    previous = parse_alternative(query.output) if query.ok else None
    if previous is None:
        raise FaultSupportError(
            f"{name}: iptables does not work ({nf_tables.strip()[-300:]}), and squall switches "
            "a host to iptables-legacy only when it can switch it back, but "
            f"`update-alternatives --query iptables` said {query.output.strip()[-300:]!r}; "
            "partitions need iptables and root with CAP_NET_ADMIN on the node"
        )
    legacy = node.run(
        f"update-alternatives --set iptables {LEGACY_IPTABLES} >/dev/null 2>&1 && "
        "iptables -w -L -n",
        timeout=30,
        check=False,
    )
    if not legacy.ok:
        node.run(previous.restore_command(), timeout=30, check=False)
        raise FaultSupportError(
            f"{name}: iptables does not work (nf_tables: {nf_tables.strip()[-300:]}; "
            f"legacy: {legacy.output.strip()[-300:]}); partitions need iptables and root "
            "with CAP_NET_ADMIN on the node"
        )
    return previous


def undo_host_changes(cluster: Cluster) -> list[str]:
    """Undo what squall changed on the nodes: its iptables chain and the INPUT jump to it,
    its netem qdisc, and the iptables alternative it switched to legacy (after the chain,
    which lives in legacy's tables). What was undone; NodeError naming every node where
    something could not be, after trying them all."""
    names = [n.name for n in cluster.all_nodes()]
    undone: list[str] = []
    problems: dict[str, BaseException] = {}
    had_chain, failures = on_each_node(
        names,
        lambda n: cluster.node(n).run(f"iptables -w -n -L {CHAIN}", timeout=15, check=False).ok,
    )
    failures = {**failures, **Partitioner(cluster).remove_chain()}
    problems.update(failures)
    undone += [
        f"iptables chain {CHAIN} on {n}" for n in names if had_chain.get(n) and n not in failures
    ]
    if cluster.capabilities.netem:
        outcomes, failures = NetworkShaper(cluster).clear(names)
        problems.update(failures)
        undone += [f"netem qdisc on {n}" for n in names if outcomes.get(n) == "cleared"]
    alternatives = _load_alternatives(cluster.run_id)
    _, failures = on_each_node(
        [n for n in names if n in alternatives and n not in problems],
        lambda n: cluster.node(n).run(alternatives[n].restore_command(), timeout=30),
    )
    problems.update(failures)
    undone += [
        f"iptables alternative on {n} put back to {alternatives[n].describe()}"
        for n in names
        if n in alternatives and n not in problems
    ]
    if problems:
        raise NodeError(
            f"cluster {cluster.run_id}: could not undo squall's changes on "
            + "; ".join(f"{n}: {err}" for n, err in sorted(problems.items()))
        )
    return undone


def claim_root_command(root: str) -> str:
    """Shell making ``root`` squall's: the marker file is there already, or is written into a
    new or empty directory (or one holding an earlier squall's ``sut``); else exit 3."""
    root = _squall_root(root)
    directory, marker = shlex.quote(root), shlex.quote(f"{root}/{ROOT_MARKER}")
    refusal = (
        f"squall: root {root} is not empty and not squall's (no {ROOT_MARKER} in it); "
        f"empty it, choose another root, or, if squall may delete its data, logs, run and "
        f"config directories, `touch {root}/{ROOT_MARKER}`"
    )
    return (
        f"if [ -f {marker} ]; then exit 0; fi\n"
        f'if [ ! -e {directory} ] || [ -z "$(ls -A {directory} 2>/dev/null)" ] || '
        f"[ -d {directory}/sut/system_under_test ]; then\n"
        f"  mkdir -p {directory} && echo 'squall keeps its SUT, data and logs here' > {marker}\n"
        "  exit $?\n"
        "fi\n"
        f"echo {shlex.quote(refusal)}\n"
        f"exit {NOT_SQUALLS}\n"
    )


def remove_run_directories_command(root: str) -> str:
    """Shell deleting the run directories under ``root``, only if the marker makes it
    squall's (exit 3 otherwise); ValueError for a system directory."""
    directory = _squall_root(root)
    marker = shlex.quote(f"{directory}/{ROOT_MARKER}")
    paths = " ".join(shlex.quote(f"{directory}/{d}") for d in RUN_DIRECTORIES)
    refusal = shlex.quote(
        f"squall: {directory} is not squall's (no {ROOT_MARKER}); nothing deleted"
    )
    return f"if [ ! -f {marker} ]; then echo {refusal}; exit {NOT_SQUALLS}; fi; rm -rf -- {paths}"


def _squall_root(root: str) -> str:
    try:
        return check_root(root)
    except ValueError as err:
        raise ValueError(f"root {root!r}: {err}") from None


def _raise_first(failures: Mapping[str, BaseException]) -> None:
    for error in failures.values():
        raise error


def import_check_command(sut: str, python: str, *, kafka: bool = False) -> str:
    """Whether the SUT (its log needs the crc32c C extension on the node) and kazoo import
    from ``sut`` with the node's ``python``; with ``kafka``, the Kafka listener too."""
    directory = shlex.quote(sut)
    modules = "kazoo.client, system_under_test.server"
    if kafka:
        modules += ", system_under_test.kafka_handler"
    return f"cd {directory} && PYTHONPATH={directory} {shlex.quote(python)} -c 'import {modules}'"


def deploy_system_under_test(cluster: Cluster, say: Progress = _quiet) -> None:
    """ZooKeeper on zk1, then the SUT (with kazoo vendored) installed and started on every
    broker node, on its lazy disk when the cluster has them; installs run in parallel with
    ZooKeeper's start."""
    sources = vendored_packages()
    zookeeper = cluster.zookeeper_service()

    def start_zookeeper() -> None:
        zookeeper.configure()
        zookeeper.start()

    def install(name: str) -> None:
        broker = cluster.broker(name)
        broker.install(sources)
        node = cluster.node(name)
        kafka = cluster.state.kafka_listener
        command = import_check_command(str(broker.root / "sut"), broker.python, kafka=kafka)
        check = node.run(command, check=False)
        if not check.ok:
            raise SutImportError(
                f"{name}: the SUT, kazoo or the crc32c module (Debian: python3-crc32c) does "
                f"not import with the node's "
                f"{broker.python} (it must be Python 3.11+):\n{check.output.strip()}"
            )
        if cluster.state.lazy_disk:
            disk = cluster.lazy_disk(name)
            disk.install()
            disk.mount()
        broker.configure()

    disks = " on lazy disks (lazyfs)" if cluster.state.lazy_disk else ""
    say(f"starting ZooKeeper on zk1, installing the SUT on the brokers{disks}")
    names = ["zk1", *cluster.brokers]
    _, failures = on_each_node(names, lambda n: start_zookeeper() if n == "zk1" else install(n))
    _raise_first(failures)
    say(f"starting brokers {', '.join(cluster.brokers)}")
    _, failures = on_each_node(list(cluster.brokers), lambda n: cluster.broker(n).start())
    _raise_first(failures)


def stop_daemons(cluster: Cluster) -> list[str]:
    """Stop squall's daemons on every node by pidfile (TERM, then KILL), then unmount its
    lazy disk (whether or not this cluster has one: an earlier run's may be left); what was
    stopped."""

    def stop(name: str) -> list[str]:
        root = cluster.state.zookeeper.root if name == ZOOKEEPER_NODE else cluster.broker(name).root
        node = cluster.node(name)
        stopped = []
        for daemon in ("broker", "zookeeper"):
            handle = Daemon(node, str(root), daemon)
            if handle.is_running():
                handle.stop(timeout=15)
                stopped.append(f"{daemon} on {name} ({node.address})")
        if LazyDisk(node, root=str(root)).release():
            stopped.append(f"lazy disk on {name} ({node.address})")
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
        lazy_disk: bool | None = None,
        kafka_listener: bool = False,
        kept: bool = False,
    ) -> Cluster:
        """Reach every host of the inventory, check iptables/netem, stop leftovers, deploy;
        state saved. ``nodes``, when given, must match the inventory's brokers. ``lazy_disk``
        (off by default here): the brokers' data on lazyfs, which needs FUSE on the hosts."""
        from squall.cluster.inventory import load_inventory

        say = progress or _quiet
        if inventory is None:
            raise ValueError("the ssh runtime needs an inventory of hosts (--inventory FILE)")
        state = load_inventory(inventory).cluster_state(run_id, settings=settings, kept=kept)
        state.lazy_disk = bool(lazy_disk)
        state.kafka_listener = kafka_listener
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
            # A root that is not squall's stops the run before anything on the hosts changes.
            hosts = [*state.brokers, state.zookeeper]
            _, failures = on_each_node(
                [n.name for n in hosts],
                lambda n: cluster.node(n).run(claim_root_command(cluster_root(state, n))),
            )
            _raise_first(failures)
            check_fault_support(cluster, say)
            say("stopping squall daemons left from earlier runs")
            stop_daemons(cluster)
            for node_state in hosts:
                cluster.node(node_state.name).run(remove_run_directories_command(node_state.root))
            deploy_system_under_test(cluster, say)
        except BaseException:
            cluster.close()
            raise
        return cluster

    def attach(self, state: ClusterState) -> Cluster:
        return ssh_cluster(state)

    def down(self, state: ClusterState) -> list[str]:
        """Stop the brokers and ZooKeeper and undo squall's changes to the hosts (iptables
        chain, netem, iptables alternative); the hosts, squall's files and logs stay. What
        was stopped and undone; the state is kept (for ``clean``) if something failed."""
        cluster = self.attach(state)
        try:
            removed = stop_daemons(cluster)
            removed += undo_host_changes(cluster)
        finally:
            cluster.close()
        state.forget()
        forget_capabilities(state.run_id)
        return removed

    def clean(self, run_id: str | None = None, *, kept_too: bool = False) -> list[str]:
        """``down`` for one ssh cluster with saved state, or (no run id) for every one whose
        owner is gone (``squall.cluster.owner``), never a run in progress; unreachable hosts
        are reported, not fatal."""
        removed: list[str] = []
        for state in _saved_states(self.name, run_id):
            if run_id is None and not is_leftover(state.owner, kept_too=kept_too):
                continue
            try:
                removed += self.down(state)
            except (NodeError, OSError) as err:
                removed.append(
                    f"nothing of ssh cluster {state.run_id}: {err}; its state is kept, so that "
                    "`squall clean` can try again"
                )
        return removed


def cluster_root(state: ClusterState, name: str) -> str:
    return next(n.root for n in [*state.brokers, state.zookeeper] if n.name == name)


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
