"""The SUT's life on one node: install, configure, start, stop, kill, pause, logs.

Works on anything shaped like squall's ``Node`` (run, upload, download, start_daemon,
signal_daemon, daemon_running); this module imports nothing from the framework, as the SUT
must stay shippable on its own. Layout on a node, under ``root``::

    sut/                 the system_under_test package (and vendored pure-Python deps)
    config/server.properties
    data/logs/           log.dirs; data/logs/squall-events.jsonl is the event log
    run/broker.pid       run/zookeeper.pid
    logs/broker.log      logs/zookeeper.log
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol


class DeployError(RuntimeError):
    """A daemon did not start or stop as asked."""


class _Result(Protocol):
    exit_code: int
    output: str


class NodeLike(Protocol):
    """The part of squall's Node this module uses."""

    @property
    def name(self) -> str: ...

    @property
    def address(self) -> str: ...

    def run(self, command: Any, *, timeout: float = ..., check: bool = ...) -> Any: ...

    def upload(self, local: Path, remote: str) -> None: ...

    def download(self, remote: str, local: Path) -> None: ...

    def start_daemon(self, spec: Any) -> int: ...

    def signal_daemon(self, pidfile: str, signal_name: str) -> bool: ...

    def daemon_running(self, pidfile: str) -> bool: ...


@dataclass(frozen=True)
class DaemonSpecData:
    """Mirrors squall.cluster.node.DaemonSpec (duck-typed; no framework import)."""

    name: str
    command: Sequence[str]
    pidfile: str
    logfile: str
    env: Mapping[str, str] | None = None
    cwd: str | None = None


def package_root() -> Path:
    """The directory holding the ``system_under_test`` package on this machine."""
    return Path(__file__).resolve().parent.parent


class Daemon:
    """Start/stop/kill/pause of one pidfile-tracked process on a node."""

    def __init__(self, node: NodeLike, root: str, name: str) -> None:
        self.node = node
        self.root = PurePosixPath(root)
        self.name = name

    @property
    def pidfile(self) -> str:
        return str(self.root / "run" / f"{self.name}.pid")

    @property
    def logfile(self) -> str:
        return str(self.root / "logs" / f"{self.name}.log")

    def is_running(self) -> bool:
        return self.node.daemon_running(self.pidfile)

    def kill(self, wait: float = 10.0) -> bool:
        """SIGKILL (a crash) and wait until the process is gone; True if it was running."""
        self.node.signal_daemon(self.pidfile, "CONT")
        was_running = self.node.signal_daemon(self.pidfile, "KILL")
        deadline = time.monotonic() + wait
        while was_running and self.is_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        return was_running

    def pause(self, wait: float = 5.0) -> bool:
        """SIGSTOP, and wait until the kernel shows the process stopped; True if it ran."""
        if not self.node.signal_daemon(self.pidfile, "STOP"):
            return False
        probe = f"awk '{{print $3}}' /proc/$(cat {shlex.quote(self.pidfile)})/stat"
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            state = self.node.run(probe, timeout=10, check=False).output.strip()
            if state in ("T", "t", ""):
                break
            time.sleep(0.02)
        return True

    def resume(self) -> bool:
        return self.node.signal_daemon(self.pidfile, "CONT")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a clean shutdown), wait, then SIGKILL if it lingers."""
        self.node.signal_daemon(self.pidfile, "CONT")
        if not self.node.signal_daemon(self.pidfile, "TERM"):
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_running():
                return
            time.sleep(0.1)
        self.node.signal_daemon(self.pidfile, "KILL")

    def _start(self, command: Sequence[str], *, env: Mapping[str, str] | None = None) -> int:
        if self.is_running():
            raise DeployError(f"{self.node.name}: {self.name} is already running")
        return self.node.start_daemon(
            DaemonSpecData(
                self.name, list(command), self.pidfile, self.logfile, env=env, cwd=str(self.root)
            )
        )

    def _wait_listening(self, port: int, timeout: float) -> None:
        probe = (
            f"python3 -c 'import socket,sys; s=socket.socket(); s.settimeout(0.5); "
            f'sys.exit(s.connect_ex(("{self.node.address}", {port})))\''
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_running():
                tail = self.node.run(f"tail -n 30 {shlex.quote(self.logfile)}", check=False)
                raise DeployError(
                    f"{self.node.name}: {self.name} exited while starting; last lines of "
                    f"{self.logfile}:\n{getattr(tail, 'output', '')}"
                )
            if self.node.run(probe, timeout=5, check=False).exit_code == 0:
                return
            time.sleep(0.2)
        raise DeployError(
            f"{self.node.name}: {self.name} did not listen on port {port} in {timeout:.0f}s"
        )


class BrokerDeployment(Daemon):
    """A broker of the replicated log on one node."""

    def __init__(
        self,
        node: NodeLike,
        *,
        broker_id: int,
        zookeeper_connect: str,
        root: str = "/opt/squall",
        python: str = "python3",
        port: int = 9092,
        settings: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(node, root, "broker")
        self.broker_id = broker_id
        self.zookeeper_connect = zookeeper_connect
        self.python = python
        self.port = port
        self.settings = dict(settings or {})

    @property
    def log_dir(self) -> str:
        return str(self.root / "data" / "logs")

    @property
    def event_log(self) -> str:
        return str(self.root / "data" / "logs" / "squall-events.jsonl")

    def install(self, sources: Sequence[Path] = ()) -> None:
        """Upload the SUT package (and any vendored pure-Python packages) to ``root/sut``."""
        sut = self.root / "sut"
        for sub in ("sut", "config", "data/logs", "run", "logs"):
            self.node.run(f"mkdir -p {shlex.quote(str(self.root / sub))}")
        self.node.upload(package_root() / "system_under_test", str(sut / "system_under_test"))
        for source in sources:
            self.node.upload(source, str(sut / source.name))

    def configure(self) -> None:
        values: dict[str, object] = {
            "broker.id": self.broker_id,
            "listeners": f"{self.node.address}:{self.port}",
            "log.dirs": self.log_dir,
            "zookeeper.connect": self.zookeeper_connect,
            "event.log": self.event_log,
        }
        values.update(self.settings)
        text = "".join(f"{k}={v}\n" for k, v in values.items())
        path = self.root / "config" / "server.properties"
        self.node.run(f"cat > {shlex.quote(str(path))} <<'SQUALL_EOF'\n{text}SQUALL_EOF")

    def start(self, timeout: float = 30.0) -> int:
        """Start the broker and wait until it listens; its pid."""
        pid = self._start(
            [
                self.python,
                "-m",
                "system_under_test",
                "broker",
                "--config",
                str(self.root / "config" / "server.properties"),
            ],
            env={"PYTHONPATH": str(self.root / "sut"), "PYTHONUNBUFFERED": "1"},
        )
        self._wait_listening(self.port, timeout)
        return pid

    def fetch_logs(self, local: Path) -> None:
        local.mkdir(parents=True, exist_ok=True)
        self.node.download(self.logfile, local / "broker.log")
        self.node.download(self.event_log, local / "events.jsonl")
        self.node.download(
            str(self.root / "config" / "server.properties"), local / "server.properties"
        )


class ZooKeeperDeployment(Daemon):
    """The real ZooKeeper server (Debian's package) on one node."""

    CLASSPATH = (
        "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:"
        "/usr/share/java/log4j-1.2.jar"
    )

    def __init__(
        self, node: NodeLike, *, root: str = "/opt/squall", port: int = 2181, heap_mb: int = 256
    ) -> None:
        super().__init__(node, root, "zookeeper")
        self.port = port
        self.heap_mb = heap_mb

    def configure(self) -> None:
        data = self.root / "data" / "zookeeper"
        for sub in ("config", "run", "logs"):
            self.node.run(f"mkdir -p {shlex.quote(str(self.root / sub))} {shlex.quote(str(data))}")
        config = (
            f"tickTime=500\ndataDir={data}\nclientPort={self.port}\n"
            f"clientPortAddress={self.node.address}\nmaxClientCnxns=0\n"
            "minSessionTimeout=1000\nmaxSessionTimeout=60000\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
        )
        log4j = (
            "log4j.rootLogger=INFO, FILE\nlog4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.root / 'logs' / 'zookeeper-server.log'}\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n\n"
        )
        self.node.run(
            f"cat > {self.root / 'config' / 'zoo.cfg'} <<'SQUALL_EOF'\n{config}SQUALL_EOF"
        )
        self.node.run(
            f"cat > {self.root / 'config' / 'log4j.properties'} <<'SQUALL_EOF'\n{log4j}SQUALL_EOF"
        )

    def start(self, timeout: float = 60.0) -> int:
        pid = self._start(
            [
                "java",
                f"-Xmx{self.heap_mb}m",
                "-XX:+ExitOnOutOfMemoryError",
                f"-Dlog4j.configuration=file:{self.root / 'config' / 'log4j.properties'}",
                "-cp",
                self.CLASSPATH,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(self.root / "config" / "zoo.cfg"),
            ]
        )
        self._wait_listening(self.port, timeout)
        return pid

    def fetch_logs(self, local: Path) -> None:
        local.mkdir(parents=True, exist_ok=True)
        self.node.download(self.logfile, local / "zookeeper.log")
        self.node.download(
            str(self.root / "logs" / "zookeeper-server.log"), local / "zookeeper-server.log"
        )
