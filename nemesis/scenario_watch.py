"""Watching scenarios run: the partition each run aims at, the cluster settling between
runs, and whether each run reached its state, from the SUT's events as they are logged.

The schedule runner asks, for every run of a scenario: before it, that the cluster has
settled since the last heal (a leader for every partition of the workload and of its
consumer groups' state, every replica back in its ISR, a controller; up to a bound of a few
session timeouts), then leaves a
quiet time of a few fetch rounds in which nothing strikes, so that a node rejoining as
follower shows what its rejoin did before it is struck again; then which partition the run
aims at (``nemesis.aim``); after it, once settled again, whether it reached its state
(``nemesis.reach``). A run that did not is tried again on another partition, and another
way (the schedule runner lays it out anew: ``nemesis.scenarios.Scenario.after``).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from nemesis.aim import Aim, choose_partition
from nemesis.errors import ClusterError, TargetError
from nemesis.fault import Fault
from nemesis.protocols import EventSource, RoleObserver
from nemesis.reach import Reach, ScenarioRun
from nemesis.scenarios import SCENARIOS
from nemesis.targets import ClusterView
from nemesis.timing import Detectors, Span

SETTLE_BOUND = Span(3.0, 3.0, "session")
"""The longest the runner waits for the cluster to settle before the next run."""
QUIET = Span(2.0, 4.0, "fetch")
"""Time after the cluster settled in which nothing strikes."""
ATTEMPTS = 2
"""Runs of one scenario instance at most: the first, and one more on another partition,
laid out another way."""


def unsettled(view: ClusterView) -> list[str]:
    """What keeps the cluster of ``view`` from being settled; [] when it is."""
    problems = [] if view.controller is not None and view.controller >= 0 else ["no controller"]
    for key, state in sorted({**view.partitions, **view.groups}.items()):
        if state.leader < 0:
            problems.append(f"{key} has no leader")
        missing = sorted(set(state.replicas) - set(state.isr))
        if missing:
            problems.append(f"{key}: replicas {missing} are not in its ISR {list(state.isr)}")
    return problems


@dataclass(frozen=True)
class Settling:
    """How waiting for the cluster to settle went."""

    settled: bool
    waited_s: float
    unsettled: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"settled": self.settled, "waited_s": round(self.waited_s, 3)}
        if self.unsettled:
            doc["unsettled"] = self.unsettled
        return doc


class ScenarioWatch:
    """Observes the cluster for the schedule runner: settling, aims and reach."""

    def __init__(
        self,
        roles: RoleObserver,
        events: EventSource,
        keys: Sequence[str],
        detectors: Detectors,
        *,
        rng: random.Random,
        settle_bound: Span = SETTLE_BOUND,
        quiet: Span = QUIET,
        attempts: int = ATTEMPTS,
        poll_s: float = 0.5,
        observe_timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        group_keys: Sequence[str] = (),
    ) -> None:
        """``keys`` are the workload's partitions; ``group_keys`` the partitions that hold
        its consumer groups' state (none: the workload has no group), which the
        ``group-state`` aim picks among."""
        if not keys:
            raise TargetError("a scenario watch needs the workload's partitions")
        self.roles = roles
        self.events = events
        self.keys = tuple(keys)
        self.group_keys = tuple(k for k in group_keys if k not in self.keys)
        self.detectors = detectors
        self.rng = rng
        self.settle_bound = settle_bound
        self.quiet = quiet
        self.attempts = attempts
        self.poll_s = poll_s
        self.observe_timeout_s = observe_timeout_s
        self.clock = clock
        self._seen: list[dict[str, Any]] = []

    def view(self) -> ClusterView:
        observed = self.roles.observe(
            (*self.keys, *self.group_keys), controller=True, timeout_s=self.observe_timeout_s
        )
        if not self.group_keys:
            return observed
        states = observed.partitions
        return replace(
            observed,
            partitions={k: v for k, v in states.items() if k not in self.group_keys},
            groups={k: v for k, v in states.items() if k in self.group_keys},
        )

    def settle(self, stop: threading.Event) -> Settling:
        """Wait until the cluster has settled, up to the bound (or ``stop``)."""
        started = self.clock()
        bound = self.settle_bound.draw(self.detectors, self.rng)
        while True:
            try:
                problems = unsettled(self.view())
            except (TargetError, ClusterError, OSError) as err:
                problems = [f"roles unreadable: {err}"]
            waited = self.clock() - started
            if not problems:
                return Settling(True, waited)
            if waited >= bound or stop.wait(self.poll_s):
                return Settling(False, self.clock() - started, problems)

    def quiet_s(self) -> float:
        """A quiet time drawn around the detectors."""
        return self.quiet.draw(self.detectors, self.rng)

    def aim(self, rule: str, *, avoid: Collection[str] = ()) -> Aim:
        """The partition a run aims at, by its scenario's rule; TargetError when none."""
        return choose_partition(rule, self.view(), self.rng, avoid=avoid)

    def _read(self) -> None:
        # what a node that does not answer logged is read the next time it does
        with contextlib.suppress(ClusterError, OSError):
            self._seen.extend(self.events.read())

    def mark(self) -> int:
        """Read every event logged so far; the mark from which a run's events count (by the
        order they were read in, not by the nodes' clocks, which may differ)."""
        self._read()
        return len(self._seen)

    def events_since(self, mark: int) -> list[dict[str, Any]]:
        """Every SUT event read after ``mark``, until now."""
        self._read()
        return self._seen[mark:]

    def judge(self, name: str, aim: Aim, faults: Sequence[Fault], mark: int) -> Reach:
        """Whether the run of scenario ``name`` that began at ``mark`` reached its state."""
        run = ScenarioRun(name, aim, tuple(faults), self.events_since(mark))
        return SCENARIOS[name].reached(run)
