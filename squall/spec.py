"""A test: what cluster, which workload, which faults, for how long, from which seed.

Written as TOML (``squall run --spec FILE``) or assembled from CLI flags::

    name = "acks-all-leader-kills"
    runtime = "docker"            # docker | ssh | local; default: docker where an engine answers
    nodes = 3
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

    [nemesis]                     # nemesis.ScheduleSpec; omit for no faults
    faults = { kill = 1, partition = 1 }
    interval_s = [5, 10]
    duration_s = [3, 6]

``test.json`` holds this spec resolved (seed drawn, runtime chosen), plus the ``topic``
summary the checkers read to know what the configuration promised.
"""

from __future__ import annotations

import random
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from nemesis import FaultError, ScheduleSpec
from system_under_test.config import BROKER_KEYS, ConfigError, resolve_topic_config
from workloads import WorkloadSpec
from workloads.errors import WorkloadSpecError

TOP_LEVEL = {
    "name",
    "runtime",
    "nodes",
    "seed",
    "time_limit_s",
    "recovery_wait_s",
    "inventory",
    "broker",
    "workload",
    "nemesis",
    "description",
}


class SpecError(ValueError):
    """A test spec that cannot be run: names the file, the key and what to do."""


@dataclass(frozen=True)
class TestSpec:
    """Everything that defines one test run."""

    name: str
    workload: WorkloadSpec
    nemesis: ScheduleSpec | None = None
    runtime: str | None = None
    nodes: int = 3
    seed: int | None = None
    time_limit_s: float = 60.0
    recovery_wait_s: float = 10.0
    broker: Mapping[str, str] = field(default_factory=dict)
    inventory: str | None = None
    description: str = ""

    __test__ = False  # not a pytest test class

    def resolved(self, *, runtime: str) -> TestSpec:
        """The spec with a seed drawn and the runtime chosen, as a replay must see it."""
        seed = self.seed if self.seed is not None else random.SystemRandom().randrange(2**31)
        nemesis = self.nemesis
        if nemesis is not None:
            nemesis = replace(nemesis, seed=seed, time_limit_s=self.time_limit_s)
        return replace(self, seed=seed, runtime=runtime, nemesis=nemesis)

    def promises_no_loss(self) -> bool:
        """acks=-1 with min.insync >= 2 and unclean election off: acknowledged data must survive."""
        return self.workload.acks == -1 and self.min_insync_replicas >= 2 and not self.unclean

    @property
    def min_insync_replicas(self) -> int:
        raw = self.workload.topic_config.get(
            "min.insync.replicas", self.broker.get("min.insync.replicas", 1)
        )
        return int(raw)

    @property
    def unclean(self) -> bool:
        raw = self.workload.topic_config.get(
            "unclean.leader.election.enable",
            self.broker.get("unclean.leader.election.enable", "false"),
        )
        return str(raw).lower() == "true"

    def to_json(self) -> dict[str, Any]:
        """test.json's spec part; ``topic`` summarises what the checkers need."""
        return {
            "name": self.name,
            "description": self.description,
            "runtime": self.runtime,
            "nodes": self.nodes,
            "seed": self.seed,
            "time_limit_s": self.time_limit_s,
            "recovery_wait_s": self.recovery_wait_s,
            "inventory": self.inventory,
            "broker": dict(self.broker),
            "workload": self.workload.to_dict(),
            "nemesis": self.nemesis.to_json() if self.nemesis is not None else None,
            "topic": {
                "name": self.workload.topic,
                "partitions": self.workload.partitions,
                "replication_factor": self.workload.replication_factor,
                "min_insync_replicas": self.min_insync_replicas,
                "unclean_leader_election": self.unclean,
                "truncation": self.broker.get("replica.truncation", "leader-epoch"),
            },
        }

    @classmethod
    def from_mapping(cls, doc: Mapping[str, Any], *, source: str) -> TestSpec:
        unknown = sorted(set(doc) - TOP_LEVEL)
        if unknown:
            raise SpecError(
                f"{source}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(TOP_LEVEL))}"
            )
        name = doc.get("name")
        if not isinstance(name, str) or not name:
            raise SpecError(
                f"{source}: `name` is required: a short name for the test's store directory"
            )
        broker = {str(k): str(v) for k, v in dict(doc.get("broker", {})).items()}
        bad = sorted(k for k in broker if k not in BROKER_KEYS)
        if bad:
            raise SpecError(
                f"{source}: [broker] has unknown key(s) {', '.join(bad)}; use Kafka's broker keys"
            )
        try:
            workload = WorkloadSpec.from_dict(dict(doc.get("workload", {})))
            resolve_topic_config(dict(workload.topic_config), f"{source} [workload] topic_config")
        except (WorkloadSpecError, ConfigError, TypeError, ValueError) as err:
            raise SpecError(f"{source}: [workload]: {err}") from None
        nemesis: ScheduleSpec | None = None
        if doc.get("nemesis"):
            try:
                nemesis = ScheduleSpec.from_json(
                    {"time_limit_s": doc.get("time_limit_s", 60.0), **dict(doc["nemesis"])}
                )
            except FaultError as err:
                raise SpecError(f"{source}: [nemesis]: {err}") from None
        spec = cls(
            name=name,
            workload=workload,
            nemesis=nemesis,
            runtime=doc.get("runtime"),
            nodes=_int(doc, "nodes", 3, source, minimum=1),
            seed=_int(doc, "seed", None, source, minimum=0),
            time_limit_s=_float(doc, "time_limit_s", 60.0, source),
            recovery_wait_s=_float(doc, "recovery_wait_s", 10.0, source),
            broker=broker,
            inventory=doc.get("inventory"),
            description=str(doc.get("description", "")),
        )
        if spec.runtime not in (None, "docker", "ssh", "local"):
            raise SpecError(f"{source}: runtime = {spec.runtime!r}: use docker, ssh or local")
        if spec.workload.replication_factor > spec.nodes:
            raise SpecError(
                f"{source}: replication_factor {spec.workload.replication_factor} needs at least "
                f"that many nodes, but nodes = {spec.nodes}"
            )
        return spec

    @classmethod
    def load(cls, path: Path) -> TestSpec:
        try:
            doc = tomllib.loads(path.read_text())
        except OSError as err:
            raise SpecError(f"cannot read spec {path}: {err.strerror}") from None
        except tomllib.TOMLDecodeError as err:
            raise SpecError(f"{path}: not valid TOML: {err}") from None
        return cls.from_mapping(doc, source=str(path))


def _int(
    doc: Mapping[str, Any], key: str, default: int | None, source: str, *, minimum: int
) -> Any:
    value = doc.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"{source}: {key} = {value!r}: expected an integer >= {minimum}")
    return value


def _float(doc: Mapping[str, Any], key: str, default: float, source: str) -> float:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise SpecError(f"{source}: {key} = {value!r}: expected a number of seconds > 0")
    return float(value)
