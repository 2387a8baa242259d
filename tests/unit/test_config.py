from __future__ import annotations

from pathlib import Path

import pytest

from system_under_test.config import (
    NEVER,
    BrokerConfig,
    ConfigError,
    parse_listener,
    resolve_topic_config,
)


def test_defaults_use_kafka_names() -> None:
    config = BrokerConfig()
    assert config["log.index.interval.bytes"] == 4096
    assert config["log.flush.interval.messages"] == NEVER
    assert config["unclean.leader.election.enable"] is False
    assert config.standalone


def test_connection_limits_have_kafkas_names_and_defaults() -> None:
    config = BrokerConfig()
    assert config["max.connections"] == 1000
    assert config["connections.max.idle.ms"] == 600_000
    assert config["socket.request.read.timeout.ms"] == 30_000
    assert config["queued.max.request.bytes"] == 256 * 1024 * 1024
    assert BrokerConfig({"max.connections": "3"})["max.connections"] == 3


def test_properties_file_with_overrides(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# a comment\nbroker.id=3\n\nlog.dirs=/a,/b\nlisteners=PLAINTEXT://10.0.0.1:9093\n"
    )
    config = BrokerConfig.load(path, ["broker.id=4", "unclean.leader.election.enable=true"])
    assert config.broker_id == 4
    assert config.log_dirs == [Path("/a"), Path("/b")]
    assert config.listener == ("10.0.0.1", 9093)
    assert config["unclean.leader.election.enable"] is True
    assert "broker.id" in config.explicit


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        (["log.dirz=/x"], "unknown broker key(s) log.dirz"),
        (["broker.id=abc"], "broker.id='abc' is not valid"),
        (["broker.id=-1"], "below its minimum 0"),
        (["replica.truncation=sometimes"], "must be one of leader-epoch, high-watermark"),
        (["max.connections=0"], "max.connections=0 is below its minimum 1"),
        (["connections.max.idle.ms=0"], "connections.max.idle.ms=0 is below its minimum 1"),
        (["socket.request.read.timeout.ms=0"], "read.timeout.ms=0 is below its minimum 1"),
        (["queued.max.request.bytes=0"], "queued.max.request.bytes=0 is below its minimum 1"),
        (["noequals"], "expected key=value"),
    ],
)
def test_bad_values_name_the_key(items: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        BrokerConfig.load(None, items)


def test_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        BrokerConfig.load(tmp_path / "missing.properties")


def test_malformed_properties_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("broker.id=1\njust words\n")
    with pytest.raises(ConfigError, match=r"bad.properties:2: expected key=value"):
        BrokerConfig.load(path)


def test_topic_config_keys() -> None:
    assert resolve_topic_config({"segment.bytes": "2048", "min.insync.replicas": 2}) == {
        "segment.bytes": 2048,
        "min.insync.replicas": 2,
    }
    with pytest.raises(ConfigError, match="unknown topic key"):
        resolve_topic_config({"log.segment.bytes": "2048"})
    defaults = BrokerConfig({"log.segment.bytes": 4096}).topic_defaults()
    assert defaults["segment.bytes"] == 4096


@pytest.mark.parametrize("text", ["nohost", ":9092", "h:port", "h:70000"])
def test_bad_listener(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_listener(text, "listeners")
