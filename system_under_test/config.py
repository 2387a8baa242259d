"""Broker and topic configuration, under Kafka's key names.

A broker's configuration comes from a properties file (``key=value`` lines, ``#`` comments,
as Kafka's ``server.properties``) and ``--set key=value`` overrides. Every key is declared
once below with its type, default and meaning, so an unknown key or a bad value is an error
that names the key, the value and what is expected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NEVER = 2**63 - 1
"""Kafka's Long.MAX_VALUE: 'never' for intervals and 'unbounded' for sizes."""


class ConfigError(ValueError):
    """A configuration key or value that cannot be used."""


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _parse_int(text: str) -> int:
    return int(text.strip().replace("_", ""))


def _parse_commit_acks(text: str) -> int:
    value = _parse_int(text)
    if value not in (-1, 1):
        raise ValueError("expected -1 (all in-sync replicas) or 1 (the leader alone)")
    return value


def _parse_str(text: str) -> str:
    return text.strip()


@dataclass(frozen=True)
class ConfigKey:
    """One declared key: its parser, default, lower bound and meaning."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    minimum: int | None = None
    choices: tuple[str, ...] | None = None
    topic_level: str | None = None
    """The topic-level override of this broker default, as in Kafka (segment.bytes, ...)."""

    def convert(self, raw: object, source: str) -> Any:
        """Parse and check one raw value; raise ConfigError naming the key and the source."""
        if raw is None:
            return None
        try:
            value = self.parse(str(raw)) if isinstance(raw, str) else self._coerce(raw)
        except ValueError as err:
            raise ConfigError(
                f"{source}: {self.name}={raw!r} is not valid: {err}. {self.name}: {self.doc}"
            ) from None
        if self.minimum is not None and isinstance(value, int) and value < self.minimum:
            raise ConfigError(
                f"{source}: {self.name}={value} is below its minimum {self.minimum}. "
                f"{self.name}: {self.doc}"
            )
        if self.choices is not None and value not in self.choices:
            raise ConfigError(
                f"{source}: {self.name}={value!r} must be one of {', '.join(self.choices)}"
            )
        return value

    def _coerce(self, raw: object) -> Any:
        if self.parse is _parse_int and isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if self.parse is _parse_bool and isinstance(raw, bool):
            return raw
        return self.parse(str(raw))


def _key(
    name: str,
    parse: Callable[[str], Any],
    default: Any,
    doc: str,
    *,
    minimum: int | None = None,
    choices: tuple[str, ...] | None = None,
    topic_level: str | None = None,
) -> ConfigKey:
    return ConfigKey(name, parse, default, doc, minimum, choices, topic_level)


BROKER_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        _key("broker.id", _parse_int, 0, "this broker's unique id", minimum=0),
        _key(
            "listeners",
            _parse_str,
            "127.0.0.1:9092",
            "HOST:PORT (or PLAINTEXT://HOST:PORT) to listen on",
        ),
        _key(
            "advertised.listeners",
            _parse_str,
            None,
            "HOST:PORT clients are told to use; defaults to listeners",
        ),
        _key(
            "kafka.listeners",
            _parse_str,
            None,
            "HOST:PORT of a second listener (KAFKA_PROTOCOL.md), whose Metadata answers name "
            "the brokers' second listeners; unset: no such listener",
        ),
        _key(
            "kafka.advertised.listeners",
            _parse_str,
            None,
            "HOST:PORT Kafka clients are told to use for the Kafka listener; defaults to "
            "kafka.listeners",
        ),
        _key(
            "log.dirs",
            _parse_str,
            "/tmp/squall-logs",
            "comma-separated directories holding partition logs",
        ),
        _key(
            "num.partitions",
            _parse_int,
            1,
            "partitions of a topic created without a count",
            minimum=1,
        ),
        _key(
            "default.replication.factor",
            _parse_int,
            1,
            "replicas of a topic created without a factor",
            minimum=1,
        ),
        _key(
            "min.insync.replicas",
            _parse_int,
            1,
            "ISR size an acks=-1 produce needs",
            minimum=1,
            topic_level="min.insync.replicas",
        ),
        _key(
            "unclean.leader.election.enable",
            _parse_bool,
            False,
            "elect an out-of-sync replica when no ISR member is alive",
            topic_level="unclean.leader.election.enable",
        ),
        _key(
            "controlled.shutdown.enable",
            _parse_bool,
            True,
            "a broker stopping cleanly first asks the controller to move its leaderships "
            "and ISR memberships to other replicas",
        ),
        _key(
            "controlled.shutdown.max.retries",
            _parse_int,
            3,
            "attempts at a controlled shutdown before the broker stops regardless",
            minimum=1,
        ),
        _key(
            "controlled.shutdown.retry.backoff.ms",
            _parse_int,
            5000,
            "pause between controlled shutdown attempts",
            minimum=0,
        ),
        _key(
            "auto.leader.rebalance.enable",
            _parse_bool,
            True,
            "the controller moves leadership back to each partition's preferred replica "
            "when a broker leads too few of the partitions it is preferred for",
        ),
        _key(
            "leader.imbalance.check.interval.seconds",
            _parse_int,
            300,
            "how often the controller checks the leaders' balance",
            minimum=1,
        ),
        _key(
            "leader.imbalance.per.broker.percentage",
            _parse_int,
            10,
            "the share of its preferred partitions a broker may not lead before the check "
            "moves them back",
            minimum=0,
        ),
        _key(
            "replica.lag.time.max.ms",
            _parse_int,
            10000,
            "a follower not caught up for this long leaves the ISR",
            minimum=1,
        ),
        _key(
            "replica.lag.max.messages",
            _parse_int,
            0,
            "legacy: a follower this many messages behind leaves the ISR (0 = off)",
            minimum=0,
        ),
        _key(
            "replica.truncation",
            _parse_str,
            "leader-epoch",
            "how a new follower truncates: leader-epoch (KIP-101) or high-watermark (pre-0.11, unsafe)",
            choices=("leader-epoch", "high-watermark"),
        ),
        _key(
            "offsets.storage",
            _parse_str,
            "kafka",
            "where consumer groups' committed offsets live: kafka (the replicated "
            "__consumer_offsets topic) or zookeeper (Kafka 0.8's /consumers/<group>/offsets)",
            choices=("kafka", "zookeeper"),
        ),
        _key(
            "offsets.topic.num.partitions",
            _parse_int,
            12,
            "partitions of __consumer_offsets when it is created (Kafka's default is 50)",
            minimum=1,
        ),
        _key(
            "offsets.topic.replication.factor",
            _parse_int,
            3,
            "replicas of __consumer_offsets; it is not created while fewer brokers are alive",
            minimum=1,
        ),
        _key(
            "offsets.topic.min.insync.replicas",
            _parse_int,
            None,
            "min.insync.replicas of __consumer_offsets when it is created (unset: the "
            "broker's min.insync.replicas, as Kafka does)",
            minimum=1,
        ),
        _key(
            "offsets.commit.required.acks",
            _parse_commit_acks,
            -1,
            "acks of a commit's write to __consumer_offsets (-1, or 1: unsafe)",
        ),
        _key(
            "offsets.commit.timeout.ms",
            _parse_int,
            5000,
            "longest a commit waits for its write to be replicated",
            minimum=1,
        ),
        _key(
            "offset.metadata.max.bytes",
            _parse_int,
            4096,
            "longest metadata string a commit may carry",
            minimum=0,
        ),
        _key(
            "group.min.session.timeout.ms",
            _parse_int,
            6000,
            "shortest session timeout a group member may ask for",
            minimum=1,
        ),
        _key(
            "group.max.session.timeout.ms",
            _parse_int,
            1800000,
            "longest session timeout a group member may ask for",
            minimum=1,
        ),
        _key(
            "group.initial.rebalance.delay.ms",
            _parse_int,
            3000,
            "how long an empty group's first rebalance waits for more members",
            minimum=0,
        ),
        _key(
            "replica.fetch.wait.max.ms",
            _parse_int,
            500,
            "longest a follower fetch waits for data",
            minimum=0,
        ),
        _key(
            "replica.high.watermark.checkpoint.interval.ms",
            _parse_int,
            5000,
            "how often high watermarks are written to replication-offset-checkpoint",
            minimum=1,
        ),
        _key(
            "replica.fetch.max.bytes",
            _parse_int,
            1048576,
            "bytes a follower asks for per partition",
            minimum=1,
        ),
        _key(
            "log.segment.bytes",
            _parse_int,
            1073741824,
            "roll a segment at this size",
            minimum=1024,
            topic_level="segment.bytes",
        ),
        _key(
            "log.roll.ms",
            _parse_int,
            604800000,
            "roll a segment at this age",
            minimum=1,
            topic_level="segment.ms",
        ),
        _key(
            "log.index.interval.bytes",
            _parse_int,
            4096,
            "bytes appended between two index entries",
            minimum=0,
            topic_level="index.interval.bytes",
        ),
        _key(
            "log.index.size.max.bytes",
            _parse_int,
            10485760,
            "largest offset or time index file",
            minimum=64,
            topic_level="segment.index.bytes",
        ),
        _key(
            "log.retention.ms",
            _parse_int,
            604800000,
            "delete segments older than this (-1 = keep)",
            minimum=-1,
            topic_level="retention.ms",
        ),
        _key(
            "log.retention.bytes",
            _parse_int,
            -1,
            "delete old segments beyond this size per partition (-1 = keep)",
            minimum=-1,
            topic_level="retention.bytes",
        ),
        _key(
            "log.retention.check.interval.ms",
            _parse_int,
            300000,
            "how often retention runs",
            minimum=1,
        ),
        _key(
            "log.flush.interval.messages",
            _parse_int,
            NEVER,
            "fsync after this many appended messages",
            minimum=1,
            topic_level="flush.messages",
        ),
        _key(
            "log.flush.interval.ms",
            _parse_int,
            NEVER,
            "fsync data older than this",
            minimum=0,
            topic_level="flush.ms",
        ),
        _key(
            "log.flush.scheduler.interval.ms",
            _parse_int,
            1000,
            "how often the time-based flush runs",
            minimum=1,
        ),
        _key(
            "message.max.bytes",
            _parse_int,
            1048588,
            "largest record batch accepted",
            minimum=68,  # a batch's 61-byte header and one empty record
            topic_level="max.message.bytes",
        ),
        _key(
            "socket.request.max.bytes",
            _parse_int,
            104857600,
            "largest request accepted",
            minimum=1024,
        ),
        _key(
            "queued.max.request.bytes",
            _parse_int,
            268435456,
            "stop reading requests while received but unanswered requests hold this many bytes "
            "(Kafka's default is unbounded)",
            minimum=1,
        ),
        _key(
            "max.connections",
            _parse_int,
            1000,
            "client connections open at once; one more is closed as soon as it is accepted",
            minimum=1,
        ),
        _key(
            "connections.max.idle.ms",
            _parse_int,
            600000,
            "close a connection that has sent nothing and awaited no answer for this long",
            minimum=1,
        ),
        _key(
            "socket.request.read.timeout.ms",
            _parse_int,
            30000,
            "squall's own: close a connection whose request has begun but not fully arrived "
            "within this time",
            minimum=1,
        ),
        _key(
            "zookeeper.connect",
            _parse_str,
            None,
            "HOST:PORT[,HOST:PORT][/chroot] of ZooKeeper; unset = standalone",
        ),
        _key(
            "zookeeper.session.timeout.ms",
            _parse_int,
            18000,
            "ZooKeeper session timeout",
            minimum=1,
        ),
        _key(
            "zookeeper.connection.timeout.ms",
            _parse_int,
            18000,
            "wait this long to connect to ZooKeeper",
            minimum=1,
        ),
        _key(
            "request.timeout.ms",
            _parse_int,
            30000,
            "longest an acks=-1 produce waits for replication",
            minimum=1,
        ),
        _key(
            "event.log",
            _parse_str,
            None,
            "file for election and ISR-change events, one JSON line each; default <first log dir>/events.jsonl",
        ),
    ]
}

TOPIC_KEYS: dict[str, ConfigKey] = {k.topic_level: k for k in BROKER_KEYS.values() if k.topic_level}


def parse_properties(text: str, source: str) -> dict[str, str]:
    """Parse ``key=value`` lines; ``#`` and ``!`` start comments, blank lines are skipped."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        if "=" not in stripped:
            raise ConfigError(f"{source}:{number}: expected key=value, got {stripped!r}")
        key, _, value = stripped.partition("=")
        out[key.strip()] = value.strip()
    return out


def parse_assignments(items: Iterable[str], source: str = "--set") -> dict[str, str]:
    """Parse ``key=value`` command-line items."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{source} {item!r}: expected key=value, e.g. log.dirs=/tmp/kafka")
        out[key.strip()] = value.strip()
    return out


def _resolve(
    keys: Mapping[str, ConfigKey], raw: Mapping[str, object], source: str, what: str
) -> dict[str, Any]:
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        known = ", ".join(sorted(keys))
        raise ConfigError(
            f"{source}: unknown {what} key(s) {', '.join(unknown)}; known keys: {known}"
        )
    return {name: key.convert(raw[name], source) for name, key in keys.items() if name in raw}


class BrokerConfig:
    """A broker's validated configuration; read values with ``config["log.dirs"]``."""

    def __init__(
        self, values: Mapping[str, object] | None = None, *, source: str = "config"
    ) -> None:
        given = _resolve(BROKER_KEYS, values or {}, source, "broker")
        self._values = {name: key.default for name, key in BROKER_KEYS.items()}
        self._values.update(given)
        self.explicit = frozenset(given)

    @classmethod
    def load(cls, path: Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """A properties file (if any) with --set overrides on top."""
        raw: dict[str, object] = {}
        source = "--set"
        if path is not None:
            try:
                text = path.read_text()
            except OSError as err:
                raise ConfigError(f"cannot read config file {path}: {err.strerror}") from None
            raw.update(parse_properties(text, str(path)))
            source = f"{path} and --set"
        raw.update(parse_assignments(overrides))
        return cls(raw, source=source)

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            raise KeyError(f"{name} is not a broker configuration key")
        return self._values[name]

    def as_dict(self) -> dict[str, Any]:
        """Every key with its value."""
        return dict(self._values)

    @property
    def broker_id(self) -> int:
        return int(self._values["broker.id"])

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(p.strip()) for p in str(self._values["log.dirs"]).split(",") if p.strip()]

    @property
    def listener(self) -> tuple[str, int]:
        return parse_listener(str(self._values["listeners"]), "listeners")

    @property
    def advertised_listener(self) -> tuple[str, int]:
        advertised = self._values["advertised.listeners"]
        if advertised:
            return parse_listener(str(advertised), "advertised.listeners")
        return self.listener

    @property
    def kafka_listener(self) -> tuple[str, int] | None:
        """Where the Kafka-protocol listener binds; None when it is off."""
        value = self._values["kafka.listeners"]
        return parse_listener(str(value), "kafka.listeners") if value else None

    @property
    def kafka_advertised_listener(self) -> tuple[str, int] | None:
        """The Kafka listener's address for Metadata answers, if set apart from the bound one."""
        value = self._values["kafka.advertised.listeners"]
        return parse_listener(str(value), "kafka.advertised.listeners") if value else None

    @property
    def standalone(self) -> bool:
        return not self._values["zookeeper.connect"]

    def topic_defaults(self) -> dict[str, Any]:
        """The broker-level defaults of every topic-level key, under topic-level names."""
        return {topic_name: self._values[key.name] for topic_name, key in TOPIC_KEYS.items()}


def resolve_topic_config(raw: Mapping[str, object], source: str = "topic config") -> dict[str, Any]:
    """Validate topic-level overrides (segment.bytes, retention.ms, min.insync.replicas, ...)."""
    return _resolve(TOPIC_KEYS, raw, source, "topic")


def parse_listener(text: str, source: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``PLAINTEXT://HOST:PORT`` to (host, port)."""
    value = text.split(",")[0].strip()
    if "://" in value:
        value = value.split("://", 1)[1]
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{source}={text!r}: expected HOST:PORT, e.g. 127.0.0.1:9092")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"{source}={text!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{source}={text!r}: port {port} is outside 0..65535")
    return host.strip("[]"), port
