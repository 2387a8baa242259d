from __future__ import annotations

from collections import Counter

import pytest

from system_under_test.replication.assignment import AssignmentError, assign_replicas


def test_kafka_round_robin_layout_from_start_zero() -> None:
    layout = assign_replicas("t", [1, 2, 3], 6, 3, start_index=0)
    assert layout == {
        0: [1, 2, 3],
        1: [2, 3, 1],
        2: [3, 1, 2],
        3: [1, 3, 2],
        4: [2, 1, 3],
        5: [3, 2, 1],
    }


@pytest.mark.parametrize(("brokers", "partitions", "rf"), [(3, 9, 3), (5, 10, 3), (4, 8, 2)])
def test_replicas_distinct_and_leaders_spread(brokers: int, partitions: int, rf: int) -> None:
    ids = list(range(1, brokers + 1))
    layout = assign_replicas("topic", ids, partitions, rf)
    assert all(len(set(r)) == rf for r in layout.values())
    leaders = Counter(r[0] for r in layout.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in ids) <= 1
    assert assign_replicas("topic", ids, partitions, rf) == layout  # deterministic


def test_too_few_brokers_is_a_clear_error() -> None:
    with pytest.raises(AssignmentError, match="larger than the 2 live broker"):
        assign_replicas("t", [1, 2], 1, 3)
