"""The test runner end to end on containers, as a user runs it: `squall run`, a SIGKILLed
control process, `squall check`, `squall replay`, `squall clean`.

`squall run` and `squall replay` run as a user runs them, each in a process of its own that
starts its own Spark. The killed run's history is checked by `squall check` in this process,
in the test session's shared SparkSession (tests/spark_session.py): what that test is about
is the history the killed run left, not a check's start-up, and a JVM started for that one
check would cost as much again as the check itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from squall.cli import main
from tests.spark_session import shared_spark
from tests.support import run_squall

pytestmark = pytest.mark.docker

RUN_FLAGS = [
    "--runtime",
    "docker",
    "--nodes",
    "3",
    "--time-limit",
    "12",
    "--faults",
    "kill=1,partition=1",
    "--interval",
    "3,4",
    "--duration",
    "1,3",
    "--acks",
    "-1",
    "--replication-factor",
    "3",
    "--min-insync-replicas",
    "2",
    "--seed",
    "11",
    # Consumers outside any group: these tests are about the store, the replay and the
    # clean-up, and members' processes would only cost the machine (groups: their own tests).
    "--no-group-membership",
]


def squall(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return run_squall(*args, cwd=cwd, home=cwd / ".squall", timeout=timeout)


def short_recovery(cwd: Path) -> str:
    """A spec file the flags complete: 3 s of recovery after healing instead of 10 (the
    final read waits for the cluster anyway), which the replay takes from test.json."""
    spec = cwd / "e2e.toml"
    spec.write_text('name = "e2e"\nrecovery_wait_s = 3\n')
    return str(spec)


def history(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]


@pytest.mark.timeout(1200)
def test_a_short_run_writes_a_valid_store_and_replays_its_schedule(tmp_path: Path) -> None:
    # Through a real Kafka client (squall's own runs in every other docker test): the same
    # store, history and replay whichever client ran.
    done = squall(
        tmp_path,
        "run",
        "--spec",
        short_recovery(tmp_path),
        *RUN_FLAGS,
        "--client",
        "confluent-kafka",
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    run_dir = Path(json.loads(done.stdout.strip().splitlines()[-1])["run_dir"])
    run_dir = tmp_path / run_dir if not run_dir.is_absolute() else run_dir
    for name in ("test.json", "history.jsonl", "schedule.json", "results.json"):
        assert (run_dir / name).exists(), name
    assert (tmp_path / "store" / "latest").resolve() == run_dir.resolve()
    ops = history(run_dir)
    assert [op["index"] for op in ops] == list(range(len(ops)))
    assert any(op["process"] == "nemesis" for op in ops)
    assert any(op["process"] == "sut" and op["f"] == "leader-election" for op in ops)
    assert any(op.get("final") for op in ops)
    for node in ("n1", "n2", "n3", "zk1"):
        assert any((run_dir / "nodes" / node).iterdir())
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] in (True, False, "unknown") and "checkers" in results
    test = json.loads((run_dir / "test.json").read_text())
    assert test["recovery_wait_s"] == 3
    assert test["workload"]["client"] == "confluent-kafka" and test["kafka_listener"]
    assert test["kafka_bootstrap"].count(":9093") == 3
    assert any(op["f"] == "send" and op["type"] == "ok" for op in ops)
    assert any(op["f"] == "poll" and op["type"] == "ok" and op.get("final") for op in ops)
    applied = json.loads((run_dir / "schedule.json").read_text())["faults"]

    replayed = squall(tmp_path, "replay", str(run_dir))
    assert replayed.returncode in (0, 1), replayed.stderr[-3000:]
    again = Path(json.loads(replayed.stdout.strip().splitlines()[-1])["run_dir"])
    again = tmp_path / again if not again.is_absolute() else again
    reapplied = json.loads((again / "schedule.json").read_text())["faults"]
    prefix = min(len(applied), len(reapplied))
    assert prefix > 0
    for first, second in zip(applied[:prefix], reapplied[:prefix], strict=True):
        assert first["f"] == second["f"]
        assert first["value"].get("targets") == second["value"].get("targets")
        assert first["value"].get("grudge") == second["value"].get("grudge")


def test_sigkilled_run_leaves_a_checkable_history_and_clean_removes_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {**os.environ, "SQUALL_HOME": str(tmp_path / ".squall")}
    control = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "squall",
            "run",
            "--name",
            "killed",
            *RUN_FLAGS,
            "--time-limit",
            "120",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    history_path = tmp_path / "store" / "killed" / "latest" / "history.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if history_path.exists() and history_path.stat().st_size > 20_000:
            break
        time.sleep(1)
    assert history_path.exists(), "the run never started writing its history"
    control.send_signal(signal.SIGKILL)
    control.wait(timeout=10)
    shared_spark()  # `squall check` checks in the running session
    capsys.readouterr()
    checked = main(["check", str(history_path.parent), "--json"])
    out, err = capsys.readouterr()
    assert checked in (0, 1), err[-3000:]
    assert json.loads(out)["stats"]["ops"] > 0
    run_id = json.loads((history_path.parent / "test.json").read_text())["run_id"]
    cleaned = squall(tmp_path, "clean")
    assert cleaned.returncode == 0, cleaned.stderr
    client = docker.from_env()
    # Only this run's leftovers: runs of other users on the same engine stay as they are.
    label = {"label": f"squall.run={run_id}"}
    assert not client.containers.list(all=True, filters=label)
    assert not client.networks.list(filters=label)
