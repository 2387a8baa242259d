"""What a check is told: the checker options, and the tested configuration from `test.json`.

From a run's `test.json` the checkers read only
`topic.replication_factor`, `topic.min_insync_replicas`, `topic.unclean_leader_election`,
`topic.flush_messages`, `topic.flush_ms` and `topic.flush_setting` (the flush policy in
force: fsync every so many messages, or data older than so many ms; 2**63-1: never),
`workload.acks` (-1, 0, 1 or "all"), `workload.producer_retries` (an integer >= 0: how
often a producer without idempotence may send a record again), `workload.idempotence`
(true: every producer was idempotent, so nothing sent lands twice), `workload.producers`
and `workload.idempotent_producers` (how many of them were idempotent: all of them is
`idempotence`; some of them leaves a duplicate to be explained by the others' retries),
`workload.consumer_mode` (`at-least-once`, or `at-most-once`: consumers commit what they
fetched before delivering it), `workload.client` (the
client library; one that resends on its own whatever its retries, `RESENDING_CLIENTS`),
`broker_in_force["replica.lag.time.max.ms"]`,
`broker_in_force["offsets.topic.min.insync.replicas"]` (1: an ISR of one acknowledges the
consumer group's generations and commits), `brokers` (each broker node's name and its
broker id: `{"n1": 1, ...}`, which joins nemesis events to SUT events) and
`clock.tolerance_ns` (how far the SUT
events' times may still be off the operations' after the runner corrected each node's
measured clock offset; `checkers.conformance`). They decide:
- whether the configuration promised that no acknowledged acks=-1 write is lost
  (min.insync.replicas >= 2, unclean leader election off: `promises_no_loss`, for the
  verdict's words), and whether it bounds such losses (min.insync.replicas given, 1
  too, unclean leader election off, replication factor >= 2 or unknown): only then is
  `lost-acked-write` judged (`checkers.delivery.judges_lost_acked_writes`);
- which losses it allows: those of acks=0/1 writes, with unclean leader election on those
  in an unclean-loss window, and, under a flush policy that does not fsync each message
  before it is acknowledged (`flush_messages` > 1), those lost with the power of every
  replica that held them (`checkers.power_losses`), and the consumer group's state on the
  offsets topic lost with power (of every broker; of any, where the offsets topic's
  min.insync.replicas is 1: `LossRules.group_state_losses`). They are reported as expected
  losses, not anomalies;
- whether a retried send may have landed twice (producer_retries > 0, or a client that
  resends on its own, and no idempotence): a `duplicate` that such a retry explains is
  then reported as expected, not as an anomaly.
Without `test.json` nothing was promised and nothing is allowed beyond what each
operation's own `acks` field says; `--expect-loss` declares allowances by hand (for Jepsen
histories, say): `acks0`, `acks1`, `unclean`, and `retries` (the producer may have retried
without idempotence).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from checkers.errors import TestConfigError

RESENDING_CLIENTS: Mapping[str, str] = {
    "confluent-kafka": "librdkafka sends a batch again after an attempt that landed, whatever "
    "its retries (a deposed leader's NOT_LEADER_FOR_PARTITION, a connection lost while the "
    "batch waited for its replicas)",
}
"""Client libraries (test.json's `workload.client`) that may send a record again on their own
without idempotence, and how, as a duplicate's reason quotes it (docs/clients.md)."""
ExpectedLoss = Literal["acks0", "acks1", "unclean", "retries"]
EXPECTED_LOSSES: tuple[ExpectedLoss, ...] = ("acks0", "acks1", "unclean", "retries")
Loader = Literal["auto", "exact"]
NEVER = 2**63 - 1
"""A flush interval that never comes (Kafka's Long.MAX_VALUE, the default)."""
FLUSH_SETTINGS = ("log.flush.interval.messages", "flush.messages")
"""The settings that may give a topic's `flush_messages`: the broker's, the topic's."""
DEFAULT_CLOCK_TOLERANCE_NS = 200_000_000
"""The tolerance on SUT event times where test.json does not give one (a history of a run
that did not measure its nodes' clocks): 200 ms, for nodes that share the control
machine's clock (docker, local) and events written just after what they record."""


@dataclass(frozen=True)
class TestSettings:
    """The parts of a test's configuration that decide what may be lost or duplicated;
    None: not known."""

    __test__ = False  # not a pytest test class, despite the name

    source: str | None = None
    replication_factor: int | None = None
    min_insync_replicas: int | None = None
    unclean_leader_election: bool | None = None
    acks: int | None = None
    producer_retries: int | None = None
    idempotence: bool | None = None
    producers: int | None = None
    idempotent_producers: int | None = None
    """How many of the `producers` were idempotent (None: not known; `idempotence`: all)."""
    consumer_mode: str | None = None
    """`at-least-once` or `at-most-once` (None: not known)."""
    client: str | None = None
    replica_lag_time_max_ms: int | None = None
    offsets_min_insync_replicas: int | None = None
    """min.insync.replicas of the offsets topic, where the group's state lives."""
    clock_tolerance_ns: int | None = None
    brokers: Mapping[str, int] | None = None
    flush_messages: int | None = None
    flush_ms: int | None = None
    flush_setting: str | None = None

    @property
    def fsyncs_before_ack(self) -> bool | None:
        """Whether every replica fsyncs each message before it counts (so before an acks=-1
        write is acknowledged): `flush_messages` 1; None: the flush policy is not known."""
        if self.flush_messages is None:
            return None
        return self.flush_messages == 1

    @property
    def flush_policy(self) -> str | None:
        """The flush policy in words, as reasons quote it (None: not known)."""
        if self.flush_messages is None:
            return None
        setting = self.flush_setting or "log.flush.interval.messages"
        never = " (never)" if self.flush_messages >= NEVER else ""
        return f"{setting}={self.flush_messages}{never}"

    @property
    def event_tolerance_ns(self) -> int:
        """How far an SUT event's time may be off the operations' clock: test.json's
        `clock.tolerance_ns`, else `DEFAULT_CLOCK_TOLERANCE_NS`."""
        if self.clock_tolerance_ns is not None:
            return self.clock_tolerance_ns
        return DEFAULT_CLOCK_TOLERANCE_NS

    @property
    def every_producer_idempotent(self) -> bool:
        """Every producer was idempotent: `idempotence`, or `idempotent_producers` of all."""
        if self.idempotence:
            return True
        if self.idempotent_producers is None or self.producers is None:
            return False
        return self.producers > 0 and self.idempotent_producers >= self.producers

    @property
    def client_resends(self) -> str | None:
        """How a producer without idempotence resends on its own whatever its retries
        (None: it does not, every producer is idempotent, or the client is not known)."""
        if self.every_producer_idempotent or self.client is None:
            return None
        return RESENDING_CLIENTS.get(self.client)

    @property
    def retries_may_duplicate(self) -> bool:
        """A producer may send a record again without idempotence: it may land twice."""
        if self.every_producer_idempotent:
            return False
        retries = self.producer_retries is not None and self.producer_retries > 0
        return retries or self.client_resends is not None

    @property
    def promises_no_loss(self) -> bool:
        """min.insync.replicas >= 2 with unclean election off: acks=-1 writes survive."""
        return (
            self.min_insync_replicas is not None
            and self.min_insync_replicas >= 2
            and self.unclean_leader_election is False
            and (self.replication_factor is None or self.replication_factor >= 2)
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "replication_factor": self.replication_factor,
            "min_insync_replicas": self.min_insync_replicas,
            "unclean_leader_election": self.unclean_leader_election,
            "acks": self.acks,
            "producer_retries": self.producer_retries,
            "idempotence": self.idempotence,
            "producers": self.producers,
            "idempotent_producers": self.idempotent_producers,
            "consumer_mode": self.consumer_mode,
            "client": self.client,
            "replica_lag_time_max_ms": self.replica_lag_time_max_ms,
            "offsets_min_insync_replicas": self.offsets_min_insync_replicas,
            "clock_tolerance_ns": self.event_tolerance_ns,
            "brokers": None if self.brokers is None else dict(self.brokers),
            "flush_messages": self.flush_messages,
            "flush_ms": self.flush_ms,
            "flush_setting": self.flush_setting,
            "fsyncs_before_ack": self.fsyncs_before_ack,
            "promises_no_loss": self.promises_no_loss,
            "retries_may_duplicate": self.retries_may_duplicate,
        }


@dataclass(frozen=True)
class CheckConfig:
    """Options of one check.

    `sample`: anomalies kept per type in results (counts are always complete).
    `expect_loss`: losses declared expected beyond what `test.json` allows: `acks0` and
    `acks1` make writes whose acks is not recorded count as sent with that acks; `unclean`
    allows unclean-election losses; `retries` declares that the producer may have retried
    sends without idempotence, so a value a retry explains at several offsets is an
    expected duplicate.
    `test`: the tested configuration; None reads the run's `test.json`.
    `loader`: how `history.jsonl` becomes Parquet: `auto` (the bulk converter, which leaves
    what it cannot vouch for to the exact one) or `exact` (line by line); see `checkers.load`.
    `stats_window_s`: width of the stats time windows; None picks about 100 windows.
    """

    sample: int = 8
    expect_loss: frozenset[ExpectedLoss] = field(default_factory=frozenset)
    test: TestSettings | None = None
    loader: Loader = "auto"
    stats_window_s: float | None = None

    def __post_init__(self) -> None:
        if self.sample < 0:
            raise ValueError(f"sample is {self.sample}, expected >= 0")
        unknown = set(self.expect_loss) - set(EXPECTED_LOSSES)
        if unknown:
            raise ValueError(
                f"expect_loss has {sorted(unknown)}, expected some of {list(EXPECTED_LOSSES)}"
            )
        if self.loader not in ("auto", "exact"):
            raise ValueError(f"loader is {self.loader!r}, expected auto or exact")
        if self.stats_window_s is not None and self.stats_window_s <= 0:
            raise ValueError(f"stats_window_s is {self.stats_window_s}, expected > 0")


def _field(doc: dict[str, Any], path: str, section: str, name: str, kind: type) -> Any:
    part = doc.get(section)
    if part is None:
        return None
    if not isinstance(part, dict):
        raise TestConfigError(f"{path}: {section!r} is {part!r}, expected an object")
    value = part.get(name)
    if value is None:
        return None
    if kind is int and (type(value) is not int):
        raise TestConfigError(f"{path}: {section}.{name} is {value!r}, expected an integer")
    if kind is bool and type(value) is not bool:
        raise TestConfigError(f"{path}: {section}.{name} is {value!r}, expected true or false")
    if kind is str and type(value) is not str:
        raise TestConfigError(f"{path}: {section}.{name} is {value!r}, expected a string")
    return value


def read_test_settings(path: Path) -> TestSettings:
    """The settings in a `test.json`; raises `TestConfigError` if it is malformed."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TestConfigError(
            f"{path} cannot be read as JSON ({err}); fix or remove it, or pass the "
            "configuration explicitly"
        ) from err
    if not isinstance(doc, dict):
        raise TestConfigError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    where = str(path)
    acks = _acks(where, doc)
    return TestSettings(
        source=where,
        replication_factor=_field(doc, where, "topic", "replication_factor", int),
        min_insync_replicas=_field(doc, where, "topic", "min_insync_replicas", int),
        unclean_leader_election=_field(doc, where, "topic", "unclean_leader_election", bool),
        acks=acks,
        producer_retries=_producer_retries(where, doc),
        idempotence=_field(doc, where, "workload", "idempotence", bool),
        producers=_count(where, doc, "producers"),
        idempotent_producers=_count(where, doc, "idempotent_producers"),
        consumer_mode=_consumer_mode(where, doc),
        client=_field(doc, where, "workload", "client", str),
        replica_lag_time_max_ms=_broker_int(where, doc, "replica.lag.time.max.ms", 0),
        offsets_min_insync_replicas=_broker_int(where, doc, "offsets.topic.min.insync.replicas", 1),
        clock_tolerance_ns=_field(doc, where, "clock", "tolerance_ns", int),
        brokers=_brokers(where, doc),
        flush_messages=_positive(where, doc, "flush_messages"),
        flush_ms=_field(doc, where, "topic", "flush_ms", int),
        flush_setting=_flush_setting(where, doc),
    )


def _count(path: str, doc: dict[str, Any], name: str) -> int | None:
    """`workload.<name>`: an integer >= 0 (None: absent)."""
    value = _field(doc, path, "workload", name, int)
    if value is not None and value < 0:
        raise TestConfigError(f"{path}: workload.{name} is {value}, expected an integer >= 0")
    return value  # type: ignore[no-any-return]


def _positive(path: str, doc: dict[str, Any], name: str) -> int | None:
    """`topic.<name>`: an integer >= 1 (None: absent)."""
    value = _field(doc, path, "topic", name, int)
    if value is not None and value < 1:
        raise TestConfigError(f"{path}: topic.{name} is {value}, expected an integer >= 1")
    return value  # type: ignore[no-any-return]


def _flush_setting(path: str, doc: dict[str, Any]) -> str | None:
    """`topic.flush_setting`: which setting gave `flush_messages` (None: absent)."""
    value = _field(doc, path, "topic", "flush_setting", str)
    if value is not None and value not in FLUSH_SETTINGS:
        raise TestConfigError(
            f"{path}: topic.flush_setting is {value!r}, expected one of {list(FLUSH_SETTINGS)}"
        )
    return value  # type: ignore[no-any-return]


def _brokers(path: str, doc: dict[str, Any]) -> dict[str, int] | None:
    """`brokers`: node name -> broker id (None: absent)."""
    brokers = doc.get("brokers")
    if brokers is None:
        return None
    if not isinstance(brokers, dict) or not all(
        isinstance(name, str) and type(broker) is int for name, broker in brokers.items()
    ):
        raise TestConfigError(
            f'{path}: brokers is {brokers!r}, expected node names and broker ids, e.g. {{"n1": 1}}'
        )
    return dict(brokers)


def _broker_int(path: str, doc: dict[str, Any], name: str, least: int) -> int | None:
    """`broker_in_force[name]` as an integer of at least `least` (None: absent)."""
    settings = doc.get("broker_in_force")
    if not isinstance(settings, dict) or settings.get(name) is None:
        return None
    raw = settings[name]
    try:
        value = int(str(raw))
    except ValueError:
        raise TestConfigError(
            f"{path}: broker_in_force.{name} is {raw!r}, expected an integer"
        ) from None
    if value < least:
        raise TestConfigError(f"{path}: broker_in_force.{name} is {value}, expected >= {least}")
    return value


def _acks(path: str, doc: dict[str, Any]) -> int | None:
    workload = doc.get("workload")
    if workload is None:
        return None
    if not isinstance(workload, dict):
        raise TestConfigError(f"{path}: 'workload' is {workload!r}, expected an object")
    acks = workload.get("acks")
    if acks is None:
        return None
    if acks == "all":
        return -1
    if type(acks) is not int or acks not in (-1, 0, 1):
        raise TestConfigError(f'{path}: workload.acks is {acks!r}, expected -1, 0, 1 or "all"')
    return int(acks)


CONSUMER_MODES = ("at-least-once", "at-most-once")


def _consumer_mode(path: str, doc: dict[str, Any]) -> str | None:
    """`workload.consumer_mode`: one of `CONSUMER_MODES`, or None when absent."""
    mode: str | None = _field(doc, path, "workload", "consumer_mode", str)
    if mode is not None and mode not in CONSUMER_MODES:
        raise TestConfigError(
            f"{path}: workload.consumer_mode is {mode!r}, expected one of "
            f"{', '.join(CONSUMER_MODES)}"
        )
    return mode


def _producer_retries(path: str, doc: dict[str, Any]) -> int | None:
    """`workload.producer_retries`: an integer >= 0, or None when absent (not known)."""
    workload = doc.get("workload")
    if workload is None:
        return None
    if not isinstance(workload, dict):
        raise TestConfigError(f"{path}: 'workload' is {workload!r}, expected an object")
    retries = workload.get("producer_retries")
    if retries is None:
        return None
    if type(retries) is not int or retries < 0:
        raise TestConfigError(
            f"{path}: workload.producer_retries is {retries!r}, expected an integer >= 0"
        )
    return retries


def find_test_settings(run_dir: Path | None) -> TestSettings:
    """The run's `test.json` settings, or empty settings (nothing promised) without one."""
    if run_dir is None:
        return TestSettings()
    path = run_dir / "test.json"
    if not path.is_file():
        return TestSettings()
    return read_test_settings(path)
