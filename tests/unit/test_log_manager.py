"""LogManager: startup after clean and unclean shutdowns, placement, locking, periodic work."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from system_under_test.log import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    InvalidTopicError,
    LogConfig,
    LogDirError,
    LogManager,
    OffsetCheckpointFile,
)
from system_under_test.log.log_manager import parse_partition_dir_name
from system_under_test.log.record import decode_records, encode_records

CONFIG = LogConfig(segment_bytes=1000)


def batch(count: int, timestamp: int = 1000) -> bytearray:
    return bytearray(encode_records([(None, b"v" * 66, timestamp) for _ in range(count)]))


def started(dirs: list[Path], config: LogConfig = CONFIG, **topic_configs: LogConfig) -> LogManager:
    manager = LogManager(dirs, config, clock=lambda: 5_000)
    manager.startup(topic_configs)
    return manager


def test_partition_dir_names_split_at_the_last_dash() -> None:
    assert parse_partition_dir_name("orders-eu-west-12") == ("orders-eu-west", 12)
    assert parse_partition_dir_name("t-0") == ("t", 0)
    assert parse_partition_dir_name("t--1") == ("t-", 1)
    for name in ["orders", "orders-", "-3", "orders-x", "bad name-1", "lost+found"]:
        assert parse_partition_dir_name(name) is None, name


def test_clean_shutdown_and_reload(tmp_path: Path) -> None:
    manager = started([tmp_path])
    log = manager.get_or_create_log("orders-eu", 3)
    for _ in range(7):
        log.append(batch(2))
    manager.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).read() == {
        ("orders-eu", 3): 14
    }

    manager = started([tmp_path])
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # removed while the broker runs
    reloaded = manager.get_log("orders-eu", 3)
    assert reloaded is not None
    assert reloaded.log_end_offset == 14
    assert reloaded.recovery_report.clean_shutdown
    assert reloaded.recovery_report.recovered == []
    manager.shutdown()


def test_unclean_shutdown_recovers_from_the_checkpointed_recovery_point(tmp_path: Path) -> None:
    manager = started([tmp_path], LogConfig(segment_bytes=400))
    log = manager.get_or_create_log("t", 0)
    for _ in range(4):
        log.append(batch(4))  # 357-byte batches: segments at 0, 4, 8, 12 (rolls fsync)
    manager.checkpoint_recovery_points()
    assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).read() == {("t", 0): 12}
    log.append(batch(1))  # a fifth segment, at 16
    log.append(batch(1))
    # Simulate SIGKILL: no shutdown, locks released as the process would release them.
    manager._unlock_all()
    active = tmp_path / "t-0" / f"{16:020d}.log"
    active.write_bytes(active.read_bytes()[:-10])  # the last write was torn

    manager = started([tmp_path], LogConfig(segment_bytes=400))
    recovered = manager.get_log("t", 0)
    assert recovered is not None
    report = recovered.recovery_report
    assert not report.clean_shutdown
    assert [r.base_offset for r in report.recovered] == [12, 16]
    assert recovered.log_end_offset == 17
    assert [r.offset for r in decode_records(recovered.read(16, 10_000).records)] == [16]
    manager.shutdown()


def _append_then_hang(path: str, queue: multiprocessing.Queue[int]) -> None:
    manager = LogManager([Path(path)], LogConfig(segment_bytes=3000))
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    for _ in range(20):
        log.append(batch(7))
    queue.put(log.log_end_offset)
    time.sleep(120)


def test_sigkilled_broker_loses_no_appended_record(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[int] = context.Queue()
    process = context.Process(target=_append_then_hang, args=(str(tmp_path), queue))
    process.start()
    try:
        acknowledged = queue.get(timeout=60)
    finally:
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        process.join(30)
    assert acknowledged == 140
    manager = started([tmp_path], LogConfig(segment_bytes=3000))
    log = manager.get_log("t", 0)
    assert log is not None
    assert not log.recovery_report.clean_shutdown
    assert log.log_end_offset == 140
    offsets: list[int] = []
    while len(offsets) < 140:
        offsets += [r.offset for r in decode_records(log.read(len(offsets), 10_000).records)]
    assert offsets == list(range(140))
    manager.shutdown()


def test_logs_without_a_checkpoint_are_recovered_from_zero(tmp_path: Path) -> None:
    manager = started([tmp_path])
    manager.get_or_create_log("t", 1).append(batch(20))
    manager._unlock_all()  # crash before any checkpoint
    manager = started([tmp_path])
    log = manager.get_log("t", 1)
    assert log is not None
    assert [r.base_offset for r in log.recovery_report.recovered] == [0]
    assert log.log_end_offset == 20
    manager.shutdown()


def test_corrupt_recovery_checkpoint_means_full_recovery(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = started([tmp_path])
    manager.get_or_create_log("t", 0).append(batch(3))
    manager.shutdown()
    (tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).write_text("0\n5\nt 0 3\n")
    manager = started([tmp_path])
    log = manager.get_log("t", 0)
    assert log is not None
    assert [r.base_offset for r in log.recovery_report.recovered] == [0]
    assert "says 5 entries" in caplog.text
    manager.shutdown()


def test_new_logs_go_to_the_dir_with_fewest_partitions(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    manager = started(dirs)
    for p in range(6):
        manager.get_or_create_log("t", p)
    placement = {tp: log.dir.parent.name for tp, log in manager.all_logs().items()}
    assert sorted(placement.values()) == ["a", "a", "b", "b", "c", "c"]
    manager.shutdown()
    (dirs[0] / "t-0").rename(dirs[2] / "t-0")  # c now holds 3, a holds 1
    manager = started(dirs)
    assert manager.get_or_create_log("u", 0).dir.parent == dirs[0]
    manager.shutdown()


def test_get_or_create_returns_the_existing_log(tmp_path: Path) -> None:
    manager = started([tmp_path])
    first = manager.get_or_create_log("t", 0)
    first.append(batch(1))
    assert manager.get_or_create_log("t", 0, LogConfig(segment_bytes=5000)) is first
    assert manager.get_log("t", 1) is None
    with pytest.raises(InvalidTopicError):
        manager.get_or_create_log("no spaces", 0)
    with pytest.raises(InvalidTopicError):
        manager.get_or_create_log("t", -1)
    manager.shutdown()


def test_topic_configs_apply_on_startup(tmp_path: Path) -> None:
    manager = started([tmp_path])
    manager.get_or_create_log("big", 0)
    manager.get_or_create_log("small", 0)
    manager.shutdown()
    manager = started([tmp_path], small=LogConfig(segment_bytes=2048))
    assert manager.get_log("small", 0).config.segment_bytes == 2048  # type: ignore[union-attr]
    assert manager.get_log("big", 0).config == CONFIG  # type: ignore[union-attr]
    manager.shutdown()


def test_a_log_loaded_with_the_defaults_takes_its_topic_config_when_asked_for(
    tmp_path: Path,
) -> None:
    """A broker loads its logs before the controller says which topic settings apply; the
    settings given later must replace the defaults (a restarted broker once kept
    min.insync.replicas=1 and the default segment size for good)."""
    manager = started([tmp_path])
    manager.get_or_create_log("t", 0).append(batch(1))
    manager.shutdown()
    manager = started([tmp_path])
    loaded = manager.get_log("t", 0)
    assert loaded is not None and loaded.config == CONFIG
    topic = LogConfig(segment_bytes=2048, min_insync_replicas=2, flush_messages=1)
    assert manager.get_or_create_log("t", 0, topic) is loaded
    assert loaded.config == topic
    assert manager.get_or_create_log("t", 0) is loaded and loaded.config == topic
    manager.shutdown()


def test_same_partition_in_two_dirs_is_an_error(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        (d / "t-0").mkdir(parents=True)
    with pytest.raises(LogDirError, match="two log dirs"):
        started(dirs)
    started(dirs[:1]).shutdown()  # the failed startup released its locks


def test_stray_directories_are_ignored_and_deletions_finished(tmp_path: Path) -> None:
    (tmp_path / "lost+found").mkdir()
    leftover = tmp_path / "t-0.0123abcd-delete"
    leftover.mkdir()
    (leftover / f"{0:020d}.log").write_bytes(b"")
    manager = started([tmp_path])
    assert manager.all_logs() == {}
    assert not leftover.exists()
    assert (tmp_path / "lost+found").exists()
    manager.shutdown()


def _try_lock(path: str, queue: multiprocessing.Queue[str]) -> None:
    try:
        LogManager([Path(path)], CONFIG).startup()
        queue.put("started")
    except LogDirError as err:
        queue.put(str(err))


def test_a_second_broker_cannot_use_a_locked_log_dir(tmp_path: Path) -> None:
    manager = started([tmp_path])
    with pytest.raises(LogDirError, match="in use by another broker"):
        started([tmp_path])
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[str] = context.Queue()
    process = context.Process(target=_try_lock, args=(str(tmp_path), queue))
    process.start()
    process.join(60)
    assert "in use by another broker" in queue.get(timeout=5)
    manager.shutdown()
    started([tmp_path]).shutdown()  # free again after shutdown


def test_unusable_log_dir_is_a_clear_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(LogDirError, match="cannot create log dir"):
        started([not_a_dir / "logs"])
    with pytest.raises(LogDirError, match="not a directory"):
        started([not_a_dir])
    with pytest.raises(LogDirError, match="twice"):
        LogManager([tmp_path / "a", tmp_path / "a"], CONFIG)


def test_missing_log_dirs_are_created(tmp_path: Path) -> None:
    manager = started([tmp_path / "deep" / "logs"])
    assert (tmp_path / "deep" / "logs" / ".lock").exists()
    manager.shutdown()


def test_delete_log_removes_its_directory(tmp_path: Path) -> None:
    manager = started([tmp_path])
    manager.get_or_create_log("t", 0).append(batch(2))
    assert manager.delete_log("t", 0)
    assert not manager.delete_log("t", 0)
    assert not (tmp_path / "t-0").exists()
    manager.shutdown()
    assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).read() == {}


def test_flush_due_logs_uses_flush_ms(tmp_path: Path) -> None:
    manager = started([tmp_path], LogConfig(flush_ms=1000))
    a = manager.get_or_create_log("a", 0)
    b = manager.get_or_create_log("b", 0)
    a.append(batch(2))  # the clock says 5000
    assert manager.flush_due_logs(5_999) == 0
    assert manager.flush_due_logs(6_000) == 1
    assert (a.recovery_point, b.recovery_point) == (2, 0)
    manager.shutdown()


def test_cleanup_logs_applies_retention(tmp_path: Path) -> None:
    manager = started([tmp_path], LogConfig(segment_bytes=200, retention_ms=100))
    log = manager.get_or_create_log("t", 0)
    for ts in (1000, 1000, 5000):
        log.append(batch(2, timestamp=ts))
    assert manager.cleanup_logs(now_ms=1101) == 2
    assert log.log_start_offset == 4
    manager.shutdown()
