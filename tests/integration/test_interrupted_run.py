"""Ctrl-C during a real run (local runtime): the run heals, keeps its history, checks what
it has, is marked interrupted in test.json, results.json and junit.xml, is never VALID, and
exits 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import wait_for

pytestmark = pytest.mark.integration


def test_ctrl_c_marks_the_run_interrupted_and_never_valid(tmp_path: Path) -> None:
    env = {**os.environ, "SQUALL_HOME": str(tmp_path / "home"), "COLUMNS": "80"}
    store = tmp_path / "store"
    command = [
        sys.executable,
        "-m",
        "squall",
        "run",
        "--runtime",
        "local",
        "--name",
        "ctrl-c",
        "--time-limit",
        "120",
        "--faults",
        "none",
        "--rate",
        "200",
        "--store",
        str(store),
    ]
    run = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        history = lambda: next(store.glob("ctrl-c/2*/history.jsonl"), None)  # noqa: E731
        wait_for(
            lambda: (h := history()) is not None and h.stat().st_size > 20_000,
            timeout=120,
            what="the workload to record operations",
        )
        started = time.monotonic()
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err[-3000:]
    assert time.monotonic() - started < 200  # it did not wait out the time limit
    run_dir = next(store.glob("ctrl-c/2*"))
    test = json.loads((run_dir / "test.json").read_text())
    assert test["interrupted"] is True and test["interrupted_by"] == "SIGINT"
    results = json.loads((run_dir / "results.json").read_text())
    assert results["interrupted"] is True
    assert results["valid"] != True  # noqa: E712 - "unknown" or false, never true
    assert any("interrupted" in note for note in results["notes"])
    assert "interrupted" in (run_dir / "junit.xml").read_text()
    assert "INTERRUPTED" in " ".join(err.split()) or "INTERRUPTED" in " ".join(out.split())
    leftovers = (
        list((tmp_path / "home" / "local").glob("*"))
        if (tmp_path / "home" / "local").exists()
        else []
    )
    assert leftovers == []  # healed and taken down
