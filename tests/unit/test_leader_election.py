from __future__ import annotations

from system_under_test.controller import Election, elect_leader


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
