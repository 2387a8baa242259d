"""The class-data archive of a local Spark JVM: claimed by one JVM, moved into place only
once that JVM has gone, then used by every later one."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

import checkers.jvm_archive as jvm_archive
from checkers.jvm_archive import archive_options, record_jvm


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(jvm_archive, "archive_key", lambda: "k")
    return "k"


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_the_first_jvm_records_the_archive_and_a_later_one_uses_it(
    tmp_path: Path, key: str
) -> None:
    options, claim = archive_options(tmp_path)
    assert claim == tmp_path / f"{key}.claim"
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'k.part'}" in options
    # While it runs, nobody else records or uses one.
    record_jvm(claim, os.getpid())
    assert archive_options(tmp_path) == ("-Xlog:disable -Xlog:all=error:stderr", None)
    # It has gone, leaving its archive: the next JVM starts from it.
    (tmp_path / "k.part").write_bytes(b"archive")
    record_jvm(claim, _dead_pid())
    options, claim = archive_options(tmp_path)
    assert claim is None
    assert f"-XX:SharedArchiveFile={tmp_path / 'k.jsa'}" in options
    assert "-XX:+VerifySharedSpaces" in options
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.jsa"]


def test_a_jvm_that_left_no_archive_lets_the_next_one_record_it(tmp_path: Path, key: str) -> None:
    _, claim = archive_options(tmp_path)
    assert claim is not None
    record_jvm(claim, _dead_pid())
    options, again = archive_options(tmp_path)
    assert again == claim and "ArchiveClassesAtExit" in options


def test_a_claim_that_names_no_jvm_is_given_up_only_when_stale(tmp_path: Path, key: str) -> None:
    claim = tmp_path / "k.claim"
    claim.write_text("")
    assert archive_options(tmp_path)[1] is None  # its JVM may still be starting
    old = time.time() - 3600
    os.utime(claim, (old, old))
    assert archive_options(tmp_path)[1] == claim


def test_without_java_there_is_no_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jvm_archive, "_java", lambda: None)
    assert archive_options(tmp_path) == ("", None)
    assert list(tmp_path.iterdir()) == []
