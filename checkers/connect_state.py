"""The record of squall's own Spark Connect server: its pid, port, token and shared session,
kept in the user's private cache directory (`connect-server.json`, written atomically under
a lock), and the address a client dials to reach it (`connect_address`). The server is
started and stopped by `checkers.connect_server`; a check finds it through this record."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from checkers.cache_dir import private_cache_dir
from checkers.errors import SparkUnavailableError
from checkers.spark_urls import spark_endpoints
from histories.atomic import atomic_file

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
STATE = "connect-server.json"
_LOOPBACK = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class ServerState:
    """What the state file records of a server squall started."""

    pid: int
    port: int
    token: str
    started: float
    """Seconds since the epoch."""
    log: str
    memory: str
    spark_version: str
    session: str = ""
    """The Spark Connect session every check shares (empty: none recorded)."""

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def describe(self, *, running: bool) -> dict[str, Any]:
        """The state as `squall spark status --json` prints it (never the token)."""
        return {
            "running": running,
            "url": self.url,
            "pid": self.pid,
            "port": self.port,
            "uptime_s": round(time.time() - self.started, 1) if running else None,
            "started": self.started,
            "memory": self.memory,
            "log": self.log,
            "spark_version": self.spark_version,
        }


def state_dir() -> Path:
    """The private directory of the state file and the log; `SparkUnavailableError` when it
    cannot be made private."""
    try:
        return private_cache_dir("spark")
    except OSError as err:
        raise SparkUnavailableError(
            f"squall's cache directory cannot hold the Spark Connect server's state: {err}"
        ) from err


def read_state() -> ServerState | None:
    """The recorded server, running or not; None when there is none (or the record is
    unreadable)."""
    try:
        doc = json.loads((state_dir() / STATE).read_text())
        return ServerState(
            pid=int(doc["pid"]),
            port=int(doc["port"]),
            token=str(doc["token"]),
            started=float(doc["started"]),
            log=str(doc["log"]),
            memory=str(doc["memory"]),
            spark_version=str(doc["spark_version"]),
            session=str(doc.get("session", "")),
        )
    except (OSError, ValueError, TypeError, KeyError, SparkUnavailableError):
        return None


def is_server(pid: int) -> bool:
    """Whether `pid` is a Spark Connect server of this user (not a process that took the
    pid of one that ended)."""
    try:
        os.kill(pid, 0)
    except OSError:  # gone, or another user's
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:  # no /proc (macOS)
        listed = subprocess.run(
            ["ps", "-ww", "-p", str(pid), "-o", "command="],
            capture_output=True,
            text=True,
            check=False,
        )
        command = listed.stdout
    return SERVER_CLASS in command


def server_status() -> tuple[ServerState | None, bool]:
    """The recorded server and whether it runs."""
    state = read_state()
    return state, state is not None and is_server(state.pid)


def connect_address(url: str) -> str:
    """The address a Connect client dials for `url`: with the token of squall's own server
    when `url` names it (pyspark sends a token without TLS only to `localhost`), else
    `url` as it is."""
    try:
        [(host, port)] = spark_endpoints(url)
    except ValueError:
        return url
    params = urlsplit(url).path
    if host not in _LOOPBACK or ";token=" in params:
        return url
    state, running = server_status()
    if state is None or not running or state.port != port:
        return url
    shared = f";session_id={state.session}" if state.session and "session_id=" not in url else ""
    return f"sc://localhost:{port}/;token={state.token}{shared}" + params.lstrip("/")


def renew_session(address: str) -> str | None:
    """The address with a new shared session, recorded for later checks, when `address`
    names the recorded server's shared session (the server closed it); else None."""
    with locked_state() as directory:
        state, running = server_status()
        if state is None or not running or f";session_id={state.session}" not in address:
            return None
        renewed = replace(state, session=str(uuid.uuid4()))
        write_state(directory, renewed)
    return address.replace(f"session_id={state.session}", f"session_id={renewed.session}")


@contextlib.contextmanager
def locked_state() -> Iterator[Path]:
    """The state directory, held against another `squall spark` of the same user."""
    directory = state_dir()
    with open(directory / f"{STATE}.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield directory


def write_state(directory: Path, state: ServerState) -> None:
    with atomic_file(directory / STATE) as out:
        out.write((json.dumps({**asdict(state), "url": state.url}, indent=2) + "\n").encode())
