"""Hunting for a failure, and shrinking the fault schedule that caused it.

``hunt`` runs one configuration again and again with fresh seeds until a run detects
something (its verdict is invalid, or it shows losses the configuration allows), a time
budget ends or enough runs were made. ``shrink`` then minimises the detecting run's fault
schedule by greedy delta debugging, as Jepsen and Hypothesis shrink: drop one scenario
instance, or one fault with the faults that heal it or hit its nodes, keep the smaller
schedule when a replay of it still fails, and start again until no removal fails. Both take
the run as an injected function, so they are tested without a cluster.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from histories.atomic import write_json_atomically
from nemesis import Schedule
from squall.exit_codes import ExitCode
from squall.store import StoreError

log = logging.getLogger(__name__)

HUNT_JSON = "hunt.json"
SHRUNK_SCHEDULE = "shrunk-schedule.json"
MAX_CONSECUTIVE_FAILURES = 3
"""Runs in a row without a verdict (the cluster did not come up, nothing completed) that end
a hunt as an infrastructure failure."""


@dataclass(frozen=True)
class RunReport:
    """One run of a hunt or of a shrink: its seed, directory, verdict and what it found."""

    seed: int
    run_dir: str | None
    valid: bool | str | None
    """results.json's ``valid`` (true, false, "unknown"); None when no verdict was reached."""
    anomaly_types: tuple[str, ...] = ()
    expected_anomaly_types: tuple[str, ...] = ()
    exit_code: int = ExitCode.INFRASTRUCTURE
    seconds: float = 0.0
    interrupted: bool = False
    error: str | None = None

    @classmethod
    def of(
        cls,
        seed: int,
        run_dir: str | None,
        results: Mapping[str, Any] | None,
        *,
        exit_code: int,
        seconds: float,
        interrupted: bool = False,
    ) -> RunReport:
        """The report of a run whose results.json (or None) says what it found."""
        found = results or {}
        return cls(
            seed,
            run_dir,
            found.get("valid") if results is not None else None,
            tuple(found.get("anomaly_types") or ()),
            tuple(found.get("expected_anomaly_types") or ()),
            exit_code,
            seconds,
            interrupted,
        )

    @property
    def detected(self) -> bool:
        """Invalid, or with losses the configuration allows: what a hunt looks for."""
        return self.valid is False or bool(self.expected_anomaly_types)

    @property
    def found(self) -> frozenset[str]:
        """The anomaly types found, invalid and expected alike."""
        return frozenset(self.anomaly_types) | frozenset(self.expected_anomaly_types)

    @property
    def verdict(self) -> str:
        """``invalid``, ``allowed-losses``, ``valid``, ``unknown`` or ``failed`` (no verdict)."""
        if self.valid is False:
            return "invalid"
        if self.expected_anomaly_types:
            return "allowed-losses"
        if self.valid is True:
            return "valid"
        return "unknown" if self.valid == "unknown" else "failed"

    def reproduces(self, target: RunReport) -> bool:
        """Whether this run fails as `target` did: detected, with the same types or more."""
        return self.detected and self.found >= target.found

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "run_dir": self.run_dir,
            "verdict": self.verdict,
            "valid": self.valid,
            "anomaly_types": list(self.anomaly_types),
            "expected_anomaly_types": list(self.expected_anomaly_types),
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 1),
            "interrupted": self.interrupted,
            "error": self.error,
        }


@dataclass
class HuntResult:
    """How a hunt ended: its runs, why it stopped, and the detecting run if any."""

    runs: list[RunReport]
    stopped: str
    """``detected``, ``budget``, ``max-runs``, ``interrupted`` or ``failures``."""
    elapsed_s: float
    time_to_detection_s: float | None = None
    """Seconds from the start of the hunt to the end of the detecting run."""

    @property
    def detection(self) -> RunReport | None:
        return self.runs[-1] if self.stopped == "detected" else None

    @property
    def exit_code(self) -> int:
        """1 found, 0 nothing found, 130 interrupted, 3 when no run reached a verdict."""
        if self.detection is not None:
            return ExitCode.ANOMALIES
        if self.stopped == "interrupted":
            return ExitCode.INTERRUPTED
        if self.stopped == "failures" or not any(r.valid is True for r in self.runs):
            return ExitCode.INFRASTRUCTURE
        return ExitCode.SUCCESS

    def to_json(self) -> dict[str, Any]:
        detection = self.detection
        return {
            "stopped": self.stopped,
            "elapsed_s": round(self.elapsed_s, 1),
            "seeds": [r.seed for r in self.runs],
            "runs": runs_json(self.runs),
            "detection": None
            if detection is None
            else {"run": len(self.runs), **detection.to_json()},
            "time_to_detection_s": None
            if self.time_to_detection_s is None
            else round(self.time_to_detection_s, 1),
            "runs_to_detection": None if detection is None else len(self.runs),
            "exit_code": self.exit_code,
        }


def runs_json(runs: Iterable[RunReport]) -> list[dict[str, Any]]:
    """The runs as hunt.json lists them, numbered from 1."""
    return [{"run": n, **r.to_json()} for n, r in enumerate(runs, start=1)]


def fresh_seeds(first: int | None = None) -> Iterator[int]:
    """Seeds for a hunt, never the same twice: `first`, then seeds drawn from it (a hunt that
    can be repeated), or, without it, seeds drawn from the system's randomness."""
    rng: random.Random = random.SystemRandom() if first is None else random.Random(first)
    seen: set[int] = set()
    if first is not None:
        seen.add(first)
        yield first
    while True:
        seed = rng.randrange(2**31)
        if seed not in seen:
            seen.add(seed)
            yield seed


def hunt(
    run_once: Callable[[int], RunReport],
    *,
    seeds: Iterable[int],
    budget_s: float,
    max_runs: int | None = None,
    max_failures: int = MAX_CONSECUTIVE_FAILURES,
    clock: Callable[[], float] = time.monotonic,
    on_run: Callable[[int, RunReport], None] = lambda _n, _r: None,
) -> HuntResult:
    """Run `run_once(seed)` for each seed until a run detects something, the budget is spent
    (a run started within it finishes), `max_runs` were made, a run was interrupted, or
    `max_failures` runs in a row reached no verdict. A run that raises counts as one
    without a verdict; Ctrl-C between runs ends the hunt as interrupted."""
    started = clock()
    runs: list[RunReport] = []
    failures = 0
    stopped = "budget"
    for seed in seeds:
        if max_runs is not None and len(runs) >= max_runs:
            stopped = "max-runs"
            break
        if clock() - started >= budget_s:
            stopped = "budget"
            break
        run_started = clock()
        try:
            report = run_once(seed)
        except KeyboardInterrupt:
            stopped = "interrupted"
            break
        except Exception as err:  # one run's failure is recorded; the hunt goes on
            log.exception("hunt run with seed %s failed", seed)
            report = RunReport(
                seed,
                None,
                None,
                seconds=clock() - run_started,
                error=f"{type(err).__name__}: {err}",
            )
        runs.append(report)
        on_run(len(runs), report)
        if report.detected:
            elapsed = clock() - started
            return HuntResult(runs, "detected", elapsed, time_to_detection_s=elapsed)
        if report.interrupted:
            stopped = "interrupted"
            break
        failures = 0 if report.valid is True else failures + 1
        if failures >= max_failures:
            stopped = "failures"
            break
    return HuntResult(runs, stopped, clock() - started)


# --- shrinking a schedule -----------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A smaller schedule: the ids of the faults removed, and what they were."""

    schedule: Schedule
    removed: tuple[int, ...]
    what: str


def scenario_instances(schedule: Schedule) -> list[tuple[str, tuple[int, ...]]]:
    """Each scenario instance, in time order: its name and its faults' ids. Consecutive faults
    (in time order) of one scenario form one instance; a fault of no scenario ends it."""
    instances: list[tuple[str, list[int]]] = []
    previous: str | None = None
    for entry in schedule.faults:
        if entry.scenario is not None:
            if entry.scenario == previous:
                instances[-1][1].append(entry.id)
            else:
                instances.append((entry.scenario, [entry.id]))
        previous = entry.scenario
    return [(name, tuple(ids)) for name, ids in instances]


def with_dependents(schedule: Schedule, ids: Iterable[int]) -> frozenset[int]:
    """`ids` and every fault that heals one of them or is ``same_as`` one, transitively: what
    must go with them for the schedule's links to stay whole."""
    removed = set(ids)
    grown = True
    while grown:
        grown = False
        for entry in schedule.faults:
            if entry.id in removed:
                continue
            if (entry.heals is not None and entry.heals in removed) or (
                entry.same_as is not None and entry.same_as in removed
            ):
                removed.add(entry.id)
                grown = True
    return frozenset(removed)


def without(schedule: Schedule, ids: Iterable[int]) -> Schedule:
    """The schedule without the faults `ids` (and their dependents); the others keep their ids,
    so a shrunk schedule still names the faults of the run it came from."""
    gone = with_dependents(schedule, ids)
    return Schedule(
        tuple(e for e in schedule.faults if e.id not in gone),
        seed=schedule.seed,
        spec=schedule.spec,
        resolved=schedule.resolved,
    )


def shrink_candidates(schedule: Schedule) -> list[Candidate]:
    """The schedules one step smaller: each scenario instance removed whole, then each fault
    that heals nothing removed with its dependents (a healing fault goes only with its
    fault); each removal once."""
    candidates: list[Candidate] = []
    seen: set[frozenset[int]] = set()

    def add(ids: Iterable[int], what: str) -> None:
        removed = with_dependents(schedule, ids)
        if removed in seen:
            return
        seen.add(removed)
        smaller = without(schedule, removed)
        candidates.append(Candidate(smaller, tuple(sorted(removed)), what))

    for name, ids in scenario_instances(schedule):
        add(ids, f"scenario {name}")
    for entry in schedule.faults:
        if entry.heals is None:
            add([entry.id], f"fault {entry.id} {entry.fault.f}")
    return candidates


@dataclass(frozen=True)
class ShrinkTry:
    """One candidate tried: what it removed, the size left, and whether it still failed."""

    removed: tuple[int, ...]
    what: str
    faults_left: int
    failed: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "removed": list(self.removed),
            "what": self.what,
            "faults_left": self.faults_left,
            "failed": self.failed,
        }


@dataclass
class ShrinkResult:
    """The smallest failing schedule found, and every candidate tried on the way."""

    original: Schedule
    schedule: Schedule
    tries: list[ShrinkTry] = field(default_factory=list)
    complete: bool = True
    """False when stopped before no candidate failed (budget, interrupt)."""

    def to_json(self) -> dict[str, Any]:
        kept = {e.id for e in self.schedule.faults}
        return {
            "faults_before": len(self.original),
            "faults_after": len(self.schedule),
            "kept": sorted(kept),
            "removed": sorted(e.id for e in self.original.faults if e.id not in kept),
            "complete": self.complete,
            "tries": [t.to_json() for t in self.tries],
        }


def shrink(
    schedule: Schedule,
    run_candidate: Callable[[Schedule], bool],
    *,
    should_stop: Callable[[], bool] = lambda: False,
    on_try: Callable[[Candidate, bool], None] = lambda _c, _f: None,
) -> ShrinkResult:
    """Greedy delta debugging: try the candidates of the current schedule in order; the first
    that still fails (`run_candidate` is true) becomes the current one, and the candidates
    start over from it; stop when none fails (1-minimal for these removals) or
    `should_stop()` says so."""
    result = ShrinkResult(schedule, schedule)
    while True:
        for candidate in shrink_candidates(result.schedule):
            if should_stop():
                result.complete = False
                return result
            failed = run_candidate(candidate.schedule)
            result.tries.append(
                ShrinkTry(candidate.removed, candidate.what, len(candidate.schedule), failed)
            )
            on_try(candidate, failed)
            if failed:
                result.schedule = candidate.schedule
                break
        else:
            return result


# --- where a hunt's summary goes ----------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def new_hunt_dir(store: Path, test_name: str, *, now: datetime | None = None) -> Path:
    """``store/<test>-hunt/<YYYYMMDDTHHMMSS>/`` (``-2``, ``-3``... within one second), and the
    ``latest`` link beside it; StoreError when the name cannot name a directory."""
    name = f"{test_name}-hunt"
    if not _NAME.match(name):
        raise StoreError(
            f"test name {test_name!r} cannot name a hunt directory ({name!r}): use letters, "
            "digits, '.', '_', '-' (at most 95)"
        )
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")
    parent = store / name
    path = parent / stamp
    suffix = 1
    while path.exists():
        suffix += 1
        path = parent / f"{stamp}-{suffix}"
    try:
        path.mkdir(parents=True)
        link = parent / "latest.tmp"
        link.unlink(missing_ok=True)
        link.symlink_to(path.name)
        link.replace(parent / "latest")
    except OSError as err:
        raise StoreError(f"cannot create hunt directory {path}: {err.strerror}") from None
    return path


def write_json(path: Path, doc: Any) -> None:
    """Write a hunt's JSON file atomically (a reader never sees half of it)."""
    write_json_atomically(path, doc, default=str)
