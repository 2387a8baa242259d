from __future__ import annotations

from system_under_test.controller import Election, LeaderRebalance, elect_leader, fenced_into_elr


def test_first_live_isr_member_in_assignment_order() -> None:
    assert elect_leader((1, 2, 3), (3, 2), {2, 3}, unclean_allowed=False) == Election(
        2, (3, 2), False
    )


def test_dead_isr_members_leave_the_isr() -> None:
    assert elect_leader((1, 2, 3), (1, 2, 3), {2, 3}, unclean_allowed=False) == Election(
        2, (2, 3), False
    )


def test_no_live_isr_member_goes_offline_when_unclean_is_off() -> None:
    assert elect_leader((1, 2, 3), (1,), {2, 3}, unclean_allowed=False) is None


def test_unclean_election_takes_the_first_live_replica() -> None:
    assert elect_leader((1, 2, 3), (1,), {3, 2}, unclean_allowed=True) == Election(2, (2,), True)


def test_nothing_live_means_offline_even_when_unclean() -> None:
    assert elect_leader((1, 2), (1, 2), set(), unclean_allowed=True) is None


# KIP-966: eligible leader replicas (ELR), and replicas that restarted (may have lost data).


def test_a_live_isr_member_that_did_not_restart_comes_first() -> None:
    assert elect_leader(
        (1, 2, 3), (1, 3), {1, 2, 3}, unclean_allowed=False, elr=(2,), restarted=frozenset({1})
    ) == Election(3, (3,), False, (2,))


def test_an_eligible_replica_comes_before_a_restarted_isr_member() -> None:
    # The ISR of one (3) lost power and restarted; 1 and 2 left the ISR below the minimum.
    assert elect_leader(
        (3, 1, 2), (3,), {1, 2, 3}, unclean_allowed=False, elr=(1, 2), restarted=frozenset({3})
    ) == Election(1, (1,), False, (2,), from_elr=True)


def test_a_restarted_eligible_replica_is_not_elected_and_leaves_the_elr() -> None:
    assert elect_leader(
        (3, 1, 2), (3,), {1, 2}, unclean_allowed=False, elr=(1, 2), restarted=frozenset({1})
    ) == Election(2, (2,), False, (), from_elr=True)


def test_restarted_isr_members_are_the_last_clean_resort() -> None:
    # Every eligible replica restarted too: what the last ISR kept is all there is.
    assert elect_leader(
        (3, 1, 2), (3,), {1, 3}, unclean_allowed=True, elr=(1, 2), restarted=frozenset({1, 3})
    ) == Election(3, (3,), False, (2,))


def test_unclean_comes_last_and_clears_the_elr() -> None:
    assert elect_leader(
        (3, 1, 2), (3,), {1}, unclean_allowed=True, elr=(2,), restarted=frozenset({1})
    ) == Election(1, (1,), True)
    assert (
        elect_leader(
            (3, 1, 2), (3,), {1}, unclean_allowed=False, elr=(2,), restarted=frozenset({1})
        )
        is None
    )


def test_dead_isr_members_join_the_elr_where_the_isr_falls_below_min_insync() -> None:
    """KIP-966: the leader 1 dies while 2 and 3 are alive, min.insync.replicas 3: 2 leads
    with ISR [2, 3], below the minimum, and dead 1 becomes eligible (the high watermark
    stood still since). Where the ISR keeps the minimum, nobody joins."""
    assert elect_leader(
        (1, 2, 3), (1, 2, 3), {2, 3}, unclean_allowed=False, min_insync=3
    ) == Election(2, (2, 3), False, (1,))
    assert elect_leader(
        (1, 2, 3), (1, 2, 3), {2, 3}, unclean_allowed=False, min_insync=2
    ) == Election(2, (2, 3), False, ())


def test_followers_dead_past_their_sessions_stay_eligible_after_the_leader_is_lost() -> None:
    """The followers 1 and 3 are fenced (paused past their sessions): ISR [2], ELR [1, 3];
    when 2 dies too and 1 returns without having restarted, 1 is elected from the ELR."""
    assert fenced_into_elr((), (1, 2, 3), (2,), {2}, 2) == (1, 3)
    assert fenced_into_elr((), (1, 2, 3), (2,), {2}, 1) == ()
    assert elect_leader((2, 1, 3), (2,), {1, 3}, unclean_allowed=False, elr=(1, 3)) == Election(
        1, (1,), False, (3,), from_elr=True
    )


def test_a_broker_leading_too_few_of_its_preferred_partitions_is_imbalanced() -> None:
    assignments = {
        ("t", 0): (1, 2, 3),
        ("t", 1): (2, 3, 1),
        ("t", 2): (3, 1, 2),
        ("t", 3): (1, 3, 2),
    }
    balanced = {("t", 0): 1, ("t", 1): 2, ("t", 2): 3, ("t", 3): 1}
    assert LeaderRebalance().imbalanced(assignments, balanced) == {}
    moved = {**balanced, ("t", 0): 2}  # broker 1 leads one of its two: 50% > 10%
    assert LeaderRebalance().imbalanced(assignments, moved) == {1: [("t", 0)]}
    assert LeaderRebalance(imbalance_percent=50).imbalanced(assignments, moved) == {}
    assert LeaderRebalance(imbalance_percent=49).imbalanced(assignments, moved) == {1: [("t", 0)]}
    offline = {**balanced, ("t", 2): -1}
    assert LeaderRebalance().imbalanced(assignments, offline) == {3: [("t", 2)]}
    unknown = {k: v for k, v in balanced.items() if k != ("t", 1)}
    assert LeaderRebalance().imbalanced(assignments, unknown) == {}
