"""The idempotent producers' state of a partition: sequence checks, duplicates answered with
the first write's offsets, epochs, and snapshots that survive a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.log.producer_state import (
    BATCHES_RETAINED,
    MAX_SEQUENCE,
    ProducerBatch,
    ProducerStateManager,
    snapshot_path,
)
from system_under_test.producer_ids import FileBlockClaim, ProducerIdManager


def batch(
    first_seq: int, count: int = 2, *, at: int = -1, pid: int = 7, epoch: int = 0
) -> ProducerBatch:
    """A batch of ``count`` records from sequence ``first_seq``, written at offset ``at``."""
    return ProducerBatch(pid, epoch, first_seq, first_seq + count - 1, at, at + count - 1, 1_000)


def write(state: ProducerStateManager, b: ProducerBatch) -> ProducerBatch:
    """What a leader does: check, then (unless a duplicate) append at the log's end."""
    assert state.check(b) is None
    written = ProducerBatch(
        b.producer_id,
        b.epoch,
        b.first_sequence,
        b.last_sequence,
        state.end_offset,
        state.end_offset + b.last_sequence - b.first_sequence,
        b.max_timestamp,
    )
    state.update(written)
    return written


def refused(state: ProducerStateManager, b: ProducerBatch) -> ErrorCode:
    with pytest.raises(BrokerError) as caught:
        state.check(b)
    return caught.value.code


def test_sequences_in_order_are_accepted_and_gaps_refused(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    write(state, batch(0))
    write(state, batch(2, 3))
    assert state.entry(7) is not None and state.entry(7).last_sequence == 4  # type: ignore[union-attr]
    assert refused(state, batch(6)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # 5 is missing
    assert refused(state, batch(3)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # overlaps
    write(state, batch(5))


def test_a_retried_batch_gets_the_offsets_it_was_first_written_at(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    first = write(state, batch(0))
    for i in range(1, BATCHES_RETAINED):
        write(state, batch(2 * i))
    assert state.check(batch(0)) == first  # the oldest of the last five
    write(state, batch(2 * BATCHES_RETAINED))
    # six batches on, the first is forgotten: a retry of it is out of order, not a duplicate
    assert refused(state, batch(0)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_producer_unknown_here_must_start_at_sequence_zero(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    assert refused(state, batch(4)) is ErrorCode.UNKNOWN_PRODUCER_ID
    write(state, batch(0, pid=8))
    assert refused(state, batch(4)) is ErrorCode.UNKNOWN_PRODUCER_ID  # another producer's state


def test_epochs_fence_old_producers_and_restart_sequences(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    write(state, batch(0, epoch=1))
    assert refused(state, batch(2, epoch=0)) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert refused(state, batch(2, epoch=2)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    write(state, batch(0, epoch=2))
    assert refused(state, batch(0, epoch=1)) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert state.check(batch(0, epoch=2)) is not None  # a duplicate in the new epoch


def test_sequences_wrap_after_the_largest_int32(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update(ProducerBatch(7, 0, MAX_SEQUENCE - 1, MAX_SEQUENCE, 0, 1, 0))
    write(state, batch(0))


def test_followers_keep_the_leaders_state_without_checking(tmp_path: Path) -> None:
    follower = ProducerStateManager(tmp_path)
    follower.update(batch(10, at=0))  # a leader accepted it; the follower only records it
    assert follower.entry(7) is not None and follower.end_offset == 2
    assert follower.check(batch(10)) is not None


def test_a_snapshot_restores_the_state_and_the_log_replays_the_rest(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    write(state, batch(0))
    write(state, batch(0, pid=9))
    state.take_snapshot()
    after = write(state, batch(2))

    restarted = ProducerStateManager(tmp_path)
    assert restarted.load(log_end_offset=after.last_offset + 1) == 4
    assert restarted.entry(9) is not None and restarted.entry(7).last_sequence == 1  # type: ignore[union-attr]
    restarted.replay([after], after.last_offset + 1)
    assert restarted.check(batch(2)) == after
    write(restarted, batch(4))


def test_snapshots_beyond_a_truncated_end_are_dropped(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    write(state, batch(0))
    state.take_snapshot()  # at 2
    write(state, batch(2))
    state.take_snapshot()  # at 4
    assert state.load(log_end_offset=3) == 2  # truncated to 3: the snapshot at 4 is gone
    assert state.snapshots() == [2]
    assert state.entry(7).last_sequence == 1  # type: ignore[union-attr]
    assert state.load(log_end_offset=1) == 0 and state.entry(7) is None


def test_a_damaged_snapshot_is_skipped_for_an_older_one(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    write(state, batch(0))
    state.take_snapshot()
    write(state, batch(2))
    newest = state.take_snapshot()
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0x10
    newest.write_bytes(bytes(data))
    assert ProducerStateManager(tmp_path).load(log_end_offset=4) == 2
    assert not newest.exists()


def test_only_the_newest_snapshots_are_kept(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for seq in range(0, 8, 2):
        write(state, batch(seq))
        state.take_snapshot()
    assert state.snapshots() == [6, 8]
    assert snapshot_path(tmp_path, 8).name == "00000000000000000008.snapshot"


def test_a_standalone_broker_claims_blocks_in_its_log_dir(tmp_path: Path) -> None:
    ids = ProducerIdManager(FileBlockClaim(tmp_path), block_size=3)
    assert [ids.next_id() for _ in range(4)] == [0, 1, 2, 3]
    restarted = ProducerIdManager(FileBlockClaim(tmp_path), block_size=3)
    assert restarted.next_id() == 6  # the block 3-5 was claimed before the restart
    (tmp_path / "producer-id-block.json").write_text("{")
    with pytest.raises(ValueError, match="damaged"):
        ProducerIdManager(FileBlockClaim(tmp_path)).next_id()
