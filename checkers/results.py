"""Assembling `results.json` (docs/results.md) from the checkers' findings.

All finding frames are collected in one Spark job: per (checker, anomaly, expected) the
complete count and the first `sample` anomalies in order. The document:

- `valid`: true, false or "unknown", the worst over checkers (false > unknown > true); a
  history where no send, poll or txn completed `ok` shows nothing and is "unknown" unless
  something already makes it false;
- `anomaly_types`: the types found that make the history invalid;
- `allowed_anomaly_types` (found, always allowed: int-send-skip) and
  `expected_anomaly_types` (found, but losses the configuration allows, or duplicates that
  its producer's retries explain; see `checkers.losses`);
- `checkers`: per checker `valid` (its anomalies' verdict, combined with its own if it
  gives one), `anomalies` (samples by type), `counts` (complete, every type the checker
  judged, 0 when none), `expected` / `expected_counts` (the same for what is expected), and
  `details` and `notes` where it has them;
- `stats`, `config` (the tested configuration read, and what it promised), `history`
  (where it came from and how it was loaded), `notes`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any, Literal

from pyspark.sql import Window
from pyspark.sql import functions as F

from checkers.catalogue import ANOMALIES, describe_case
from checkers.findings import FINDING_COLUMNS, Finding, FindingSlot, sample_order
from histories.atomic import write_json_atomically

Validity = bool | Literal["unknown"]
_RANK: dict[Any, int] = {True: 0, "unknown": 1, False: 2}


@dataclass
class CheckerReport:
    """One checker's findings, plus what it says beyond anomalies.

    `valid`: a verdict of its own ("unknown": it could not judge), combined with its
    anomalies' (false > unknown > true); None leaves the verdict to the anomalies.
    `lost_by_key`: for a checker that counts acknowledged writes lost, per key that lost
    any, `acknowledged_lost` and `allowed_lost` (for `summary`); None: it does not count.
    """

    name: str
    findings: list[Finding]
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    valid: Validity | None = None
    lost_by_key: Mapping[str, Mapping[str, int]] | None = None


@dataclass(frozen=True)
class Collected:
    """The count and samples of one (checker, anomaly, expected) group."""

    count: int
    samples: list[dict[str, Any]]


def worst(values: Sequence[Validity]) -> Validity:
    """The worst validity: false > unknown > true (true when there is none)."""
    return max(values, key=lambda value: _RANK[value], default=True)


def collect_findings(
    findings: Sequence[Finding], sample: int
) -> dict[tuple[str, str, bool], Collected]:
    """Count and sample every finding: the frames in one job, the already sampled ones
    (`Finding.sampled`) without one; counts are complete, samples at most `sample`, in
    order of (order, key, detail) as the frames' are."""
    fields = {
        (item.checker, name): item.json_fields for item in findings for name in item.anomalies
    }
    ranked: list[tuple[FindingSlot, int, int, str]] = []
    frames = [item.frame.select(*FINDING_COLUMNS) for item in findings if item.frame is not None]
    if frames:
        union = reduce(lambda left, right: left.unionByName(right), frames)
        group = Window.partitionBy("checker", "anomaly", "expected")
        top = (
            union.withColumn("n", F.count(F.lit(1)).over(group))
            .withColumn("rank", F.row_number().over(group.orderBy("order", "key", "detail")))
            .filter(F.col("rank") <= max(sample, 1))
        )
        for row in top.collect():
            slot = (row["checker"], row["anomaly"], bool(row["expected"]))
            ranked.append((slot, int(row["rank"]), int(row["n"]), row["detail"]))
    for item in findings:
        for (anomaly, expected), sampled in (item.sampled or {}).items():
            rows = sorted(sampled.rows, key=lambda r: sample_order(*r))
            slot = (item.checker, anomaly, expected)
            for rank, (_, _, detail) in enumerate(rows[: max(sample, 1)], start=1):
                ranked.append((slot, rank, sampled.count, detail))
    out: dict[tuple[str, str, bool], Collected] = {}
    for slot, rank, count, detail in sorted(ranked, key=lambda r: (r[0][:2], r[1])):
        collected = out.setdefault(slot, Collected(count, []))
        if rank <= sample:
            collected.samples.append(decode_values(json.loads(detail), fields[slot[:2]]))
    return out


def decode_values(detail: dict[str, Any], json_fields: Sequence[str]) -> dict[str, Any]:
    """Turn the JSON text of history values (as stored in Parquet) back into values."""
    for name in json_fields:
        if name in detail:
            detail[name] = _decode(detail[name])
    return detail


def _decode(item: Any) -> Any:
    if isinstance(item, list):
        return [_decode(element) for element in item]
    if isinstance(item, str):
        try:
            return json.loads(item)
        except ValueError:
            return item
    return item


def checker_section(
    report: CheckerReport,
    collected: dict[tuple[str, str, bool], Collected],
    *,
    has_ok: bool,
) -> dict[str, Any]:
    """One entry of `checkers`."""
    counts: dict[str, int] = {}
    anomalies: dict[str, list[dict[str, Any]]] = {}
    expected_counts: dict[str, int] = {}
    expected: dict[str, list[dict[str, Any]]] = {}
    invalid = False
    for item in report.findings:
        for name in item.anomalies:
            counts[name] = 0
            found = collected.get((report.name, name, False))
            if found is not None:
                counts[name] = found.count
                if found.samples:
                    anomalies[name] = found.samples
                invalid = invalid or (found.count > 0 and name not in item.allowed)
            loss = collected.get((report.name, name, True))
            if loss is not None:
                expected_counts[name] = loss.count
                if loss.samples:
                    expected[name] = loss.samples
    valid: Validity = False if invalid else (True if has_ok else "unknown")
    if report.valid is not None:
        valid = worst([valid, report.valid])
    section: dict[str, Any] = {"valid": valid, "anomalies": anomalies, "counts": counts}
    if expected_counts:
        section["expected"] = expected
        section["expected_counts"] = expected_counts
    if report.details:
        section["details"] = report.details
    if report.notes:
        section["notes"] = report.notes
    return section


def assemble_results(
    reports: Sequence[CheckerReport],
    collected: dict[tuple[str, str, bool], Collected],
    *,
    has_ok: bool,
    stats: dict[str, Any],
    config: dict[str, Any],
    history: dict[str, Any],
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """The whole results.json document."""
    sections = {
        report.name: checker_section(report, collected, has_ok=has_ok) for report in reports
    }
    allowed_types = {
        name for report in reports for item in report.findings for name in item.allowed
    }
    found: set[str] = set()
    allowed: set[str] = set()
    expected: set[str] = set()
    for section in sections.values():
        for anomaly, count in section["counts"].items():
            if count > 0:
                (allowed if anomaly in allowed_types else found).add(anomaly)
        expected.update(name for name, n in section.get("expected_counts", {}).items() if n)
    summary = lost_summary(reports)
    all_notes = list(notes)
    if not has_ok:
        all_notes.append(
            "no send, poll or txn completed ok: the history shows nothing, so it is unknown"
        )
    return {
        "valid": worst([section["valid"] for section in sections.values()]),
        "anomaly_types": sorted(found),
        "allowed_anomaly_types": sorted(allowed),
        "expected_anomaly_types": sorted(expected),
        **({"summary": summary} if summary is not None else {}),
        "explanations": explain_anomalies(sections),
        "checkers": sections,
        "stats": stats,
        "config": config,
        "history": history,
        "notes": all_notes,
    }


def lost_summary(reports: Sequence[CheckerReport]) -> dict[str, Any] | None:
    """`summary`: the acknowledged writes lost and allowed, in all and per key, from the
    reports that count them (several: per key, the most any counted); None when none does."""
    counting = [report.lost_by_key for report in reports if report.lost_by_key is not None]
    if not counting:
        return None
    keys: dict[str, dict[str, int]] = {}
    for by_key in counting:
        for key, lost in by_key.items():
            held = keys.setdefault(key, {"acknowledged_lost": 0, "allowed_lost": 0})
            for name in held:
                held[name] = max(held[name], int(lost.get(name, 0)))
    return {
        "acknowledged_lost": sum(lost["acknowledged_lost"] for lost in keys.values()),
        "allowed_lost": sum(lost["allowed_lost"] for lost in keys.values()),
        "keys": dict(sorted(keys.items())),
    }


EXPLAINED_CASES = 3
"""Cases per anomaly type that ``explanations`` describes in a sentence."""


def explain_anomalies(sections: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """For each anomaly type found (invalid, expected or allowed): what it means, what allows
    it, its page, and its first cases explained (key, offsets, history lines, a sentence)."""
    explained: dict[str, Any] = {}
    for checker, section in sections.items():
        for group in ("anomalies", "expected"):
            for name, cases in (section.get(group) or {}).items():
                if not cases or name in explained:
                    continue
                about = ANOMALIES.get(name)
                entry: dict[str, Any] = {"checker": checker}
                if about is not None:
                    entry.update(
                        meaning=about.meaning,
                        allowed_by=about.allowed_by,
                        allowance=about.allowance,
                        doc=about.doc,
                    )
                listed = cases if isinstance(cases, list) else [cases]
                entry["cases"] = [describe_case(name, c) for c in listed[:EXPLAINED_CASES]]
                explained[name] = entry
    return dict(sorted(explained.items()))


def write_results(results: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write results.json atomically (temporary file, fsync, rename)."""
    return write_json_atomically(path, results)
