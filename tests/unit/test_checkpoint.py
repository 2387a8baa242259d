"""Checkpoint files: round trips, atomic replacement, and errors for malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from system_under_test.log.checkpoint import (
    CheckpointError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)


def test_offset_checkpoint_round_trip(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    offsets = {("orders", 0): 17, ("orders-eu", 3): 0, ("a.b_c", 12): 2**40}
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    text = checkpoint.path.read_text()
    assert text.splitlines()[:2] == ["0", "3"]
    assert "orders-eu 3 0" in text.splitlines()


def test_offset_checkpoint_of_nothing(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    assert checkpoint.read() == {}  # missing file
    checkpoint.write({})
    assert checkpoint.path.read_text() == "0\n0\n"
    assert checkpoint.read() == {}


def test_write_replaces_atomically_and_leaves_no_temp_file(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    checkpoint.write({("t", 0): 1, ("t", 1): 2})
    checkpoint.write({("t", 0): 5})
    assert checkpoint.read() == {("t", 0): 5}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    checkpoint.write({("t", 0): 1})

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("system_under_test.log.checkpoint.os.fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        checkpoint.write({("t", 0): 2})
    monkeypatch.undo()
    assert checkpoint.read() == {("t", 0): 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp"]


def test_topic_with_spaces_cannot_be_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="spaces"):
        OffsetCheckpointFile(tmp_path / "cp").write({("bad topic", 0): 1})


def test_leader_epoch_checkpoint_round_trip(tmp_path: Path) -> None:
    checkpoint = LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")
    epochs = [(0, 0), (1, 57), (4, 57), (5, 1200)]
    checkpoint.write(epochs)
    assert checkpoint.read() == epochs
    assert checkpoint.path.read_text() == "0\n4\n0 0\n1 57\n4 57\n5 1200\n"
    assert LeaderEpochCheckpointFile(tmp_path / "missing").read() == []


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        ("", 1, "empty"),
        ("1\n0\n", 1, "unsupported version 1"),
        ("x\n0\n", 1, "version 'x' is not an integer"),
        ("0\n", 2, "count line is missing"),
        ("0\n-1\n", 2, "negative"),
        ("0\n2\nt 0 5\n", 2, "says 2 entries but 1 follow"),
        ("0\n1\nt 0 5\nt 1 6\n", 2, "says 1 entries but 2 follow"),
        ("0\n1\nt 0\n", 3, "expected 3 fields"),
        ("0\n2\nt 0 5\nt 1 five\n", 4, "offset 'five' is not an integer"),
        ("0\n1\nt x 5\n", 3, "partition 'x' is not an integer"),
        ("0\n1\nt -1 5\n", 3, "partition -1 is negative"),
        ("0\n1\nt 0 1_000\n", 3, "not an integer"),
    ],
)
def test_malformed_offset_checkpoint_names_file_line_and_problem(
    tmp_path: Path, content: str, line: int, problem: str
) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(content)
    with pytest.raises(CheckpointError) as err:
        OffsetCheckpointFile(path).read()
    assert err.value.line == line
    assert err.value.path == path
    assert problem in err.value.problem
    assert str(path) in str(err.value) and f"line {line}" in str(err.value)


def test_binary_garbage_is_a_checkpoint_error(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff\xfe 0 1\n")
    with pytest.raises(CheckpointError, match="UTF-8") as err:
        OffsetCheckpointFile(path).read()
    assert err.value.line == 3


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("0\n1\n3\n", "expected 2 fields"),
        ("0\n1\n-1 5\n", "must be >= 0"),
        ("0\n1\n1 x\n", "start offset"),
    ],
)
def test_malformed_leader_epoch_checkpoint(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(content)
    with pytest.raises(CheckpointError, match=problem):
        LeaderEpochCheckpointFile(path).read()
