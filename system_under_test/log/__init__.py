"""The storage engine: records, segments, offset and time indexes, recovery, checkpoints."""

from system_under_test.log.checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    CheckpointError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from system_under_test.log.index_file import CorruptIndexError
from system_under_test.log.log import (
    AppendInfo,
    FetchData,
    InvalidOffsetError,
    Log,
    LogConfig,
    LogError,
    NonMonotonicOffsetError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from system_under_test.log.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    InvalidTopicError,
    LogDirError,
    LogManager,
)
from system_under_test.log.offset_index import OffsetIndex
from system_under_test.log.record import CorruptRecordError, Record
from system_under_test.log.recovery import RecoveryReport, SegmentRecovery
from system_under_test.log.segment import LogSegment
from system_under_test.log.time_index import TimeIndex

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "REPLICATION_OFFSET_CHECKPOINT_FILE",
    "AppendInfo",
    "CheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "FetchData",
    "InvalidOffsetError",
    "InvalidTopicError",
    "LeaderEpochCheckpointFile",
    "Log",
    "LogConfig",
    "LogDirError",
    "LogError",
    "LogManager",
    "LogSegment",
    "NonMonotonicOffsetError",
    "OffsetCheckpointFile",
    "OffsetIndex",
    "OffsetOutOfRangeError",
    "Record",
    "RecordTooLargeError",
    "RecoveryReport",
    "SegmentRecovery",
    "TimeIndex",
]
