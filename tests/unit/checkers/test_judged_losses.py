"""Which configurations `lost-acked-write` is judged under (`judges_lost_acked_writes`):
those that bound the loss of acknowledged acks=-1 writes, min.insync.replicas=1 included."""

from __future__ import annotations

from typing import Any

import pytest

from checkers.config import TestSettings
from checkers.delivery import delivery_details, judges_lost_acked_writes
from checkers.losses import LossRules

SAFE: dict[str, Any] = {
    "replication_factor": 3,
    "min_insync_replicas": 2,
    "unclean_leader_election": False,
}


def rules(expect_loss: frozenset[Any] = frozenset(), **settings: Any) -> LossRules:
    return LossRules(TestSettings(**{**SAFE, **settings}), expect_loss)


@pytest.mark.parametrize(
    ("case", "judged"),
    [
        ({}, True),
        ({"min_insync_replicas": 1}, True),
        ({"min_insync_replicas": 1, "acks": 1}, True),  # acks=1 writes are left out by acks
        ({"replication_factor": None}, True),
        ({"min_insync_replicas": None}, False),
        ({"unclean_leader_election": None}, False),
        ({"unclean_leader_election": True}, False),
        ({"replication_factor": 1}, False),
    ],
)
def test_judged_where_the_configuration_bounds_the_loss(case: dict[str, Any], judged: bool) -> None:
    assert judges_lost_acked_writes(rules(**case)) is judged


def test_an_unclean_loss_declared_by_hand_is_not_judged() -> None:
    declared = rules(frozenset({"unclean"}), min_insync_replicas=1)
    assert judges_lost_acked_writes(declared) is False
    assert delivery_details(declared, {}) == {
        "lost_acked_write": "not judged: unclean leader election is allowed"
    }
    assert delivery_details(rules(min_insync_replicas=None), {})["lost_acked_write"].startswith(
        "not judged: the configuration did not bound it"
    )
    assert delivery_details(rules(min_insync_replicas=1), {}) == {
        "lost_acked_write": "judged",
        "keys_with_complete_final_read": 0,
        "keys_without_complete_final_read": [],
        "keys_without_complete_final_read_count": 0,
    }
