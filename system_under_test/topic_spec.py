"""A topic to create, and the checks every CreateTopics request passes first."""

from __future__ import annotations

from dataclasses import dataclass, field

from system_under_test.config import BrokerConfig, ConfigError, resolve_topic_config
from system_under_test.errors import ErrorCode
from system_under_test.log.log import LogConfig
from system_under_test.log.log_manager import InvalidTopicError, validate_topic_partition
from system_under_test.protocol import CreatableTopic

MAX_PARTITIONS = 10_000
"""A guard against typos: more partitions per topic than this is refused."""


class CreateTopicError(Exception):
    """One topic of a CreateTopics request refused, with the code and message to return."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic: its partition count, replication factor and configuration overrides."""

    name: str
    partitions: int
    config: dict[str, str]
    replication_factor: int = field(default=1)


def validate_creatable_topic(topic: CreatableTopic, config: BrokerConfig) -> TopicSpec:
    """Name, partition count, replication factor and configs; CreateTopicError if wrong."""
    try:
        validate_topic_partition(topic.name, 0)
    except InvalidTopicError as err:
        raise CreateTopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(err)) from None
    count = config["num.partitions"] if topic.num_partitions == -1 else topic.num_partitions
    if not 1 <= count <= MAX_PARTITIONS:
        raise CreateTopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"number of partitions must be between 1 and {MAX_PARTITIONS} "
            f"(or -1 for num.partitions), got {topic.num_partitions}",
        )
    factor = (
        config["default.replication.factor"]
        if topic.replication_factor == -1
        else topic.replication_factor
    )
    if factor < 1:
        raise CreateTopicError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor must be at least 1 (or -1 for default.replication.factor), "
            f"got {topic.replication_factor}",
        )
    names = [e.name for e in topic.configs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CreateTopicError(
            ErrorCode.INVALID_CONFIG, f"config key(s) {', '.join(repeated)} given more than once"
        )
    overrides = {e.name: e.value for e in topic.configs if e.value is not None}
    try:
        resolve_topic_config(overrides, f"config of topic {topic.name!r}")
        LogConfig.from_mapping({**config.topic_defaults(), **overrides})
    except ConfigError as err:
        raise CreateTopicError(ErrorCode.INVALID_CONFIG, str(err)) from None
    return TopicSpec(topic.name, count, overrides, factor)
