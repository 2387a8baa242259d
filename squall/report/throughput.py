"""The rate a run achieved: completed operations per second of workload, overall and per f.

Read from results.json's `stats` (completions by f, the history's duration) and, when there
is one, the run's test.json: its `time_limit_s` is how long the workload ran, whereas the
history also spans healing, the recovery wait and the final read. The final read's few
polls are counted with the workload's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

COMPLETIONS = ("ok", "fail", "info")


@dataclass(frozen=True, slots=True)
class AchievedRate:
    """Completions per second over `seconds`, in all and per f (busiest first)."""

    seconds: float
    completed: int
    ops_per_s: float
    by_f: dict[str, float]
    basis: str
    """What `seconds` is: the workload's time limit or the history's whole span."""

    def describe_by_f(self) -> str:
        """``send 412/s, poll 380/s, ...``"""
        return ", ".join(f"{f} {rate:,.0f}/s" for f, rate in self.by_f.items())


def achieved_rate(
    results: Mapping[str, Any], test: Mapping[str, Any] | None = None
) -> AchievedRate | None:
    """The achieved rate of a checked run; None if its stats do not say."""
    stats = results.get("stats")
    if not isinstance(stats, Mapping):
        return None
    by_f = stats.get("by_f")
    duration = _number(stats.get("duration_s"))
    if not isinstance(by_f, Mapping) or not by_f or not duration:
        return None
    seconds, basis = duration, "the history's span"
    limit = _number((test or {}).get("time_limit_s"))
    if limit and limit <= duration and not results.get("interrupted"):
        seconds, basis = limit, "the workload's time limit"
    done = {
        str(f): sum(int(counts.get(kind) or 0) for kind in COMPLETIONS)
        for f, counts in by_f.items()
        if isinstance(counts, Mapping)
    }
    completed = sum(done.values())
    rates = {f: n / seconds for f, n in sorted(done.items(), key=lambda item: -item[1]) if n}
    return AchievedRate(seconds, completed, completed / seconds, rates, basis)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)
