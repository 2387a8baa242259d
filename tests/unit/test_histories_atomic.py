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


def _fsyncs_of_directories(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record which fsync calls were on directories (issue 17: the rename must be synced)."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        import stat

        if stat.S_ISDIR(os.fstat(fd).st_mode):
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_the_directory_is_synced_after_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = _fsyncs_of_directories(monkeypatch)
    write_json_atomically(tmp_path / "results.json", {"valid": True})
    assert synced == [str(tmp_path)]


def test_a_file_system_that_cannot_sync_directories_is_let_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import stat

    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_json_atomically(tmp_path / "results.json", {"valid": True})
    assert json.loads((tmp_path / "results.json").read_text()) == {"valid": True}

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="I/O error"):
        write_json_atomically(tmp_path / "results.json", {"valid": False})
