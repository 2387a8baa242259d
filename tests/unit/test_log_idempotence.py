"""The log's idempotent producers: duplicates answered with their first offsets, sequences
checked, and the state rebuilt after a restart, a crash and a truncation."""

from __future__ import annotations

from pathlib import Path

import pytest

from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.log import Log, LogConfig
from system_under_test.log.record import decode_records, encode_records

PRODUCER = 4000


def batch(sequence: int, count: int = 2, *, producer: int = PRODUCER, epoch: int = 0) -> bytearray:
    return bytearray(
        encode_records(
            [(None, b"s%d" % (sequence + i), 1000) for i in range(count)],
            producer_id=producer,
            producer_epoch=epoch,
            base_sequence=sequence,
        )
    )


def open_log(path: Path, *, clean: bool = True, segment_bytes: int = 1 << 20) -> Log:
    return Log.open(
        path / "t-0",
        LogConfig(segment_bytes=segment_bytes),
        recovery_point=0,
        clean_shutdown=clean,
    )


def values(log: Log) -> list[bytes | None]:
    return [r.value for r in decode_records(log.read(log.log_start_offset, 1 << 20).records)]


def refusal(log: Log, data: bytearray) -> ErrorCode:
    end = log.log_end_offset
    with pytest.raises(BrokerError) as raised:
        log.append(data)
    assert log.log_end_offset == end, "nothing of a refused batch is written"
    return raised.value.code


def test_a_retried_batch_is_answered_with_its_first_offsets_and_not_written_again(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    first = log.append(batch(0))
    log.append(batch(2))
    again = log.append(batch(0))
    assert again.duplicate and (again.first_offset, again.last_offset) == (0, 1)
    assert (first.first_offset, first.last_offset) == (0, 1) and not first.duplicate
    assert log.log_end_offset == 4
    assert values(log) == [b"s0", b"s1", b"s2", b"s3"]


def test_sequences_out_of_order_unknown_producers_and_fenced_epochs_are_refused(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    assert refusal(log, batch(5)) == ErrorCode.UNKNOWN_PRODUCER_ID
    log.append(batch(0))
    assert refusal(log, batch(3)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert refusal(log, batch(1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.append(batch(0, epoch=1))  # a new epoch starts from 0
    assert refusal(log, batch(2, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH
    log.append(batch(0, producer=PRODUCER + 1))  # another producer has its own sequence


def test_the_state_survives_a_clean_restart_and_a_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)  # several rolls: snapshots on the way
    for sequence in range(0, 20, 2):
        log.append(batch(sequence))
    log.close()
    assert list((tmp_path / "t-0").glob("*.snapshot"))

    reopened = open_log(tmp_path, segment_bytes=300)
    assert reopened.append(batch(18)).duplicate
    reopened.append(batch(20))
    # A crash: no close, so the newest snapshot is older than the log end.
    crashed = open_log(tmp_path, clean=False, segment_bytes=300)
    assert crashed.append(batch(20)).duplicate
    assert crashed.append(batch(22)).first_offset == 22


def test_a_follower_keeps_the_state_and_a_truncation_takes_back_what_it_removed(
    tmp_path: Path,
) -> None:
    follower = open_log(tmp_path)
    for base, sequence in ((0, 0), (2, 2), (4, 4)):
        data = batch(sequence)
        data[0:8] = base.to_bytes(8, "big")  # the leader's offsets
        follower.append(data, assign_offsets=False)
    assert follower.append(batch(4)).duplicate  # now leading: it knows the producer
    follower.truncate_to(4)
    again = follower.append(batch(4))  # what the truncation removed is written again
    assert not again.duplicate and again.first_offset == 4
    assert values(follower) == [b"s0", b"s1", b"s2", b"s3", b"s4", b"s5"]


def test_a_log_emptied_to_start_elsewhere_forgets_its_producers(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for sequence in range(0, 10, 2):
        log.append(batch(sequence))
    log.truncate_fully_and_start_at(50)  # a follower far behind its leader's log start
    assert not list((tmp_path / "t-0").glob("*.snapshot"))
    assert refusal(log, batch(8)) == ErrorCode.UNKNOWN_PRODUCER_ID  # not a "duplicate"
    log.close()
    assert open_log(tmp_path, segment_bytes=300).producer_state.entry(PRODUCER) is None
