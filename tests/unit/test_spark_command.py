"""Where the checkers run, without starting Spark: the Spark URLs squall accepts,
`--spark-master` against `--spark-remote`, the state file `squall spark` keeps, and the
token squall hands its own Connect server."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import checkers
import checkers.connect_server as connect_server
import checkers.connect_state as connect_state
from checkers.connect_state import STATE, ServerState, connect_address, state_dir
from checkers.errors import SparkUnavailableError
from checkers.session import SparkSettings, probe_spark, spark_settings
from checkers.spark_urls import spark_endpoints
from squall.cli import app
from squall.exit_codes import ExitCode

runner = CliRunner()


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache directory: the state file of a real `squall spark` is never touched."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("SQUALL_SPARK_REMOTE", raising=False)
    return cache


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _record(pid: int, port: int = 15002) -> ServerState:
    state = ServerState(pid, port, "s3cret", 1_700_000_000.0, "/x/connect-server.log", "4g", "4")
    (state_dir() / STATE).write_text(json.dumps(asdict(state)))
    return state


@pytest.mark.parametrize(
    ("url", "endpoints"),
    [
        ("spark://10.0.0.1:7077", [("10.0.0.1", 7077)]),
        ("spark://a:7077,b:7078", [("a", 7077), ("b", 7078)]),
        ("spark://master", [("master", 7077)]),
        ("sc://127.0.0.1:15003", [("127.0.0.1", 15003)]),
        ("sc://host/;user_id=x", [("host", 15002)]),
        ("local[2]", []),
        ("yarn", []),
    ],
)
def test_the_endpoints_of_a_spark_url(url: str, endpoints: list[tuple[str, int]]) -> None:
    assert spark_endpoints(url) == endpoints


@pytest.mark.parametrize("url", ["sc://host:port", "spark://:7077", "sc://"])
def test_a_malformed_spark_url_is_a_value_error(url: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        spark_endpoints(url)


def test_a_master_and_a_remote_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="exclude each other"):
        spark_settings("local[1]", "sc://127.0.0.1:15002")
    assert spark_settings(None, None) is None
    remote = spark_settings(None, "sc://127.0.0.1:1")
    assert remote is not None and remote.target == "sc://127.0.0.1:1" and not remote.is_local


def test_nothing_listening_is_reported_with_the_url_and_what_to_do() -> None:
    with pytest.raises(SparkUnavailableError) as caught:
        probe_spark(SparkSettings(master="spark://127.0.0.1:1"))
    assert "spark://127.0.0.1:1" in str(caught.value) and "--spark-master" in str(caught.value)
    with pytest.raises(SparkUnavailableError) as caught:
        probe_spark(SparkSettings(remote="sc://127.0.0.1:1"))
    assert "squall spark start" in str(caught.value) and "--spark-remote" in str(caught.value)
    probe_spark(SparkSettings(master="local[1]"))  # nothing to probe


def test_check_with_both_options_is_a_usage_error(tmp_path: Path) -> None:
    args = ["check", str(tmp_path), "--spark-master", "local[1]", "--spark-remote", "sc://h:1"]
    result = runner.invoke(app, args)
    assert result.exit_code == ExitCode.USAGE
    assert "--spark-master" in result.output and "--spark-remote" in result.output


def test_a_remote_from_the_environment_gives_way_to_an_explicit_master(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def check_history(_path: Any, **kwargs: Any) -> dict[str, Any]:
        seen.update(kwargs)
        return {"valid": True, "checkers": {}, "history": {}}

    monkeypatch.setattr(checkers, "check_history", check_history)
    monkeypatch.setenv("SQUALL_SPARK_REMOTE", "sc://127.0.0.1:1")
    args = ["check", str(tmp_path), "--json", "--no-write", "--spark-master", "local[1]"]
    result = runner.invoke(app, args)
    assert result.exit_code == ExitCode.VALID, result.output
    assert seen["spark_master"] == "local[1]" and seen["spark_remote"] is None


def test_a_remote_nothing_answers_at_fails_before_the_check(tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", str(tmp_path), "--spark-remote", "sc://127.0.0.1:1"])
    assert result.exit_code == ExitCode.INFRASTRUCTURE
    assert "sc://127.0.0.1:1" in result.output


def test_status_and_stop_without_a_server() -> None:
    status = runner.invoke(app, ["spark", "status", "--json"])
    assert status.exit_code == 0 and json.loads(status.output) == {"running": False}
    stop = runner.invoke(app, ["spark", "stop"])
    assert stop.exit_code == 0 and "not running" in stop.output


def test_stop_removes_a_stale_state_file() -> None:
    state = _record(_dead_pid())
    status = runner.invoke(app, ["spark", "status"])
    assert status.exit_code == 0 and "not running" in status.output
    described = json.loads(runner.invoke(app, ["spark", "status", "--json"]).output)
    assert described["running"] is False and described["pid"] == state.pid
    assert "s3cret" not in json.dumps(described)
    stop = runner.invoke(app, ["spark", "stop"])
    assert stop.exit_code == 0 and "stale" in stop.output
    assert not (state_dir() / STATE).exists()


def test_a_bad_memory_size_is_a_usage_error() -> None:
    assert runner.invoke(app, ["spark", "start", "--memory", "lots"]).exit_code == ExitCode.USAGE
    assert runner.invoke(app, ["spark", "start", "--warmup", "-1"]).exit_code == ExitCode.USAGE


def test_the_token_goes_only_to_squalls_own_running_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _record(os.getpid(), port=15010)
    monkeypatch.setattr(connect_state, "is_server", lambda pid: pid == os.getpid())
    for url in ("sc://127.0.0.1:15010", "sc://localhost:15010"):
        assert connect_address(url) == "sc://localhost:15010/;token=s3cret"
    assert connect_address("sc://127.0.0.1:15010/;user_id=u").endswith(";token=s3cret;user_id=u")
    for other in ("sc://127.0.0.1:15011", "sc://10.0.0.1:15010", "sc://localhost:15010/;token=t"):
        assert connect_address(other) == other
    monkeypatch.setattr(connect_state, "is_server", lambda pid: False)
    assert connect_address("sc://127.0.0.1:15010") == "sc://127.0.0.1:15010"


def test_the_server_command_binds_loopback_and_keeps_the_token_off_the_command_line(
    tmp_path: Path,
) -> None:
    command = connect_server.server_command(15020, "2g", tmp_path / "connect-server.log")
    assert "spark.connect.grpc.binding.address=127.0.0.1" in command
    assert "spark.connect.grpc.binding.port=15020" in command
    assert command[command.index("--driver-memory") + 1] == "2g"
    env = connect_server._server_env("t0ken")
    assert env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == "t0ken"
    assert not any("t0ken" in part for part in command)


def test_spark_help_names_the_commands() -> None:
    result = runner.invoke(app, ["spark", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    for command in ("start", "status", "stop"):
        assert command in result.output
    check_help = runner.invoke(app, ["check", "--help"], env={"COLUMNS": "80"}).output
    assert "squall spark start" in " ".join(check_help.split())


def test_every_check_shares_the_servers_session_until_the_server_closes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server keeps Python workers per session: squall's checks all use the session
    the state file names, and a session the server closed is replaced there."""
    state = ServerState(
        os.getpid(), 15010, "s3cret", 1_700_000_000.0, "/x/log", "4g", "4", session="s-1"
    )
    (state_dir() / STATE).write_text(json.dumps(asdict(state)))
    monkeypatch.setattr(connect_state, "is_server", lambda pid: pid == os.getpid())
    address = connect_address("sc://127.0.0.1:15010")
    assert address == "sc://localhost:15010/;token=s3cret;session_id=s-1"
    mine = "sc://127.0.0.1:15010/;session_id=mine"
    assert connect_address(mine) == "sc://localhost:15010/;token=s3cret;session_id=mine"

    renewed = connect_state.renew_session(address)
    assert renewed is not None and ";session_id=s-1" not in renewed
    recorded = connect_state.read_state()
    assert recorded is not None and recorded.session not in ("", "s-1")
    assert renewed.endswith(f";session_id={recorded.session}")
    assert connect_address("sc://127.0.0.1:15010") == renewed
    assert connect_state.renew_session(connect_address(mine)) is None  # not squall's session
