"""The brokers' disk that can lose what was not fsynced: lazyfs on a node, from the control
side.

lazyfs (the node-side package ``lazyfs``, with mfusepy, uploaded like the SUT) is a FUSE
passthrough that journals every write, truncate and directory change not yet made durable by
an fsync, and forgets them all on command, as a power loss would. On a broker node it is
mounted under the broker's data, and ``log.dirs`` points into it; the SUT knows nothing of
it. Layout under the node's root::

    lazyfs/              the lazyfs package and mfusepy.py (PYTHONPATH of the daemon only)
    data/disk-backing/   the backing directory: what the disk holds durably, and the journal's
                         graveyard (.lazyfs-graveyard)
    data/disk/           the mount: the broker's log.dirs
    run/lazyfs.pid       run/lazyfs.sock (the control socket)   logs/lazyfs.log

The nemesis drives it through ``cluster.disks`` (``squall.cluster.disks.NodeDisks``) by
node name: ``lose_unsynced(node)`` drops,
at once, everything on that node's disk that was not fsynced and says what it dropped. It
is meant for a node whose broker is dead (killed at the same instant, as a power loss), as
a process that kept its files open would see stale pages.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import time
from pathlib import Path, PurePosixPath
from typing import Any

from nemesis.errors import ClusterError
from squall.cluster.lazyfs.mounts import FS_TYPE
from squall.cluster.lazyfs.tallies import Dropped, Unsynced
from squall.cluster.node import CommandResult, DaemonSpec, Node

CODE_DIR = "lazyfs"
BACKING_DIR = "data/disk-backing"
MOUNT_DIR = "data/disk"
DAEMON = "lazyfs"


class LazyDiskError(ClusterError):
    """The lazy disk of a node could not be mounted, commanded or unmounted, or its daemon
    died (the broker's data would be gone from under it)."""


def code_sources() -> list[Path]:
    """The node-side code: the lazyfs package and mfusepy's module (found without importing
    it: importing loads libfuse3, which the control machine need not have)."""
    from squall.cluster import lazyfs

    spec = importlib.util.find_spec("mfusepy")
    if spec is None or spec.origin is None:
        raise LazyDiskError("mfusepy is not installed here; run `make setup`")
    return [Path(lazyfs.__file__).resolve().parent, Path(spec.origin)]


class LazyDisk:
    """lazyfs under one broker node's data: install, mount, drop, inspect, unmount."""

    def __init__(self, node: Node, *, root: str = "/opt/squall", python: str = "python3") -> None:
        self.node = node
        self.root = PurePosixPath(root)
        self.python = python

    @property
    def backing(self) -> str:
        return str(self.root / BACKING_DIR)

    @property
    def mountpoint(self) -> str:
        return str(self.root / MOUNT_DIR)

    @property
    def control(self) -> str:
        return str(self.root / "run" / f"{DAEMON}.sock")

    @property
    def pidfile(self) -> str:
        return str(self.root / "run" / f"{DAEMON}.pid")

    @property
    def logfile(self) -> str:
        return str(self.root / "logs" / f"{DAEMON}.log")

    def _lazyfs(self, *args: str) -> str:
        code = shlex.quote(str(self.root / CODE_DIR))
        return f"PYTHONPATH={code} {shlex.quote(self.python)} -m lazyfs {shlex.join(args)}"

    def install(self) -> None:
        """Upload lazyfs and mfusepy to ``root/lazyfs``."""
        for source in code_sources():
            self.node.upload(source, str(self.root / CODE_DIR / source.name))

    def mount(self, timeout: float = 30.0) -> None:
        """Mount the disk (the backing directory made if missing) and wait until its control
        socket answers; a disk mounted and alive already is left as it is, and the dead mount
        of a crashed daemon is removed first (the backing directory keeps what was written)."""
        if self.node.daemon_running(self.pidfile) and self._ask("status", check=False).ok:
            return
        self.release()
        self.node.run(f"mkdir -p {shlex.quote(self.backing)} {shlex.quote(self.mountpoint)}")
        self.node.start_daemon(
            DaemonSpec(
                DAEMON,
                [
                    *(self.python, "-m", "lazyfs", "mount", self.backing, self.mountpoint),
                    *("--control", self.control),
                ],
                self.pidfile,
                self.logfile,
                env={"PYTHONPATH": str(self.root / CODE_DIR), "PYTHONUNBUFFERED": "1"},
                cwd=str(self.root),
            )
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.node.daemon_running(self.pidfile):
                raise LazyDiskError(
                    f"{self.node.name}: lazyfs exited while mounting {self.mountpoint} (FUSE "
                    "needs /dev/fuse, CAP_SYS_ADMIN and Debian's fuse3 on the node); last lines "
                    f"of {self.logfile}:\n{self._log_tail()}"
                )
            if self._ask("status", check=False).ok:
                return
            time.sleep(0.1)
        raise LazyDiskError(
            f"{self.node.name}: lazyfs did not mount {self.mountpoint} in {timeout:.0f} s; "
            f"last lines of {self.logfile}:\n{self._log_tail()}"
        )

    def lose_unsynced(self) -> Dropped:
        """Forget everything on the disk not fsynced (as a power loss); what was dropped."""
        return Dropped(**self._answer("drop")["dropped"])

    def unsynced(self) -> Unsynced:
        """What a power loss would take now."""
        return Unsynced(**self._answer("status")["unsynced"])

    def check(self) -> None:
        """LazyDiskError unless the disk is mounted and its daemon answers: a broker must not
        start on the empty directory a dead mount leaves behind."""
        self._answer("status")

    def unmount(self, timeout: float = 30.0) -> bool:
        """Unmount (processes using the disk must be stopped first); the daemon then exits.
        False if it was not mounted."""
        result = self.node.run(
            self._lazyfs("unmount", self.mountpoint, "--timeout", str(timeout)),
            timeout=timeout + 30,
            check=False,
        )
        if not result.ok:
            raise LazyDiskError(f"{self.node.name}: {result.output.strip()}")
        deadline = time.monotonic() + timeout
        while self.node.daemon_running(self.pidfile) and time.monotonic() < deadline:
            time.sleep(0.05)
        return bool(_json_line(result.output).get("unmounted"))

    def release(self) -> bool:
        """Remove whatever a crashed run left of this disk, with the shell only (the lazyfs
        code may be gone): unmount it, lazily if it stays busy, and end its daemon. Whether
        there was a mount."""
        result = self.node.run(release_command(self.mountpoint), timeout=60, check=False)
        self.node.signal_daemon(self.pidfile, "TERM")
        return "released" in result.output

    def _ask(self, op: str, *, check: bool = True) -> CommandResult:
        return self.node.run(self._lazyfs("ctl", self.control, op), timeout=120, check=check)

    def _answer(self, op: str) -> dict[str, Any]:
        result = self._ask(op, check=False)
        if not result.ok:
            alive = self.node.daemon_running(self.pidfile)
            raise LazyDiskError(
                f"{self.node.name}: the lazy disk at {self.mountpoint} did not answer {op} "
                f"({result.output.strip()[-300:]}); its daemon is "
                f"{'alive' if alive else 'gone'}; last lines of {self.logfile}:\n"
                f"{self._log_tail()}"
            )
        return _json_line(result.output)

    def _log_tail(self, lines: int = 20) -> str:
        return self.node.run(
            f"tail -n {lines} {shlex.quote(self.logfile)}", timeout=10, check=False
        ).output


def release_command(mountpoint: str) -> str:
    """Shell unmounting the lazyfs mount at ``mountpoint`` if there is one, live or with a
    dead daemon; lazily (``-z``) if a process still holds it. Prints ``released`` if so."""
    quoted = shlex.quote(mountpoint)
    return (
        f"if grep -qs {shlex.quote(f' {mountpoint} {FS_TYPE} ')} /proc/mounts; then "
        f"fusermount3 -u {quoted} 2>/dev/null || fusermount3 -u -z {quoted}; echo released; fi"
    )


def _json_line(output: str) -> dict[str, Any]:
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            doc: dict[str, Any] = json.loads(line)
            return doc
    raise LazyDiskError(f"lazyfs printed no JSON: {output.strip()[-300:]}")
