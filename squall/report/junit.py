"""junit.xml: one writer for a run (a test case per checker) and a campaign (a case per run)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from xml.etree import ElementTree


@dataclass(frozen=True)
class JUnitOutcome:
    """Why a test case did not pass: a ``failure`` (it found something), an ``error``, or
    ``skipped`` (it tested nothing)."""

    kind: Literal["failure", "error", "skipped"]
    message: str
    text: str | None = None


@dataclass(frozen=True)
class JUnitCase:
    """One ``<testcase>``; no outcome: it passed."""

    name: str
    time_s: float | None = None
    outcome: JUnitOutcome | None = None
    system_out: str | None = None


def render_suite(
    suite: str,
    cases: Sequence[JUnitCase],
    *,
    time_s: float | None = None,
    timestamp: str | None = None,
    properties: Mapping[str, object] | None = None,
) -> str:
    """A ``<testsuite>`` named `suite` (also every case's classname) holding `cases`, with
    ``<properties>`` (None values left out)."""
    attributes = {
        "name": suite,
        "tests": str(len(cases)),
        "failures": str(sum(1 for c in cases if c.outcome and c.outcome.kind == "failure")),
        "errors": str(sum(1 for c in cases if c.outcome and c.outcome.kind == "error")),
    }
    skipped = sum(1 for c in cases if c.outcome and c.outcome.kind == "skipped")
    if skipped:
        attributes["skipped"] = str(skipped)
    if time_s is not None:
        attributes["time"] = f"{time_s:.1f}"
    if timestamp is not None:
        attributes["timestamp"] = timestamp
    root = ElementTree.Element("testsuite", attributes)
    given = {k: v for k, v in (properties or {}).items() if v is not None}
    if given:
        listing = ElementTree.SubElement(root, "properties")
        for name, value in given.items():
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            ElementTree.SubElement(listing, "property", name=name, value=text)
    for case in cases:
        case_attributes = {"classname": suite, "name": case.name}
        if case.time_s is not None:
            case_attributes["time"] = f"{case.time_s:.1f}"
        element = ElementTree.SubElement(root, "testcase", case_attributes)
        if case.outcome is not None:
            outcome = ElementTree.SubElement(
                element, case.outcome.kind, message=case.outcome.message
            )
            outcome.text = case.outcome.text
        if case.system_out is not None:
            ElementTree.SubElement(element, "system-out").text = case.system_out
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True)


def run_properties(test: Mapping[str, Any] | None, run_dir: str | None) -> dict[str, object]:
    """What a CI reader needs to know and redo a run: seed, runtime, spec, replay command."""
    if test is None:
        return {"run_dir": run_dir}
    spec = {k: test.get(k) for k in ("workload", "topic", "broker", "nemesis") if k in test}
    return {
        "seed": test.get("seed"),
        "runtime": test.get("runtime"),
        "nodes": test.get("nodes"),
        "time_limit_s": test.get("time_limit_s"),
        "profile": test.get("profile"),
        "git_commit": test.get("git_commit"),
        "run_dir": run_dir,
        "replay": f"squall replay {run_dir}" if run_dir else None,
        "spec": spec,
    }


def render_junit(
    results: Mapping[str, Any],
    *,
    suite: str,
    test: Mapping[str, Any] | None = None,
    run_dir: str | None = None,
) -> str:
    """A run's junit.xml: one case per checker, failed when it found anomalies (the message
    names each type with its count and meaning), its output naming the losses the
    configuration allows with their counts; a case for the acknowledged writes lost when
    any was; the run's seed, runtime and spec, and the losses' counts, as properties; the
    suite's time is the history's duration."""
    cases = []
    for name, found in sorted(results.get("checkers", {}).items()):
        outcome = None
        if found.get("valid") is False:
            counts = {k: v for k, v in found.get("counts", {}).items() if v}
            text = _failure_text(found.get("anomalies", {}))
            outcome = JUnitOutcome("failure", _failure_message(counts), text)
        elif found.get("valid") is not True:
            outcome = JUnitOutcome("error", "unknown: nothing could be checked")
        cases.append(JUnitCase(name, outcome=outcome, system_out=_allowed_text(found)))
    cases += _lost_case(results)
    cases += _scenario_cases(results)
    if results.get("interrupted"):
        message = "interrupted: the run was stopped before its time limit; not a verdict"
        cases.append(JUnitCase("run", outcome=JUnitOutcome("error", message)))
    duration = (results.get("stats") or {}).get("duration_s")
    return render_suite(
        suite,
        cases,
        time_s=float(duration) if isinstance(duration, int | float) else None,
        properties={**run_properties(test, run_dir), **loss_properties(results)},
    )


def loss_properties(results: Mapping[str, Any]) -> dict[str, object]:
    """The acknowledged writes lost and allowed (results.json `summary`), and the allowed
    types with their counts, as properties (none for a run that found nothing)."""
    from squall.report.verdict import lost_counts, type_counts

    counted = lost_counts(results)
    allowed = type_counts(results, "expected_counts")
    out: dict[str, object] = {}
    if counted is not None and counted[0]:
        out["acknowledged_lost"] = str(counted[0])
        out["allowed_lost"] = str(counted[1])
    if allowed:
        out["allowed_anomalies"] = ", ".join(f"{k} {v}" for k, v in sorted(allowed.items()))
    return out


def _lost_case(results: Mapping[str, Any]) -> list[JUnitCase]:
    """A case "acknowledged writes lost" when any was: it passes when the configuration
    allows every one (its output says so), and fails otherwise."""
    from squall.report.verdict import describe_lost, lost_counts

    counted = lost_counts(results)
    said = describe_lost(results)
    if counted is None or said is None:
        return []
    lost, allowed = counted
    allowances = "; ".join((results.get("config") or {}).get("allowances") or [])
    if allowed == lost:
        text = f"{said}, every one allowed by the configuration ({allowances})"
        return [JUnitCase("acknowledged writes lost", system_out=text)]
    message = f"{said}; {lost - allowed:,} of them the configuration does not allow"
    return [
        JUnitCase(
            "acknowledged writes lost",
            outcome=JUnitOutcome("failure", message, _per_key(results)),
        )
    ]


def _per_key(results: Mapping[str, Any]) -> str:
    keys = (results.get("summary") or {}).get("keys") or {}
    return "\n".join(
        f"{key}: {lost.get('acknowledged_lost', 0)} lost, {lost.get('allowed_lost', 0)} allowed"
        for key, lost in keys.items()
    )


def _allowed_text(found: Mapping[str, Any]) -> str | None:
    """A checker's losses the configuration allows: each type with its count, why, and its
    first cases explained (None: none)."""
    from checkers.catalogue import describe_case

    counts = {k: v for k, v in (found.get("expected_counts") or {}).items() if v}
    if not counts:
        return None
    lines = ["allowed by the configuration (expected losses):"]
    for name, count in sorted(counts.items()):
        cases = (found.get("expected") or {}).get(name) or []
        because = cases[0].get("expected_because") if cases and isinstance(cases[0], dict) else None
        lines.append(f"{name} {count}" + (f" ({because})" if because else ""))
        lines += [f"  - {describe_case(name, case)['text']}" for case in cases[:3]]
    return "\n".join(lines)


def _scenario_cases(results: Mapping[str, Any]) -> list[JUnitCase]:
    """A case per scenario: skipped when no run of it reached its state (it tested nothing
    of what it aims at), passed otherwise; how many runs did, in its output."""
    section = results.get("scenarios")
    by_name = section.get("by_name") if isinstance(section, Mapping) else None
    cases = []
    for name, entry in sorted((by_name or {}).items()):
        said = (
            f"reached its state in {entry.get('reached')} of {entry.get('instances')} runs "
            f"({entry.get('attempts')} attempts)"
        )
        outcome = None
        if entry.get("instances") and not entry.get("reached"):
            message = f"scenario {name} reached its state in none of its {entry['instances']} runs"
            outcome = JUnitOutcome("skipped", message)
        cases.append(JUnitCase(f"scenario {name}", outcome=outcome, system_out=said))
    return cases


def _failure_message(counts: Mapping[str, int]) -> str:
    """Each anomaly type with its count and what it means."""
    from checkers.catalogue import ANOMALIES

    parts = []
    for name, count in sorted(counts.items()):
        about = ANOMALIES.get(name)
        parts.append(f"{name} ({count})" + (f": {about.meaning}" if about else ""))
    return " ".join(p if p.endswith(".") else p + ";" for p in parts).rstrip(";")


def _failure_text(anomalies: Mapping[str, Any]) -> str:
    """The first cases of each type, explained (history lines included), then as data."""
    from checkers.catalogue import ANOMALIES, describe_case

    lines = []
    for name, cases in sorted(anomalies.items()):
        if not cases:
            continue
        about = ANOMALIES.get(name)
        lines.append(
            f"{name}" + (f" (see {about.doc}; allowed by: {about.allowed_by})" if about else "")
        )
        lines += [f"  - {describe_case(name, case)['text']}" for case in cases[:5]]
    samples = {k: v[:5] for k, v in anomalies.items() if v}
    return "\n".join(lines) + "\n\n" + json.dumps(samples, default=str, indent=1)
