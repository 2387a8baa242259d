"""Fault schedules: generated from a seed, run, and replayed from their JSON form.

``generate_schedule(spec)`` draws faults and their healing operations from
``random.Random(spec.seed)``: the same spec gives the same schedule. A ``ScheduleRunner``
applies each operation at its time and reports the fault as applied; the schedule it
returns holds those resolved faults (node names, grudges), so replaying it hits exactly the
same nodes in the same way. Replaying a schedule that was never run (roles unresolved)
resolves the roles again, against the cluster as it is then.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from nemesis.aim import Aim, aimed
from nemesis.errors import ClusterError, FaultError, TargetError
from nemesis.fault import MEMBER_FAULTS, PARTITION_AMONG, TARGETS_DEFAULT_TO_ACTIVE, Fault
from nemesis.generator import KIND_NEEDS, SINGLE_KINDS, parse_generator
from nemesis.grudge import SHAPES, TARGETED_SHAPES
from nemesis.layout import CAPABILITIES, Layout
from nemesis.netem import NetemSpec
from nemesis.partial_failures import FaultApplicationError
from nemesis.reach import Reach
from nemesis.scenario_watch import ScenarioWatch, Settling
from nemesis.scenarios import SCENARIOS
from nemesis.targets import parse_target
from nemesis.timing import Detectors

SCHEDULE_FILE = "schedule.json"
SCHEDULE_VERSION = 1

KINDS = SINGLE_KINDS
"""Kind of fault in a spec -> (the fault, the fault that heals it; None: instantaneous)."""

DEFAULT_TARGETS: dict[str, list[str]] = {
    "kill": ["random"],
    "bounce": ["random"],
    "pause": ["random"],
    "freeze": ["random"],
    "partition": [],
    "netem": ["all"],
    "slow": ["follower"],
    "corrupt": ["random"],
    "truncate": ["random"],
    "rollback": ["random"],
    "power-loss": ["random"],
    "member-pause": [],
    "member-crash": [],
    "member-leave": [],
}
DEFAULT_SHAPES = ("isolate", "halves", "random-halves", "majorities-ring", "bridge")


def _pair(name: str, value: object) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise FaultError(f"{name} must be [min, max] seconds, got {value!r}")
    low, high = value
    for bound in (low, high):
        if (
            isinstance(bound, bool)
            or not isinstance(bound, int | float)
            or not math.isfinite(bound)
        ):
            raise FaultError(f"{name} must be [min, max] seconds, got {value!r}")
    if not 0 <= low <= high:
        raise FaultError(f"{name} must have 0 <= min <= max, got {value!r}")
    return float(low), float(high)


@dataclass(frozen=True)
class ScheduleSpec:
    """How to draw a schedule: a generator of scenarios and faults, or weighted kinds.

    ``generator`` (plain data, ``nemesis.generator``) lays scenarios and faults out around
    the cluster's ``detectors``, on its ``brokers``, within its ``capabilities``. Without
    one, ``faults`` weighs kinds (``kill``, ``bounce``, ``pause``, ``freeze``,
    ``partition``, ``netem``, ``slow``, ``corrupt``, ``truncate``, ``rollback``,
    ``power-loss``); a fault starts every ``interval_s`` (drawn between min and
    max) and is healed ``duration_s`` later (at ``time_limit_s`` at the latest). ``targets``
    lists, per kind, the target strings to draw from; ``shapes`` the partition shapes. Two
    faults of one kind never overlap unless the kind is in ``allow_overlap``.
    """

    faults: Mapping[str, float] = field(default_factory=dict)
    interval_s: tuple[float, float] = (10.0, 20.0)
    duration_s: tuple[float, float] = (5.0, 15.0)
    targets: Mapping[str, Sequence[str]] = field(default_factory=dict)
    shapes: Sequence[str] = DEFAULT_SHAPES
    partition_among: str = "all"
    netem: NetemSpec = field(default_factory=lambda: NetemSpec(delay_ms=100.0, jitter_ms=50.0))
    time_limit_s: float = 60.0
    seed: int = 0
    allow_overlap: frozenset[str] = frozenset()
    generator: Any = None
    detectors: Detectors = field(default_factory=Detectors)
    brokers: tuple[str, ...] = ("n1", "n2", "n3")
    capabilities: frozenset[str] = CAPABILITIES

    def __post_init__(self) -> None:
        object.__setattr__(self, "interval_s", _pair("interval_s", self.interval_s))
        object.__setattr__(self, "duration_s", _pair("duration_s", self.duration_s))
        object.__setattr__(self, "faults", {k: float(v) for k, v in self.faults.items()})
        object.__setattr__(self, "targets", {k: list(v) for k, v in sorted(self.targets.items())})
        object.__setattr__(self, "shapes", tuple(self.shapes))
        object.__setattr__(self, "allow_overlap", frozenset(self.allow_overlap))
        object.__setattr__(self, "time_limit_s", float(self.time_limit_s))
        for kind, weight in self.faults.items():
            if kind not in KINDS:
                raise FaultError(f"unknown kind of fault {kind!r}; use {', '.join(KINDS)}")
            if not math.isfinite(weight) or weight < 0:
                raise FaultError(f"the weight of {kind} must be a number >= 0, got {weight}")
        object.__setattr__(self, "brokers", tuple(self.brokers))
        object.__setattr__(self, "capabilities", frozenset(self.capabilities))
        if not self.capabilities <= CAPABILITIES:
            raise FaultError(f"capabilities: use some of {sorted(CAPABILITIES)}")
        if self.generator is not None:
            parse_generator(self.generator)
        elif not any(self.faults.values()):
            raise FaultError(
                "a schedule needs a generator, or at least one kind of fault with a weight above 0"
            )
        if self.interval_s[1] <= 0:
            raise FaultError("interval_s must allow a positive interval between faults")
        for kind, targets in self.targets.items():
            if kind not in KINDS:
                raise FaultError(f"targets given for unknown kind {kind!r}")
            for target in targets:
                parse_target(target)
        for shape in self.shapes:
            if shape not in SHAPES:
                raise FaultError(f"unknown partition shape {shape!r}; use {', '.join(SHAPES)}")
        if self.faults.get("partition") and not self.shapes:
            raise FaultError("partition faults need at least one shape")
        if self.partition_among not in PARTITION_AMONG:
            raise FaultError(f"partition_among must be one of {PARTITION_AMONG}")
        if "partition" in self.allow_overlap:
            raise FaultError("partitions cannot overlap: a new grudge replaces the old one")
        if not (math.isfinite(self.time_limit_s) and self.time_limit_s > 0):
            raise FaultError(f"time_limit_s must be positive, got {self.time_limit_s}")

    def targets_for(self, kind: str) -> list[str]:
        return list(self.targets.get(kind, DEFAULT_TARGETS[kind]))

    def to_json(self) -> dict[str, Any]:
        return {
            "faults": dict(sorted(self.faults.items())),
            "interval_s": list(self.interval_s),
            "duration_s": list(self.duration_s),
            "targets": {k: list(v) for k, v in self.targets.items()},
            "shapes": list(self.shapes),
            "partition_among": self.partition_among,
            "netem": self.netem.to_value(),
            "time_limit_s": self.time_limit_s,
            "seed": self.seed,
            "allow_overlap": sorted(self.allow_overlap),
            "generator": self.generator,
            "detectors": self.detectors.to_json(),
            "brokers": list(self.brokers),
            "capabilities": sorted(self.capabilities),
            # Said outright: a schedule written before this capability existed had ZooKeeper.
            **({} if "zookeeper" in self.capabilities else {"zookeeper": False}),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ScheduleSpec:
        try:
            return cls(
                faults=dict(doc.get("faults") or {}),
                interval_s=tuple(doc.get("interval_s", (10.0, 20.0))),
                duration_s=tuple(doc.get("duration_s", (5.0, 15.0))),
                targets=dict(doc.get("targets", {})),
                shapes=tuple(doc.get("shapes", DEFAULT_SHAPES)),
                partition_among=doc.get("partition_among", "all"),
                netem=NetemSpec.from_value(doc["netem"]) if "netem" in doc else NetemSpec(100, 50),
                time_limit_s=float(doc.get("time_limit_s", 60.0)),
                seed=int(doc.get("seed", 0)),
                allow_overlap=frozenset(doc.get("allow_overlap", ())),
                generator=doc.get("generator"),
                detectors=Detectors.from_json(doc.get("detectors") or {}),
                brokers=tuple(doc.get("brokers") or ("n1", "n2", "n3")),
                capabilities=frozenset(doc.get("capabilities", CAPABILITIES))
                | (frozenset({"zookeeper"}) if doc.get("zookeeper", True) else frozenset()),
            )
        except (KeyError, TypeError, ValueError) as err:
            if isinstance(err, FaultError):
                raise
            raise FaultError(f"malformed schedule spec ({type(err).__name__}: {err})") from None


@dataclass(frozen=True)
class ScheduledFault:
    """A fault and when it strikes, in seconds from the start of the schedule.

    ``id`` numbers the faults of a schedule; a healing fault names the fault it heals in
    ``heals``, so that the runner can give it that fault's resolved targets; a fault that
    must hit the nodes an earlier one hit names it in ``same_as``. ``scenario`` names the
    scenario the fault belongs to, if any, ``instance`` which run of it (the faults of one
    run share it; a retried run keeps it) and ``variant`` the way that run was laid out.
    """

    at_s: float
    fault: Fault
    id: int
    heals: int | None = None
    same_as: int | None = None
    scenario: str | None = None
    instance: int | None = None
    variant: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"id": self.id, "at_s": self.at_s, **self.fault.to_json()}
        if self.heals is not None:
            doc["heals"] = self.heals
        if self.same_as is not None:
            doc["same_as"] = self.same_as
        if self.scenario is not None:
            doc["scenario"] = self.scenario
        if self.instance is not None:
            doc["instance"] = self.instance
        if self.variant is not None:
            doc["variant"] = self.variant
        return doc

    @classmethod
    def from_json(cls, doc: object) -> ScheduledFault:
        if not isinstance(doc, Mapping):
            raise FaultError(f"a scheduled fault is an object, got {doc!r}")
        at_s, ident, heals = doc.get("at_s"), doc.get("id"), doc.get("heals")
        if isinstance(at_s, bool) or not isinstance(at_s, int | float) or at_s < 0:
            raise FaultError(f"scheduled fault {doc!r}: at_s must be seconds >= 0")
        if isinstance(ident, bool) or not isinstance(ident, int):
            raise FaultError(f"scheduled fault {doc!r}: id must be an integer")
        same_as, scenario = doc.get("same_as"), doc.get("scenario")
        instance = doc.get("instance")
        for name, link in (("heals", heals), ("same_as", same_as), ("instance", instance)):
            if link is not None and (isinstance(link, bool) or not isinstance(link, int)):
                raise FaultError(f"scheduled fault {doc!r}: {name} must be an id")
        variant = doc.get("variant")
        for name, text in (("scenario", scenario), ("variant", variant)):
            if text is not None and not isinstance(text, str):
                raise FaultError(f"scheduled fault {doc!r}: {name} must be a name")
        return cls(
            float(at_s), Fault.from_json(doc), ident, heals, same_as, scenario, instance, variant
        )


@dataclass(frozen=True)
class Schedule:
    """Faults in time order. ``resolved``: recorded as applied (replays the same nodes)."""

    faults: tuple[ScheduledFault, ...]
    seed: int | None = None
    spec: ScheduleSpec | None = None
    resolved: bool = False
    scenarios: tuple[dict[str, Any], ...] = ()
    """Each run of a scenario as judged: its aim, whether it reached its state, evidence."""

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.faults, key=lambda s: (s.at_s, s.id)))
        ids = [s.id for s in ordered]
        if len(set(ids)) != len(ids):
            raise FaultError("schedule: two faults share an id")
        for s in ordered:
            if s.heals is not None and s.heals not in ids:
                raise FaultError(f"schedule: fault {s.id} heals unknown fault {s.heals}")
            if s.same_as is not None and s.same_as not in ids:
                raise FaultError(f"schedule: fault {s.id} is the same as unknown fault {s.same_as}")
        object.__setattr__(self, "faults", ordered)

    def __len__(self) -> int:
        return len(self.faults)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": SCHEDULE_VERSION,
            "seed": self.seed,
            "resolved": self.resolved,
            "spec": None if self.spec is None else self.spec.to_json(),
            "faults": [s.to_json() for s in self.faults],
            **({"scenarios": list(self.scenarios)} if self.scenarios else {}),
        }

    @classmethod
    def from_json(cls, doc: object) -> Schedule:
        if not isinstance(doc, Mapping) or not isinstance(doc.get("faults"), list):
            raise FaultError('a schedule is {"version": 1, "faults": [...], ...}')
        if doc.get("version", SCHEDULE_VERSION) != SCHEDULE_VERSION:
            raise FaultError(
                f"schedule version {doc.get('version')!r} is not supported (this squall reads "
                f"version {SCHEDULE_VERSION})"
            )
        spec = doc.get("spec")
        return cls(
            tuple(ScheduledFault.from_json(item) for item in doc["faults"]),
            seed=doc.get("seed"),
            spec=None if spec is None else ScheduleSpec.from_json(spec),
            resolved=bool(doc.get("resolved", False)),
            scenarios=tuple(doc.get("scenarios") or ()),
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"


def _draw_fault(kind: str, spec: ScheduleSpec, rng: random.Random) -> Fault:
    f = KINDS[kind][0]
    if f in MEMBER_FAULTS:
        return Fault(f, {})  # a member drawn among those running when it strikes
    targets = spec.targets_for(kind)
    if kind == "partition":
        shape = rng.choice(list(spec.shapes))
        value: dict[str, Any] = {"shape": shape, "among": spec.partition_among}
        if shape in TARGETED_SHAPES and targets:
            value["targets"] = [rng.choice(targets)]
        return Fault(f, value)
    if kind == "netem":
        return Fault(f, {"targets": [rng.choice(targets)], **spec.netem.to_value()})
    if not targets:
        raise FaultError(f"{kind} faults need targets; give targets[{kind!r}] in the spec")
    return Fault(f, {"targets": [rng.choice(targets)]})


def generate_schedule(spec: ScheduleSpec) -> Schedule:
    """Draw a schedule from ``random.Random(spec.seed)``; deterministic for a spec."""
    if spec.generator is not None:
        return _lay_out(spec)
    rng = random.Random(spec.seed)
    kinds = [kind for kind in KINDS if spec.faults.get(kind, 0) > 0]
    busy_until: dict[str, float] = {}
    entries: list[ScheduledFault] = []
    at = 0.0
    while True:
        at += rng.uniform(*spec.interval_s)
        start = round(at, 3)
        if start >= spec.time_limit_s:
            break
        free = [k for k in kinds if k in spec.allow_overlap or busy_until.get(k, 0.0) <= start]
        if not free:
            continue
        kind = rng.choices(free, weights=[spec.faults[k] for k in free])[0]
        fault = _draw_fault(kind, spec, rng)
        entries.append(ScheduledFault(start, fault, len(entries)))
        heal = KINDS[kind][1]
        if heal is None:
            continue
        end = min(round(start + rng.uniform(*spec.duration_s), 3), spec.time_limit_s)
        busy_until[kind] = end
        entries.append(ScheduledFault(end, Fault(heal), len(entries), heals=entries[-1].id))
    return Schedule(tuple(entries), seed=spec.seed, spec=spec)


def not_applicable(spec: ScheduleSpec) -> dict[str, str]:
    """The scenarios and kinds of fault the spec asks for that its capabilities cannot
    apply, and what each needs: a schedule leaves them out."""
    if spec.generator is not None:
        layout = Layout(
            rng=random.Random(spec.seed),
            detectors=spec.detectors,
            brokers=spec.brokers,
            time_limit_s=spec.time_limit_s,
            capabilities=spec.capabilities,
        )
        return parse_generator(spec.generator).unavailable(layout)
    return {
        kind: KIND_NEEDS[kind]
        for kind, weight in sorted(spec.faults.items())
        if weight > 0 and kind in KIND_NEEDS and KIND_NEEDS[kind] not in spec.capabilities
    }


def _lay_out(spec: ScheduleSpec) -> Schedule:
    """The schedule of a generator: its steps in time order, healing steps by the time limit,
    other steps dropped past it."""
    layout = Layout(
        rng=random.Random(spec.seed),
        detectors=spec.detectors,
        brokers=spec.brokers,
        time_limit_s=spec.time_limit_s,
        capabilities=spec.capabilities,
    )
    generator = parse_generator(spec.generator)
    if not generator.available(layout):
        raise FaultError(
            f"the generator needs what this runtime cannot do (it offers "
            f"{', '.join(sorted(spec.capabilities)) or 'process faults only'})"
        )
    generator.lay(layout, 0.0)
    kept: dict[int, int] = {}
    entries: list[ScheduledFault] = []
    # Generators laid out alongside each other add their steps stream by stream.
    in_time = sorted(range(len(layout.steps)), key=lambda n: (layout.steps[n].at_s, n))
    for index in in_time:
        step = layout.steps[index]
        at = step.at_s
        if at >= spec.time_limit_s:
            if step.heals is None or step.heals not in kept:
                continue
            at = spec.time_limit_s
        kept[index] = len(entries)
        entries.append(
            ScheduledFault(
                at,
                step.fault,
                len(entries),
                heals=None if step.heals is None else kept.get(step.heals),
                same_as=None if step.same_as is None else kept.get(step.same_as),
                scenario=step.scenario,
                instance=step.instance,
                variant=step.variant,
            )
        )
    return Schedule(tuple(entries), seed=spec.seed, spec=spec)


class FaultApplier(Protocol):
    """What runs a schedule's faults: a Nemesis."""

    def apply(self, fault: Fault) -> Fault: ...


_RECORDED_ERRORS = (TargetError, ClusterError, OSError)
"""Failures that are part of the test (recorded, the schedule goes on), unlike bad data or an
unsupported fault, which stop the run."""


class ScheduleRunner:
    """Applies a schedule's faults at their times and reports each as applied.

    ``on_applied(fault)`` receives every fault as applied (the history writer, later); a
    fault that failed is reported too, with an ``error`` in its value, and the schedule goes
    on. ``stop()`` (or the ``stop`` event) ends the run early; healing is the caller's job.

    With a ``watch`` (``nemesis.scenario_watch``), each run of a scenario of a schedule not
    yet applied waits for the cluster to settle and a quiet time, aims at a partition
    chosen by the scenario's rule, and is judged once it ended and the cluster settled
    again; a run that did not reach its state is tried once more, at once, on another
    partition and another way: laid out anew as the scenario's next variant, its durations
    drawn from the longer half of their ranges (the same faults again when the schedule
    does not say how it was drawn). The time this takes moves every later fault as much.
    ``on_judged`` receives each run's outcome; the applied schedule keeps them all
    (``scenarios``), and the faults of every attempt as applied, so a replay applies them
    all as they were.
    """

    def __init__(
        self,
        nemesis: FaultApplier,
        *,
        on_applied: Callable[[Fault], None] = lambda _fault: None,
        clock: Callable[[], float] = time.monotonic,
        stop: threading.Event | None = None,
        watch: ScenarioWatch | None = None,
        on_judged: Callable[[dict[str, Any]], None] = lambda _outcome: None,
    ) -> None:
        self.nemesis = nemesis
        self.on_applied = on_applied
        self.clock = clock
        self.watch = watch
        self.on_judged = on_judged
        self._stop = stop or threading.Event()
        self._started = 0.0
        self._shift = 0.0
        self._next_id = 0
        self._applied: dict[int, Fault] = {}
        self._record: list[ScheduledFault] = []
        self._record_lock = threading.Lock()
        """Held around ``_applied`` and ``_record``: members' faults run alongside."""
        self._spec: ScheduleSpec | None = None
        self.outcomes: list[dict[str, Any]] = []

    def stop(self) -> None:
        self._stop.set()

    def run(self, schedule: Schedule) -> Schedule:
        """Run schedule from now; the schedule as applied (resolved, for ``schedule.json``)."""
        self._started = self.clock()
        self._shift = 0.0
        self._applied, self._record, self.outcomes = {}, [], []
        self._spec = schedule.spec
        self._next_id = max((entry.id for entry in schedule.faults), default=-1) + 1
        watching = self.watch is not None and not schedule.resolved
        members = [e for e in schedule.faults if e.fault.f in MEMBER_FAULTS]
        faults = [e for e in schedule.faults if e.fault.f not in MEMBER_FAULTS]
        alongside = (
            threading.Thread(
                target=self._run_alongside, args=(members,), name="nemesis-members", daemon=True
            )
            if members
            else None
        )
        if alongside is not None:
            alongside.start()
        try:
            for chunk in _runs(faults) if watching else [[e] for e in faults]:
                if self._stop.is_set():
                    break
                if watching and chunk[0].instance is not None and chunk[0].scenario is not None:
                    self._run_scenario(chunk)
                    continue
                for entry in chunk:
                    if self._apply_at(entry) is None:
                        break
        finally:
            if alongside is not None:
                alongside.join()
        record = sorted(self._record, key=lambda entry: entry.at_s)
        return Schedule(
            tuple(record),
            seed=schedule.seed,
            spec=schedule.spec,
            resolved=True,
            scenarios=tuple(self.outcomes),
        )

    def _run_alongside(self, entries: list[ScheduledFault]) -> None:
        """The consumer-group members' faults, each at its time, on a timeline of their own
        (a scenario tried again does not move them)."""
        for entry in entries:
            if self._apply_at(entry, shifted=False) is None:
                return

    def _apply_at(
        self,
        entry: ScheduledFault,
        aim: Aim | None = None,
        attempt: int = 1,
        *,
        shifted: bool = True,
    ) -> Fault | None:
        """Apply entry at its time (moved by the shift, when ``shifted``); None when stopped
        first."""
        shift = self._shift if shifted else 0.0
        delay = self._started + shift + entry.at_s - self.clock()
        if self._stop.wait(max(0.0, delay)):
            return None
        with self._record_lock:
            fault = _with_linked_targets(entry, self._applied)
        if aim is not None:
            fault = aimed(fault, aim.key, idle=bool(aim.idle_followers))
        if attempt > 1:
            fault = fault.with_value(attempt=attempt)
        try:
            result = self.nemesis.apply(fault)
        except FaultApplicationError as err:
            result = err.applied
        except _RECORDED_ERRORS as err:
            result = fault.with_value(error=f"{type(err).__name__}: {err}")
        if entry.scenario is not None:
            result = result.with_value(scenario=entry.scenario)
        if entry.variant is not None:
            result = result.with_value(variant=entry.variant)
        with self._record_lock:
            self._applied[entry.id] = result
            self._record.append(
                ScheduledFault(
                    round(entry.at_s + shift, 3),
                    result,
                    entry.id,
                    entry.heals,
                    entry.same_as,
                    entry.scenario,
                    entry.instance,
                    entry.variant,
                )
            )
        self.on_applied(result)
        return result

    def _run_scenario(self, entries: list[ScheduledFault]) -> None:
        """One run of a scenario, judged, and tried again where it fell short."""
        watch = self.watch
        assert watch is not None
        name = entries[0].scenario or ""
        rule = SCENARIOS[name].aim if name in SCENARIOS else "any"
        avoid: list[str] = []
        durations = "drawn"
        for attempt in range(1, watch.attempts + 1):
            planned = self._started + self._shift + entries[0].at_s
            if self._stop.wait(max(0.0, planned - self.clock())):
                return
            before = watch.settle(self._stop)
            if self._stop.wait(watch.quiet_s()):
                return
            if self._past_time_limit():
                self._cut_off(entries[0], attempt, durations, before)
                return
            aim: Aim | None = None
            missing = ""
            try:
                aim = watch.aim(rule, avoid=avoid)
            except (TargetError, ClusterError, OSError) as err:
                missing = f"no partition to aim at: {err}"
            mark = watch.mark()
            # the run's first fault strikes now, and the rest keep their spacing
            self._shift += max(0.0, self.clock() - planned)
            began_s = self.clock() - self._started
            applied = [self._apply_at(entry, aim, attempt) for entry in entries]
            outcome: dict[str, Any] = {
                "scenario": name,
                "instance": entries[0].instance,
                "attempt": attempt,
                "variant": entries[0].variant,
                "durations": durations,
                "aim": None if aim is None else aim.to_json(),
                "started_s": round(began_s, 3),
                "ended_s": round(self.clock() - self._started, 3),
                "settled_before": before.to_json(),
            }
            if self._stop.is_set():
                outcome.update(reached=None, missing="the test ended before the scenario did")
            else:
                after = watch.settle(self._stop)
                outcome["settled_after"] = after.to_json()
                faults = [fault for fault in applied if fault is not None]
                reach = (
                    Reach(False, missing=missing)
                    if aim is None
                    else watch.judge(name, aim, faults, mark)
                )
                outcome.update(reach.to_json())
            self.outcomes.append(outcome)
            self.on_judged(outcome)
            if outcome["reached"] is not False or self._stop.is_set():
                return
            if aim is not None:
                avoid.append(aim.key)
            entries, durations = self._again(entries)

    def _past_time_limit(self) -> bool:
        """Whether the schedule's time limit has passed (settling and quiet times moved the
        run there): the workload is ending, and a run started now would be cut off by it."""
        spec = self._spec
        return spec is not None and self.clock() - self._started >= spec.time_limit_s

    def _cut_off(
        self, first: ScheduledFault, attempt: int, durations: str, before: Settling
    ) -> None:
        """Record a run not started because the time limit passed first (not judged)."""
        now = round(self.clock() - self._started, 3)
        outcome: dict[str, Any] = {
            "scenario": first.scenario,
            "instance": first.instance,
            "attempt": attempt,
            "variant": first.variant,
            "durations": durations,
            "aim": None,
            "started_s": now,
            "ended_s": now,
            "settled_before": before.to_json(),
            "reached": None,
            "missing": "the test's time limit passed before the run could start",
        }
        self.outcomes.append(outcome)
        self.on_judged(outcome)

    def _again(self, entries: list[ScheduledFault]) -> tuple[list[ScheduledFault], str]:
        """The run once more, from now, under new ids, and how its durations were drawn:
        laid out anew the next way where it can be, else the same faults again."""
        now = self.clock() - self._started - self._shift
        relaid = self._relaid(entries[0], now)
        if relaid is not None:
            return relaid, "longer"
        ids = {entry.id: self._next_id + n for n, entry in enumerate(entries)}
        self._next_id += len(entries)
        base = entries[0].at_s
        copied = [
            replace(
                entry,
                at_s=round(now + entry.at_s - base, 3),
                id=ids[entry.id],
                heals=ids.get(entry.heals, entry.heals) if entry.heals is not None else None,
                same_as=ids.get(entry.same_as, entry.same_as)
                if entry.same_as is not None
                else None,
            )
            for entry in entries
        ]
        return copied, "drawn"

    def _relaid(self, first: ScheduledFault, now: float) -> list[ScheduledFault] | None:
        """The run of ``first``'s scenario laid out from ``now`` as its next variant, every
        duration from the longer half of its range; None when the schedule does not say how
        it was drawn (no spec) or the scenario is unknown."""
        scenario = SCENARIOS.get(first.scenario or "")
        spec, watch = self._spec, self.watch
        if scenario is None or spec is None or watch is None or first.instance is None:
            return None
        layout = Layout(
            rng=watch.rng,
            detectors=spec.detectors,
            brokers=spec.brokers,
            time_limit_s=math.inf,
            capabilities=spec.capabilities,
            longer=True,
        )
        if not scenario.available(layout):
            return None
        variant = scenario.after(layout, first.variant)
        with layout.run_of(scenario.name, first.instance, variant.name):
            variant.lay(layout, 0.0)
        base = self._next_id
        self._next_id += len(layout.steps)
        return [
            ScheduledFault(
                round(now + step.at_s, 3),
                step.fault,
                base + n,
                heals=None if step.heals is None else base + step.heals,
                same_as=None if step.same_as is None else base + step.same_as,
                scenario=step.scenario,
                instance=step.instance,
                variant=step.variant,
            )
            for n, step in enumerate(layout.steps)
        ]


def _runs(faults: Sequence[ScheduledFault]) -> list[list[ScheduledFault]]:
    """The schedule cut into runs of scenarios (every fault from a run's first to its last)
    and single faults."""
    last = {entry.instance: n for n, entry in enumerate(faults) if entry.instance is not None}
    chunks: list[list[ScheduledFault]] = []
    n = 0
    while n < len(faults):
        entry = faults[n]
        end = n if entry.instance is None else last[entry.instance]
        chunks.append(list(faults[n : end + 1]))
        n = end + 1
    return chunks


def _with_linked_targets(entry: ScheduledFault, applied: Mapping[int, Fault]) -> Fault:
    """The fault with the nodes of the fault it is the same as, once that one hit nodes."""
    fault = entry.fault
    if entry.same_as is not None:
        earlier = applied.get(entry.same_as)
        hit = [] if earlier is None else earlier.targets or []
        if hit and all(parse_target(t).role == "node" for t in hit):
            return fault.with_value(targets=hit)
    return _with_healed_targets(entry, applied)


def _with_healed_targets(entry: ScheduledFault, applied: Mapping[int, Fault]) -> Fault:
    """A healing fault without targets heals exactly the nodes (members) its fault hit."""
    fault = entry.fault
    healed = applied.get(entry.heals) if entry.heals is not None else None
    if fault.f == "resume-member":
        hit = [] if healed is None else healed.value.get("members", [])
        return fault if "members" in fault.value else fault.with_value(members=hit)
    if healed is None or fault.targets is not None or fault.f not in TARGETS_DEFAULT_TO_ACTIVE:
        return fault
    hit = healed.targets or []
    if any(parse_target(t).role != "node" for t in hit):
        hit = []  # the fault failed before its roles were resolved: it hit nobody
    return fault.with_value(targets=hit)


def replay(
    schedule: Schedule,
    nemesis: FaultApplier,
    *,
    on_applied: Callable[[Fault], None] = lambda _fault: None,
    stop: threading.Event | None = None,
) -> Schedule:
    """Run a saved schedule again. A resolved schedule (as a run saved it) applies exactly
    the recorded nodes and grudges; an unresolved one resolves its roles anew."""
    return ScheduleRunner(nemesis, on_applied=on_applied, stop=stop).run(schedule)
