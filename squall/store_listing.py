"""What a run store holds: one line per run (test, time, verdict, anomalies, duration), read
from each run's test.json and results.json, for ``squall runs`` and ``squall serve``."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_STAMP = re.compile(r"^(\d{8}T\d{6})(?:-(\d+))?$")


@dataclass(frozen=True)
class RunSummary:
    """One run of the store as a listing shows it."""

    test: str
    stamp: str
    path: str
    started: str | None
    """ISO 8601 UTC, from the directory's name."""
    verdict: str
    """VALID, INVALID, UNKNOWN, INTERRUPTED, or NO VERDICT (no results.json: in progress,
    or stopped before its check)."""
    anomalies: dict[str, int] = field(default_factory=dict)
    expected: list[str] = field(default_factory=list)
    duration_s: float | None = None
    has_report: bool = False
    acknowledged_lost: int | None = None
    """Distinct acknowledged writes lost (results.json's `summary`; None: not counted)."""
    allowed_lost: int | None = None
    """Of those, the ones the configuration allows."""
    expected_counts: dict[str, int] = field(default_factory=dict)
    """Cases per type of loss the configuration allows, summed over the checkers."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A JSON object read from path; None when it is missing, unreadable or not an object."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _verdict(results: dict[str, Any] | None, test: dict[str, Any] | None) -> str:
    interrupted = bool((results or {}).get("interrupted") or (test or {}).get("interrupted"))
    if interrupted:
        return "INTERRUPTED"
    if results is None:
        return "NO VERDICT"
    valid = results.get("valid")
    return "VALID" if valid is True else "INVALID" if valid is False else "UNKNOWN"


def _anomaly_counts(
    results: dict[str, Any], types_field: str = "anomaly_types", counts_field: str = "counts"
) -> dict[str, int]:
    """Cases per anomaly type that makes the run invalid (by default; or of the given
    types and counts fields), summed over the checkers."""
    types = results.get(types_field)
    wanted = {t for t in types if isinstance(t, str)} if isinstance(types, list) else set()
    counts = dict.fromkeys(sorted(wanted), 0)
    checkers = results.get("checkers")
    for section in checkers.values() if isinstance(checkers, dict) else ():
        found = section.get(counts_field) if isinstance(section, dict) else None
        for name, count in found.items() if isinstance(found, dict) else ():
            if name in counts and isinstance(count, int):
                counts[name] += count
    return counts


def summarise_run(run_dir: Path) -> RunSummary:
    """The listing line of one run directory (``store/<test>/<stamp>``)."""
    results = read_json_object(run_dir / "results.json")
    test = read_json_object(run_dir / "test.json")
    match = _STAMP.match(run_dir.name)
    started = (
        datetime.strptime(match.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=UTC).isoformat()
        if match
        else None
    )
    stats = (results or {}).get("stats")
    duration = stats.get("duration_s") if isinstance(stats, dict) else None
    expected = (results or {}).get("expected_anomaly_types")
    summary = (results or {}).get("summary")
    lost = summary if isinstance(summary, dict) else {}
    return RunSummary(
        test=run_dir.parent.name,
        stamp=run_dir.name,
        path=str(run_dir),
        started=started,
        verdict=_verdict(results, test),
        anomalies=_anomaly_counts(results) if results else {},
        expected=[t for t in expected if isinstance(t, str)] if isinstance(expected, list) else [],
        duration_s=float(duration) if isinstance(duration, int | float) else None,
        has_report=(run_dir / "report.html").is_file(),
        acknowledged_lost=_int_or_none(lost.get("acknowledged_lost")),
        allowed_lost=_int_or_none(lost.get("allowed_lost")),
        expected_counts=(
            _anomaly_counts(results, "expected_anomaly_types", "expected_counts") if results else {}
        ),
    )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def describe_findings(run: RunSummary) -> str:
    """What a run found, for a listing: the acknowledged writes lost first (each once), then
    the anomaly types with their counts, then the allowed ones with theirs; "" when nothing."""
    parts = []
    if run.acknowledged_lost:
        allowed = f" ({run.allowed_lost:,} allowed)" if run.allowed_lost else ""
        parts.append(f"{run.acknowledged_lost:,} acknowledged writes lost{allowed}")
    if run.anomalies:
        parts.append(", ".join(f"{name} {count:,}" for name, count in run.anomalies.items()))
    if run.expected_counts:
        listed = ", ".join(f"{name} {count:,}" for name, count in run.expected_counts.items())
        parts.append(f"allowed: {listed}")
    elif run.expected:
        parts.append("allowed: " + ", ".join(run.expected))
    return "; ".join(parts)


def run_directories(store: Path, test: str | None = None) -> list[Path]:
    """Every run directory of the store (of one test), newest first; links and the store's
    ``campaigns/`` are not runs."""
    if not store.is_dir():
        return []
    tests = [store / test] if test else sorted(p for p in store.iterdir() if p.is_dir())
    found: list[Path] = []
    for test_dir in tests:
        if test_dir.is_symlink() or test_dir.name == "campaigns" or not test_dir.is_dir():
            continue
        found.extend(
            p
            for p in test_dir.iterdir()
            if _STAMP.match(p.name) and p.is_dir() and not p.is_symlink()
        )
    return sorted(found, key=lambda p: (p.name, p.parent.name), reverse=True)


def list_runs(store: Path, test: str | None = None, limit: int | None = None) -> list[RunSummary]:
    """The store's runs, newest first, at most ``limit``."""
    dirs = run_directories(store, test)
    return [summarise_run(d) for d in (dirs if limit is None else dirs[:limit])]
