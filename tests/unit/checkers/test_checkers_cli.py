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
        assert "lost-write" in result.output and '"value": 3' in result.output
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
        "unclean",
    }
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["valid"] is True
