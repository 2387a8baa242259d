"""A small language that composes faults and scenarios into a timeline, as Jepsen's
generators compose operations.

A generator is plain data (JSON, or a TOML table in a test spec):

- ``"zombie-leader"`` or ``{"scenario": "zombie-leader"}``: a named scenario
  (``nemesis.scenarios``), its variant drawn (``{"scenario": ..., "variant": "paused"}``:
  that one); ``"default"`` is the default mix, the storage family
  (``nemesis.scenarios.DISK_SCENARIOS``) included (``"default-with-disks"``, its older name,
  is the same), ``"default-without-disks"`` the default mix without the storage family;
- ``{"fault": "kill", "targets": ["leader"], "duration": "1.5-2.5 session"}``: one fault and
  the fault that heals it ``duration`` later (other keys go into the fault's value);
- ``{"sequence": [G, ...], "gap": SPAN}``: one after another;
- ``{"repeat": G, "times": N, "gap": SPAN}``: the same generator N times;
- ``{"mix": [{"weight": W, "do": G}, ...]}``: one of them, drawn by weight;
- ``{"cycle": [G, ...]}``: each use takes the next of a shuffled round, so every member
  comes up before any comes up twice;
- ``{"first": [G, ...]}``: the first of them the runtime can apply (a stronger form of a
  state where the runtime allows it, a weaker one elsewhere);
- ``{"stagger": G, "gap": SPAN}``: G again and again, a gap apart, until the time limit;
- ``{"phases": [{"for_s": S, "do": G}, ...]}``: each generator for its share of the time.

SPANs are durations around the cluster's detectors (``nemesis.timing``). Laying a generator
out draws every choice from one seeded ``random.Random``: the same spec, seed, detectors and
nodes give the same timeline. Roles (``leader``, ``followers``, ``controller``) stay roles
until the fault strikes; a step may take the nodes an earlier step hit (``same_as``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nemesis.errors import FaultError
from nemesis.fault import Fault
from nemesis.grudge import SHAPES
from nemesis.layout import Layout
from nemesis.scenarios import (
    DEFAULT_FAMILIES,
    DISK_SCENARIOS,
    DISKS_FAMILY,
    SCENARIOS,
    needs_of,
    turn_scenarios,
)
from nemesis.timing import Span

SINGLE_KINDS: dict[str, tuple[str, str | None]] = {
    "kill": ("kill", "start"),
    "bounce": ("bounce", None),
    "pause": ("pause", "resume"),
    "freeze": ("freeze", "unfreeze"),
    "partition": ("start-partition", "stop-partition"),
    "netem": ("start-netem", "stop-netem"),
    "slow": ("start-slow", "stop-slow"),
    "corrupt": ("corrupt-file", "start"),
    "truncate": ("truncate-file", "start"),
    "rollback": ("snapshot", "rollback"),
    "power-loss": ("power-loss", "start"),
    "member-pause": ("pause-member", "resume-member"),
    "member-crash": ("kill-member", None),
    "member-leave": ("leave-member", None),
}
"""A kind of single fault -> (the fault, the fault that heals it; None: instantaneous). A
``rollback`` is a snapshot, and ``duration`` later the rollback to it."""
KIND_NEEDS = {
    "partition": "partitions",
    "netem": "netem",
    "freeze": "freeze",
    "corrupt": "disks",
    "truncate": "disks",
    "rollback": "disks",
    "power-loss": "lazy-disk",
    "member-pause": "members",
    "member-crash": "members",
    "member-leave": "members",
}
"""Kinds that need a capability of the runtime (``nemesis.protocols.Capabilities``)."""
DEFAULT_KIND_TARGETS = {
    "kill": ["leader"],
    "bounce": ["leader"],
    "pause": ["leader"],
    "freeze": ["leader"],
    "slow": ["follower"],
    "netem": ["all"],
    "corrupt": ["follower"],
    "truncate": ["follower"],
    "rollback": ["follower"],
    "power-loss": ["leader"],
}
"""Whom a single fault of a generator hits when it names no targets."""
DEFAULT_DURATION = Span(1.3, 2.0, "session")
DEFAULT_GAP = Span(0.3, 0.6, "session")
NO_GAP = Span(0, 0)
MEMBER_PAUSE = Span(1.5, 2.5, "member")
"""A member paused past its session timeout: it wakes up a zombie, its partitions given to
the others meanwhile."""
MEMBER_GAP = Span(0.5, 1.5, "member")
DEFAULT_DURATIONS = {"member-pause": MEMBER_PAUSE}
"""Kinds whose faults last otherwise than ``DEFAULT_DURATION`` unless told."""


class Generator(Protocol):
    """Lays its faults out from ``start_s``; returns when its last fault ends."""

    def lay(self, layout: Layout, start_s: float) -> float: ...

    def available(self, layout: Layout) -> bool:
        """Whether the runtime can apply what this generator would lay out."""
        ...

    def unavailable(self, layout: Layout) -> dict[str, str]:
        """The scenarios and kinds of fault in it that the runtime cannot apply, and what
        each needs; they are left out of the timeline (or replaced by a variant)."""
        ...

    def to_json(self) -> Any: ...


@dataclass(frozen=True)
class SingleFault:
    """One fault of a kind, healed after ``duration`` (nothing to heal for a bounce)."""

    kind: str
    value: Mapping[str, Any] = field(default_factory=dict, hash=False)
    duration: Span = DEFAULT_DURATION

    def __post_init__(self) -> None:
        if self.kind not in SINGLE_KINDS:
            raise FaultError(
                f"unknown kind of fault {self.kind!r}; use one of {', '.join(SINGLE_KINDS)}"
            )
        self.fault(random.Random(0))  # validates the value now, not when the fault strikes

    def fault(self, rng: random.Random) -> Fault:
        value = dict(self.value)
        if self.kind == "partition" and "shape" not in value and "grudge" not in value:
            value["shape"] = rng.choice([s for s in SHAPES if s not in ("one-way", "isolate-zk")])
        if self.kind == "netem" and not {"delay_ms", "jitter_ms", "loss_pct"} & set(value):
            value.update(delay_ms=100.0, jitter_ms=50.0)
        if self.kind in DEFAULT_KIND_TARGETS and "targets" not in value:
            value["targets"] = list(DEFAULT_KIND_TARGETS[self.kind])
        return Fault(SINGLE_KINDS[self.kind][0], value)

    def lay(self, layout: Layout, start_s: float) -> float:
        hit = layout.add(start_s, self.fault(layout.rng))
        heal = SINGLE_KINDS[self.kind][1]
        if heal is None:
            return start_s
        end = start_s + layout.draw(self.duration)
        layout.add(end, Fault(heal), heals=hit)
        return end

    def available(self, layout: Layout) -> bool:
        need = KIND_NEEDS.get(self.kind)
        return need is None or layout.can(need)

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return {} if self.available(layout) else {self.kind: KIND_NEEDS[self.kind]}

    def to_json(self) -> dict[str, Any]:
        return {"fault": self.kind, **self.value, "duration": self.duration.to_json()}


@dataclass(frozen=True)
class NamedScenario:
    """A scenario of ``nemesis.scenarios``, laid out under its name: the given variant, or
    one drawn among those the runtime can apply."""

    name: str
    variant: str | None = None

    def __post_init__(self) -> None:
        if self.name not in SCENARIOS:
            raise FaultError(
                f"unknown scenario {self.name!r}; scenarios: {', '.join(sorted(SCENARIOS))}"
            )
        if self.variant is not None:
            SCENARIOS[self.name].variant(self.variant)

    def lay(self, layout: Layout, start_s: float) -> float:
        scenario = SCENARIOS[self.name]
        if not self.available(layout):
            raise FaultError(
                f"scenario {self.name} needs {self._needs()}, which this runtime lacks"
            )
        variant = (
            scenario.choose(layout) if self.variant is None else scenario.variant(self.variant)
        )
        instance = layout.instances
        layout.instances += 1
        with layout.run_of(self.name, instance, variant.name):
            return variant.lay(layout, start_s)

    def _needs(self) -> str | None:
        scenario = SCENARIOS[self.name]
        return (
            scenario.needs if self.variant is None else needs_of([scenario.variant(self.variant)])
        )

    def available(self, layout: Layout) -> bool:
        scenario = SCENARIOS[self.name]
        if self.variant is None:
            return scenario.available(layout)
        return scenario.variant(self.variant).available(layout)

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return {} if self.available(layout) else {self.name: str(self._needs())}

    def to_json(self) -> str | dict[str, str]:
        if self.variant is None:
            return self.name
        return {"scenario": self.name, "variant": self.variant}


@dataclass(frozen=True)
class SequenceOf:
    """Each generator after the previous one ends, ``gap`` apart."""

    items: tuple[Generator, ...]
    gap: Span = NO_GAP

    def lay(self, layout: Layout, start_s: float) -> float:
        at = start_s
        for index, item in enumerate(self.items):
            if not item.available(layout):
                continue
            if index:
                at += layout.draw(self.gap)
            at = item.lay(layout, at)
        return at

    def available(self, layout: Layout) -> bool:
        return any(item.available(layout) for item in self.items)

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return _union(layout, self.items)

    def to_json(self) -> dict[str, Any]:
        return {"sequence": [i.to_json() for i in self.items], "gap": self.gap.to_json()}


@dataclass(frozen=True)
class Repeat:
    """One generator ``times`` times, ``gap`` apart."""

    item: Generator
    times: int
    gap: Span = NO_GAP

    def __post_init__(self) -> None:
        if isinstance(self.times, bool) or not isinstance(self.times, int) or self.times < 1:
            raise FaultError(f"repeat: times must be an integer >= 1, got {self.times!r}")

    def lay(self, layout: Layout, start_s: float) -> float:
        return SequenceOf((self.item,) * self.times, self.gap).lay(layout, start_s)

    def available(self, layout: Layout) -> bool:
        return self.item.available(layout)

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return self.item.unavailable(layout)

    def to_json(self) -> dict[str, Any]:
        return {"repeat": self.item.to_json(), "times": self.times, "gap": self.gap.to_json()}


@dataclass(frozen=True)
class Mix:
    """One generator, drawn by weight among those the runtime can apply."""

    choices: tuple[tuple[float, Generator], ...]

    def __post_init__(self) -> None:
        if not self.choices or any(w < 0 for w, _ in self.choices):
            raise FaultError("mix: give at least one generator, with weights >= 0")
        if not any(w > 0 for w, _ in self.choices):
            raise FaultError("mix: at least one weight must be above 0")

    def lay(self, layout: Layout, start_s: float) -> float:
        usable = [(w, g) for w, g in self.choices if w > 0 and g.available(layout)]
        _, chosen = layout.rng.choices(usable, weights=[w for w, _ in usable])[0]
        return chosen.lay(layout, start_s)

    def available(self, layout: Layout) -> bool:
        return any(w > 0 and g.available(layout) for w, g in self.choices)

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return _union(layout, (g for w, g in self.choices if w > 0))

    def to_json(self) -> dict[str, Any]:
        return {"mix": [{"weight": w, "do": g.to_json()} for w, g in self.choices]}


@dataclass(frozen=True)
class Cycle:
    """Each use lays out the next generator of a shuffled round (a fresh round when done)."""

    items: tuple[Generator, ...]
    _rounds: dict[int, list[Generator]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.items:
            raise FaultError("cycle: give at least one generator")

    def lay(self, layout: Layout, start_s: float) -> float:
        pending = self._rounds.setdefault(id(layout), [])
        if not pending:
            pending.extend(item for item in self.items if item.available(layout))
            layout.rng.shuffle(pending)
        return pending.pop(0).lay(layout, start_s)

    def available(self, layout: Layout) -> bool:
        return any(item.available(layout) for item in self.items)

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return _union(layout, self.items)

    def to_json(self) -> dict[str, Any]:
        return {"cycle": [i.to_json() for i in self.items]}


@dataclass(frozen=True)
class FirstOf:
    """The first of ``items`` the runtime can apply; the others are left aside."""

    items: tuple[Generator, ...]

    def __post_init__(self) -> None:
        if not self.items:
            raise FaultError("first: give at least one generator")

    def chosen(self, layout: Layout) -> Generator | None:
        return next((item for item in self.items if item.available(layout)), None)

    def lay(self, layout: Layout, start_s: float) -> float:
        item = self.chosen(layout)
        if item is None:
            return self.items[0].lay(layout, start_s)  # says what the runtime lacks
        return item.lay(layout, start_s)

    def available(self, layout: Layout) -> bool:
        return self.chosen(layout) is not None

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return _union(layout, self.items)

    def to_json(self) -> dict[str, Any]:
        return {"first": [i.to_json() for i in self.items]}


@dataclass(frozen=True)
class Stagger:
    """A generator again and again, ``gap`` after each ends, until the time limit."""

    item: Generator
    gap: Span = DEFAULT_GAP

    def lay(self, layout: Layout, start_s: float) -> float:
        at = start_s
        while self.item.available(layout):
            at += layout.draw(self.gap)
            if at >= layout.time_limit_s:
                break
            at = max(self.item.lay(layout, at), at + 0.001)
        return min(at, layout.time_limit_s)

    def available(self, layout: Layout) -> bool:
        return self.item.available(layout)

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return self.item.unavailable(layout)

    def to_json(self) -> dict[str, Any]:
        return {"stagger": self.item.to_json(), "gap": self.gap.to_json()}


@dataclass(frozen=True)
class Phases:
    """Each generator in its own stretch of time, one after the other."""

    phases: tuple[tuple[float, Generator], ...]

    def __post_init__(self) -> None:
        if not self.phases or any(s <= 0 for s, _ in self.phases):
            raise FaultError("phases: give at least one phase, each with for_s > 0")

    def lay(self, layout: Layout, start_s: float) -> float:
        at = start_s
        limit = layout.time_limit_s
        for seconds, item in self.phases:
            layout.time_limit_s = min(limit, at + seconds)
            try:
                if item.available(layout):
                    item.lay(layout, at)
            finally:
                layout.time_limit_s = limit
            at += seconds
        return min(at, limit)

    def available(self, layout: Layout) -> bool:
        return any(item.available(layout) for _, item in self.phases)

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return _union(layout, (item for _, item in self.phases))

    def to_json(self) -> dict[str, Any]:
        return {"phases": [{"for_s": s, "do": g.to_json()} for s, g in self.phases]}


@dataclass(frozen=True)
class Alongside:
    """Generators laid out side by side from the same start, each on its own timeline (the
    runner applies them concurrently); ends when the last does."""

    items: tuple[Generator, ...]

    def lay(self, layout: Layout, start_s: float) -> float:
        ends = [item.lay(layout, start_s) for item in self.items if item.available(layout)]
        return max(ends, default=start_s)

    def available(self, layout: Layout) -> bool:
        return any(item.available(layout) for item in self.items)

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return _union(layout, self.items)

    def to_json(self) -> dict[str, Any]:
        return {"alongside": [item.to_json() for item in self.items]}


@dataclass(frozen=True)
class WhereAble:
    """A generator laid out where the runtime and the workload can apply it, else quietly
    left out (not counted among what the run could not do)."""

    item: Generator

    def lay(self, layout: Layout, start_s: float) -> float:
        return self.item.lay(layout, start_s) if self.item.available(layout) else start_s

    def available(self, layout: Layout) -> bool:
        return True

    def unavailable(self, layout: Layout) -> dict[str, str]:
        return {}

    def to_json(self) -> dict[str, Any]:
        return {"where-able": self.item.to_json()}


def _union(layout: Layout, items: Iterable[Generator]) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items:
        found.update(item.unavailable(layout))
    return found


WITHOUT_DISKS = "default-without-disks"
DEFAULT_GENERATORS = ("default", "default-with-disks", WITHOUT_DISKS)
"""The named rounds: the default mix (``default-with-disks`` is an older name of it), and the
default mix without the storage family."""


def default_generator(*, disks: bool = True) -> Generator:
    """squall's default: a shuffled round of the scenario families (leader change, ISR
    shrink, truncation after failover, a slow follower, a group's coordinator moved and, with
    ``disks``, the storage family), each use of a family taking its next scenario (the first of a turn's the
    runtime can apply), one after another, a third to half a session timeout apart, until
    the time limit. A family the runtime cannot apply at all sits out."""
    families: list[Generator] = []
    for family, turns in DEFAULT_FAMILIES.items():
        if not disks and family == DISKS_FAMILY:
            continue
        members: list[Generator] = []
        for turn in turns:
            names = [n for n in turn_scenarios(turn) if disks or n not in DISK_SCENARIOS]
            if len(names) == 1:
                members.append(NamedScenario(names[0]))
            elif names:
                members.append(FirstOf(tuple(NamedScenario(n) for n in names)))
        families.append(Cycle(tuple(members)))
    return Alongside((Stagger(Cycle(tuple(families))), WhereAble(member_faults())))


def member_faults() -> Generator:
    """The consumer-group members' faults of the default mix, alongside the brokers': in
    turn a member paused past its session timeout (a zombie), one crashed, another paused,
    one leaving cleanly, a member's session timeout or so apart."""
    return Stagger(
        Cycle(
            (
                SingleFault("member-pause", duration=MEMBER_PAUSE),
                SingleFault("member-crash"),
                SingleFault("member-pause", duration=MEMBER_PAUSE),
                SingleFault("member-leave"),
            )
        ),
        MEMBER_GAP,
    )


def _span(doc: Mapping[str, Any], key: str, default: Span, where: str) -> Span:
    return Span.parse(doc[key], where=f"{where}.{key}") if key in doc else default


def _keys(doc: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = set(doc) - allowed
    if unknown:
        raise FaultError(
            f"{where}: unknown keys {sorted(unknown)}; this form takes {sorted(allowed)}"
        )


def parse_generator(doc: Any, *, where: str = "generator") -> Generator:
    """A generator from its plain-data form; FaultError naming the place that is wrong."""
    if isinstance(doc, str):
        if doc in DEFAULT_GENERATORS:
            return default_generator(disks=doc != WITHOUT_DISKS)
        return NamedScenario(doc)
    if not isinstance(doc, Mapping):
        raise FaultError(f"{where}: expected a scenario name or a table, got {doc!r}")
    forms: dict[str, Callable[[Mapping[str, Any], str], Generator]] = {
        "scenario": _scenario,
        "fault": _single,
        "sequence": _sequence,
        "repeat": _repeat,
        "mix": _mix,
        "cycle": _cycle,
        "first": _first,
        "stagger": _stagger,
        "phases": _phases,
        "alongside": _alongside,
        "where-able": _where_able,
    }
    present = [key for key in forms if key in doc]
    if len(present) != 1:
        raise FaultError(
            f"{where}: a generator has exactly one of {', '.join(forms)}; got {sorted(doc)}"
        )
    return forms[present[0]](doc, f"{where}.{present[0]}")


def _scenario(doc: Mapping[str, Any], where: str) -> Generator:
    _keys(doc, {"scenario", "variant"}, where)
    if "variant" not in doc:
        return parse_generator(str(doc["scenario"]), where=where)
    if not isinstance(doc["variant"], str):
        raise FaultError(f"{where}.variant: expected a variant's name, got {doc['variant']!r}")
    try:
        return NamedScenario(str(doc["scenario"]), doc["variant"])
    except FaultError as err:
        raise FaultError(f"{where}: {err}") from None


def _single(doc: Mapping[str, Any], where: str) -> Generator:
    value = {k: v for k, v in doc.items() if k not in ("fault", "duration")}
    kind = str(doc["fault"])
    default = DEFAULT_DURATIONS.get(kind, DEFAULT_DURATION)
    return SingleFault(kind, value, _span(doc, "duration", default, where))


def _items(doc: Any, where: str) -> tuple[Generator, ...]:
    if not isinstance(doc, Sequence) or isinstance(doc, str) or not doc:
        raise FaultError(f"{where}: expected a non-empty list of generators, got {doc!r}")
    return tuple(parse_generator(item, where=f"{where}[{i}]") for i, item in enumerate(doc))


def _sequence(doc: Mapping[str, Any], where: str) -> Generator:
    _keys(doc, {"sequence", "gap"}, where)
    return SequenceOf(_items(doc["sequence"], where), _span(doc, "gap", NO_GAP, where))


def _repeat(doc: Mapping[str, Any], where: str) -> Generator:
    _keys(doc, {"repeat", "times", "gap"}, where)
    item = parse_generator(doc["repeat"], where=where)
    return Repeat(item, doc.get("times", 1), _span(doc, "gap", NO_GAP, where))


def _mix(doc: Mapping[str, Any], where: str) -> Generator:
    _keys(doc, {"mix"}, where)
    entries = doc["mix"]
    if not isinstance(entries, Sequence) or isinstance(entries, str) or not entries:
        raise FaultError(f'{where}: expected [{{"weight": W, "do": G}}, ...], got {entries!r}')
    choices = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or "do" not in entry:
            raise FaultError(f'{where}[{i}]: expected {{"weight": W, "do": G}}, got {entry!r}')
        _keys(entry, {"weight", "do"}, f"{where}[{i}]")
        weight = entry.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise FaultError(f"{where}[{i}].weight: expected a number >= 0, got {weight!r}")
        choices.append((float(weight), parse_generator(entry["do"], where=f"{where}[{i}].do")))
    return Mix(tuple(choices))


def _cycle(doc: Mapping[str, Any], where: str) -> Generator:
    _keys(doc, {"cycle"}, where)
    return Cycle(_items(doc["cycle"], where))


def _first(doc: Mapping[str, Any], where: str) -> Generator:
    _keys(doc, {"first"}, where)
    return FirstOf(_items(doc["first"], where))


def _stagger(doc: Mapping[str, Any], where: str) -> Generator:
    _keys(doc, {"stagger", "gap"}, where)
    return Stagger(
        parse_generator(doc["stagger"], where=where), _span(doc, "gap", DEFAULT_GAP, where)
    )


def _phases(doc: Mapping[str, Any], where: str) -> Generator:
    _keys(doc, {"phases"}, where)
    entries = doc["phases"]
    if not isinstance(entries, Sequence) or isinstance(entries, str) or not entries:
        raise FaultError(f'{where}: expected [{{"for_s": S, "do": G}}, ...], got {entries!r}')
    phases = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or "do" not in entry or "for_s" not in entry:
            raise FaultError(f'{where}[{i}]: expected {{"for_s": S, "do": G}}, got {entry!r}')
        _keys(entry, {"for_s", "do"}, f"{where}[{i}]")
        seconds = entry["for_s"]
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
            raise FaultError(f"{where}[{i}].for_s: expected seconds > 0, got {seconds!r}")
        phases.append((float(seconds), parse_generator(entry["do"], where=f"{where}[{i}].do")))
    return Phases(tuple(phases))


def _alongside(doc: Mapping[str, Any], where: str) -> Generator:
    _keys(doc, {"alongside"}, where)
    return Alongside(_items(doc["alongside"], where))


def _where_able(doc: Mapping[str, Any], where: str) -> Generator:
    _keys(doc, {"where-able"}, where)
    return WhereAble(parse_generator(doc["where-able"], where=where))
