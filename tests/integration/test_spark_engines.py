"""The checkers on other Spark engines find what they find in a local session, byte for
byte: in the Spark Connect server `squall spark` runs, and on a standalone master with a worker
started from pyspark's own launcher. A master or server nothing answers at fails the check
at once (exit 3) and says what to do.

One hand-made history with anomalies of every checker (the checker tests' scenarios) is
checked locally, in this process's shared session (tests/spark_session.py), and by each
engine; each engine's JVMs are stopped at teardown, also when a test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

from checkers import check_history
from checkers.cache_dir import user_cache_dir
from checkers.connect_state import is_server
from tests.spark_session import shared_spark
from tests.support import run_squall, wait_for
from tests.unit.checkers.history_builder import HistoryBuilder
from tests.unit.checkers.scenarios import DEFAULT_SCENARIOS, UNCLEAN_SCENARIOS, build

pytestmark = pytest.mark.integration

SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def share_class_archives(cache: Path) -> None:
    """Link the user's recorded class-data archives (checkers.jvm_archive) into `cache`, so
    that local JVMs start from them instead of recording their own on a slow exit (the
    recording is tests/unit/checkers/test_jvm_archive.py's)."""
    recorded = user_cache_dir() / "spark" / "cds"
    archives = sorted(recorded.glob("*.jsa")) if recorded.is_dir() else []
    if not archives:
        return
    target = cache
    for part in ("squall", "spark", "cds"):
        target = target / part
        target.mkdir(mode=0o700)
    for archive in archives:
        (target / archive.name).symlink_to(archive)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """squall's environment: a private cache (its own `squall spark` state, the user's class
    archives), loopback only."""
    cache = tmp_path_factory.mktemp("cache")
    cache.chmod(0o700)
    share_class_archives(cache)
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("SQUALL_SPARK_REMOTE", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")
    }
    environment.update(
        XDG_CACHE_HOME=str(cache),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_HOME=str(SPARK_HOME),
        PYSPARK_PYTHON=sys.executable,
    )
    return environment


def squall(
    *args: str, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return run_squall(*args, env=env, timeout=timeout)


def checkers_section(stdout: str) -> str:
    return json.dumps(json.loads(stdout)["checkers"], sort_keys=True)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    builder = HistoryBuilder(tmp_path_factory.mktemp("history"))
    build(builder, {**DEFAULT_SCENARIOS, **{f"u{k}": v for k, v in UNCLEAN_SCENARIOS.items()}})
    return builder.close()


@pytest.fixture(scope="module")
def local_checkers(history: Path) -> str:
    """The checkers' section of the history's check on local[2], in this process's shared
    session (the one the checker tests and the verdict runs use: its JVM starts once), as
    `squall check --json` prints it."""
    shared_spark()
    results = check_history(history)
    assert results["valid"] is False, results["anomaly_types"]
    assert {"lost-write", "duplicate", "poll-skip", "unclean-loss-window"} <= set(
        results["anomaly_types"]
    )
    return checkers_section(json.dumps(results, default=str))


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's group, SIGKILL after 20 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
            return


def python_daemons(server: int) -> set[int]:
    """The pids of the Python worker daemons the server started."""
    daemons = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == server and b"pyspark.daemon" in command:
            daemons.add(int(stat.parent.name))
    return daemons


def test_a_check_in_squalls_connect_server_is_the_local_check(
    history: Path, env: dict[str, str], local_checkers: str
) -> None:
    started = squall("spark", "start", "--port", "0", "--memory", "1g", "--warmup", "1", env=env)
    try:
        assert started.returncode == 0, started.stderr
        assert "warming it up: 1 check of a small history" in started.stderr
        url = started.stdout.strip()
        assert url.startswith("sc://127.0.0.1:"), started.stdout
        status = json.loads(squall("spark", "status", "--json", env=env).stdout)
        assert status["running"] is True and status["url"] == url
        again = squall("spark", "start", env=env)
        assert again.returncode == 0 and again.stdout.strip() == url
        assert "already runs" in again.stderr

        workers = []
        for _ in range(2):
            checked = squall(
                "check", "--json", "--no-write", "--spark-remote", url, str(history), env=env
            )
            assert checked.returncode == 1, checked.stderr
            assert checkers_section(checked.stdout) == local_checkers
            workers.append(python_daemons(status["pid"]))
        # The checks share the server's session, and so its Python workers.
        assert workers[0] and workers[1] == workers[0]

        stranger = subprocess.run(  # a client without squall's token is turned away
            [
                sys.executable,
                "-c",
                "import sys; from pyspark.sql import SparkSession; "
                "SparkSession.builder.remote(sys.argv[1]).getOrCreate().range(1).count()",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
        assert stranger.returncode != 0
        assert "UNAUTHENTICATED" in stranger.stderr
    finally:
        stopped = squall("spark", "stop", env=env, timeout=120)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
    assert json.loads(squall("spark", "status", "--json", env=env).stdout)["running"] is False
    assert not is_server(status["pid"])  # gone (or ended, and not yet reaped by init)


def _master_state(ui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
        state: dict[str, Any] = json.load(answer)
        return state


@pytest.fixture(scope="module")
def standalone_master(
    env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, int]]:
    """A standalone master and one worker of two cores and 1 GB, on loopback: the master's
    URL and the port of its web UI. One worker (one executor JVM) is enough to show the
    check ran on the cluster's executors; a second only adds a JVM on CI's two cores."""
    logs = tmp_path_factory.mktemp("standalone")
    port, ui_port = free_port(), free_port()
    cluster_env = {**env, "SPARK_DAEMON_MEMORY": "512m"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    processes: list[subprocess.Popen[bytes]] = []

    def launch(name: str, *args: str) -> None:
        with open(logs / f"{name}.log", "wb") as log:
            processes.append(
                subprocess.Popen(
                    [spark_class, *args],
                    env=cluster_env,
                    cwd=logs,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    master = f"spark://127.0.0.1:{port}"
    try:
        launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)),
        )
        launch(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            *("--host", "127.0.0.1", "--cores", "2", "--memory", "1g"),
            *("--webui-port", str(free_port()), "--work-dir", str(logs / "work")),
            master,
        )
        wait_for(
            lambda: _master_state(ui_port).get("aliveworkers") == 1,
            timeout=120,
            what="a standalone master with its worker",
            interval=0.5,
        )
        yield master, ui_port
    finally:
        for process in reversed(processes):
            _stop_group(process)


def test_a_check_on_a_standalone_cluster_is_the_local_check(
    history: Path,
    env: dict[str, str],
    local_checkers: str,
    standalone_master: tuple[str, int],
) -> None:
    master, ui_port = standalone_master
    checked = squall(
        "check", "--json", "--no-write", "--spark-master", master, str(history), env=env
    )
    assert checked.returncode == 1, checked.stderr
    assert checkers_section(checked.stdout) == local_checkers
    state = _master_state(ui_port)
    apps = [app["name"] for app in state["activeapps"] + state["completedapps"]]
    assert "squall-check" in apps, state  # it ran on the cluster's executors


@pytest.mark.parametrize(
    ("option", "scheme"), [("--spark-master", "spark"), ("--spark-remote", "sc")]
)
def test_a_spark_url_nothing_answers_at_fails_with_exit_3(
    history: Path, env: dict[str, str], option: str, scheme: str
) -> None:
    url = f"{scheme}://127.0.0.1:{free_port()}"
    checked = squall("check", option, url, str(history), env=env, timeout=120)
    assert checked.returncode == 3, checked.stderr
    message = " ".join(checked.stderr.split())
    assert url in message and f"leave out {option}" in message
