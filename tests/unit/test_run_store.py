from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from squall.store import RunStore, StoreError


def test_run_directories_and_latest_links(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    when = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
    first = store.new_run("acks-all", now=when)
    assert first.path == tmp_path / "store" / "acks-all" / "20261122T100000"
    second = store.new_run("acks-all", now=when)
    assert second.path.name == "20261122T100000-2"
    assert (tmp_path / "store" / "latest").resolve() == second.path
    assert (tmp_path / "store" / "acks-all" / "latest").resolve() == second.path
    assert (second.path / "nodes").is_dir()


def test_test_json_carries_spec_versions_and_commit(tmp_path: Path) -> None:
    run = RunStore(tmp_path).new_run("t")
    run.write_test({"name": "t", "seed": 7})
    doc = json.loads(run.test_json.read_text())
    assert doc["seed"] == 7 and "python" in doc["versions"] and "git_commit" in doc
    assert run.read_test()["name"] == "t"


@pytest.mark.parametrize("name", ["", "../escape", "a/b", "x" * 101])
def test_bad_test_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(StoreError, match="cannot name a directory"):
        RunStore(tmp_path).new_run(name)
