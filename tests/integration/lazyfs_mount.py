"""A real lazyfs mount on this machine for the tests: the daemon as its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from squall.cluster.lazyfs.control import ControlError, request
from squall.cluster.lazyfs.mounts import is_mounted, unmount

REPOSITORY = Path(__file__).resolve().parents[2]


def fuse_missing() -> str | None:
    """Why this machine cannot mount FUSE, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if os.geteuid() != 0:
        return "mounting needs root here"
    if subprocess.run(["sh", "-c", "command -v fusermount3"], capture_output=True).returncode:
        return "no fusermount3 (Debian's fuse3)"
    return None


@dataclass
class LazyMount:
    """A mounted lazyfs: its mountpoint, its backing directory and its control socket."""

    root: Path
    backing: Path
    control: str
    process: subprocess.Popen[bytes]

    def ctl(self, op: str) -> dict[str, Any]:
        return request(self.control, op)

    def drop(self) -> dict[str, int]:
        dropped: dict[str, int] = self.ctl("drop")["dropped"]
        return dropped

    def unsynced(self) -> dict[str, int]:
        unsynced: dict[str, int] = self.ctl("status")["unsynced"]
        return unsynced


@contextmanager
def lazy_mount(base: Path) -> Iterator[LazyMount]:
    """Mount ``base/backing`` on ``base/mnt``; unmount (and check the daemon exits) after."""
    why = fuse_missing()
    if why is not None:
        pytest.skip(f"FUSE unavailable: {why}")
    backing, mountpoint = base / "backing", base / "mnt"
    backing.mkdir(exist_ok=True)
    control = str(base / "control.sock")
    log = (base / "lazyfs.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "squall.cluster.lazyfs",
            "mount",
            str(backing),
            str(mountpoint),
            "--control",
            control,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
    )
    try:
        _wait_until_mounted(control, process, base / "lazyfs.log")
        yield LazyMount(mountpoint, backing, control, process)
    finally:
        if is_mounted(str(mountpoint)):
            unmount(str(mountpoint))
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_until_mounted(control: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"lazyfs exited with {process.returncode}: {log.read_text()}")
        try:
            request(control, "status", timeout=5)
            return
        except ControlError:
            time.sleep(0.05)
    raise AssertionError(f"lazyfs did not mount in 60 s: {log.read_text()}")


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def json_line(text: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(text.strip().splitlines()[-1])
    return doc
