from __future__ import annotations

from pathlib import Path

from system_under_test.replication.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    LeaderEpochCache,
)


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


def test_unknown_epoch_is_undefined(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.end_offset_for(3, 10) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    cache.assign(4, 7)
    assert cache.end_offset_for(3, 10) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


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
