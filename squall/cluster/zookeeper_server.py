"""A real ZooKeeper server (Debian's `zookeeper` package) run as a child process.

One standalone server per data directory, with its own generated `zoo.cfg`, log4j
configuration, log file and pidfile, so that tests never share state and a crashed run's
leftover server can be found and killed (`kill_leftover`). Faults: `kill`, `pause`, `resume`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

JAR_DIR = Path("/usr/share/java")
# zookeeper.jar's manifest Class-Path names its other dependencies; these two give it a log backend.
REQUIRED_JARS = ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_HINT = "run `apt-get install zookeeper default-jre-headless` (or `make setup`)"

CONFIG_FILE = "zoo.cfg"
LOG4J_FILE = "log4j.properties"
LOG_FILE = "zookeeper.log"
CONSOLE_FILE = "zookeeper.out"
PID_FILE = "zookeeper.pid"
STATE_DIR = "data"

_LOG4J_TEMPLATE = """\
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.RollingFileAppender
log4j.appender.FILE.File={log}
log4j.appender.FILE.MaxFileSize=20MB
log4j.appender.FILE.MaxBackupIndex=3
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} %-5p [%t:%C{{1}}@%L] - %m%n
"""


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


def find_zookeeper_classpath(jar_dir: Path = JAR_DIR) -> list[Path]:
    """The jars that run the ZooKeeper server with log4j logging."""
    jars = [jar_dir / name for name in REQUIRED_JARS]
    missing = [str(jar) for jar in jars if not jar.is_file()]
    if missing:
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper jars missing: {', '.join(missing)}; {INSTALL_HINT}"
        )
    return jars


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` now (another process may still take it later)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


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
    if _is_alive(pid) and {config, MAIN_CLASS} <= set(_cmdline(pid)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _is_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        killed = pid
    pid_path.unlink(missing_ok=True)
    return killed


def _last_lines(text: str, count: int = 40) -> str:
    return "\n".join(text.splitlines()[-count:])


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

    Layout of `data_dir`: `zoo.cfg`, `log4j.properties`, `zookeeper.log` (the server's log),
    `zookeeper.out` (JVM stdout/stderr), `zookeeper.pid`, and `data/` (snapshots, txn logs).
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
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        self._started_once = False

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
        return self.data_dir / LOG_FILE

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs (paused included), else None."""
        return self._proc.pid if self._proc is not None and self.is_running() else None

    @property
    def returncode(self) -> int | None:
        """The exit status of the last process once it has exited (negative: killed by signal)."""
        return None if self._proc is None else self._proc.poll()

    @property
    def paused(self) -> bool:
        return self._paused and self.is_running()

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

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
        classpath = os.pathsep.join(str(jar) for jar in find_zookeeper_classpath())
        deadline = time.monotonic() + timeout
        for attempt in range(3):
            try:
                self._launch(java, classpath, deadline)
                break
            except _PortInUseError:
                # Only a port we picked ourselves, and never after clients have learnt it.
                if not (self._auto_port and not self._started_once and attempt < 2):
                    raise
                self.port = free_port(self.host)
        self._started_once = True

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM, then SIGKILL if the server has not exited within `timeout` seconds."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            if self._paused:
                proc.send_signal(signal.SIGCONT)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._reap()

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; data already synced survives."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._reap()

    def pause(self) -> None:
        """SIGSTOP: the server stays up, its port accepts connections, nothing answers."""
        self._signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
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

    def _launch(self, java: str, classpath: str, deadline: float) -> None:
        state_dir = self.data_dir / STATE_DIR
        state_dir.mkdir(parents=True, exist_ok=True)
        config_path = self._write_config(state_dir)
        log4j_path = self.data_dir / LOG4J_FILE
        log4j_path.write_text(_LOG4J_TEMPLATE.format(log=self.log_path))
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        command = [
            java,
            f"-Xmx{self.heap_mb}m",
            "-XX:+ExitOnOutOfMemoryError",
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration={log4j_path.as_uri()}",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(config_path),
        ]
        with open(self.data_dir / CONSOLE_FILE, "ab") as console:
            # A session of its own: a Ctrl-C meant for the test runner does not reach the server.
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
            )
        self._paused = False
        (self.data_dir / PID_FILE).write_text(f"{self._proc.pid}\n")
        self._wait_until_serving(state_dir, log_offset, deadline)

    def _write_config(self, state_dir: Path) -> Path:
        config = {
            "tickTime": str(self.tick_time_ms),
            "dataDir": str(state_dir),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
            "minSessionTimeout": str(2 * self.tick_time_ms),
            "maxSessionTimeout": str(max(60_000, 20 * self.tick_time_ms)),
            "maxClientCnxns": "0",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
            **self.extra_config,
        }
        path = self.data_dir / CONFIG_FILE
        path.write_text("".join(f"{key}={value}\n" for key, value in config.items()))
        return path

    def _wait_until_serving(self, state_dir: Path, log_offset: int, deadline: float) -> None:
        assert self._proc is not None
        while True:
            returncode = self._proc.poll()
            if returncode is not None:
                self._reap()
                log = self._log_since(log_offset)
                port_taken = "java.net.BindException" in log
                hint = f" (port {self.port} is in use; choose another or pass port=0)"
                raise (_PortInUseError if port_taken else ZooKeeperStartError)(
                    f"ZooKeeper exited with status {returncode} while starting on "
                    f"{self.connect_string}{hint if port_taken else ''}; "
                    f"last lines of {self.log_path} and {CONSOLE_FILE}:\n" + _last_lines(log)
                )
            if self._serves_from(state_dir):
                return
            if time.monotonic() > deadline:
                self.kill()
                raise ZooKeeperStartError(
                    f"ZooKeeper did not answer on {self.connect_string} in time; "
                    f"last lines of {self.log_path} and {CONSOLE_FILE}:\n"
                    + _last_lines(self._log_since(log_offset))
                )
            time.sleep(0.05)

    def _serves_from(self, state_dir: Path) -> bool:
        """True once the server on our port serves requests and is ours: `conf` names our dataDir."""
        try:
            serving = "Mode:" in self.four_letter_word("srvr", timeout=1)
            return serving and f"dataDir={state_dir}" in self.four_letter_word("conf", timeout=1)
        except OSError:
            return False

    def _log_since(self, offset: int) -> str:
        """What this start wrote to the server log (from `offset`) and to the JVM console."""
        texts = []
        for path, start in ((self.log_path, offset), (self.data_dir / CONSOLE_FILE, 0)):
            with contextlib.suppress(OSError), open(path, "rb") as file:
                size = file.seek(0, os.SEEK_END)
                file.seek(start if start <= size else 0)  # the log may have rolled over
                texts.append(file.read().decode(errors="replace"))
        return "\n".join(text.strip() for text in texts if text.strip())

    def _leftover_pid(self) -> int | None:
        try:
            pid = int((self.data_dir / PID_FILE).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        config = str(self.data_dir / CONFIG_FILE)
        return pid if _is_alive(pid) and {config, MAIN_CLASS} <= set(_cmdline(pid)) else None

    def _signal(self, signum: signal.Signals) -> None:
        if self._proc is None or self._proc.poll() is not None:
            raise ZooKeeperNotRunningError(f"ZooKeeper in {self.data_dir} is not running")
        self._proc.send_signal(signum)

    def _reap(self) -> None:
        self._paused = False
        (self.data_dir / PID_FILE).unlink(missing_ok=True)


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
                print(f"zookeeper exited with status {server.returncode}", file=sys.stderr)
                return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
