"""The system under test's services on a node: its broker and ZooKeeper, installed,
configured, started, signalled and read back.

These are the only launchers of both daemons: the runtimes deploy with them, the nemesis
drives them through ``ServiceDaemons`` (``nemesis.protocols.Daemons``), and the local
launchers (``broker_process``, ``zookeeper_server``) wrap them on a ``LocalNode``. Files
are written by upload, never through a shell. Layout on a node, under ``root``::

    sut/                 the system_under_test package (and vendored pure-Python deps)
    config/              server.properties, zoo.cfg, log4j.properties
    data/logs/           log.dirs; data/logs/squall-events.jsonl is the event log
    data/disk/           log.dirs instead, on a lazy disk (``lazy_disk``: lazyfs, mounted over
                         data/disk-backing), when the cluster has one; the event log stays on
                         the node's own disk (a power loss of the broker's data spares it)
    data/zookeeper/      ZooKeeper's snapshots and transaction logs
    run/broker.pid       run/zookeeper.pid
    logs/broker.log      logs/zookeeper.log (console), logs/zookeeper-server.log
"""

from __future__ import annotations

import shlex
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from nemesis.errors import ClusterError
from squall.cluster.lazy_disk import MOUNT_DIR, LazyDisk, LazyDiskError
from squall.cluster.node import DaemonSpec, Node

BROKER_PORT = 9092
KAFKA_PORT = 9093
"""Where a broker serves Kafka's own protocol, when the cluster has that listener."""
ZOOKEEPER_PORT = 2181
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
ROOT_MARKER = ".squall-root"
"""The file that marks a directory as a squall root: squall deletes under a root only with it."""
ZOOKEEPER_JARS = ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
"""zookeeper.jar's manifest names its other dependencies; these two give it a log backend."""
JAR_DIR = "/usr/share/java"
FOUR_LETTER_WORDS = ("srvr", "conf", "ruok")
"""The only four-letter words ZooKeeper answers: the ones squall asks (readiness, its dataDir)."""
MAX_ZOOKEEPER_CONNECTIONS_PER_ADDRESS = 60
"""ZooKeeper's own default: each broker holds one session, the control node a few."""


DUMP_TIMEOUT_S = 300.0
"""How long a broker node's `dump-log` may take (a 120 s run's log takes seconds)."""
MAX_DUMP_BYTES = 1 << 30
"""The most a broker node's `dump-log` output may hold before it is refused."""


class ServiceError(ClusterError):
    """A daemon did not install, start or stop as asked."""


def package_root() -> Path:
    """The directory holding the ``system_under_test`` package on this machine."""
    import system_under_test

    return Path(system_under_test.__file__).resolve().parent.parent


def put_text(node: Node, remote: str, text: str) -> None:
    """Write ``text`` to the file ``remote`` on node, by upload (no shell sees the text)."""
    with tempfile.TemporaryDirectory(prefix="squall-upload-") as directory:
        local = Path(directory) / PurePosixPath(remote).name
        local.write_text(text)
        node.upload(local, remote)


def properties_text(values: Mapping[str, object]) -> str:
    """``key=value`` lines; ServiceError for a key or value that would break the format."""
    lines = []
    for key, value in values.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        for what, part in (("key", key), ("value", text)):
            if any(ord(c) < 32 or ord(c) == 127 for c in part):
                raise ServiceError(
                    f"setting {key!r}: its {what} holds a control character ({part!r}); "
                    "settings are single-line text"
                )
        if not key or "=" in key or key.strip() != key:
            raise ServiceError(f"setting {key!r} is not a valid property name")
        lines.append(f"{key}={text}\n")
    return "".join(lines)


class Daemon:
    """Start, stop, kill, pause and resume of one pidfile-tracked process on a node."""

    def __init__(self, node: Node, root: str, name: str) -> None:
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
        """SIGKILL (a crash) and wait until the process is gone; True if it was running.

        A paused process dies paused: SIGKILL needs no SIGCONT, and a SIGCONT sent first
        would let it run (answer requests queued while it was paused) before it dies."""
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
        self.kill()

    def log_tail(self, lines: int = 30) -> str:
        result = self.node.run(f"tail -n {lines} {shlex.quote(self.logfile)}", check=False)
        return result.output

    def _make_directories(self, *subdirectories: str) -> None:
        """The root's subdirectories, and the root's marker (squall set this root up)."""
        paths = " ".join(shlex.quote(str(self.root / sub)) for sub in subdirectories)
        marker = shlex.quote(str(self.root / ROOT_MARKER))
        self.node.run(
            f"mkdir -p {paths} && {{ [ -e {marker} ] || "
            f"echo 'squall keeps its SUT, data and logs here' > {marker}; }}"
        )

    def _start(self, command: Sequence[str], *, env: Mapping[str, str] | None = None) -> int:
        if self.is_running():
            raise ServiceError(f"{self.node.name}: {self.name} is already running")
        return self.node.start_daemon(
            DaemonSpec(
                self.name, list(command), self.pidfile, self.logfile, env=env, cwd=str(self.root)
            )
        )

    def _wait_until(self, probe: str, what: str, timeout: float) -> None:
        """Until the shell probe succeeds on the node; ServiceError with the log's tail if the
        process exits first or the time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_running():
                raise ServiceError(
                    f"{self.node.name}: {self.name} exited while starting; last lines of "
                    f"{self.logfile}:\n{self.log_tail()}"
                )
            if self.node.run(probe, timeout=5, check=False).exit_code == 0:
                return
            time.sleep(0.1)
        self.kill()
        raise ServiceError(
            f"{self.node.name}: {self.name} did not {what} in {timeout:.0f} s; last lines of "
            f"{self.logfile}:\n{self.log_tail()}"
        )

    def _listening_probe(self, port: int) -> str:
        script = (
            "import socket,sys; s=socket.socket(); s.settimeout(0.5); "
            f"sys.exit(s.connect_ex(({self.node.address!r}, {port})))"
        )
        return f"python3 -c {shlex.quote(script)}"


class BrokerService(Daemon):
    """A broker of the replicated log on one node."""

    def __init__(
        self,
        node: Node,
        *,
        broker_id: int,
        zookeeper_connect: str | None,
        root: str = "/opt/squall",
        python: str = "python3",
        port: int = BROKER_PORT,
        settings: Mapping[str, object] | None = None,
        lazy_disk: bool = False,
        kafka_port: int | None = None,
    ) -> None:
        """``zookeeper_connect`` None runs the broker standalone (no controller);
        ``lazy_disk``: log.dirs is on the node's lazy disk, which must be mounted;
        ``kafka_port``: the broker also serves Kafka's protocol there (KAFKA_PROTOCOL.md)."""
        super().__init__(node, root, "broker")
        self.broker_id = broker_id
        self.zookeeper_connect = zookeeper_connect
        self.python = python
        self.port = port
        self.settings = dict(settings or {})
        self.lazy_disk = lazy_disk
        self.kafka_port = kafka_port

    @property
    def bootstrap(self) -> str:
        return f"{self.node.address}:{self.port}"

    @property
    def log_dir(self) -> str:
        if self.lazy_disk:
            return str(self.root / MOUNT_DIR)
        return str(self.root / "data" / "logs")

    def disk(self) -> LazyDisk:
        """The lazy disk under this broker's data."""
        return LazyDisk(self.node, root=str(self.root), python=self.python)

    @property
    def event_log(self) -> str:
        return str(self.root / "data" / "logs" / "squall-events.jsonl")

    @property
    def config_file(self) -> str:
        return str(self.root / "config" / "server.properties")

    def install(self, sources: Sequence[Path] = ()) -> None:
        """Upload the SUT package (and vendored pure-Python packages) to ``root/sut``."""
        self._make_directories("sut", "config", "data/logs", "run", "logs")
        sut = self.root / "sut"
        self.node.upload(package_root() / "system_under_test", str(sut / "system_under_test"))
        for source in sources:
            self.node.upload(source, str(sut / source.name))

    def configure(self) -> None:
        """Write ``server.properties``: the node's identity, then the test's settings."""
        self._make_directories("config", "data/logs", "run", "logs")
        values: dict[str, object] = {
            "broker.id": self.broker_id,
            "listeners": f"{self.node.address}:{self.port}",
            "log.dirs": self.log_dir,
            "event.log": self.event_log,
        }
        if self.zookeeper_connect is not None:
            values["zookeeper.connect"] = self.zookeeper_connect
        if self.kafka_port is not None:
            values["kafka.listeners"] = f"{self.node.address}:{self.kafka_port}"
        values.update(self.settings)
        put_text(self.node, self.config_file, properties_text(values))

    def command(self) -> list[str]:
        command = [self.python, "-m", "system_under_test", "broker", "--config", self.config_file]
        return command if self.zookeeper_connect is not None else [*command, "--standalone"]

    def start(self, timeout: float = 30.0) -> int:
        """Start the broker and wait until it listens; its pid. On a lazy disk, the disk must
        be mounted and its daemon alive (ServiceError otherwise)."""
        if self.lazy_disk:
            try:
                self.disk().check()
            except LazyDiskError as err:
                raise ServiceError(f"broker {self.broker_id} not started: {err}") from None
        pid = self._start(
            self.command(),
            env={"PYTHONPATH": str(self.root / "sut"), "PYTHONUNBUFFERED": "1"},
        )
        self._wait_until(self._listening_probe(self.port), f"listen on {self.bootstrap}", timeout)
        return pid

    def dump_log(
        self,
        topic: str,
        local: Path,
        *,
        timeout: float = DUMP_TIMEOUT_S,
        max_bytes: int = MAX_DUMP_BYTES,
    ) -> Path:
        """Run the SUT's own `dump-log` over this broker's log dir for `topic` (read-only, as
        `kafka-dump-log.sh`), its JSON lines written to a file on the node and fetched to
        `local` (streamed, never held in memory whole); ServiceError when it fails, or when
        its output exceeds `max_bytes`. A broker holding no replica of the topic gives an
        empty file."""
        remote = str(self.root / "run" / f"dump-log-{topic}.jsonl")
        command = shlex.join(
            [
                self.python,
                "-m",
                "system_under_test",
                "dump-log",
                "--log-dir",
                self.log_dir,
                "--topic",
                topic,
                "--format",
                "jsonl",
            ]
        )
        sut = shlex.quote(str(self.root / "sut"))
        target = shlex.quote(remote)
        result = self.node.run(
            f"PYTHONPATH={sut} {command} > {target}; code=$?; "
            f"echo; echo dump-log-exit=$code; stat -c %s {target}",
            timeout=timeout,
            check=False,
        )
        lines = result.output.strip().splitlines()
        exit_line = next((x for x in reversed(lines) if x.startswith("dump-log-exit=")), "")
        code = exit_line.removeprefix("dump-log-exit=")
        if code == "2" and "holds no partition directory" in result.output:
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(b"")
            return local
        if code != "0" or not lines or not lines[-1].isdigit():
            raise ServiceError(
                f"{self.node.name}: dump-log of topic {topic} failed (exit {code or '?'}): "
                f"{result.output.strip()[-600:]}"
            )
        size = int(lines[-1])
        if size > max_bytes:
            self.node.run(f"rm -f {target}", check=False)
            raise ServiceError(
                f"{self.node.name}: dump-log of topic {topic} wrote {size} bytes, more than the "
                f"bound of {max_bytes}; the replica reads skip this node"
            )
        try:
            self.node.download(remote, local)
        finally:
            self.node.run(f"rm -f {target}", check=False)
        if not local.exists():
            raise ServiceError(f"{self.node.name}: the dump of topic {topic} was not fetched")
        return local

    def fetch_logs(self, local: Path) -> None:
        local.mkdir(parents=True, exist_ok=True)
        self.node.download(self.logfile, local / "broker.log")
        self.node.download(self.event_log, local / "events.jsonl")
        self.node.download(self.config_file, local / "server.properties")


class ZooKeeperService(Daemon):
    """The real ZooKeeper server (Debian's package) on one node, standalone."""

    def __init__(
        self,
        node: Node,
        *,
        root: str = "/opt/squall",
        port: int = ZOOKEEPER_PORT,
        heap_mb: int = 256,
        tick_time_ms: int = 500,
        java: str = "java",
        jar_dir: str = JAR_DIR,
        extra_config: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(node, root, "zookeeper")
        self.port = port
        self.heap_mb = heap_mb
        self.tick_time_ms = tick_time_ms
        self.java = java
        self.jar_dir = jar_dir
        self.extra_config = dict(extra_config or {})

    @property
    def data_dir(self) -> str:
        return str(self.root / "data" / "zookeeper")

    @property
    def config_file(self) -> str:
        return str(self.root / "config" / "zoo.cfg")

    @property
    def server_log(self) -> str:
        """ZooKeeper's own log (the JVM's console goes to ``logfile``)."""
        return str(self.root / "logs" / "zookeeper-server.log")

    @property
    def connect_string(self) -> str:
        address = self.node.address
        return f"[{address}]:{self.port}" if ":" in address else f"{address}:{self.port}"

    def configure(self) -> None:
        """Write zoo.cfg and the log4j configuration."""
        self._make_directories("config", "run", "logs", "data/zookeeper")
        config: dict[str, object] = {
            "tickTime": self.tick_time_ms,
            "dataDir": self.data_dir,
            "clientPort": self.port,
            "clientPortAddress": self.node.address,
            "minSessionTimeout": 2 * self.tick_time_ms,
            "maxSessionTimeout": max(60_000, 20 * self.tick_time_ms),
            "maxClientCnxns": MAX_ZOOKEEPER_CONNECTIONS_PER_ADDRESS,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": ",".join(FOUR_LETTER_WORDS),
            **self.extra_config,
        }
        put_text(self.node, self.config_file, properties_text(config))
        put_text(
            self.node,
            str(self.root / "config" / "log4j.properties"),
            "log4j.rootLogger=INFO, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.RollingFileAppender\n"
            f"log4j.appender.FILE.File={self.server_log}\n"
            "log4j.appender.FILE.MaxFileSize=20MB\n"
            "log4j.appender.FILE.MaxBackupIndex=3\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n\n",
        )

    def command(self) -> list[str]:
        classpath = ":".join(f"{self.jar_dir}/{jar}" for jar in ZOOKEEPER_JARS)
        log4j = self.root / "config" / "log4j.properties"
        return [
            self.java,
            f"-Xmx{self.heap_mb}m",
            "-XX:+ExitOnOutOfMemoryError",
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{log4j}",
            "-cp",
            classpath,
            ZOOKEEPER_MAIN,
            self.config_file,
        ]

    def start(self, timeout: float = 60.0) -> int:
        """Start the server and wait until it serves on its port from its own data
        directory (another server on the port does not count); its pid."""
        pid = self._start(self.command())
        self._wait_until(self._serving_probe(), f"serve on {self.connect_string}", timeout)
        return pid

    def _serving_probe(self) -> str:
        script = (
            "import socket,sys\n"
            "def ask(word):\n"
            f"    s=socket.create_connection(({self.node.address!r},{self.port}),timeout=1)\n"
            "    s.sendall(word); out=b''\n"
            "    while (chunk:=s.recv(65536)): out+=chunk\n"
            "    return out.decode(errors='replace')\n"
            "try:\n"
            f"    ok='Mode:' in ask(b'srvr') and {('dataDir=' + self.data_dir)!r} in ask(b'conf')\n"
            "except OSError:\n"
            "    ok=False\n"
            "sys.exit(0 if ok else 1)\n"
        )
        return f"python3 -c {shlex.quote(script)}"

    def fetch_logs(self, local: Path) -> None:
        local.mkdir(parents=True, exist_ok=True)
        self.node.download(self.logfile, local / "zookeeper.log")
        self.node.download(self.server_log, local / "zookeeper-server.log")


class ServiceDaemons:
    """The system's daemon on each node of a cluster, by node name: squall's implementation of
    ``nemesis.protocols.Daemons``."""

    def __init__(self, daemon_of: Callable[[str], BrokerService | ZooKeeperService]) -> None:
        self._daemon_of = daemon_of

    def is_running(self, node: str) -> bool:
        return self._daemon_of(node).is_running()

    def kill(self, node: str) -> bool:
        return self._daemon_of(node).kill()

    def start(self, node: str, *, timeout_s: float) -> None:
        self._daemon_of(node).start(timeout=timeout_s)

    def stop(self, node: str, *, timeout_s: float) -> None:
        self._daemon_of(node).stop(timeout=timeout_s)

    def pause(self, node: str) -> bool:
        return self._daemon_of(node).pause()

    def resume(self, node: str) -> bool:
        return self._daemon_of(node).resume()
