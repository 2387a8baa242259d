"""The brokers' data directories as the nemesis damages them: squall's implementation of
``nemesis.protocols.Disks`` over each node's command channel.

A broker's data directory is its ``log.dirs`` (``<root>/data/logs``); its snapshots live
in ``<root>/data/snapshots/<name>``, out of the broker's sight. The event log
(``squall-events.jsonl``, in the data directory) is squall's record of the run, not the
broker's data: snapshots leave it out and a rollback keeps it. Every change is fsynced, a
restored directory file by file. Every operation is one run of a small stdlib-only Python
program on the node (nodes have python3), which checks that each path stays inside the
directory it names.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Protocol

from nemesis.errors import ClusterError
from nemesis.protocols import LAZY_DISK_MISSING, StoredFile
from squall.cluster.lazy_disk import LazyDisk
from squall.cluster.node import CommandResult, Node
from squall.cluster.services import BrokerService
from system_under_test.log.checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
)
from system_under_test.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from system_under_test.server import EVENT_LOG_NAME

SEGMENT_SUFFIXES = {"log": LOG_SUFFIX, "index": INDEX_SUFFIX, "timeindex": TIME_INDEX_SUFFIX}
"""The segment files of a partition, by the nemesis's kind of file."""
CHECKPOINTS = {
    "recovery-point-checkpoint": RECOVERY_POINT_CHECKPOINT_FILE,
    "high-watermark-checkpoint": REPLICATION_OFFSET_CHECKPOINT_FILE,
}
"""The data directory's own checkpoint files, by kind."""
KEPT_OUT = (EVENT_LOG_NAME,)
SNAPSHOT_DIR = "snapshots"
"""Under the node's ``<root>/data``, beside (never inside) the log dir."""
"""Files of the data directory that snapshots leave out and rollbacks keep."""
COMMAND_TIMEOUT_S = 120.0
_KEY = re.compile(r"^[A-Za-z0-9._-]+-[0-9]+$")

NODE_PROGRAM = r"""
import json, os, re, shutil, sys

def inside(base, rel):
    path = os.path.realpath(os.path.join(base, rel))
    if os.path.commonpath([path, os.path.realpath(base)]) != os.path.realpath(base):
        sys.exit(f"{rel!r} is not inside {base}")
    return path

def synced(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

def synced_tree(top):
    for directory, _, files in os.walk(top, topdown=False):
        for name in files:
            synced(os.path.join(directory, name))
        synced(directory)

op, logs, snapshots, *args = sys.argv[1:]
if op == "list":
    directory, suffix = inside(logs, args[0]), args[1]
    pattern = re.compile(r"[0-9]{20}" + re.escape(suffix))
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    print(json.dumps([[n, os.path.getsize(os.path.join(directory, n))]
                      for n in names if pattern.fullmatch(n)]))
elif op == "stat":
    path = inside(logs, args[0])
    print(json.dumps([[args[0], os.path.getsize(path)]] if os.path.isfile(path) else []))
elif op == "flip":
    path, flips = inside(logs, args[0]), json.loads(args[1])
    fd = os.open(path, os.O_RDWR)
    try:
        size, done = os.fstat(fd).st_size, 0
        for offset, bit in flips:
            if offset < size:
                byte = os.pread(fd, 1, offset)[0] ^ (1 << bit)
                os.pwrite(fd, bytes([byte]), offset)
                done += 1
        os.fsync(fd)
    finally:
        os.close(fd)
    print(done)
elif op == "truncate":
    path, size = inside(logs, args[0]), int(args[1])
    before = os.path.getsize(path)
    if size < before:
        os.truncate(path, size)
        synced(path)
    print(before)
elif op == "snapshot":
    target, kept_out = inside(snapshots, args[0]), args[1:]
    partial = target + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(logs, partial, symlinks=True,
                    ignore=lambda d, names: kept_out if d == logs else [])
    shutil.rmtree(target, ignore_errors=True)
    os.replace(partial, target)
    print(sum(os.path.getsize(os.path.join(d, f))
              for d, _, files in os.walk(target) for f in files))
elif op == "restore":
    snapshot, kept = inside(snapshots, args[0]), set(args[1:])
    if not os.path.isdir(snapshot):
        sys.exit(f"no snapshot {args[0]}")
    for entry in os.scandir(logs):
        if entry.name in kept:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    shutil.copytree(snapshot, logs, symlinks=True, dirs_exist_ok=True)
    synced_tree(logs)
elif op == "drop":
    names = sorted(os.listdir(snapshots)) if os.path.isdir(snapshots) else []
    shutil.rmtree(snapshots, ignore_errors=True)
    print(json.dumps([n for n in names if not n.endswith(".partial")]))
else:
    sys.exit(f"unknown operation {op}")
"""


class DiskError(ClusterError):
    """A broker's data directory could not be read or changed as asked."""


class LazyDiskSetting(Protocol):
    @property
    def lazy_disk(self) -> bool:
        """Whether the brokers' data is on lazy disks."""
        ...


class BrokerCluster(Protocol):
    """What the disks need of a cluster (``squall.cluster.cluster.Cluster``)."""

    @property
    def brokers(self) -> Mapping[str, Node]: ...

    @property
    def state(self) -> LazyDiskSetting: ...

    def node(self, name: str) -> Node:
        """The node ``name``; KeyError naming the known nodes."""
        ...

    def broker(self, name: str) -> BrokerService: ...

    def lazy_disk(self, name: str) -> LazyDisk: ...


class NodeDisks:
    """The data directories of a cluster's brokers, by node name."""

    def __init__(self, cluster: BrokerCluster) -> None:
        self._cluster = cluster

    def _broker(self, node: str) -> BrokerService:
        if node not in self._cluster.brokers:
            self._cluster.node(node)  # KeyError naming the known nodes
            raise DiskError(f"{node} runs no broker: storage faults hit brokers' data directories")
        return self._cluster.broker(node)

    def _run(self, node: str, op: str, *args: str) -> str:
        """Run the node program's ``op`` on the broker's log dir and snapshots."""
        broker = self._broker(node)
        snapshots = str(broker.root / "data" / SNAPSHOT_DIR)
        command = shlex.join(
            [broker.python, "-c", NODE_PROGRAM, op, broker.log_dir, snapshots, *args]
        )
        result: CommandResult = broker.node.run(command, timeout=COMMAND_TIMEOUT_S, check=False)
        if not result.ok:
            tail = "\n".join(result.output.strip().splitlines()[-5:])
            raise DiskError(f"{node}: {op} {' '.join(args[:1])} failed: {tail}")
        return result.output.strip()

    def files(self, node: str, kind: str, key: str | None) -> list[StoredFile]:
        if kind in CHECKPOINTS:
            listing = self._run(node, "stat", CHECKPOINTS[kind])
            return [StoredFile(path, size) for path, size in json.loads(listing)]
        if key is None or not _KEY.match(key):
            raise DiskError(
                f"{kind} files belong to a partition: give TOPIC-PARTITION, not {key!r}"
            )
        if kind == "leader-epoch-checkpoint":
            listing = self._run(node, "stat", f"{key}/{LEADER_EPOCH_CHECKPOINT_FILE}")
            return [StoredFile(path, size) for path, size in json.loads(listing)]
        if kind not in SEGMENT_SUFFIXES:
            raise DiskError(f"no kind of file {kind!r}; kinds: {', '.join(SEGMENT_SUFFIXES)}")
        listing = self._run(node, "list", key, SEGMENT_SUFFIXES[kind])
        return [StoredFile(f"{key}/{name}", size) for name, size in json.loads(listing)]

    def flip_bits(self, node: str, path: str, flips: Sequence[tuple[int, int]]) -> int:
        return int(self._run(node, "flip", path, json.dumps([list(f) for f in flips])))

    def truncate(self, node: str, path: str, size: int) -> int:
        return int(self._run(node, "truncate", path, str(size)))

    def snapshot(self, node: str, name: str) -> int:
        return int(self._run(node, "snapshot", name, *KEPT_OUT))

    def restore(self, node: str, name: str) -> None:
        self._run(node, "restore", name, *KEPT_OUT)

    def drop_snapshots(self, node: str) -> list[str]:
        names: list[str] = json.loads(self._run(node, "drop"))
        return names

    def _lazy(self, node: str) -> LazyDisk:
        self._broker(node)
        if not self._cluster.state.lazy_disk:
            raise DiskError(f"{node}: {LAZY_DISK_MISSING}")
        return self._cluster.lazy_disk(node)

    def lose_unsynced(self, node: str) -> dict[str, int]:
        return self._lazy(node).lose_unsynced().to_json()

    def unsynced(self, node: str) -> dict[str, int]:
        return self._lazy(node).unsynced().to_json()
