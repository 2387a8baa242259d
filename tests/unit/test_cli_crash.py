"""A failure of squall itself exits 3 (never 1, which means anomalies), with a short message
that is never read as markup, and the traceback in a log file."""

from __future__ import annotations

from pathlib import Path

import pytest

from squall import cli
from squall.exit_codes import ExitCode
from squall.store import RunStore


def test_an_unexpected_error_exits_3_with_its_traceback_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(_path: Path) -> None:
        raise RuntimeError("boom in [/opt/x] and [bold]not markup[/bold]")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(RunStore, "open", staticmethod(broken))
    assert cli.main(["report", str(tmp_path)]) == ExitCode.INFRASTRUCTURE
    err = capsys.readouterr().err
    assert "RuntimeError: boom in [/opt/x] and [bold]not markup[/bold]" in " ".join(err.split())
    logs = list((tmp_path / "cache" / "squall" / "crashes").glob("squall-*.log"))
    assert len(logs) == 1
    assert "Traceback" in logs[0].read_text() and "broken" in logs[0].read_text()
