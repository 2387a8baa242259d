"""A topic to create, and the checks every CreateTopics request passes first.

Every check is linear in the request, and the caps below bound how much work one request can
ask for: a request over a cap is refused, topic by topic, before anything is created.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from system_under_test.config import BrokerConfig, ConfigError, resolve_topic_config
from system_under_test.errors import ErrorCode
from system_under_test.log.log import LogConfig
from system_under_test.log.log_manager import InvalidTopicError, validate_topic_partition

MAX_PARTITIONS = 10_000
"""A guard against typos: more partitions per topic than this is refused."""
MAX_TOPICS_PER_REQUEST = 1_000
"""A CreateTopics request naming more topics than this is refused (squall's clients send one)."""
MAX_PARTITIONS_PER_REQUEST = MAX_PARTITIONS
"""A request whose topics add up to more partitions than this is refused, so one request
creates at most as many partitions as one topic may have."""
MAX_CONFIGS_PER_TOPIC = 1_000
"""A topic with more config entries than this is refused (there are about ten topic keys)."""
MAX_MESSAGE_CHARS = 1_000
"""Error messages are cut to this length: they quote names from the request, and a response
string holds at most 32767 bytes."""
MAX_NAMES_QUOTED = 10
"""A message listing names from the request quotes this many, then says how many more."""


@dataclass(frozen=True, slots=True)
class TopicConfigEntry:
    """One topic-level setting asked for at creation."""

    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    """A topic a CreateTopics request asks for."""

    name: str
    num_partitions: int
    """-1 uses the broker's num.partitions."""
    replication_factor: int
    """-1 uses the broker's default.replication.factor."""
    configs: list[TopicConfigEntry]


@dataclass(frozen=True, slots=True)
class CreatableTopicResult:
    """What became of one requested topic: NONE, or the error and why."""

    name: str
    error_code: int
    error_message: str | None


class CreateTopicError(Exception):
    """One topic of a CreateTopics request refused, with the code and message to return."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[: MAX_MESSAGE_CHARS - 3] + "..."
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


def _quote_some(names: Iterable[str]) -> str:
    """The first MAX_NAMES_QUOTED names (cut to 60 characters), and how many more there are."""
    listed = list(names)
    shown = ", ".join(name[:60] for name in listed[:MAX_NAMES_QUOTED])
    more = len(listed) - MAX_NAMES_QUOTED
    return f"{shown} and {more} more" if more > 0 else shown


def request_errors(
    topics: Sequence[CreatableTopic], config: BrokerConfig
) -> list[CreateTopicError | None]:
    """What the request as a whole makes wrong with each topic, in request order.

    Too many topics, or partitions in all, refuses every topic; a name given twice refuses
    both. None: the topic goes on to validate_creatable_topic.
    """
    if len(topics) > MAX_TOPICS_PER_REQUEST:
        error = CreateTopicError(
            ErrorCode.INVALID_REQUEST,
            f"{len(topics)} topics in one request, more than the {MAX_TOPICS_PER_REQUEST} "
            "allowed; create them in several requests",
        )
        return [error] * len(topics)
    # Counts outside 1..MAX_PARTITIONS are refused topic by topic with INVALID_PARTITIONS.
    requested = (
        config["num.partitions"] if t.num_partitions == -1 else t.num_partitions for t in topics
    )
    partitions = sum(n for n in requested if 1 <= n <= MAX_PARTITIONS)
    if partitions > MAX_PARTITIONS_PER_REQUEST:
        error = CreateTopicError(
            ErrorCode.INVALID_REQUEST,
            f"{partitions} partitions in all in one request, more than the "
            f"{MAX_PARTITIONS_PER_REQUEST} allowed; create the topics in several requests",
        )
        return [error] * len(topics)
    counts = Counter(t.name for t in topics)
    return [
        CreateTopicError(ErrorCode.INVALID_REQUEST, f"topic {t.name!r} appears more than once")
        if counts[t.name] > 1
        else None
        for t in topics
    ]


def validate_creatable_topic(topic: CreatableTopic, config: BrokerConfig) -> TopicSpec:
    """Name, partition count, replication factor and configs; CreateTopicError if wrong."""
    if len(topic.configs) > MAX_CONFIGS_PER_TOPIC:
        raise CreateTopicError(
            ErrorCode.INVALID_CONFIG,
            f"{len(topic.configs)} config entries, more than the {MAX_CONFIGS_PER_TOPIC} "
            "allowed per topic",
        )
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
    counts = Counter(e.name for e in topic.configs)
    repeated = sorted(name for name, n in counts.items() if n > 1)
    if repeated:
        raise CreateTopicError(
            ErrorCode.INVALID_CONFIG,
            f"config key(s) {_quote_some(repeated)} given more than once",
        )
    overrides = {e.name: e.value for e in topic.configs if e.value is not None}
    try:
        resolve_topic_config(overrides, f"config of topic {topic.name!r}")
        LogConfig.from_mapping({**config.topic_defaults(), **overrides})
    except ConfigError as err:
        raise CreateTopicError(ErrorCode.INVALID_CONFIG, str(err)) from None
    return TopicSpec(topic.name, count, overrides, factor)
