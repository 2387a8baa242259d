"""The broker's logs across its log dirs: loading at startup, placement, flushing, retention.

Each log dir holds partition directories ``<topic>-<partition>``, a
``recovery-point-offset-checkpoint`` and, after a clean shutdown, the marker file
``.squall_cleanshutdown``. A ``.lock`` file, held with ``flock`` while the broker runs, keeps a
second broker out of the same log dir.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from system_under_test.log.checkpoint import (
    RECOVERY_POINT_CHECKPOINT_FILE,
    CheckpointError,
    OffsetCheckpointFile,
    fsync_directory,
)
from system_under_test.log.log import DELETE_DIR_SUFFIX, Log, LogConfig, LogError, wall_clock_ms

CLEAN_SHUTDOWN_FILE = ".squall_cleanshutdown"
LOCK_FILE = ".lock"
MAX_TOPIC_LENGTH = 249

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_NO_TOPIC_CONFIGS: Mapping[str, LogConfig] = MappingProxyType({})

logger = logging.getLogger(__name__)


class LogDirError(LogError):
    """A log dir that cannot be used (not creatable, not writable, locked, inconsistent)."""


class InvalidTopicError(LogError, ValueError):
    """A topic name or partition number that cannot name a partition directory."""


def validate_topic_partition(topic: str, partition: int) -> None:
    """Raise InvalidTopicError unless topic and partition can name a directory (Kafka's rules)."""
    if not _TOPIC_NAME.fullmatch(topic) or topic in (".", "..") or len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic name {topic!r} is invalid: use 1 to {MAX_TOPIC_LENGTH} characters from "
            f"a-z, A-Z, 0-9, '.', '_' and '-' (and not '.' or '..')"
        )
    if partition < 0:
        raise InvalidTopicError(f"partition {partition} of topic {topic!r} is negative")


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``."""
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) from ``<topic>-<partition>`` (the topic may contain '-'), else None."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not partition.isdigit() or not partition.isascii():
        return None
    try:
        validate_topic_partition(topic, int(partition))
    except InvalidTopicError:
        return None
    return topic, int(partition)


class _LogDir:
    """One locked log dir."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.exists() and not path.is_dir():
            raise LogDirError(f"log dir {path} exists but is not a directory; fix log.dirs")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise LogDirError(
                f"cannot create log dir {path}: {err.strerror}; check log.dirs and the permissions "
                f"of its parent directory"
            ) from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise LogDirError(
                f"log dir {path} is not writable by this user; fix its permissions or log.dirs"
            )
        lock_path = path / LOCK_FILE
        try:
            self._lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise LogDirError(f"cannot open lock file {lock_path}: {err.strerror}") from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise LogDirError(
                f"log dir {path} is in use by another broker (the lock on {lock_path} is held); "
                f"stop that broker or give this one its own log.dirs"
            ) from None
        self.checkpoint = OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT_FILE)

    def unlock(self) -> None:
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1


class LogManager:
    """Every partition log of a broker, spread over its log dirs."""

    def __init__(
        self,
        log_dirs: Sequence[Path],
        default_config: LogConfig,
        *,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        if not log_dirs:
            raise LogDirError("no log dir given; set log.dirs to one or more directories")
        resolved = [Path(d).absolute() for d in log_dirs]
        if len(set(resolved)) != len(resolved):
            raise LogDirError(f"log.dirs lists a directory twice: {', '.join(map(str, log_dirs))}")
        self.log_dirs = resolved
        self.default_config = default_config
        self._clock = clock
        self._dirs: dict[Path, _LogDir] = {}
        self._logs: dict[tuple[str, int], Log] = {}
        self._logs_per_dir: dict[Path, int] = {}
        """How many logs each log dir holds, so placing a new log does not count them all."""
        self._started = False

    # -- startup and shutdown ----------------------------------------------------------------

    def startup(self, topic_configs: Mapping[str, LogConfig] = _NO_TOPIC_CONFIGS) -> None:
        """Lock every log dir and load every partition in it.

        A log dir shut down cleanly (marker file present) is loaded as is; otherwise each log
        is recovered from its checkpointed recovery point (0 when unknown).
        """
        if self._started:
            raise LogError("the log manager is already started")
        try:
            for path in self.log_dirs:
                log_dir = _LogDir(path)
                self._dirs[path] = log_dir
                self._logs_per_dir[path] = 0
                self._load_dir(log_dir, topic_configs)
        except BaseException:
            for log in self._logs.values():
                log.close()
            self._logs.clear()
            self._logs_per_dir.clear()
            self._unlock_all()
            raise
        self._started = True

    def _load_dir(self, log_dir: _LogDir, topic_configs: Mapping[str, LogConfig]) -> None:
        marker = log_dir.path / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        if clean:
            marker.unlink()
            fsync_directory(log_dir.path)
        try:
            recovery_points = log_dir.checkpoint.read()
        except CheckpointError as err:
            logger.warning("%s; recovering every log in %s from offset 0", err, log_dir.path)
            recovery_points = {}
            clean = False
        for entry in sorted(os.scandir(log_dir.path), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                logger.info("removing %s, left over by a partition deletion", entry.path)
                shutil.rmtree(entry.path)
                continue
            parsed = parse_partition_dir_name(entry.name)
            if parsed is None:
                logger.warning(
                    "ignoring %s: not a <topic>-<partition> directory; move it out of the log dir",
                    entry.path,
                )
                continue
            if parsed in self._logs:
                raise LogDirError(
                    f"partition {entry.name} is in two log dirs ({self._logs[parsed].dir.parent} and "
                    f"{log_dir.path}); remove the stale copy"
                )
            topic, _partition = parsed
            try:
                log = Log.open(
                    Path(entry.path),
                    topic_configs.get(topic, self.default_config),
                    recovery_point=recovery_points.get(parsed, 0),
                    clean_shutdown=clean,
                    clock=self._clock,
                )
            except OSError as err:
                raise LogDirError(
                    f"cannot load partition {entry.path}: {err}; fix the file's permissions or "
                    f"the disk, or move the directory out of the log dir"
                ) from err
            self._logs[parsed] = log
            self._logs_per_dir[log_dir.path] += 1
        logger.info(
            "loaded %d log(s) from %s after a%s shutdown",
            self._logs_per_dir[log_dir.path],
            log_dir.path,
            " clean" if clean else "n unclean",
        )

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint recovery points, mark the dirs clean, unlock."""
        failed: set[Path] = set()
        for key, log in list(self._logs.items()):
            try:
                log.close()
            except OSError as err:
                failed.add(log.dir.parent)
                logger.error("cannot close log %s-%d cleanly: %s", key[0], key[1], err)
        for path, log_dir in self._dirs.items():
            if path in failed:
                continue
            try:
                log_dir.checkpoint.write(self._recovery_points(path))
                marker = path / CLEAN_SHUTDOWN_FILE
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.fsync(fd)
                os.close(fd)
                fsync_directory(path)
            except OSError as err:
                logger.error("cannot mark %s as cleanly shut down: %s", path, err)
        self._logs.clear()
        self._logs_per_dir.clear()
        self._unlock_all()
        self._started = False

    def _unlock_all(self) -> None:
        for log_dir in self._dirs.values():
            log_dir.unlock()
        self._dirs.clear()

    # -- logs --------------------------------------------------------------------------------

    def _check_started(self) -> None:
        if not self._started:
            raise LogError("the log manager is not started; call startup() first")

    def get_log(self, topic: str, partition: int) -> Log | None:
        """The log of a partition, None if this broker has none."""
        return self._logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created empty in the log dir holding the fewest partitions.

        A log loaded at start-up was opened with the broker's defaults, before anyone could
        say which topic settings apply; given `config`, an existing log takes it.
        """
        self._check_started()
        existing = self._logs.get((topic, partition))
        if existing is not None:
            if config is not None and existing.config != config:
                existing.update_config(config)
            return existing
        validate_topic_partition(topic, partition)
        target = min(self._dirs, key=lambda p: self._logs_per_dir[p])
        directory = target / partition_dir_name(topic, partition)
        try:
            directory.mkdir()
        except FileExistsError:
            pass
        except OSError as err:
            raise LogDirError(f"cannot create {directory}: {err.strerror}") from None
        fsync_directory(target)
        log = Log.open(
            directory,
            config or self.default_config,
            recovery_point=0,
            clean_shutdown=False,
            clock=self._clock,
        )
        self._logs[(topic, partition)] = log
        self._logs_per_dir[target] += 1
        return log

    def all_logs(self) -> dict[tuple[str, int], Log]:
        """Every log by (topic, partition)."""
        return dict(self._logs)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close and remove a partition's log; False if there was none."""
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return False
        self._logs_per_dir[log.dir.parent] -= 1
        log.delete()
        return True

    # -- periodic work -----------------------------------------------------------------------

    def flush_due_logs(self, now_ms: int) -> int:
        """Flush the logs whose oldest unflushed data is flush.ms old; return how many."""
        return sum(1 for log in list(self._logs.values()) if log.maybe_flush(now_ms))

    def cleanup_logs(self, now_ms: int) -> int:
        """Apply retention to every log; return the number of segments deleted."""
        return sum(log.delete_old_segments(now_ms) for log in list(self._logs.values()))

    def checkpoint_recovery_points(self) -> None:
        """Write each log dir's recovery-point-offset-checkpoint."""
        for path, log_dir in self._dirs.items():
            log_dir.checkpoint.write(self._recovery_points(path))

    def _recovery_points(self, path: Path) -> dict[tuple[str, int], int]:
        return {
            key: log.recovery_point for key, log in self._logs.items() if log.dir.parent == path
        }
