"""Atomic replacement of files: the whole new file, or the old one and no leftovers."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import pytest

from histories.atomic import atomic_file, write_json_atomically


def test_json_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text("old")
    assert write_json_atomically(path, {"valid": True, "n": [1, 2]}) == path
    text = path.read_text()
    assert text.endswith("}\n") and json.loads(text) == {"valid": True, "n": [1, 2]}
    assert os.listdir(tmp_path) == ["results.json"]


def test_json_default_turns_other_values_into_json(tmp_path: Path) -> None:
    path = tmp_path / "test.json"
    write_json_atomically(path, {"day": date(2026, 11, 23)}, default=str)
    assert json.loads(path.read_text()) == {"day": "2026-11-23"}


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text('{"old": true}\n')
    with pytest.raises(TypeError):
        write_json_atomically(path, {"day": date(2026, 11, 23)})
    with pytest.raises(RuntimeError), atomic_file(path) as fh:
        fh.write(b"half")
        raise RuntimeError("interrupted")
    assert path.read_text() == '{"old": true}\n'
    assert os.listdir(tmp_path) == ["results.json"]
