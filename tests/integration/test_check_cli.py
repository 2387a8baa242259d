"""`squall check` as a user runs it on bad input."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support import run_squall

pytestmark = pytest.mark.integration


def squall(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return run_squall(*args, cwd=cwd, timeout=timeout)


def test_a_malformed_history_line_is_rejected_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(
        '{"index":0,"time":0,"process":0,"type":"invoke","f":"send","value":[["send","t-0",1]]}\n'
        '{"index":1,"time":5,"process":0,"type":"okay","f":"send","value":[["send","t-0",[0,1]]]}\n'
    )
    checked = squall(tmp_path, "check", str(path))
    assert checked.returncode == 2
    assert "line 2" in checked.stderr and "okay" in checked.stderr
