"""Consumer group settings and the offset store's checks that need no ZooKeeper."""

from __future__ import annotations

import pytest

from system_under_test.client import (
    ClientConfigError,
    OffsetCommitError,
    OffsetStoreError,
    ZooKeeperOffsetStore,
)
from system_under_test.client.config import ConsumerConfig

ZK = "127.0.0.1:2181/squall"


def test_group_settings_default_to_kafka_0_8_values_except_auto_commit() -> None:
    config = ConsumerConfig.from_mapping({"group.id": "g", "zookeeper.connect": ZK})
    assert config.group_id == "g"
    assert config.zookeeper_connect == ZK
    assert config.zookeeper_session_timeout_ms == 6000
    assert config.zookeeper_connection_timeout_ms == 6000
    assert config.auto_commit_enable is False  # Kafka 0.8: true
    assert config.auto_commit_interval_ms == 60000
    assert ConsumerConfig.from_mapping(None).group_id is None


@pytest.mark.parametrize(
    ("given", "expected"), [("smallest", "earliest"), ("LARGEST", "latest"), ("none", "none")]
)
def test_kafka_0_8_offset_reset_names_are_accepted(given: str, expected: str) -> None:
    assert ConsumerConfig.from_mapping({"auto.offset.reset": given}).auto_offset_reset == expected


@pytest.mark.parametrize(("raw", "expected"), [("true", True), (" False ", False), (True, True)])
def test_auto_commit_enable_takes_true_or_false(raw: object, expected: bool) -> None:
    config = {"group.id": "g", "zookeeper.connect": ZK, "auto.commit.enable": raw}
    assert ConsumerConfig.from_mapping(config).auto_commit_enable is expected


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"group.id": "g"}, r"group\.id='g' needs zookeeper\.connect"),
        ({"group.id": "g", "zookeeper.connect": " "}, r"needs zookeeper\.connect"),
        ({"group.id": "a/b", "zookeeper.connect": ZK}, "without '/'"),
        ({"group.id": "", "zookeeper.connect": ZK}, "not a usable group name"),
        ({"auto.commit.enable": "true"}, r"needs a group\.id"),
        ({"group.id": "g", "zookeeper.connect": ZK, "auto.commit.enable": "yes"}, "true or false"),
        ({"zookeeper.session.timeout.ms": 0}, "below its minimum"),
        ({"auto.offset.reset": "oldest"}, "earliest, latest or none"),
    ],
)
def test_bad_group_settings_are_clear_config_errors(
    config: dict[str, object], message: str
) -> None:
    with pytest.raises(ClientConfigError, match=message):
        ConsumerConfig.from_mapping(config)


def test_a_store_that_is_not_open_fails_definitely() -> None:
    store = ZooKeeperOffsetStore("g", ZK)
    with pytest.raises(OffsetCommitError, match="nothing was written") as failed:
        store.commit({("t", 0): 5})
    assert failed.value.definite
    assert failed.value.committed == {}
    with pytest.raises(OffsetStoreError, match="not open"):
        store.committed("t", 0)
    store.close()  # harmless when never started


@pytest.mark.parametrize(
    "offsets",
    [{("t", 0): -1}, {("t", -1): 0}, {("", 0): 0}, {("a/b", 0): 0}, {("t", 0): True}],
)
def test_nonsense_offsets_are_refused_before_anything_is_sent(
    offsets: dict[tuple[str, int], int],
) -> None:
    with pytest.raises(ValueError):
        ZooKeeperOffsetStore("g", ZK).commit(offsets)
