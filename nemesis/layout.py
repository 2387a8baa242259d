"""A timeline of faults being laid out: its steps, and what every choice depends on (the
seeded random numbers, the cluster's detectors, its brokers, the time limit, what the
runtime can do). Generators (``nemesis.generator``) and scenarios (``nemesis.scenarios``)
lay their faults out on one."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from nemesis.fault import Fault
from nemesis.timing import Detectors, Span

CAPABILITIES = frozenset(
    {"partitions", "netem", "freeze", "disks", "lazy-disk", "zookeeper", "members"}
)
"""What a runtime may offer beyond process faults (``members``: the workload's consumers are
members of a group, in processes of their own, which the nemesis can fault)."""


@dataclass(frozen=True)
class Step:
    """One fault of a timeline: when, what, which earlier step it heals or takes nodes from."""

    at_s: float
    fault: Fault
    heals: int | None = None
    same_as: int | None = None
    scenario: str | None = None
    instance: int | None = None
    """Which run of a scenario the step belongs to (steps of one run share it)."""
    variant: str | None = None
    """The way that run gets to its state (``nemesis.scenarios.Variant``)."""


@dataclass
class Layout:
    """A timeline being laid out, and what every choice depends on."""

    rng: random.Random
    detectors: Detectors
    brokers: tuple[str, ...]
    time_limit_s: float
    capabilities: frozenset[str] = CAPABILITIES
    """What the runtime can do beyond process faults (``CAPABILITIES``)."""
    steps: list[Step] = field(default_factory=list)
    scenario: str | None = None
    instance: int | None = None
    instances: int = 0
    """How many runs of scenarios have been laid out."""
    variant: str | None = None
    longer: bool = False
    """Draw every duration from the longer half of its range (a run tried again)."""

    def add(
        self, at_s: float, fault: Fault, *, heals: int | None = None, same_as: int | None = None
    ) -> int:
        """Add a step; its index (what later steps name in ``heals`` and ``same_as``)."""
        self.steps.append(
            Step(
                round(at_s, 3),
                fault,
                heals,
                same_as,
                self.scenario,
                self.instance,
                self.variant,
            )
        )
        return len(self.steps) - 1

    def draw(self, span: Span) -> float:
        return (span.longer_half() if self.longer else span).draw(self.detectors, self.rng)

    @contextmanager
    def run_of(self, scenario: str, instance: int, variant: str) -> Iterator[None]:
        """Steps added inside belong to that run of that scenario, laid out that way."""
        outer = self.scenario, self.instance, self.variant
        self.scenario, self.instance, self.variant = scenario, instance, variant
        try:
            yield
        finally:
            self.scenario, self.instance, self.variant = outer

    def can(self, capability: str) -> bool:
        return capability in self.capabilities
