"""The run store: one directory per test run, as docs/run-store.md lays it out.

``store/<test-name>/<YYYYMMDDTHHMMSS>/`` holds ``test.json`` (written before the first
fault), ``history.jsonl``, ``schedule.json``, ``results.json``, reports and plots, and
``nodes/<node>/`` with every node's logs; ``store/latest`` and ``store/<test-name>/latest``
are symlinks to the newest run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from histories.atomic import write_json_atomically
from nemesis import FaultError, Schedule

DEFAULT_STORE = Path("store")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class StoreError(RuntimeError):
    """A run directory that cannot be made or read."""


def _git_commit(cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def versions() -> dict[str, str]:
    """Versions of what a run depends on, for test.json."""
    out = {"python": sys.version.split()[0]}
    for package in (
        "squall",
        "pyspark",
        "kazoo",
        "paramiko",
        "docker",
        "confluent-kafka",
        "kafka-python",
    ):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return out


@dataclass(frozen=True)
class RunDirectory:
    """One run's directory and the names of the files in it."""

    path: Path

    @property
    def test_name(self) -> str:
        return self.path.parent.name

    @property
    def test_json(self) -> Path:
        return self.path / "test.json"

    @property
    def history(self) -> Path:
        return self.path / "history.jsonl"

    @property
    def parquet(self) -> Path:
        return self.path / "history.parquet"

    @property
    def schedule(self) -> Path:
        return self.path / "schedule.json"

    @property
    def results(self) -> Path:
        return self.path / "results.json"

    @property
    def report_html(self) -> Path:
        return self.path / "report.html"

    @property
    def junit(self) -> Path:
        return self.path / "junit.xml"

    def node_dir(self, node: str) -> Path:
        return self.path / "nodes" / node

    def write_json(self, path: Path, doc: Any) -> None:
        """Atomically (temp file, fsync, rename)."""
        write_json_atomically(path, doc, default=str)

    def write_test(self, spec: dict[str, Any]) -> None:
        doc = {
            **spec,
            "versions": versions(),
            "git_commit": _git_commit(Path(__file__).resolve().parent),
            "run_dir": str(self.path),
        }
        self.write_json(self.test_json, doc)

    def write_schedule(self, schedule: Schedule) -> None:
        """``schedule.json``: the schedule as applied, replayable."""
        self.write_json(self.schedule, schedule.to_json())

    def read_test(self) -> dict[str, Any]:
        try:
            doc: dict[str, Any] = json.loads(self.test_json.read_text())
        except (OSError, ValueError) as err:
            raise StoreError(f"cannot read {self.test_json}: {err}") from None
        return doc


class RunStore:
    """Creates run directories under a store root and keeps the ``latest`` links."""

    def __init__(self, root: Path = DEFAULT_STORE) -> None:
        self.root = root

    def new_run(self, test_name: str, *, now: datetime | None = None) -> RunDirectory:
        if not _NAME.match(test_name):
            raise StoreError(
                f"test name {test_name!r} cannot name a directory: use letters, digits, '.', '_', "
                "'-' (at most 100)"
            )
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")
        test_dir = self.root / test_name
        path = test_dir / stamp
        suffix = 1
        while path.exists():
            suffix += 1
            path = test_dir / f"{stamp}-{suffix}"
        try:
            (path / "nodes").mkdir(parents=True)
        except OSError as err:
            raise StoreError(f"cannot create run directory {path}: {err.strerror}") from None
        self._link(test_dir / "latest", path)
        self._link(self.root / "latest", path)
        return RunDirectory(path)

    @staticmethod
    def _link(link: Path, target: Path) -> None:
        temp = link.with_name(link.name + ".tmp")
        temp.unlink(missing_ok=True)
        temp.symlink_to(os.path.relpath(target, link.parent))
        temp.replace(link)

    @staticmethod
    def open(path: Path) -> RunDirectory:
        """A run directory given by path (a ``latest`` link is resolved)."""
        resolved = path.resolve()
        if not resolved.is_dir():
            raise StoreError(f"{path} is not a run directory")
        return RunDirectory(resolved)


def load_schedule(path: Path) -> Schedule:
    """Read a ``schedule.json`` (or a run directory's), checked against its model;
    FaultError or ConfigurationError naming the file."""
    from squall.config.schedule_file import schedule_from_json

    source = path / "schedule.json" if path.is_dir() else path
    try:
        doc = json.loads(source.read_text())
    except (OSError, ValueError) as err:
        raise FaultError(f"cannot read schedule {source}: {err}") from None
    return schedule_from_json(doc, source=str(source))
