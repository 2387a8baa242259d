"""``squall spark start|stop|status``: a Spark Connect server in the background, so that
repeated checks (``--spark-remote``) skip the JVM's start (checkers.connect_server, checkers.connect_state); and the
``--spark-master`` / ``--spark-remote`` options every command that checks takes."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from squall.commands._common import fail, stderr
from squall.exit_codes import ExitCode

if TYPE_CHECKING:
    from checkers.connect_state import ServerState

REMOTE_ENV = "SQUALL_SPARK_REMOTE"

SparkMasterOption = typer.Option(
    None,
    "--spark-master",
    metavar="URL",
    help="Spark master for the checkers (spark://HOST:7077 for a standalone cluster).  "
    "[default: local[*]]",
)
SparkRemoteOption = typer.Option(
    None,
    "--spark-remote",
    metavar="URL",
    envvar=REMOTE_ENV,
    show_envvar=True,
    help="A Spark Connect server for the checkers, sc://HOST:PORT: repeated checks skip "
    "Spark's start (`squall spark start` runs one here). Not with --spark-master.",
)

spark_app = typer.Typer(
    help="A Spark Connect server on this machine: repeated checks skip Spark's start.\n\n"
    "`squall spark start` prints its URL; `squall check --spark-remote URL` (or "
    f"{REMOTE_ENV}=URL) checks in it.",
    no_args_is_help=True,
)

_MEMORY = re.compile(r"^[1-9][0-9]*[kmgt]?$", re.IGNORECASE)


def spark_target(
    ctx: typer.Context, master: str | None, remote: str | None
) -> tuple[str | None, str | None]:
    """--spark-master and --spark-remote, checked (exit 2 for both, or a malformed URL);
    a remote from the environment gives way to an explicit --spark-master."""
    from checkers.session import spark_settings

    if master is not None and remote is not None:
        source = ctx.get_parameter_source("spark_remote")
        if source is not None and source.name == "ENVIRONMENT":
            remote = None
        else:
            fail(
                f"--spark-master {master} and --spark-remote {remote} exclude each other: "
                "give --spark-master for a Spark master (a cluster), --spark-remote for a "
                "Spark Connect server, or neither for local[*]",
                ExitCode.USAGE,
            )
    if remote is not None and not remote.startswith("sc://"):
        fail(f"--spark-remote {remote}: expected sc://HOST:PORT", ExitCode.USAGE)
    try:
        spark_settings(master, remote)
    except ValueError as err:
        fail(str(err), ExitCode.USAGE)
    return master, remote


def require_spark(master: str | None, remote: str | None) -> None:
    """Exit 3 now, before a test runs for minutes, when nothing answers at the Spark master
    or Connect server the checks will need."""
    from checkers.errors import SparkUnavailableError
    from checkers.session import probe_spark, spark_settings

    settings = spark_settings(master, remote)
    if settings is None:
        return
    try:
        probe_spark(settings)
    except SparkUnavailableError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)


def _uptime(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = [f"{value}{unit}" for value, unit in parts if value] or ["0s"]
    return " ".join(shown[:2])


@spark_app.command("start")
def start(
    port: int = typer.Option(
        15002,
        "--port",
        min=0,
        max=65535,
        metavar="N",
        help="The port on 127.0.0.1; 0 takes any free one.",
    ),
    memory: str = typer.Option(
        "4g", "--memory", metavar="SIZE", help="The server's JVM heap, e.g. 4g or 2048m."
    ),
    warmup: int = typer.Option(
        5,  # checkers.connect_server.WARMUP_CHECKS: not imported before a command runs
        "--warmup",
        min=0,
        metavar="N",
        help="Check a small built-in history N times before returning, so that the first "
        "checks find Spark's code compiled (0: only start the Python workers).",
    ),
) -> None:
    """Start the server in the background and wait until it answers; print its URL.

    It runs local[*] with squall's Spark settings, listens on 127.0.0.1 only and takes
    only squall's clients of this user (a token in the user's cache directory). Exit 0
    also when it already runs; 3 when it cannot start (its log says why).
    """
    from checkers.connect_server import start_server
    from checkers.errors import SparkUnavailableError

    if not _MEMORY.match(memory):
        fail(f"--memory {memory}: expected a size such as 4g or 2048m", ExitCode.USAGE)
    try:
        state, started = start_server(
            port=port, memory=memory.lower(), warmup=warmup, on_answer=_warming_up(warmup)
        )
    except SparkUnavailableError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)
    if started:
        stderr.print(
            f"Spark Connect server started: pid {state.pid}, log {state.log}\n"
            f"check with: squall check --spark-remote {state.url} PATH",
            highlight=False,
        )
    else:
        stderr.print(
            f"a Spark Connect server already runs: pid {state.pid}, up "
            f"{_uptime(time.time() - state.started)}",
            highlight=False,
        )
    print(state.url)


def _warming_up(checks: int) -> Callable[[ServerState], None]:
    """What `spark start` says once the server answers, before its warm-up checks."""

    def say(state: ServerState) -> None:
        if checks > 0:
            stderr.print(
                f"the server answers at {state.url}; warming it up: {checks} "
                f"check{'' if checks == 1 else 's'} of a small history (--warmup 0 skips them)",
                highlight=False,
            )

    return say


@spark_app.command("status")
def status(
    as_json: bool = typer.Option(
        False,
        "--json",
        help='One JSON object: {"running", "url", "pid", "port", "uptime_s", "log", ...}.',
    ),
) -> None:
    """Whether the server runs, its URL, pid and uptime. Exit 0 either way."""
    from checkers.connect_state import server_status

    state, running = server_status()
    if as_json:
        print(json.dumps(state.describe(running=running) if state else {"running": False}))
        return
    if state is None:
        print("not running")
    elif not running:
        print(
            f"not running (the state file names pid {state.pid}, which is gone; "
            "`squall spark stop` removes it)"
        )
    else:
        print(
            f"running  {state.url}  pid {state.pid}  up {_uptime(time.time() - state.started)}"
            f"  memory {state.memory}\nlog      {state.log}"
        )


@spark_app.command("stop")
def stop() -> None:
    """Stop the server (SIGTERM, then SIGKILL after 30 s); remove a stale state file.

    Exit 0 also when none runs; 3 when it would not stop.
    """
    from checkers.connect_server import stop_server
    from checkers.errors import SparkUnavailableError

    try:
        state, running = stop_server()
    except SparkUnavailableError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)
    if state is None:
        print("not running")
    elif running:
        print(f"stopped (pid {state.pid})")
    else:
        print(f"not running; removed the stale state file (pid {state.pid} is gone)")
