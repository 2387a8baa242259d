"""squall's own Spark Connect server: one per user and machine, started in the background
from pyspark's launcher, so that checks (`--spark-remote`) skip the JVM's start.

    state, started = start_server(port=15002, memory="4g")  # waits until it answers
    state, running = server_status()  # checkers.connect_state; None: none recorded
    state, was_running = stop_server()

The server runs `local[*]` with squall's Spark settings (`SparkSettings.conf`), binds
127.0.0.1, and takes only clients that present its token: a random secret kept, with its
pid, port and start time, in the user's private cache directory
(`~/.cache/squall/spark/connect-server.json`, `checkers.connect_state`). squall hands the
token to a server it started (`connect_state.connect_address`), so other users of the
machine cannot run anything in it. It hands every check the same session too (its id is in the state file,
renewed when the server has closed it for being idle): the server keeps one set of
Python workers per session, so checks in one session skip their start. Its log (the JVM's warnings and errors, and whatever it prints) is
`connect-server.log` beside the state file; its working directory is that directory too,
so a relative path a client sends never resolves against somewhere unexpected.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checkers.connect_state import (
    SERVER_CLASS,
    STATE,
    ServerState,
    locked_state,
    server_status,
    write_state,
)
from checkers.errors import SparkUnavailableError
from checkers.processes import process_runs
from checkers.session import (
    DEFAULT_DRIVER_MEMORY,
    DEFAULT_MASTER,
    SparkSettings,
    get_spark,
    stop_spark,
)
from checkers.spark_urls import DEFAULT_CONNECT_PORT
from checkers.warmup import write_warmup_history

LOG = "connect-server.log"
START_TIMEOUT_S = 120.0
WARMUP_CHECKS = 5
"""How many times `start_server` checks the warm-up history: a fresh server's checks take
about 7, 3.3, 3.1, 3.1, then 2.6 s (a demo-sized history, this project's 2-core machine)."""
STOP_TIMEOUT_S = 30.0


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port(port: int) -> int:
    """`port` (0: any free one) if nothing listens on it at 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as err:
            raise SparkUnavailableError(
                f"port {port} on 127.0.0.1 is taken ({err.strerror or err}): give another "
                "with --port, or 0 for any free one"
            ) from None
        return int(probe.getsockname()[1])


def server_command(port: int, memory: str, log: Path) -> list[str]:
    """The spark-submit command that runs the server (pyspark's own launcher)."""
    settings = SparkSettings(
        master=DEFAULT_MASTER, driver_memory=memory, app_name="squall-connect-server"
    )
    conf = {
        **settings.conf(log),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        # Frames released by clients (checkpoints of finished checks) are dropped when the
        # JVM collects them: collect now and then, not only under memory pressure.
        "spark.cleaner.periodicGC.interval": "5min",
    }
    command = [str(_spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS]
    command += ["--master", DEFAULT_MASTER, "--driver-memory", memory]
    for name, value in conf.items():
        command += ["--conf", f"{name}={value}"]
    return command


def _server_env(token: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED")
    }
    env.update(
        SPARK_HOME=str(_spark_home()),
        SPARK_CONNECT_MODE="0",
        SPARK_LOCAL_IP="127.0.0.1",  # the driver's services on loopback too
        SPARK_CONNECT_AUTHENTICATE_TOKEN=token,  # the environment: never on a command line
        PYSPARK_PYTHON=sys.executable,
    )
    return env


def _last_error(log: Path) -> str:
    """The last line of the log that says something went wrong, if any."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines[-200:]):
        if any(word in line for word in ("ERROR", "Exception", "Error:", "error:")):
            return line.strip()[:300]
    return lines[-1].strip()[:300] if lines else ""


def start_server(
    *,
    port: int = DEFAULT_CONNECT_PORT,
    memory: str = DEFAULT_DRIVER_MEMORY,
    timeout: float = START_TIMEOUT_S,
    warmup: int = WARMUP_CHECKS,
    on_answer: Callable[[ServerState], None] | None = None,
) -> tuple[ServerState, bool]:
    """Start the server unless it runs; return it and whether it was started now.

    Waits until a Connect session runs a query on it, then checks a small history
    `warmup` times (`checkers.warmup`), after telling `on_answer`; `SparkUnavailableError`
    (the server stopped again) when it does not answer within `timeout` seconds, exits, or
    cannot check.
    """
    with locked_state() as directory:
        state, running = server_status()
        if state is not None and running:
            return state, False
        port = _free_port(port)
        log = directory / LOG
        token = secrets.token_urlsafe(32)
        with open(log, "ab") as out:
            out.write(f"--- squall spark start: port {port}, memory {memory}\n".encode())
            out.flush()
            process = subprocess.Popen(
                server_command(port, memory, log),
                env=_server_env(token),
                cwd=directory,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives this process and its terminal
            )
        from pyspark.version import __version__

        state = ServerState(
            process.pid, port, token, time.time(), str(log), memory, __version__,
            session=str(uuid.uuid4()),
        )  # fmt: skip
        write_state(directory, state)
        try:
            _await_ready(process, state, timeout, warmup, on_answer)
        except BaseException:
            _terminate(process.pid, STOP_TIMEOUT_S)
            (directory / STATE).unlink(missing_ok=True)
            raise
        return state, True


def _await_ready(
    process: subprocess.Popen[bytes],
    state: ServerState,
    timeout: float,
    warmup: int,
    on_answer: Callable[[ServerState], None] | None,
) -> None:
    deadline = time.monotonic() + timeout
    log = Path(state.log)
    while time.monotonic() < deadline:
        code = process.poll()
        if code is not None:
            raise SparkUnavailableError(
                f"the Spark Connect server exited while starting (code {code}): "
                f"{_last_error(log) or 'no error logged'}; its log: {log}"
            )
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.settimeout(0.5)
            listening = probe.connect_ex(("127.0.0.1", state.port)) == 0
        if listening:
            if on_answer is not None:
                on_answer(state)
            try:
                _warm_up(state.url, warmup)
            finally:
                stop_spark()
            return
        time.sleep(0.25)
    raise SparkUnavailableError(
        f"the Spark Connect server did not answer within {timeout:.0f} s; its log: {log}"
    )


def _warm_up(url: str, checks: int) -> None:
    """Check the warm-up history `checks` times in the shared session (at least one query
    with a Python function), so that the first checks find Spark's planner compiled, each
    of the checks' queries generated and compiled, and the Python workers started."""
    from checkers.check import check_history  # pyspark and pandas: not for `squall spark stop`

    if checks <= 0:
        _start_python_workers(get_spark(SparkSettings(remote=url)))
        return
    with tempfile.TemporaryDirectory(prefix="squall-warmup-") as scratch:
        run = write_warmup_history(Path(scratch) / "run")
        for _ in range(checks):
            try:
                check_history(run, spark_remote=url)
            except SparkUnavailableError:
                raise
            except Exception as err:  # the server answers but cannot check: no use
                raise SparkUnavailableError(
                    f"the Spark Connect server started but could not check a history "
                    f"({type(err).__name__}: {err})"
                ) from err


def _start_python_workers(spark: Any) -> None:
    """Run a query with a Python function in the shared session, so that the first check
    finds its Python workers started (with pandas and pyarrow imported)."""

    def same(table: Any) -> Any:
        import pandas  # noqa: F401  (what the per-key pass imports)

        return table

    spark.range(2).groupBy("id").applyInArrow(same, schema="id long").collect()


def stop_server(timeout: float = STOP_TIMEOUT_S) -> tuple[ServerState | None, bool]:
    """Stop the recorded server; return it (None: none recorded) and whether it was
    running (False: the record was stale, and is removed)."""
    with locked_state() as directory:
        state, running = server_status()
        if state is not None and running:
            _terminate(state.pid, timeout)
        (directory / STATE).unlink(missing_ok=True)
        return state, running


def _terminate(pid: int, timeout: float) -> None:
    """SIGTERM (Spark stops its context), SIGKILL after `timeout` seconds, to the server's
    process group (it leads one: the launcher's processes while it starts go too)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _exists(pid):
                return
            time.sleep(0.1)
    if _exists(pid):
        raise SparkUnavailableError(f"the Spark Connect server (pid {pid}) did not stop")


def _exists(pid: int) -> bool:
    """Whether `pid` still runs (ended but not yet reaped by its parent counts as ended)."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return process_runs(pid)
