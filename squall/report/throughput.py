"""The rate a run achieved: completed operations per second of workload, overall and per f;
and the rate kept during faults on the keys whose leader was alive (`stats.live_rate`).

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


def describe_live_rate(stats: Mapping[str, Any]) -> str | None:
    """One line on the rate kept during faults on keys with a live leader, next to the
    fault-free rate; None when results.json has no `live_rate`."""
    live = stats.get("live_rate")
    if not isinstance(live, Mapping):
        return None
    during, free, kept = (live.get(k) for k in ("during_faults", "fault_free", "kept"))
    if not isinstance(during, Mapping) or not isinstance(free, Mapping):
        return None
    kept = kept if isinstance(kept, Mapping) else {}

    def figure(value: Any, unit: str) -> str:
        return "n/a" if not isinstance(value, int | float) else f"{value:,.1f}{unit}"

    def share(value: Any) -> str:
        return "" if not isinstance(value, int | float) else f" ({value:.0%} of fault-free)"

    return (
        f"during faults ({figure(during.get('seconds'), ' s')}, "
        f"{figure(during.get('live_keys'), '')} of {live.get('keys')} keys live on average): "
        f"ok sends {figure(during.get('send_per_s_per_live_key'), '/s')} per live key"
        f"{share(kept.get('send'))}, fault-free {figure(free.get('send_per_s_per_live_key'), '/s')}"
        + (
            ""
            if "read_per_s_per_live_key" not in during
            else f"; records read {figure(during.get('read_per_s_per_live_key'), '/s')} per "
            f"live key{share(kept.get('read'))}, fault-free "
            f"{figure(free.get('read_per_s_per_live_key'), '/s')}"
        )
        + f"; ok polls {figure(during.get('poll_per_s'), '/s')}{share(kept.get('poll'))}, "
        f"fault-free {figure(free.get('poll_per_s'), '/s')}"
        + (
            ""
            if "send_per_s_per_writable_key" not in during
            else f"; on writable keys (ISR of at least min.insync.replicas="
            f"{live.get('min_isr')}, {figure(during.get('writable_keys'), '')} on average): "
            f"ok sends {figure(during.get('send_per_s_per_writable_key'), '/s')}"
            f"{share(kept.get('send_writable'))}"
            + (
                ""
                if "read_per_s_per_writable_key" not in during
                else f", records read {figure(during.get('read_per_s_per_writable_key'), '/s')}"
                f"{share(kept.get('read_writable'))}"
            )
        )
    )
