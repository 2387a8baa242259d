"""`squall check`: exit codes, the summary, --json, results.json in the run directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import checkers
from checkers import SparkUnavailableError
from histories import HistoryFormatError
from squall.commands.check import check
from tests.unit.test_histories_jepsen import HAND_WRITTEN_EDN

FIXTURE = Path(__file__).parent.parent / "data" / "histories" / "jepsen_kafka_history.edn"

app = typer.Typer(add_completion=False)
app.command()(check)


@app.callback()
def _root() -> None:
    """Make `check` a subcommand, as in squall's CLI."""


runner = CliRunner()


def _results(valid: Any, path: Path) -> dict[str, Any]:
    sample = {"key": "k", "value": 3, "offset": 1}
    lost = {"lost-write": 1 if valid is False else 0}
    return {
        "valid": valid,
        "anomaly_types": ["lost-write"] if valid is False else [],
        "checkers": {
            "delivery": {
                "valid": valid,
                "anomalies": {"lost-write": [sample]} if valid is False else {},
                "counts": lost,
            }
        },
        "stats": {"ops": 10, "ok": 9, "fail": 1, "info": 0, "pending": 0, "faults": []},
        "history": {"path": str(path), "kind": "run"},
        "notes": ["a note"],
    }


@pytest.mark.parametrize(("valid", "code"), [(True, 0), (False, 1), ("unknown", 3)])
def test_exit_codes_follow_the_verdict(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, valid: Any, code: int
) -> None:
    monkeypatch.setattr(checkers, "check_history", lambda path, **kw: _results(valid, tmp_path))
    result = runner.invoke(app, ["check", str(tmp_path)])
    assert result.exit_code == code, result.output
    assert "delivery" in result.output
    if valid is False:
        assert "lost-write" in result.output and "value 3 written at offset 1" in result.output
    assert json.loads((tmp_path / "results.json").read_text())["valid"] == valid


def test_json_output(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def fake(path: Any, **kw: Any) -> dict[str, Any]:
        seen.update(kw)
        return _results(False, tmp_path)

    monkeypatch.setattr(checkers, "check_history", fake)
    args = ["check", str(tmp_path), "--json", "--no-write", "--sample", "2"]
    args += ["--expect-loss", "acks1", "--expect-loss", "unclean", "--spark-master", "local[1]"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["anomaly_types"] == ["lost-write"]
    assert not (tmp_path / "results.json").exists()
    assert seen["spark_master"] == "local[1]"
    assert seen["config"].sample == 2
    assert seen["config"].expect_loss == {"acks1", "unclean"}


@pytest.mark.parametrize(
    ("error", "code", "text"),
    [
        (HistoryFormatError("h.jsonl", 7, "not valid JSON"), 2, "h.jsonl, line 7"),
        (SparkUnavailableError("Spark could not start"), 3, "Spark could not start"),
    ],
)
def test_errors_map_to_exit_codes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, error: Exception, code: int, text: str
) -> None:
    def fail(path: Any, **kw: Any) -> dict[str, Any]:
        raise error

    monkeypatch.setattr(checkers, "check_history", fail)
    result = runner.invoke(app, ["check", str(tmp_path)])
    assert result.exit_code == code
    assert text in result.output


@pytest.mark.parametrize("args", [["--expect-loss", "acks2"], ["--loader", "fast"]])
def test_usage_errors(tmp_path: Path, args: list[str]) -> None:
    result = runner.invoke(app, ["check", str(tmp_path), *args])
    assert result.exit_code == 2


def test_missing_history_is_invalid_input(tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_jepsen_history_checks_end_to_end(spark: Any, tmp_path: Path) -> None:
    """Jepsen's own history format imports, converts and checks: it is valid."""
    shutil.copy(FIXTURE, tmp_path / "history.edn")
    result = runner.invoke(app, ["check", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)
    assert results["valid"] is True
    assert results["history"]["kind"] == "edn"
    assert results["stats"]["ops"] == 11
    assert results["stats"]["faults"][0]["fault"] == "start-partition"
    assert results["checkers"]["consumer_groups"]["details"]["consumed_values"] == 5
    assert set(results["checkers"]) == {
        "offsets",
        "delivery",
        "order",
        "consumer_groups",
        "consumer_anchors",
        "generations",
        "unclean",
        "conformance",
        "replicas",
    }
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["valid"] is True


# Written by hand, as in Jepsen's own tests: process 0 goes on after its info (lines 3, 4,
# 7, 8), processes 1 and 2 complete what they never invoked (lines 5, 6). Process 2's send
# failed, yet its value is read: a G1a, found only if its completion counts as invoked.
HAND_WRITTEN = [
    (0, "invoke", "send", [["send", "k", 1]]),
    (0, "info", "send", None),
    (0, "invoke", "send", [["send", "k", 2]]),
    (0, "ok", "send", [["send", "k", [1, 2]]]),
    (1, "ok", "poll", [["poll", {"k": [[0, 1], [1, 2], [2, 3]]}]]),
    (2, "fail", "send", [["send", "k", 3]]),
    (0, "invoke", "poll", [["poll"]]),
    (0, "ok", "poll", [["poll", {"k": [[0, 1], [1, 2], [2, 3]]}]]),
]


def test_hand_written_history_checks_with_jepsen_leniency_noted(spark: Any, tmp_path: Path) -> None:
    lines = [
        {"index": i, "time": (i + 1) * 1_000_000, "process": p, "type": t, "f": f, "value": v}
        for i, (p, t, f, v) in enumerate(HAND_WRITTEN)
    ]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in lines))
    result = runner.invoke(app, ["check", str(tmp_path), "--json"])
    assert result.exit_code == 1, result.output  # a verdict, not a refused history
    results = json.loads(result.stdout)
    assert results["anomaly_types"] == ["G1a"]
    assert results["checkers"]["delivery"]["anomalies"]["G1a"][0]["value"] == 3
    assert (results["stats"]["ops"], results["stats"]["ok"], results["stats"]["fail"]) == (5, 3, 1)
    expected = [
        "4 operations came from processes after their info completion (lines 3, 4, 7, 8); "
        "each process went on, its next completion pairing with its next invoke, as Jepsen "
        "does",
        "2 completions had no invoke (lines 5, 6); each was taken as invoked at its own time, "
        "as Jepsen does",
    ]
    assert all(note in results["notes"] for note in expected), results["notes"]
    written = json.loads((tmp_path / "results.json").read_text())
    assert all(note in written["notes"] for note in expected)


def test_hand_written_jepsen_history_checks_with_leniency_noted(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "history.edn").write_text(HAND_WRITTEN_EDN)
    result = runner.invoke(app, ["check", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)
    assert results["valid"] is True and results["history"]["kind"] == "edn"
    assert (results["stats"]["ops"], results["stats"]["ok"], results["stats"]["info"]) == (4, 3, 1)
    assert (
        "1 completion had no invoke (operation index 4); it was taken as invoked at its own "
        "time, as Jepsen does" in results["notes"]
    )
    assert any(note.startswith("4 operations came from processes after their info completion")
               for note in results["notes"])  # fmt: skip


def test_the_jvm_writes_into_the_run_directory_not_the_terminal(tmp_path: Path) -> None:
    """New processes (a JVM each): what the JVM prints before log4j2 starts (Spark 4's
    ``WARNING: Using incubator modules``) goes to the run's spark.log, not stderr; with no
    run directory, it is left out. The two checks run side by side, each in a directory of
    its own."""
    import subprocess
    import sys

    lines = [
        {"index": i, "time": (i + 1) * 1_000_000, "process": p, "type": t, "f": f, "value": v}
        for i, (p, t, f, v) in enumerate(HAND_WRITTEN)
    ]
    history = "".join(json.dumps(op) + "\n" for op in lines)
    run_dir, alone = tmp_path / "run", tmp_path / "alone"
    for directory in (run_dir, alone):
        directory.mkdir()
        (directory / "history.jsonl").write_text(history)

    def check(path: Path) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "squall", "check", str(path), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    # A history file given alone has no run directory to log into: the JVM's standard
    # error comes to the terminal, without its start-up notice.
    checks = [check(run_dir), check(alone / "history.jsonl")]
    try:
        (_, in_run_err), (alone_out, alone_err) = (c.communicate(timeout=300) for c in checks)
    finally:
        for c in checks:
            if c.poll() is None:
                c.kill()
    assert checks[0].returncode == 1, in_run_err
    assert "WARNING" not in in_run_err and "incubator" not in in_run_err, in_run_err
    assert (run_dir / "spark.log").is_file()
    assert checks[1].returncode == 1, alone_err
    assert json.loads(alone_out)["valid"] is False
    assert "incubator" not in alone_err, alone_err
    assert not (alone / "spark.log").exists()
