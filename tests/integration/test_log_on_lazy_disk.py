"""The log on a disk that loses what was not fsynced: a power loss must not undo a truncation.

Found by `leader-power-loss` (run 303 of the disks bench, min.insync.replicas=1): a follower
cut a diverged record, fetched the leader's record at that offset, and lost power before
anything was fsynced. The cut came back with the power, the leader epoch checkpoint already
described the shorter log, and the replica rejoined holding the old epoch's record below the
high watermark, where its peers held another.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from system_under_test.log import Log, LogConfig
from system_under_test.log.checkpoint import fsync_directory
from system_under_test.log.record import Record, decode_records, encode_records
from system_under_test.replication.leader_epoch_cache import LeaderEpochCache
from tests.integration.lazyfs_mount import LazyMount, lazy_mount

pytestmark = pytest.mark.integration


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[LazyMount]:
    with lazy_mount(tmp_path) as mounted:
        yield mounted
        for log in OPENED:  # open files would keep the mount busy
            log.close()
        OPENED.clear()


OPENED: list[Log] = []


def batch(values: list[bytes]) -> bytearray:
    return bytearray(encode_records([(None, v, 1000 + i) for i, v in enumerate(values)]))


def open_log(directory: Path, *, segment_bytes: int = 1 << 20) -> Log:
    """The log as a broker opens it after a crash: everything past the checkpoint revalidated
    (its directory made durable first, as the log manager does)."""
    directory.mkdir(exist_ok=True)
    fsync_directory(directory.parent)
    log = Log.open(
        directory, LogConfig(segment_bytes=segment_bytes), recovery_point=0, clean_shutdown=False
    )
    OPENED.append(log)
    return log


def values(log: Log) -> list[bytes]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        records = decode_records(log.read(offset, 1 << 20).records)
        out.extend(records)
        offset = records[-1].offset + 1
    return [r.value or b"" for r in out]


def power_loss(disk: LazyMount, log: Log) -> None:
    """The process dies without a flush and the disk drops what was not fsynced."""
    for segment in log.segments:
        segment.close()  # closes the files; fsyncs nothing of the log
    OPENED.remove(log)
    disk.drop()


def test_a_truncation_outlives_a_power_loss(disk: LazyMount) -> None:
    directory = disk.root / "squall-queue-1"
    log = open_log(directory)
    cache = LeaderEpochCache(directory)
    cache.assign(3, 0)
    log.append(batch([b"a", b"b", b"c"]), assign_offsets=True)
    log.append(batch([b"old-at-3"]), assign_offsets=True)
    log.flush()  # a roll or the flush policy made offsets 0-3 durable

    log.truncate_to(3)  # the follower drops what its new leader never had
    cache.truncate_from_end(3)
    cache.assign(4, 3)  # the leader's epoch-4 record at offset 3, fetched, not fsynced
    log.append(batch([b"new-at-3"]), assign_offsets=True)
    power_loss(disk, log)

    after = open_log(directory)
    cache_after = LeaderEpochCache(directory)
    cache_after.truncate_from_end(after.log_end_offset)
    assert values(after) == [b"a", b"b", b"c"], (
        "the record cut at offset 3 came back after the power loss, while the epoch "
        f"checkpoint says {cache_after.entries}"
    )
    assert cache_after.entries == [(3, 0)]


def test_segments_a_truncation_removed_stay_removed(disk: LazyMount) -> None:
    directory = disk.root / "squall-queue-0"
    log = open_log(directory, segment_bytes=300)
    for i in range(12):
        log.append(batch([f"record-{i:02}".encode() * 4]), assign_offsets=True)
    log.flush()
    assert len(log.segments) > 2
    cut = log.segments[1].base_offset + 1

    log.truncate_to(cut)
    power_loss(disk, log)

    after = open_log(directory, segment_bytes=300)
    assert after.log_end_offset == cut
    assert [s.base_offset for s in after.segments] == [s.base_offset for s in log.segments]


def test_a_full_truncation_outlives_a_power_loss(disk: LazyMount) -> None:
    directory = disk.root / "squall-queue-2"
    log = open_log(directory)
    log.append(batch([b"x"] * 5), assign_offsets=True)
    log.flush()

    log.truncate_fully_and_start_at(40)  # behind the leader's log start: start over there
    power_loss(disk, log)

    after = open_log(directory)
    assert (after.log_start_offset, after.log_end_offset) == (40, 40)
