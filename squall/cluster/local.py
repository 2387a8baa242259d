"""The local runtime: ZooKeeper and brokers as processes on this machine.

Each node is a directory and a loopback address of its own (``127.A.B.10`` for zk1,
``127.A.B.10+i`` for ``n<i>``, with A.B drawn from the run id so two clusters never meet), so
every broker listens on the usual port 9092 as on real hosts. Kill, pause and restart work;
partitions, network shaping and freezing whole nodes do not (they need the docker or ssh
runtime, where each node has its own network stack). With ``lazy_disk`` the brokers' data is
on lazyfs mounts on this machine (root, /dev/fuse and Debian's fuse3 needed), unmounted by
``down`` and ``clean``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from nemesis.protocols import Capabilities
from squall.cluster.cluster import (
    RUN_ID,
    ZOOKEEPER_NODE,
    Cluster,
    ClusterState,
    ClusterStateError,
    NodeState,
    check_run_id,
    state_dir,
)
from squall.cluster.lazy_disk import release_command
from squall.cluster.lazyfs.mounts import lazyfs_mounts
from squall.cluster.node import (
    DEFAULT_TIMEOUT_S,
    Command,
    CommandFailed,
    CommandResult,
    CommandTimedOut,
    DaemonSpec,
    render,
)
from squall.cluster.owner import is_leftover, owner_label

SIGNALS = {
    "KILL": signal.SIGKILL,
    "TERM": signal.SIGTERM,
    "STOP": signal.SIGSTOP,
    "CONT": signal.SIGCONT,
}
Progress = Callable[[str], None]


def _process_alive(pid: int) -> bool:
    """True for a live (or stopped) process; False for none or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


class LocalNode:
    """A node that is a directory and a loopback address on this machine."""

    def __init__(self, name: str, address: str, root: Path) -> None:
        self._name = name
        self._address = address
        self.root = root

    @property
    def name(self) -> str:
        return self._name

    @property
    def address(self) -> str:
        return self._address

    def run(
        self, command: Command, *, timeout: float = DEFAULT_TIMEOUT_S, check: bool = True
    ) -> CommandResult:
        text = render(command)
        started = time.monotonic()
        process = subprocess.Popen(
            ["sh", "-c", text],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            raise CommandTimedOut(
                self.name,
                text,
                -9,
                output.decode(errors="replace") + f"\n(killed after {timeout}s)",
            ) from None
        result = CommandResult(
            text, process.returncode, output.decode(errors="replace"), time.monotonic() - started
        )
        if check and not result.ok:
            raise CommandFailed(self.name, text, result.exit_code, result.output)
        return result

    def upload(self, local: Path, remote: str) -> None:
        target = Path(remote)
        target.parent.mkdir(parents=True, exist_ok=True)
        if local.is_dir():
            shutil.copytree(
                local, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(local, target)

    def download(self, remote: str, local: Path) -> None:
        source = Path(remote)
        if not source.exists():
            return
        local.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, local, dirs_exist_ok=True)
        else:
            shutil.copy2(source, local)

    def start_daemon(self, spec: DaemonSpec) -> int:
        for path in (spec.pidfile, spec.logfile):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in (spec.env or {}).items())
        cd = f"cd {shlex.quote(spec.cwd)} && " if spec.cwd else ""
        # Detached from this process (setsid, reparented once sh exits), as on a remote node.
        self.run(
            f"{cd}{env} setsid nohup {render(spec.command)} >> {shlex.quote(spec.logfile)} 2>&1 "
            f"< /dev/null & echo $! > {shlex.quote(spec.pidfile)}"
        )
        return int(Path(spec.pidfile).read_text().strip())

    def _pid(self, pidfile: str) -> int | None:
        try:
            return int(Path(pidfile).read_text().strip())
        except (OSError, ValueError):
            return None

    def signal_daemon(self, pidfile: str, signal_name: str) -> bool:
        pid = self._pid(pidfile)
        if pid is None or not _process_alive(pid):
            return False
        try:
            os.kill(pid, SIGNALS[signal_name])
        except ProcessLookupError:
            return False
        return True

    def daemon_running(self, pidfile: str) -> bool:
        pid = self._pid(pidfile)
        return pid is not None and _process_alive(pid)

    def close(self) -> None:
        pass


class LocalRuntimeError(RuntimeError):
    """The local runtime cannot give what was asked on this machine."""


def fuse_missing() -> str | None:
    """Why this machine cannot mount lazy disks, or None."""
    if not os.path.exists("/dev/fuse"):
        return "there is no /dev/fuse"
    if os.geteuid() != 0:
        return "mounting FUSE here needs root"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing (`apt-get install fuse3`, or `make setup`)"
    return None


def _owner_of(run_id: str) -> str | None:
    try:
        return ClusterState.load(run_id).owner
    except ClusterStateError:
        return None


def _addresses(run_id: str, count: int) -> tuple[str, list[str]]:
    digest = zlib.crc32(run_id.encode())
    a, b = (digest >> 8) % 250 + 1, digest % 250 + 1
    return f"127.{a}.{b}.10", [f"127.{a}.{b}.{10 + i}" for i in range(1, count + 1)]


class LocalRuntime:
    """Builds clusters of local processes."""

    name = "local"

    def root(self, run_id: str) -> Path:
        return state_dir() / "local" / check_run_id(run_id)

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
        """Start zk1 and brokers n1..n<nodes> (3 by default), on lazy disks if asked; the
        cluster (state saved)."""
        say = progress or (lambda _message: None)
        if inventory is not None:
            raise ValueError("an inventory names existing hosts: use the ssh runtime for it")
        if lazy_disk:
            missing = fuse_missing()
            if missing is not None:
                raise LocalRuntimeError(
                    f"lazy disks need FUSE on this machine, and {missing}; run without them "
                    "(--no-lazy-disk) or use the docker runtime"
                )
        nodes = 3 if nodes is None else nodes
        zk_address, broker_addresses = _addresses(run_id, nodes)
        root = self.root(run_id)
        state = ClusterState(
            run_id=run_id,
            runtime=self.name,
            brokers=[
                NodeState(f"n{i}", address, root=str(root / f"n{i}"), python=sys.executable)
                for i, address in enumerate(broker_addresses, start=1)
            ],
            zookeeper=NodeState(ZOOKEEPER_NODE, zk_address, root=str(root / ZOOKEEPER_NODE)),
            settings={k: str(v) for k, v in (settings or {}).items()},
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            owner=owner_label(kept=kept),
            lazy_disk=bool(lazy_disk),
            kafka_listener=kafka_listener,
        )
        state.save()
        cluster = self.attach(state)
        say(f"starting ZooKeeper on {zk_address}")
        zookeeper = cluster.zookeeper_service()
        zookeeper.configure()
        zookeeper.start()
        for name in cluster.brokers:
            say(f"starting broker {name}")
            broker = cluster.broker(name)
            broker.install()
            if state.lazy_disk:
                disk = cluster.lazy_disk(name)
                disk.install()
                disk.mount()
            broker.configure()
            broker.start()
        return cluster

    def attach(self, state: ClusterState) -> Cluster:
        brokers = {n.name: LocalNode(n.name, n.address, Path(n.root)) for n in state.brokers}
        zk = LocalNode(state.zookeeper.name, state.zookeeper.address, Path(state.zookeeper.root))
        return Cluster(
            state,
            brokers,
            zk,
            capabilities=Capabilities(
                self.name,
                partitions=False,
                freeze=False,
                netem=False,
                disks=True,
                lazy_disk=state.lazy_disk,
            ),
        )

    def down(self, state: ClusterState) -> list[str]:
        """Kill every process of the cluster and remove its directories."""
        removed = self._kill_all(self.root(state.run_id))
        shutil.rmtree(self.root(state.run_id), ignore_errors=True)
        state.forget()
        return removed

    def clean(self, run_id: str | None = None, *, kept_too: bool = False) -> list[str]:
        """Kill the processes of one local cluster (found by pidfile) and remove its files;
        with no run id, of every cluster whose owner is gone, never one in progress."""
        base = state_dir() / "local"
        if run_id is not None:
            roots = [base / check_run_id(run_id)]
        else:
            roots = [
                root
                for root in (sorted(base.iterdir()) if base.exists() else [])
                if RUN_ID.match(root.name) and is_leftover(_owner_of(root.name), kept_too=kept_too)
            ]
        removed: list[str] = []
        for root in roots:
            removed += self._kill_all(root)
            if root.exists():
                shutil.rmtree(root, ignore_errors=True)
                removed.append(f"directory {root}")
            with contextlib.suppress(Exception):
                ClusterState.load(root.name).forget()
        return removed

    def _kill_all(self, root: Path) -> list[str]:
        """Kill every process of the cluster at ``root``, then unmount its lazy disks (a
        killed lazyfs leaves a dead mount that nothing under it could be deleted through)."""
        killed = self._kill_processes(root)
        for mountpoint in lazyfs_mounts():
            if Path(mountpoint).is_relative_to(root):
                node = LocalNode("local", "127.0.0.1", root)
                if "released" in node.run(release_command(mountpoint), check=False).output:
                    killed.append(f"lazy disk {mountpoint}")
        return killed

    def _kill_processes(self, root: Path) -> list[str]:
        killed: list[str] = []
        for pidfile in sorted(root.glob("*/run/*.pid")):
            try:
                pid = int(pidfile.read_text().strip())
            except (OSError, ValueError):
                continue
            if not _process_alive(pid) or not self._is_ours(pid, root):
                continue
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
            killed.append(f"process {pid} ({pidfile.parent.parent.name}/{pidfile.stem})")
        return killed

    @staticmethod
    def _is_ours(pid: int, root: Path) -> bool:
        """A recycled pid must not be killed: the command line must name the node's files."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            return False
        return str(root) in cmdline
