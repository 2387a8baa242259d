from __future__ import annotations

from pathlib import Path

from system_under_test.log import LogConfig
from system_under_test.log.log import Log
from system_under_test.log.record import encode_records
from system_under_test.replication.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    LeaderEpochCache,
)
from system_under_test.replication.partition import Partition


def test_end_offset_of_an_epoch_is_the_start_of_the_next(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(2, 10)
    cache.assign(5, 25)
    assert cache.end_offset_for(0, 40) == (0, 10)
    assert cache.end_offset_for(1, 40) == (0, 10)  # KIP-279: the largest epoch <= requested
    assert cache.end_offset_for(2, 40) == (2, 25)
    assert cache.end_offset_for(5, 40) == (5, 40)
    assert cache.end_offset_for(7, 40) == (5, 40)


def test_no_epoch_known_is_undefined(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.end_offset_for(3, 10) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def test_an_epoch_older_than_any_known_ends_where_the_first_known_starts(
    tmp_path: Path,
) -> None:
    """As Kafka answers: the leader holds nothing of that epoch any more, so a follower must
    truncate to where the leader's first known epoch starts. Before, the answer was
    undefined, the follower fell back to its high watermark and kept records the leader no
    longer had: a leader that lost its log with its power and was elected again (epoch 3
    from offset 0) left its followers' old offsets 0-8 below the high watermark, diverged
    (the detection bench, acks1, seed 50507)."""
    cache = LeaderEpochCache(tmp_path)
    cache.assign(4, 7)
    assert cache.end_offset_for(3, 10) == (3, 7)
    (tmp_path / "emptied").mkdir()
    emptied = LeaderEpochCache(tmp_path / "emptied")
    emptied.assign(3, 0)
    assert emptied.end_offset_for(1, 12) == (1, 0)


def test_persisted_and_reloaded(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    cache.assign(3, 4)
    again = LeaderEpochCache(tmp_path)
    assert again.entries == [(1, 0), (3, 4)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text().splitlines()[:2] == ["0", "2"]


def test_truncation_from_end_and_start(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in [(0, 0), (1, 5), (2, 9)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(9)
    assert cache.entries == [(0, 0), (1, 5)]
    cache.truncate_from_start(7)
    assert cache.entries == [(1, 7)]
    assert cache.epoch_for_offset(8) == 1
    assert cache.epoch_for_offset(3) == UNDEFINED_EPOCH


def test_assign_drops_contradicted_entries_and_ignores_stale_epochs(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(1, 10)
    cache.assign(3, 8)  # a new epoch starting below epoch 1's start: epoch 1 never held data
    assert cache.entries == [(0, 0), (3, 8)]
    cache.assign(2, 20)
    assert cache.entries == [(0, 0), (3, 8)]
    assert cache.latest_epoch == 3


def test_a_partition_opened_on_a_shorter_log_forgets_the_epochs_beyond_it(tmp_path: Path) -> None:
    """Recovery cut the log's tail after the cache was written: the epochs that started in
    the lost tail must not be offered to followers (OffsetsForLeaderEpoch) as if present."""
    log = Log.open(tmp_path, LogConfig(), recovery_point=0, clean_shutdown=False)
    log.append(
        bytearray(encode_records([(None, b"v", 1000) for _ in range(5)])), assign_offsets=True
    )
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(1, 3)
    cache.assign(2, 9)  # written before a crash took offsets 5.. away
    Partition("t", 0, log, local_broker_id=1, epoch_cache=cache)
    assert cache.entries == [(0, 0), (1, 3)]
    assert LeaderEpochCache(tmp_path).entries == [(0, 0), (1, 3)]
    log.close()
