"""A group member's own settings: Kafka's names and defaults, each refused clearly."""

from __future__ import annotations

import pytest

from system_under_test.client.exceptions import ClientConfigError
from system_under_test.client.group_consumer import GroupConfig


def test_defaults_are_kafkas_and_the_rest_goes_to_the_consumer() -> None:
    group, rest = GroupConfig.split({"group.id": "g", "fetch.max.bytes": 1000})
    assert group == GroupConfig("g", 10_000, 3_000, 300_000, "range")
    assert rest == {"fetch.max.bytes": 1000}


def test_settings_are_read_by_their_kafka_names() -> None:
    group, _ = GroupConfig.split(
        {
            "group.id": " g ",
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": 20_000,
            "partition.assignment.strategy": "RoundRobin",
        }
    )
    assert group == GroupConfig("g", 6000, 1000, 20_000, "roundrobin")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "needs group.id"),
        ({"group.id": "g", "session.timeout.ms": "soon"}, "give milliseconds"),
        ({"group.id": "g", "max.poll.interval.ms": 0}, "must be above 0"),
        ({"group.id": "g", "heartbeat.interval.ms": 10_000}, "must be below session"),
        ({"group.id": "g", "partition.assignment.strategy": "sticky"}, "range or roundrobin"),
    ],
)
def test_bad_settings_are_refused_saying_what_to_give(
    config: dict[str, object], message: str
) -> None:
    with pytest.raises(ClientConfigError, match=message):
        GroupConfig.split(config)
