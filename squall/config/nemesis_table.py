"""The ``[nemesis]`` table of a spec: how to draw the fault schedule, validated.

The table is checked here and turned into the nemesis package's own `ScheduleSpec`, which
keeps its small invariants; the nemesis package itself imports only the standard library.
The same shape is the ``nemesis`` object of test.json and the ``spec`` of schedule.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field, GetCoreSchemaHandler, ValidationInfo, model_validator
from pydantic_core import CoreSchema, core_schema

from nemesis import SHAPES, NetemSpec, ScheduleSpec, parse_target
from nemesis.fault import PARTITION_AMONG
from nemesis.generator import parse_generator
from nemesis.layout import CAPABILITIES
from nemesis.netem import DISTRIBUTIONS
from nemesis.schedule import DEFAULT_SHAPES, KINDS
from nemesis.timing import Detectors
from squall.config.fields import ConfigModel, NonNegative, Seconds, Seed, one_of

if TYPE_CHECKING:
    FaultKind = str
    Shape = str
    Among = str
    Distribution = str
    Capability = str
else:
    FaultKind = one_of(KINDS)
    Shape = one_of(SHAPES)
    Among = one_of(PARTITION_AMONG)
    Distribution = one_of(DISTRIBUTIONS)
    Capability = one_of(sorted(CAPABILITIES))

DEFAULT_TIME_LIMIT_S = 60.0


def _ordered(pair: tuple[float, float]) -> tuple[float, float]:
    if pair[0] > pair[1]:
        raise ValueError("expected [min, max] seconds with min <= max")
    return pair


def _generator(doc: Any) -> Any:
    if doc is not None:
        parse_generator(doc)  # FaultError, a ValueError, names the place that is wrong
    return doc


def _target(text: str) -> str:
    parse_target(text)  # FaultError, a ValueError, says what a target may be
    return text


SecondsRange = Annotated[tuple[NonNegative, NonNegative], AfterValidator(_ordered)]
"""``[min, max]`` seconds, 0 <= min <= max; each time a value is drawn between them."""
Target = Annotated[str, AfterValidator(_target)]
"""A node name (``n1``), a role (``random``, ``minority``, ``controller``, ``zk``...) or a
partition role (``leader:TOPIC-PARTITION``)."""


class NetemTable(ConfigModel):
    """``[nemesis.netem]``: the delay and loss a netem fault puts on a node's interface."""

    delay_ms: NonNegative = 0.0
    """Added delay in milliseconds."""
    jitter_ms: NonNegative = 0.0
    """Variation of the delay in milliseconds."""
    distribution: Distribution | None = "normal"
    """How the jitter is distributed."""
    loss_pct: Annotated[NonNegative, Field(json_schema_extra={"exclusiveMaximum": 100})] = 0.0
    """Packets lost, in percent (below 100: total loss would cut squall's own connection)."""

    @model_validator(mode="after")
    def _shapes_something(self) -> NetemTable:
        self.netem_spec()
        return self

    def netem_spec(self) -> NetemSpec:
        """The nemesis package's netem setting."""
        return NetemSpec(self.delay_ms, self.jitter_ms, self.distribution, self.loss_pct)


class DetectorsTable(ConfigModel):
    """The failure detectors of the cluster under test, in seconds (read from its settings)."""

    session_timeout_s: Seconds = 6.0
    """zookeeper.session.timeout.ms: how long a dead broker goes unnoticed."""
    replica_lag_s: Seconds = 10.0
    """replica.lag.time.max.ms: how long a lagging follower stays in the ISR."""
    fetch_wait_s: NonNegative = 0.5
    """replica.fetch.wait.max.ms: the longest a follower's fetch waits."""
    request_timeout_s: Seconds = 5.0
    """The workload clients' request.timeout.ms: how long a client waits on a request."""
    member_session_s: Seconds = 10.0
    """The group members' session.timeout.ms: how long a silent member keeps its partitions."""


class NemesisTable(ConfigModel):
    """``[nemesis]``: a generator of scenarios and faults (default: squall's default mix), or
    kinds of fault with their weights, how often, for how long, on whom. ``generator =
    "none"`` runs without faults."""

    generator: Annotated[Any, AfterValidator(_generator)] = None
    """Scenarios and faults composed (sequence, repeat, mix, cycle, first, stagger, phases), e.g.
    "default", "zombie-leader", or { stagger = { cycle = ["zombie-leader", "rolling-bounce"] } }."""
    faults: dict[FaultKind, NonNegative] = Field(default_factory=dict)
    """Without a generator: kinds of fault and their relative weights, e.g. { kill = 1 }."""
    interval_s: SecondsRange = (10.0, 20.0)
    """Seconds from one fault to the next, [min, max]."""
    duration_s: SecondsRange = (5.0, 15.0)
    """Seconds a fault lasts before it is healed, [min, max]."""
    targets: dict[FaultKind, list[Target]] = Field(default_factory=dict)
    """Per kind of fault, the targets to draw from."""
    shapes: list[Shape] = Field(default_factory=lambda: list(DEFAULT_SHAPES))
    """The partition shapes to draw from."""
    partition_among: Among = "all"
    """Which nodes a partition splits: all (ZooKeeper too) or only the brokers."""
    netem: NetemTable = NetemTable(delay_ms=100.0, jitter_ms=50.0)
    """The setting of netem faults."""
    time_limit_s: Seconds | None = None
    """Seconds of the schedule (default: the test's time_limit_s)."""
    seed: Seed | None = None
    """The schedule's seed (default: the test's seed)."""
    allow_overlap: list[FaultKind] = Field(default_factory=list)
    """Kinds of fault that may overlap themselves (never partition)."""
    detectors: DetectorsTable | None = None
    """The cluster's failure detectors (default: read from the broker settings in force)."""
    brokers: list[str] | None = None
    """The broker nodes a rolling bounce visits (default: the cluster's)."""
    capabilities: list[Capability] | None = None
    """What the runtime can do beyond process faults (default: the cluster's)."""
    zookeeper: bool = True
    """False: the cluster had no ZooKeeper node faults could reach (one squall did not
    deploy); "zookeeper" among the capabilities either way, as lists written before that
    capability existed leave it out."""

    @model_validator(mode="after")
    def _schedulable(self) -> NemesisTable:
        if self.generator is None and not any(self.faults.values()):
            raise ValueError(
                'give a generator ("default", a scenario name...) or faults with a weight above 0'
            )
        if self.interval_s[1] <= 0:
            raise ValueError("interval_s must allow a positive interval between faults")
        self.schedule_spec(time_limit_s=DEFAULT_TIME_LIMIT_S)  # the nemesis package's invariants
        return self

    def schedule_spec(self, *, time_limit_s: float) -> ScheduleSpec:
        """The nemesis package's `ScheduleSpec`; `time_limit_s` unless the table sets one."""
        return ScheduleSpec(
            faults=dict(self.faults),
            interval_s=self.interval_s,
            duration_s=self.duration_s,
            targets={kind: list(targets) for kind, targets in self.targets.items()},
            shapes=tuple(self.shapes),
            partition_among=self.partition_among,
            netem=self.netem.netem_spec(),
            time_limit_s=self.time_limit_s if self.time_limit_s is not None else time_limit_s,
            seed=self.seed if self.seed is not None else 0,
            allow_overlap=frozenset(self.allow_overlap),
            generator=self.generator,
            detectors=Detectors(**self.detectors.model_dump())
            if self.detectors is not None
            else Detectors(),
            brokers=tuple(self.brokers) if self.brokers is not None else ("n1", "n2", "n3"),
            capabilities=(
                frozenset(self.capabilities) if self.capabilities is not None else CAPABILITIES
            )
            - (frozenset() if self.zookeeper else frozenset({"zookeeper"}))
            | (frozenset({"zookeeper"}) if self.zookeeper else frozenset()),
        )


class _FromNemesisTable:
    """Validates a `[nemesis]` table as `NemesisTable` and gives the `ScheduleSpec` it
    describes (a `ScheduleSpec` is taken as it is); its JSON schema is `NemesisTable`'s."""

    @classmethod
    def __get_pydantic_core_schema__(
        cls, _source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.with_info_wrap_validator_function(
            cls._schedule_spec,
            handler.generate_schema(NemesisTable),
            serialization=core_schema.plain_serializer_function_ser_schema(ScheduleSpec.to_json),
        )

    @staticmethod
    def _schedule_spec(
        value: object, handler: core_schema.ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> ScheduleSpec:
        if isinstance(value, ScheduleSpec):
            return value
        table: NemesisTable = handler(value)
        data: Mapping[str, Any] = info.data if isinstance(info.data, Mapping) else {}
        time_limit_s = data.get("time_limit_s", DEFAULT_TIME_LIMIT_S)
        return table.schedule_spec(time_limit_s=time_limit_s)


ScheduleSpecTable = Annotated[ScheduleSpec, _FromNemesisTable]
"""A `ScheduleSpec` field read from a ``[nemesis]`` table (the test's time limit is its
default, so declare ``time_limit_s`` before it)."""
