"""The ``scenarios`` section of results.json: how many runs of each scenario reached the
state they aimed at, as judged from the SUT's events during the test (schedule.json's
``scenarios``, one outcome per attempt), and its lines in the reports.

An instance is one scheduled run of a scenario; it reached its state when any attempt did
(a run that fell short is tried once more, on another partition and another way: the next
variant, longer durations). Runs the end of the test cut short are counted apart
(``cut_off``) and judged by nobody. Each scenario's judged attempts are also counted by the
way they were laid out (``variants``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def scenario_section(outcomes: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The section for the outcomes of a schedule's runs; None when no scenario ran."""
    attempts: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for outcome in outcomes:
        key = (str(outcome.get("scenario")), int(outcome.get("instance") or 0))
        attempts.setdefault(key, []).append(outcome)
    if not attempts:
        return None
    by_name: dict[str, dict[str, Any]] = {}
    for (name, _instance), tries in sorted(attempts.items()):
        entry = by_name.setdefault(
            name,
            {"instances": 0, "reached": 0, "first_attempt": 0, "attempts": 0, "cut_off": 0},
        )
        judged = [t for t in tries if t.get("reached") is not None]
        entry["attempts"] += len(judged)
        for attempt in judged:
            counts = entry.setdefault("variants", {}).setdefault(
                way(attempt) or "unrecorded", {"attempts": 0, "reached": 0}
            )
            counts["attempts"] += 1
            counts["reached"] += attempt.get("reached") is True
        if not judged:
            entry["cut_off"] += 1
            continue
        entry["instances"] += 1
        if any(t.get("reached") is True for t in judged):
            entry["reached"] += 1
        if judged[0].get("reached") is True and judged[0].get("attempt", 1) == 1:
            entry["first_attempt"] += 1
    for entry in by_name.values():
        entry["share"] = (
            round(entry["reached"] / entry["instances"], 3) if entry["instances"] else None
        )
    instances = sum(e["instances"] for e in by_name.values())
    reached = sum(e["reached"] for e in by_name.values())
    return {
        "instances": instances,
        "reached": reached,
        "share": round(reached / instances, 3) if instances else None,
        "by_name": by_name,
        "runs": [dict(o) for tries in attempts.values() for o in tries],
    }


def way(outcome: Mapping[str, Any]) -> str | None:
    """How an attempt was laid out: ``paused``, ``cut-off (longer)`` (durations from the
    longer half of their ranges); None when the schedule did not record it."""
    variant = outcome.get("variant")
    if variant is None:
        return None
    return f"{variant} (longer)" if outcome.get("durations") == "longer" else str(variant)


def scenario_section_of(run_dir: Path) -> dict[str, Any] | None:
    """The section from a run directory's schedule.json; None without one or without runs."""
    try:
        schedule = json.loads((run_dir / "schedule.json").read_text())
    except (OSError, ValueError):
        return None
    outcomes = schedule.get("scenarios") if isinstance(schedule, Mapping) else None
    return scenario_section(outcomes) if isinstance(outcomes, list) else None


def describe_scenarios(results: Mapping[str, Any]) -> list[str]:
    """One line per scenario and a total: ``zombie-leader: reached 2 of 2 (3 attempts)``."""
    section = results.get("scenarios")
    if not isinstance(section, Mapping) or not isinstance(section.get("by_name"), Mapping):
        return []
    lines = [
        f"scenarios reached their state in {section.get('reached')} of "
        f"{section.get('instances')} runs"
    ]
    for name, entry in sorted(section["by_name"].items()):
        line = f"{name}: reached {entry.get('reached')} of {entry.get('instances')}"
        extra = [f"{entry.get('attempts')} attempts"]
        if entry.get("cut_off"):
            extra.append(f"{entry['cut_off']} cut off by the end of the test")
        said = ", ".join(extra)
        variants = entry.get("variants")
        if isinstance(variants, Mapping) and variants:
            said += "; by way: " + ", ".join(
                f"{name} {c.get('reached')} of {c.get('attempts')}"
                for name, c in sorted(variants.items())
                if isinstance(c, Mapping)
            )
        lines.append(f"{line} ({said})")
    return lines


def unreached_runs(results: Mapping[str, Any]) -> list[str]:
    """Each judged attempt that fell short, with what was missing."""
    section = results.get("scenarios")
    runs = section.get("runs") if isinstance(section, Mapping) else None
    out = []
    for run in runs if isinstance(runs, list) else []:
        if isinstance(run, Mapping) and run.get("reached") is False:
            aim = run.get("aim") or {}
            how = way(run)
            out.append(
                f"{run.get('scenario')} #{run.get('instance')} attempt {run.get('attempt')}"
                f"{f', {how},' if how else ''} on {aim.get('key', '?')}: "
                f"{run.get('missing', 'not reached')}"
            )
    return out
