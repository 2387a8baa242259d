"""lazyfs on a real FUSE mount: what survives a drop and what does not.

A drop forgets everything not fsynced, as a power loss would: file contents and sizes go
back to their last fsync, directory entries to their directory's last fsync.
"""

from __future__ import annotations

import itertools
import mmap
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from squall.cluster.lazy_disk import Dropped, LazyDisk, LazyDiskError, Unsynced
from squall.cluster.lazyfs.mounts import is_mounted, lazyfs_mounts
from squall.cluster.local import LocalNode, LocalRuntime
from squall.cluster.services import BrokerService, ServiceError
from system_under_test.client import AdminClient, BrokerError, Consumer, Producer
from tests.integration.lazyfs_mount import (
    REPOSITORY,
    LazyMount,
    fsync_path,
    fuse_missing,
    json_line,
    lazy_mount,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[LazyMount]:
    with lazy_mount(tmp_path) as mounted:
        yield mounted


def write_synced(path: Path, data: bytes) -> None:
    """Create or replace a file, fsync it and its directory."""
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    fsync_path(path.parent)


def test_fsynced_data_survives_a_drop(disk: LazyMount) -> None:
    write_synced(disk.root / "a", b"durable")
    assert disk.unsynced() == {"files": 0, "bytes": 0, "directories": 0, "entries": 0}
    disk.drop()
    assert (disk.root / "a").read_bytes() == b"durable"


def test_preexisting_files_count_as_durable(tmp_path: Path) -> None:
    (tmp_path / "backing").mkdir()
    (tmp_path / "backing" / "old").write_bytes(b"from before the mount")
    with lazy_mount(tmp_path) as disk:
        with (disk.root / "old").open("ab") as handle:
            handle.write(b", and after")
        disk.drop()
        assert (disk.root / "old").read_bytes() == b"from before the mount"


def test_unsynced_appends_and_overwrites_vanish(disk: LazyMount) -> None:
    write_synced(disk.root / "a", b"0123456789")
    with (disk.root / "a").open("r+b") as handle:
        handle.seek(3)
        handle.write(b"XYZ")
        handle.seek(0, os.SEEK_END)
        handle.write(b"tail" * 1000)
    assert disk.unsynced()["bytes"] == 3 + 4000
    dropped = disk.drop()
    assert (disk.root / "a").read_bytes() == b"0123456789"
    assert dropped["bytes"] == 4003
    assert os.stat(disk.root / "a").st_size == 10


def test_a_rewrite_after_fsync_goes_back_to_the_fsynced_version(disk: LazyMount) -> None:
    path = disk.root / "a"
    write_synced(path, b"first version")
    with path.open("r+b") as handle:
        handle.write(b"SECOND version, longer")
        handle.flush()
        os.fsync(handle.fileno())
        handle.seek(0)
        handle.write(b"third")
    disk.drop()
    assert path.read_bytes() == b"SECOND version, longer"


def test_fdatasync_makes_contents_durable(disk: LazyMount) -> None:
    write_synced(disk.root / "a", b"")
    fd = os.open(disk.root / "a", os.O_WRONLY)
    try:
        os.write(fd, b"data-synced")
        os.fdatasync(fd)
        os.write(fd, b" and lost")
    finally:
        os.close(fd)
    disk.drop()
    assert (disk.root / "a").read_bytes() == b"data-synced"


def test_truncates_are_undone(disk: LazyMount) -> None:
    write_synced(disk.root / "shrunk", b"abcdefghij")
    write_synced(disk.root / "grown", b"abc")
    os.truncate(disk.root / "shrunk", 4)
    with (disk.root / "shrunk").open("ab") as handle:
        handle.write(b"1234567890")  # over the cut bytes, then past the synced size
    os.truncate(disk.root / "grown", 100)
    disk.drop()
    assert (disk.root / "shrunk").read_bytes() == b"abcdefghij"
    assert (disk.root / "grown").read_bytes() == b"abc"


def test_ftruncate_then_fsync_is_durable(disk: LazyMount) -> None:
    write_synced(disk.root / "a", b"abcdefghij")
    fd = os.open(disk.root / "a", os.O_RDWR)
    try:
        os.ftruncate(fd, 3)
        os.fsync(fd)
        os.ftruncate(fd, 1)
    finally:
        os.close(fd)
    disk.drop()
    assert (disk.root / "a").read_bytes() == b"abc"


def test_open_with_o_trunc_is_undone(disk: LazyMount) -> None:
    write_synced(disk.root / "a", b"keep me")
    (disk.root / "a").write_bytes(b"x")
    disk.drop()
    assert (disk.root / "a").read_bytes() == b"keep me"


def test_o_append_writes_land_at_the_end_and_vanish(disk: LazyMount) -> None:
    write_synced(disk.root / "a", b"head")
    fd = os.open(disk.root / "a", os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"-one")
        os.fsync(fd)
        os.write(fd, b"-two")
        assert (disk.root / "a").read_bytes() == b"head-one-two"
    finally:
        os.close(fd)
    disk.drop()
    assert (disk.root / "a").read_bytes() == b"head-one"
    with (disk.root / "a").open("ab") as handle:
        handle.write(b"-three")
    assert (disk.root / "a").read_bytes() == b"head-one-three"


def test_new_files_vanish_unless_their_directory_is_fsynced(disk: LazyMount) -> None:
    write_synced(disk.root / "synced-entry", b"")
    (disk.root / "entry-synced-only").write_bytes(b"entry fsynced, contents not")
    fsync_path(disk.root)
    (disk.root / "unsynced-entry").write_bytes(b"lost with its entry")
    with (disk.root / "file-synced-only").open("wb") as handle:
        handle.write(b"contents fsynced, entry not")
        handle.flush()
        os.fsync(handle.fileno())
    disk.drop()
    assert sorted(os.listdir(disk.root)) == ["entry-synced-only", "synced-entry"]
    assert (disk.root / "entry-synced-only").read_bytes() == b""


def test_a_file_whose_entry_is_not_durable_vanishes_even_if_fsynced(disk: LazyMount) -> None:
    with (disk.root / "a").open("wb") as handle:
        handle.write(b"fsynced contents")
        handle.flush()
        os.fsync(handle.fileno())
    disk.drop()
    assert os.listdir(disk.root) == []


def test_renames_are_undone(disk: LazyMount) -> None:
    write_synced(disk.root / "old", b"old contents")
    write_synced(disk.root / "victim", b"victim contents")
    write_synced(disk.root / "moved", b"moved contents")
    os.rename(disk.root / "old", disk.root / "new")
    os.replace(disk.root / "moved", disk.root / "victim")
    assert sorted(os.listdir(disk.root)) == ["new", "victim"]
    dropped = disk.drop()
    assert sorted(os.listdir(disk.root)) == ["moved", "old", "victim"]
    assert (disk.root / "old").read_bytes() == b"old contents"
    assert (disk.root / "victim").read_bytes() == b"victim contents"
    assert (disk.root / "moved").read_bytes() == b"moved contents"
    assert dropped["entries_removed"] == 2  # "new", and "victim" pointing at moved's file
    assert dropped["entries_restored"] == 3


def test_the_checkpoint_pattern_is_durable_only_after_the_directory_fsync(disk: LazyMount) -> None:
    """Temp file, fsync, rename over the old one, fsync the directory: as the SUT's
    checkpoints are written."""
    write_synced(disk.root / "checkpoint", b"v1")
    for version, sync_directory in ((b"v2", True), (b"v3", False)):
        temp = disk.root / "checkpoint.tmp"
        with temp.open("wb") as handle:
            handle.write(version)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, disk.root / "checkpoint")
        if sync_directory:
            fsync_path(disk.root)
    disk.drop()
    assert os.listdir(disk.root) == ["checkpoint"]
    assert (disk.root / "checkpoint").read_bytes() == b"v2"


def test_unlinks_and_rmdirs_are_undone(disk: LazyMount) -> None:
    (disk.root / "dir").mkdir()
    write_synced(disk.root / "dir" / "inside", b"inside")
    fsync_path(disk.root)
    write_synced(disk.root / "file", b"file")
    os.unlink(disk.root / "dir" / "inside")
    os.rmdir(disk.root / "dir")
    os.unlink(disk.root / "file")
    assert os.listdir(disk.root) == []
    disk.drop()
    assert sorted(os.listdir(disk.root)) == ["dir", "file"]
    assert (disk.root / "dir" / "inside").read_bytes() == b"inside"
    assert (disk.root / "file").read_bytes() == b"file"


def test_an_unlink_made_durable_stays_done(disk: LazyMount) -> None:
    write_synced(disk.root / "file", b"file")
    os.unlink(disk.root / "file")
    fsync_path(disk.root)
    disk.drop()
    assert os.listdir(disk.root) == []
    assert os.listdir(disk.backing) == [".lazyfs-graveyard"]
    assert os.listdir(disk.backing / ".lazyfs-graveyard") == []


def test_an_unsynced_directory_takes_its_synced_contents_with_it(disk: LazyMount) -> None:
    (disk.root / "topic-0").mkdir()
    write_synced(disk.root / "topic-0" / "00000000000000000000.log", b"records")
    disk.drop()
    assert os.listdir(disk.root) == []


def test_a_directory_renamed_and_changed_comes_back_whole(disk: LazyMount) -> None:
    (disk.root / "topic-0").mkdir()
    write_synced(disk.root / "topic-0" / "segment", b"records")
    fsync_path(disk.root)
    os.rename(disk.root / "topic-0", disk.root / "topic-0.delete")
    os.unlink(disk.root / "topic-0.delete" / "segment")
    (disk.root / "topic-0.delete" / "new").write_bytes(b"new")
    disk.drop()
    assert os.listdir(disk.root) == ["topic-0"]
    assert os.listdir(disk.root / "topic-0") == ["segment"]
    assert (disk.root / "topic-0" / "segment").read_bytes() == b"records"


def test_a_descriptor_open_across_a_drop_sees_the_synced_file(disk: LazyMount) -> None:
    """The kernel's cached attributes and pages are invalidated by a drop."""
    write_synced(disk.root / "a", b"0123456789")
    fd = os.open(disk.root / "a", os.O_RDWR)
    try:
        os.pwrite(fd, b"ABC", 2)
        os.pwrite(fd, b"tail", 10)
        assert os.pread(fd, 100, 0) == b"01ABC56789tail"
        assert os.fstat(fd).st_size == 14  # cached by the kernel from here on
        disk.drop()
        assert os.fstat(fd).st_size == 10
        assert os.pread(fd, 100, 0) == b"0123456789"
    finally:
        os.close(fd)


def test_status_counts_what_a_drop_would_take(disk: LazyMount) -> None:
    write_synced(disk.root / "a", b"12345")
    with (disk.root / "a").open("ab") as handle:
        handle.write(b"678")
    (disk.root / "b").write_bytes(b"xy")
    assert disk.unsynced() == {"files": 2, "bytes": 5, "directories": 1, "entries": 1}
    assert disk.drop() == {"files": 2, "bytes": 5, "entries_removed": 1, "entries_restored": 0}
    assert disk.unsynced() == {"files": 0, "bytes": 0, "directories": 0, "entries": 0}


def test_a_shared_mapping_is_written_through_and_msync_makes_it_durable(disk: LazyMount) -> None:
    write_synced(disk.root / "a", b"\0" * 8192)
    with (disk.root / "a").open("r+b") as handle, mmap.mmap(handle.fileno(), 8192) as mapped:
        mapped[0:5] = b"first"
        mapped.flush()  # msync: an fsync of the range
        mapped[4096:4102] = b"second"
    disk.drop()
    data = (disk.root / "a").read_bytes()
    assert data[0:5] == b"first"
    assert data[4096:4102] == b"\0" * 6


def test_the_command_line_answers_json_and_unmounts(disk: LazyMount) -> None:
    def lazyfs(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "squall.cluster.lazyfs", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
            check=False,
        )

    (disk.root / "a").write_bytes(b"abc")
    status = lazyfs("ctl", disk.control, "status")
    assert status.returncode == 0, status.stderr
    assert json_line(status.stdout)["unsynced"]["bytes"] == 3
    assert json_line(lazyfs("ctl", disk.control, "drop").stdout)["dropped"]["bytes"] == 3
    unmounted = lazyfs("unmount", str(disk.root))
    assert unmounted.returncode == 0, unmounted.stderr
    assert disk.process.wait(timeout=60) == 0
    gone = lazyfs("ctl", disk.control, "status")
    assert gone.returncode == 3
    assert "does not answer" in gone.stderr


# --- squall's control side, on a node of this machine -----------------------------------


@pytest.fixture
def node_disk(tmp_path: Path) -> Iterator[LazyDisk]:
    why = fuse_missing()
    if why is not None:
        pytest.skip(f"FUSE unavailable: {why}")
    disk = LazyDisk(
        LocalNode("n1", "127.0.0.1", tmp_path), root=str(tmp_path), python=sys.executable
    )
    disk.install()
    disk.mount()
    try:
        yield disk
    finally:
        disk.unmount()


def test_lose_unsynced_on_a_node(node_disk: LazyDisk) -> None:
    mount = Path(node_disk.mountpoint)
    write_synced(mount / "synced", b"kept")
    (mount / "unsynced").write_bytes(b"lost")
    assert node_disk.unsynced() == Unsynced(files=1, bytes=4, directories=1, entries=1)
    assert node_disk.lose_unsynced() == Dropped(
        files=1, bytes=4, entries_removed=1, entries_restored=0
    )
    assert os.listdir(mount) == ["synced"]
    node_disk.mount()  # mounted and alive: left as it is
    assert node_disk.unmount() is True
    assert not os.path.ismount(mount)
    assert node_disk.unmount() is False


def test_a_dead_daemon_is_reported_and_its_mount_removed(node_disk: LazyDisk) -> None:
    assert node_disk.node.signal_daemon(node_disk.pidfile, "KILL")
    with pytest.raises(LazyDiskError, match="daemon is gone"):
        node_disk.check()
    broker = BrokerService(
        node_disk.node,
        broker_id=1,
        zookeeper_connect=None,
        root=str(node_disk.root),
        lazy_disk=True,
    )
    with pytest.raises(ServiceError, match=r"not started: .*did not answer status"):
        broker.start()
    node_disk.mount()  # the dead mount is replaced by a live one over the same backing
    node_disk.check()
    assert node_disk.unmount() is True
    assert not is_mounted(node_disk.mountpoint)


# --- against a model --------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c"])
BLOBS = st.binary(min_size=1, max_size=300)
OFFSETS = st.integers(min_value=0, max_value=600)


class DiskModel(RuleBasedStateMachine):
    """Random writes, truncates, renames, unlinks and fsyncs in one directory, with drops;
    the mount must always show what the model says: its current state, and after a drop, its
    durable one."""

    disk: LazyMount  # set on a subclass per mount

    def __init__(self) -> None:
        super().__init__()
        self.ids = itertools.count()
        self.current: dict[int, bytes] = {}
        self.durable: dict[int, bytes] = {}
        self.listing: dict[str, int] = {}
        self.durable_listing: dict[str, int] = {}

    @initialize(a=BLOBS, b=BLOBS)
    def start_from_two_durable_files(self, a: bytes, b: bytes) -> None:
        for name in os.listdir(self.disk.root):
            os.unlink(self.disk.root / name)
        for name, data in (("a", a), ("b", b)):
            write_synced(self.path(name), data)
            self.listing[name] = file = next(self.ids)
            self.current[file] = self.durable[file] = data
        self.durable_listing = dict(self.listing)
        self.disk.drop()

    def path(self, name: str) -> Path:
        return self.disk.root / name

    @rule(name=NAMES, data=BLOBS)
    def create(self, name: str, data: bytes) -> None:
        if name in self.listing:
            return
        self.path(name).write_bytes(data)
        self.listing[name] = file = next(self.ids)
        self.current[file], self.durable[file] = data, b""

    @rule(name=NAMES, offset=OFFSETS, data=BLOBS)
    def write(self, name: str, offset: int, data: bytes) -> None:
        if name not in self.listing:
            return
        with self.path(name).open("r+b") as handle:
            handle.seek(offset)
            handle.write(data)
        file = self.listing[name]
        old = self.current[file].ljust(offset, b"\0")
        self.current[file] = old[:offset] + data + old[offset + len(data) :]

    @rule(name=NAMES, data=BLOBS)
    def append(self, name: str, data: bytes) -> None:
        if name not in self.listing:
            return
        with self.path(name).open("ab") as handle:
            handle.write(data)
        self.current[self.listing[name]] += data

    @rule(name=NAMES, length=OFFSETS)
    def truncate(self, name: str, length: int) -> None:
        if name not in self.listing:
            return
        os.truncate(self.path(name), length)
        file = self.listing[name]
        self.current[file] = self.current[file][:length].ljust(length, b"\0")

    @rule(name=NAMES, datasync=st.booleans())
    def fsync(self, name: str, datasync: bool) -> None:
        if name not in self.listing:
            return
        fd = os.open(self.path(name), os.O_RDONLY)
        try:
            (os.fdatasync if datasync else os.fsync)(fd)
        finally:
            os.close(fd)
        file = self.listing[name]
        self.durable[file] = self.current[file]

    @rule(source=NAMES, destination=NAMES)
    def rename(self, source: str, destination: str) -> None:
        if source not in self.listing or source == destination:
            return
        os.replace(self.path(source), self.path(destination))
        self.listing[destination] = self.listing.pop(source)

    @rule(name=NAMES)
    def unlink(self, name: str) -> None:
        if name not in self.listing:
            return
        os.unlink(self.path(name))
        del self.listing[name]

    @rule()
    def fsync_directory(self) -> None:
        fsync_path(self.disk.root)
        self.durable_listing = dict(self.listing)

    @rule()
    def drop(self) -> None:
        self.disk.drop()
        self.listing = dict(self.durable_listing)
        self.current = dict(self.durable)

    @invariant()
    def the_mount_shows_the_model(self) -> None:
        assert sorted(os.listdir(self.disk.root)) == sorted(self.listing)
        for name, file in self.listing.items():
            assert self.path(name).read_bytes() == self.current[file], name


def test_the_disk_behaves_as_its_model(disk: LazyMount) -> None:
    on_this_mount = type("DiskModelOnThisMount", (DiskModel,), {"disk": disk})
    run_state_machine_as_test(
        on_this_mount,
        settings=settings(max_examples=40, stateful_step_count=30, deadline=None),
    )


# --- the local runtime ------------------------------------------------------------------


def test_a_local_cluster_on_lazy_disks_loses_the_unsynced_tail_and_unmounts_on_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    why = fuse_missing()
    if why is not None:
        pytest.skip(f"FUSE unavailable: {why}")
    monkeypatch.setenv("SQUALL_HOME", str(tmp_path / "home"))
    runtime = LocalRuntime()
    cluster = runtime.up(
        f"lazy-{uuid.uuid4().hex[:6]}",
        1,
        settings={"log.flush.interval.messages": "4"},
        lazy_disk=True,
    )
    root = runtime.root(cluster.run_id)
    try:
        assert cluster.capabilities.lazy_disk
        assert is_mounted(cluster.broker("n1").log_dir)
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topic("power", 1, replication_factor=1)
        values = [f"v{i}".encode() for i in range(10)]
        with Producer(cluster.bootstrap, acks=1) as producer:
            for value in values:
                producer.send("power", value, partition=0).result()
        disks = cluster.disks
        assert disks is not None
        assert cluster.broker("n1").kill()
        assert disks.lose_unsynced("n1")["bytes"] > 0
        cluster.broker("n1").start()
        with Consumer(cluster.bootstrap) as consumer:
            consumer.assign([("power", 0)])
            deadline = time.monotonic() + 60
            while True:  # the restarted broker leads the partition a moment after it listens
                try:
                    consumer.seek_to_beginning()
                    break
                except BrokerError:
                    assert time.monotonic() < deadline, "no leader of power-0 again in 60 s"
                    time.sleep(0.2)
            seen: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(seen) < 8 and time.monotonic() < deadline:
                seen += [r.value for r in consumer.poll(500) if r.value is not None]
            seen += [r.value for r in consumer.poll(1000) if r.value is not None]
        assert seen == values[:8]  # fsynced after the 4th and the 8th message
    finally:
        runtime.down(cluster.state)
    assert not [m for m in lazyfs_mounts() if Path(m).is_relative_to(root)]
    assert not root.exists()
