"""A real ZooKeeper server (Debian's `zookeeper` package) as a process on this machine.

It is the ZooKeeper service of `squall.cluster.services` (the one launcher) on a
`LocalNode` rooted at its data directory, with its own port, so that tests never share
state and a crashed run's leftover server can be found and killed (`kill_leftover`).
Faults: `kill`, `pause`, `resume`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from squall.cluster.local import LocalNode
from squall.cluster.services import (
    JAR_DIR,
    ZOOKEEPER_JARS,
    ZOOKEEPER_MAIN,
    ServiceError,
    ZooKeeperService,
)

INSTALL_HINT = "run `apt-get install zookeeper default-jre-headless` (or `make setup`)"
PID_FILE = "run/zookeeper.pid"
"""The server's pidfile, relative to its data directory."""
CONFIG_FILE = "config/zoo.cfg"


class ZooKeeperServerError(Exception):
    """Base class of this module's errors."""


class ZooKeeperNotInstalledError(ZooKeeperServerError):
    """Java or the ZooKeeper jars are missing on this machine."""


class ZooKeeperStartError(ZooKeeperServerError):
    """The server exited, or did not answer, while starting."""


class ZooKeeperNotRunningError(ZooKeeperServerError):
    """A signal was asked for while no server process is running."""


class _PortInUseError(ZooKeeperStartError):
    """The client port was taken by another process between choosing it and binding it."""


def find_java(java: str | None = None) -> str:
    """The java executable: `java` if given, else `$JAVA_HOME/bin/java`, else `java` on PATH."""
    if java is None:
        java_home = os.environ.get("JAVA_HOME")
        candidate = Path(java_home, "bin", "java") if java_home else None
        java = str(candidate) if candidate and candidate.is_file() else shutil.which("java")
        if java is None:
            raise ZooKeeperNotInstalledError(
                f"no Java runtime found (JAVA_HOME, PATH); {INSTALL_HINT}"
            )
    resolved = shutil.which(java)
    if resolved is None:
        raise ZooKeeperNotInstalledError(
            f"Java runtime {java!r} is not an executable; {INSTALL_HINT}"
        )
    return resolved


def find_zookeeper_classpath(jar_dir: Path = Path(JAR_DIR)) -> list[Path]:
    """The jars that run the ZooKeeper server with log4j logging."""
    jars = [jar_dir / name for name in ZOOKEEPER_JARS]
    missing = [str(jar) for jar in jars if not jar.is_file()]
    if missing:
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper jars missing: {', '.join(missing)}; {INSTALL_HINT}"
        )
    return jars


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_PORTS_FROM = 10_000
"""The lowest port `free_port` draws."""


def _ephemeral_start() -> int:
    """Where the kernel's ephemeral ports (those of outgoing connections) begin."""
    try:
        return int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` now (another process may still take it later).

    Drawn below the kernel's ephemeral range, so that no outgoing connection of this
    machine (a client's, a broker's) can be given it before its listener binds it; the
    kernel's choice only when that range has no free port.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    top = _ephemeral_start()
    for _ in range(50 if top > LISTEN_PORTS_FROM else 0):
        port = random.randrange(LISTEN_PORTS_FROM, top)
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def four_letter_word(host: str, port: int, word: str, *, timeout: float = 2.0) -> str:
    """Send a four-letter command (`ruok`, `srvr`, `mntr`, ...) and return the reply."""
    chunks = []
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def kill_leftover(data_dir: Path) -> int | None:
    """SIGKILL the server that a pidfile in `data_dir` names, if it is still alive.

    Returns the pid that was killed. The process's command line must name this directory's
    `zoo.cfg`, so that a recycled pid never kills an unrelated process.
    """
    pid_path = Path(data_dir) / PID_FILE
    try:
        pid = int(pid_path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    config = str((Path(data_dir) / CONFIG_FILE).resolve())
    killed = None
    if _is_alive(pid) and {config, ZOOKEEPER_MAIN} <= set(_cmdline(pid)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _is_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        killed = pid
    pid_path.unlink(missing_ok=True)
    return killed


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _is_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


class ZooKeeperServer:
    """A standalone ZooKeeper server process with its own data directory and port.

    Layout of `data_dir` (the service's): `config/zoo.cfg`, `config/log4j.properties`,
    `logs/zookeeper-server.log` (the server's log), `logs/zookeeper.log` (JVM console),
    `run/zookeeper.pid`, and `data/zookeeper/` (snapshots, transaction logs).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        tick_time_ms: int = 500,
        java: str | None = None,
        heap_mb: int = 256,
        extra_config: Mapping[str, str | int] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.tick_time_ms = tick_time_ms
        self.heap_mb = heap_mb
        self.extra_config = {key: str(value) for key, value in (extra_config or {}).items()}
        self._java = java
        self._auto_port = port == 0
        self.port = free_port(host) if port == 0 else port
        self._paused = False
        self._started_once = False

    def _service(self, java: str = "java") -> ZooKeeperService:
        return ZooKeeperService(
            LocalNode("zookeeper", self.host, self.data_dir),
            root=str(self.data_dir),
            port=self.port,
            heap_mb=self.heap_mb,
            tick_time_ms=self.tick_time_ms,
            java=java,
            extra_config=self.extra_config,
        )

    @property
    def client_host(self) -> str:
        """The address clients on this machine use: the bind address, or loopback for a wildcard."""
        return {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(self.host, self.host)

    @property
    def connect_string(self) -> str:
        host = self.client_host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's own log."""
        return Path(self._service().server_log)

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs (paused included), else None."""
        if not self.is_running():
            return None
        return _read_pid(self.data_dir / PID_FILE)

    @property
    def paused(self) -> bool:
        return self._paused and self.is_running()

    def is_running(self) -> bool:
        return self._service().is_running()

    def four_letter_word(self, word: str, *, timeout: float = 2.0) -> str:
        return four_letter_word(self.client_host, self.port, word, timeout=timeout)

    def start(self, timeout: float = 30) -> None:
        """Start the server and return once it serves requests on its port."""
        if self.is_running():
            raise ZooKeeperStartError(
                f"ZooKeeper in {self.data_dir} is already running (pid {self.pid})"
            )
        if leftover := self._leftover_pid():
            raise ZooKeeperStartError(
                f"a leftover ZooKeeper (pid {leftover}) still runs on {self.data_dir}; "
                "call kill_leftover() on that directory (or run `squall clean`) first"
            )
        java = find_java(self._java)
        find_zookeeper_classpath()
        for attempt in range(3):
            try:
                self._launch(java, timeout)
                break
            except _PortInUseError:
                # Only a port we picked ourselves, and never after clients have learnt it.
                if not (self._auto_port and not self._started_once and attempt < 2):
                    raise
                self.port = free_port(self.host)
        self._started_once = True

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM, then SIGKILL if the server has not exited within `timeout` seconds."""
        self._service().stop(timeout=timeout)
        self._reap()

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; data already synced survives."""
        self._service().kill()
        self._reap()

    def pause(self) -> None:
        """SIGSTOP: the server stays up, its port accepts connections, nothing answers."""
        if not self._service().pause():
            raise ZooKeeperNotRunningError(f"ZooKeeper in {self.data_dir} is not running")
        self._paused = True

    def resume(self) -> None:
        if not self._service().resume():
            raise ZooKeeperNotRunningError(f"ZooKeeper in {self.data_dir} is not running")
        self._paused = False

    def restart(self, timeout: float = 30) -> None:
        """A clean bounce on the same port: stop, then start."""
        self.stop()
        self.start(timeout)

    def __enter__(self) -> ZooKeeperServer:
        if not self.is_running():
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperServer({str(self.data_dir)!r}, {self.connect_string}, pid={self.pid})"

    def _launch(self, java: str, timeout: float) -> None:
        service = self._service(java)
        server_log = Path(service.server_log)
        log_offset = server_log.stat().st_size if server_log.exists() else 0
        self._paused = False
        try:
            service.configure()
            service.start(timeout=timeout)
        except ServiceError as err:
            self._reap()
            log = _read_from(server_log, log_offset)
            port_taken = "java.net.BindException" in log
            hint = f" (port {self.port} is in use; choose another or pass port=0)"
            raise (_PortInUseError if port_taken else ZooKeeperStartError)(
                f"ZooKeeper did not start on {self.connect_string}"
                f"{hint if port_taken else ''}: {err}\nlast lines of {server_log}:\n"
                + "\n".join(log.splitlines()[-40:])
            ) from None

    def _leftover_pid(self) -> int | None:
        pid = _read_pid(self.data_dir / PID_FILE)
        config = str(self.data_dir / CONFIG_FILE)
        if pid is None:
            return None
        return pid if _is_alive(pid) and {config, ZOOKEEPER_MAIN} <= set(_cmdline(pid)) else None

    def _reap(self) -> None:
        self._paused = False
        (self.data_dir / PID_FILE).unlink(missing_ok=True)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _read_from(path: Path, offset: int) -> str:
    """What a file holds from `offset` on (all of it if it has rolled over since)."""
    with contextlib.suppress(OSError), open(path, "rb") as file:
        size = file.seek(0, os.SEEK_END)
        file.seek(offset if offset <= size else 0)
        return file.read().decode(errors="replace")
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    """Run one server in the foreground until SIGTERM, SIGINT or SIGHUP."""
    parser = argparse.ArgumentParser(
        prog="python -m squall.cluster.zookeeper_server", description=main.__doc__
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, default=2181, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1", help="bind address")
    parser.add_argument("--tick-time-ms", type=int, default=500)
    parser.add_argument("--heap-mb", type=int, default=256)
    parser.add_argument("--java", default=None, help="java executable (default: JAVA_HOME, PATH)")
    args = parser.parse_args(argv)

    stop_requested = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop_requested.set())
    server = ZooKeeperServer(
        args.data_dir,
        port=args.port,
        host=args.host,
        tick_time_ms=args.tick_time_ms,
        java=args.java,
        heap_mb=args.heap_mb,
    )
    try:
        server.start()
    except ZooKeeperServerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(
        f"zookeeper serving {server.connect_string} pid {server.pid} log {server.log_path}",
        flush=True,
    )
    try:
        while not stop_requested.wait(0.5):
            if not server.is_running():
                print("zookeeper exited", file=sys.stderr)
                return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
