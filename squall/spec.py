"""A test: what cluster, which workload, which faults, for how long, from which seed.

Written as TOML (``squall run --spec FILE``) or assembled from CLI flags::

    name = "acks-all-leader-kills"
    runtime = "docker"            # docker | ssh | local | external; default: docker where an engine answers
    nodes = 3
    lazy_disk = true              # brokers' data on lazyfs; default: on for docker only
    kafka_listener = false        # brokers also speak Kafka's protocol, on port 9093
    seed = 42
    time_limit_s = 60
    recovery_wait_s = 10

    [broker]                      # any broker key, Kafka's names
    "replica.truncation" = "leader-epoch"

    [workload]                    # workloads.WorkloadSpec
    acks = -1
    partitions = 3
    replication_factor = 3
    topic_config = { "min.insync.replicas" = "2" }

    [nemesis]                     # squall.config.NemesisTable; omit for the default mix
    generator = { stagger = { cycle = ["zombie-leader", "isr-shrink-leader-loss"] } }
    # or: faults = { kill = 1, partition = 1 }, interval_s = [5, 10], duration_s = [3, 6]
    # or: generator = "none" for no faults

``test.json`` holds this spec resolved (seed drawn, runtime chosen), plus the ``topic``
summary the checkers read to know what the configuration promised. Both are pydantic models
(`TestSpec`, `TestDocument`); their JSON Schemas are ``docs/schemas/spec.schema.json`` and
``docs/schemas/test.schema.json``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from nemesis import ScheduleSpec
from nemesis.timing import Detectors
from squall.config import (
    ConfigModel,
    ConfigurationError,
    ScheduleSpecTable,
    Seconds,
    Seed,
    one_of,
    read_toml,
    validate,
)
from system_under_test.config import BROKER_KEYS, ConfigError
from workloads import WorkloadSpec
from workloads.clients import speaks_kafka

if TYPE_CHECKING:
    BrokerKey = str
else:
    BrokerKey = one_of(BROKER_KEYS)


def _setting_text(value: object) -> object:
    """A broker setting is text, as in a properties file: 3 is taken as "3", true as "true"."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value) if isinstance(value, int | float) else value


BrokerSetting = Annotated[
    str, BeforeValidator(_setting_text, json_schema_input_type=str | int | float | bool)
]


TEST_SEGMENT_BYTES = 65536
"""The segment size of a test cluster: a 120-second run writes a few hundred kilobytes to
each partition, so Kafka's 1 GiB segments would never roll, and segment rolls, index
lookups across segments, truncations that cross a segment's base and the recovery of
several segments would go untested; at 64 KiB each partition rolls about ten times."""

TEST_LEADER_IMBALANCE_CHECK_S = 30
"""How often a test cluster's controller checks the leaders' balance: Kafka checks every
300 s (``leader.imbalance.check.interval.seconds``), so in a 120-second run leadership would
never go back to a restarted broker, and the hand-over from a live leader to an in-sync
follower (in-flight requests answered NOT_LEADER, the old leader truncating as a follower)
would go untested; at 30 s a run sees about four checks."""

PROFILES: dict[str, dict[str, str]] = {
    "kafka-2.4": {
        "zookeeper.session.timeout.ms": "6000",
        "zookeeper.connection.timeout.ms": "6000",
        "replica.lag.time.max.ms": "10000",
        "log.segment.bytes": str(TEST_SEGMENT_BYTES),
        "leader.imbalance.check.interval.seconds": str(TEST_LEADER_IMBALANCE_CHECK_S),
    },
    "none": {},
}
"""Broker settings a test cluster starts from, before the spec's own ``[broker]``: Kafka
2.4's failure detectors (a 6 s ZooKeeper session, a 10 s replica lag time), segments small
enough to roll in a test (``TEST_SEGMENT_BYTES``) and leader-balance checks frequent enough
to happen in one (``TEST_LEADER_IMBALANCE_CHECK_S``), or the broker's own defaults."""
NO_FAULTS = "none"


def default_nemesis() -> ScheduleSpec:
    """The default fault schedule: squall's default mix of scenarios."""
    return ScheduleSpec(generator="default")


MAX_NODES = 200
"""The most brokers a test may ask for: every runtime can give them addresses (the docker and
local runtimes number node i from .10 + i in one /24, which ends at .254)."""


def _nodes_bound(nodes: int) -> int:
    if nodes > MAX_NODES:
        raise ValueError(
            f"at most {MAX_NODES} nodes: every runtime (docker, local, ssh) can address that "
            "many brokers"
        )
    return nodes


Nodes = Annotated[
    int,
    Field(strict=True, ge=1, json_schema_extra={"maximum": MAX_NODES}),
    AfterValidator(_nodes_bound),
]


class SpecError(ConfigurationError):
    """A test spec that cannot be run: names the file, the key and what to do."""


class TestSpec(ConfigModel):
    """A squall test: what cluster, which workload, which faults, for how long, from which
    seed (a TOML file for ``squall run --spec``)."""

    __test__ = False  # not a pytest test class

    name: Annotated[str, Field(min_length=1)]
    """A short name for the test: its store directory."""
    description: str = ""
    """What the test is for."""
    runtime: Literal["docker", "ssh", "local", "external"] | None = None
    """Where the nodes run (default: docker where an engine answers, else local); external:
    a running cluster squall did not deploy, described by its inventory."""
    nodes: Nodes = 3
    """Brokers (plus one ZooKeeper node), at most 200."""
    seed: Seed | None = None
    """Seed of the workload and the fault schedule (default: drawn, then saved)."""
    time_limit_s: Seconds = 60.0
    """Seconds of workload under faults."""
    recovery_wait_s: Seconds = 10.0
    """Seconds to wait after healing, before the final read."""
    inventory: str | None = None
    """The inventory file naming the hosts, for the ssh and external runtimes."""
    lazy_disk: bool | None = None
    """The brokers' log.dirs on lazyfs, disks that can lose what was not fsynced, as a power
    loss does (default: on for docker, off for ssh and local, which need FUSE on the hosts)."""
    kafka_listener: bool = False
    """Every broker also serves Kafka's own wire protocol, on port 9093 of its node
    (system_under_test/KAFKA_PROTOCOL.md), for Kafka clients and tools; always on when the
    workload's client is a Kafka client."""
    profile: Literal["kafka-2.4", "none"] = "kafka-2.4"
    """Broker settings the cluster starts from: Kafka 2.4's failure detectors (6 s session,
    10 s replica lag), 64 KiB segments, which roll many times in a test, and a leader-balance
    check every 30 s, which moves leadership back to restarted brokers within a test, or none
    (the broker's own defaults); [broker] overrides them."""
    broker: dict[BrokerKey, BrokerSetting] = Field(default_factory=dict)
    """Broker settings with Kafka's names, e.g. "replica.truncation" = "high-watermark"."""
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    """The queue workload."""
    nemesis: ScheduleSpecTable | None = Field(default_factory=default_nemesis)
    """The fault schedule (default: squall's default mix; generator = "none": no faults)."""

    @field_validator("runtime", mode="before")
    @classmethod
    def _plain_runtime(cls, value: object) -> object:
        return value.value if isinstance(value, Enum) else value

    @field_validator("broker")
    @classmethod
    def _broker_values(cls, broker: dict[str, str]) -> dict[str, str]:
        for key, setting in broker.items():
            try:
                BROKER_KEYS[key].convert(setting, "broker")
            except ConfigError as err:  # the path is in front of the message already
                raise ValueError(str(err).removeprefix("broker: ")) from None
        return broker

    @field_validator("nemesis", mode="before")
    @classmethod
    def _no_faults_is_none(cls, value: object) -> object:
        if value == {}:
            return {"generator": "default"}
        if isinstance(value, Mapping) and value.get("generator") == NO_FAULTS:
            return None
        return value

    @model_validator(mode="after")
    def _enough_nodes(self) -> TestSpec:
        if self.workload.replication_factor > self.nodes:
            raise ValueError(
                f"replication_factor {self.workload.replication_factor} needs at least that "
                f"many nodes, but nodes = {self.nodes}"
            )
        return self

    def resolved(self, *, runtime: str) -> TestSpec:
        """The spec with a seed drawn, the runtime chosen and whether the brokers' data is on
        lazy disks settled, as a replay must see it."""
        seed = self.seed if self.seed is not None else random.SystemRandom().randrange(2**31)
        nemesis = self.nemesis
        if nemesis is not None:
            nemesis = replace(
                nemesis,
                seed=seed,
                time_limit_s=self.time_limit_s,
                detectors=self.detectors(),
                brokers=tuple(f"n{i}" for i in range(1, self.nodes + 1)),
            )
        lazy_disk = self.lazy_disk if self.lazy_disk is not None else runtime == "docker"
        return self.model_copy(
            update={
                "seed": seed,
                "runtime": runtime,
                "nemesis": nemesis,
                "lazy_disk": lazy_disk,
                "kafka_listener": self.kafka_listener or speaks_kafka(self.workload.client),
            }
        )

    def broker_settings(self) -> dict[str, str]:
        """The broker settings in force: the profile's, then the spec's own. The workload's
        min.insync.replicas also becomes __consumer_offsets' (where a Kafka client's group
        commits), unless the spec's broker settings say otherwise: the group's commits are
        the workload's writes too, and the broker default (1, as in Kafka) would let an ISR
        of one acknowledge them."""
        settings = {**PROFILES[self.profile], **self.broker}
        insync = self.workload.topic_config.get("min.insync.replicas")
        if insync is not None:
            settings.setdefault("offsets.topic.min.insync.replicas", str(insync))
        return settings

    def detectors(self) -> Detectors:
        """The cluster's failure detectors, from the broker settings in force (and the
        producers' request timeout, from the workload's)."""
        settings = self.broker_settings()

        def seconds(key: str) -> float:
            raw = settings.get(key, BROKER_KEYS[key].default)
            return float(BROKER_KEYS[key].convert(str(raw), "broker")) / 1000

        return Detectors(
            session_timeout_s=seconds("zookeeper.session.timeout.ms"),
            replica_lag_s=seconds("replica.lag.time.max.ms"),
            fetch_wait_s=seconds("replica.fetch.wait.max.ms"),
            request_timeout_s=self.workload.producer_request_timeout_s(),
            member_session_s=self.workload.member_session_timeout_s(),
        )

    def promises_no_loss(self) -> bool:
        """acks=-1 with min.insync >= 2 and unclean election off: acknowledged data must survive."""
        return self.workload.acks == -1 and self.min_insync_replicas >= 2 and not self.unclean

    @property
    def min_insync_replicas(self) -> int:
        raw = self.workload.topic_config.get(
            "min.insync.replicas", self.broker.get("min.insync.replicas", 1)
        )
        return int(raw)

    def flush_policy(self) -> tuple[int, int, str]:
        """The topic's flush policy in force: fsync every this many messages, fsync data
        older than this many ms (2**63-1: never), and the setting that gave the messages'
        interval (the topic's ``flush.messages``, else the broker's
        ``log.flush.interval.messages``, whose default is never, as Kafka's)."""
        settings = self.broker_settings()
        found: dict[str, tuple[int, str]] = {}
        for broker_key, topic_key in (
            ("log.flush.interval.messages", "flush.messages"),
            ("log.flush.interval.ms", "flush.ms"),
        ):
            key, raw = broker_key, settings.get(broker_key, BROKER_KEYS[broker_key].default)
            if topic_key in self.workload.topic_config:
                key, raw = topic_key, self.workload.topic_config[topic_key]
            found[broker_key] = (int(BROKER_KEYS[broker_key].convert(str(raw), "broker")), key)
        messages, setting = found["log.flush.interval.messages"]
        return messages, found["log.flush.interval.ms"][0], setting

    @property
    def unclean(self) -> bool:
        raw = self.workload.topic_config.get(
            "unclean.leader.election.enable",
            self.broker.get("unclean.leader.election.enable", "false"),
        )
        return str(raw).lower() == "true"

    def to_json(self) -> dict[str, Any]:
        """test.json's spec part; ``topic`` summarises what the checkers need."""
        flush_messages, flush_ms, flush_setting = self.flush_policy()
        return {
            "name": self.name,
            "description": self.description,
            "runtime": self.runtime,
            "nodes": self.nodes,
            "seed": self.seed,
            "time_limit_s": self.time_limit_s,
            "recovery_wait_s": self.recovery_wait_s,
            "inventory": self.inventory,
            "lazy_disk": self.lazy_disk,
            "kafka_listener": self.kafka_listener,
            "profile": self.profile,
            "broker": dict(self.broker),
            "broker_in_force": self.broker_settings(),
            "workload": self.workload.to_dict(),
            "nemesis": self.nemesis.to_json() if self.nemesis is not None else None,
            "topic": {
                "name": self.workload.topic,
                "partitions": self.workload.partitions,
                "replication_factor": self.workload.replication_factor,
                "min_insync_replicas": self.min_insync_replicas,
                "unclean_leader_election": self.unclean,
                "truncation": self.broker.get("replica.truncation", "leader-epoch"),
                "flush_messages": flush_messages,
                "flush_ms": flush_ms,
                "flush_setting": flush_setting,
            },
        }

    @classmethod
    def from_mapping(cls, doc: Mapping[str, Any], *, source: str) -> TestSpec:
        """The spec in `doc` (a TOML or test.json document); SpecError naming `source`."""
        return validate(cls, doc, source=source, error=SpecError)

    @classmethod
    def load(cls, path: Path) -> TestSpec:
        """The spec in the TOML file `path`."""
        return cls.from_mapping(read_toml(path, what="spec", error=SpecError), source=str(path))


TOP_LEVEL = frozenset(TestSpec.model_fields)
"""The keys of a spec's top level."""


class TopicSummary(ConfigModel):
    """What the checkers need to know of the topic and what its configuration promised."""

    name: str
    partitions: int
    replication_factor: int
    min_insync_replicas: int
    unclean_leader_election: bool
    truncation: str
    """How a follower truncates: leader-epoch or high-watermark."""
    flush_messages: int | None = None
    """The broker fsyncs the topic's log every this many messages (2**63-1: never, the
    default); 1: every message before it counts, so before it is acknowledged."""
    flush_ms: int | None = None
    """The broker fsyncs data older than this many ms (2**63-1: never, the default)."""
    flush_setting: str | None = None
    """The setting that gave `flush_messages`: the topic's `flush.messages`, else the
    broker's `log.flush.interval.messages`."""


class TestDocument(TestSpec):
    """A run's test.json: the resolved spec (`TestSpec.to_json`) and what the run adds."""

    model_config = ConfigDict(extra="allow")

    topic: TopicSummary
    run_id: str | None = None
    """The cluster's run id (labels on containers and networks)."""
    bootstrap: str | None = None
    """The brokers' addresses, HOST:PORT,..."""
    kafka_bootstrap: str | None = None
    """The brokers' Kafka listeners, HOST:PORT,... (when the cluster has them)."""
    zookeeper: str | None = None
    """ZooKeeper's address, HOST:PORT."""
    brokers: dict[str, int] | None = None
    """Each broker node's name (as the nemesis events name it) and its broker id (as the SUT
    events name it): {"n1": 1, ...}."""
    versions: dict[str, str | None] = Field(default_factory=dict)
    """Versions of Python and the libraries the run used."""
    git_commit: str | None = None
    """The commit of squall that ran the test."""
    run_dir: str | None = None
    """The run directory."""
