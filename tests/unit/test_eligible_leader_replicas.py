"""Eligible leader replicas (KIP-966) on the leader's side: the ELR a shrink or expansion
writes, and a high watermark that stands still while the ISR is below min.insync.replicas;
the state znode that carries them."""

from __future__ import annotations

from pathlib import Path

from system_under_test.errors import ErrorCode
from system_under_test.replication.eligible_leader_replicas import (
    effective_min_isr,
    elr_after_isr_change,
)
from system_under_test.replication.partition import Partition
from system_under_test.zookeeper import LeaderAndIsr
from tests.unit.test_log import batch, make_log

LAG_MS = 10_000


def test_a_shrink_below_the_minimum_makes_the_removed_members_eligible() -> None:
    assert elr_after_isr_change((1, 2, 3), (1,), (), 2) == (2, 3)


def test_a_member_removed_while_the_minimum_held_is_not_eligible() -> None:
    # 2 left while {1, 3} still committed: it may lack what was committed after.
    assert elr_after_isr_change((1, 2, 3), (1, 3), (), 2) == ()
    assert elr_after_isr_change((1, 3), (1,), (), 2) == (3,)


def test_a_rejoining_member_leaves_and_the_minimum_empties_the_elr() -> None:
    assert elr_after_isr_change((1,), (1, 2), (2, 3), 3) == (3,)
    assert elr_after_isr_change((1,), (1, 2), (2, 3), 2) == ()


def test_the_minimum_is_capped_by_the_replication_factor() -> None:
    assert effective_min_isr(2, 1) == 1
    assert effective_min_isr(2, 3) == 2
    assert effective_min_isr(1, 3) == 1


def leader(tmp_path: Path, min_insync: int) -> Partition:
    log = make_log(tmp_path / "t-0", min_insync_replicas=min_insync)
    log.append(batch(10))
    partition = Partition("t", 0, log, local_broker_id=1, replicas=[1, 2, 3], isr=[1, 2, 3])
    partition.make_leader(
        leader_epoch=0,
        isr=[1, 2, 3],
        replicas=[1, 2, 3],
        zk_version=0,
        lag_time_max_ms=LAG_MS,
        lag_max_messages=0,
        now_ms=0,
    )
    partition.on_follower_fetch(2, 10, now_ms=1)
    partition.on_follower_fetch(3, 10, now_ms=1)
    assert partition.high_watermark == 10
    return partition


def test_the_leader_names_its_lagging_followers_eligible(tmp_path: Path) -> None:
    partition = leader(tmp_path, 2)
    change = partition.maybe_shrink_isr(now_ms=LAG_MS + 5)
    assert change is not None and change.isr == (1,) and change.elr == (2, 3)
    partition.apply_isr(change.isr, change.elr, 1)
    assert partition.elr == (2, 3)


def test_below_the_minimum_the_high_watermark_stands_still(tmp_path: Path) -> None:
    partition = leader(tmp_path, 2)
    partition.apply_isr((1,), (2, 3), 1)
    info = partition.append_as_leader(batch(5, base=10), required_acks=1)
    assert partition.log_end_offset == 15 and partition.high_watermark == 10
    # An acks=-1 write caught by the shrink is answered at once, not left to time out.
    assert partition.check_committed(info.last_offset) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    # Follower 2 catches up and rejoins: the ISR is back at the minimum, the ELR empty.
    change = partition.on_follower_fetch(2, 15, now_ms=LAG_MS + 10)
    assert change is not None and change.isr == (1, 2) and change.elr == ()
    partition.apply_isr(change.isr, change.elr, 2)
    assert partition.high_watermark == 15


def test_with_a_minimum_of_one_an_isr_of_one_still_commits(tmp_path: Path) -> None:
    partition = leader(tmp_path, 1)
    change = partition.maybe_shrink_isr(now_ms=LAG_MS + 5)
    assert change is not None and change.isr == (1,) and change.elr == ()
    partition.apply_isr(change.isr, change.elr, 1)
    partition.append_as_leader(batch(5, base=10), required_acks=1)
    assert partition.high_watermark == 15


def test_the_state_znode_carries_the_elr_and_old_ones_load_without_it() -> None:
    state = LeaderAndIsr(1, 4, (1,), 2, (2, 3))
    assert LeaderAndIsr.from_json(state.to_json(), "/s") == state
    old = b'{"version": 1, "leader": 1, "leader_epoch": 4, "controller_epoch": 2, "isr": [1]}'
    assert LeaderAndIsr.from_json(old, "/s") == LeaderAndIsr(1, 4, (1,), 2)


def test_a_leader_that_stops_leading_counts_it_whatever_its_epochs(tmp_path: Path) -> None:
    """`leaderships_ended` tells a leader that led without a break (a new epoch after an
    ISR change) from one that was a follower or fenced in between (the group coordinator
    keeps its groups only in the first case)."""
    partition = leader(tmp_path, 2)
    assert partition.leaderships_ended == 0

    def lead(epoch: int) -> None:
        partition.make_leader(
            leader_epoch=epoch,
            isr=[1, 2],
            replicas=[1, 2, 3],
            zk_version=epoch,
            lag_time_max_ms=LAG_MS,
            lag_max_messages=0,
            now_ms=0,
        )

    lead(1)  # the same leader in a new epoch (an ISR change)
    assert partition.leaderships_ended == 0
    partition.make_follower(leader=2, leader_epoch=2, isr=[1, 2], replicas=[1, 2, 3], zk_version=2)
    lead(3)
    assert partition.leaderships_ended == 1
    partition.fence()
    partition.fence()  # fenced once: only the end of a leadership counts
    assert partition.leaderships_ended == 2
