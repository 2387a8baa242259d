"""junit.xml: one writer for a run (a test case per checker) and a campaign (a case per run)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from xml.etree import ElementTree


@dataclass(frozen=True)
class JUnitOutcome:
    """Why a test case did not pass: a ``failure`` (it found something) or an ``error``."""

    kind: Literal["failure", "error"]
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
) -> str:
    """A ``<testsuite>`` named `suite` (also every case's classname) holding `cases`."""
    attributes = {
        "name": suite,
        "tests": str(len(cases)),
        "failures": str(sum(1 for c in cases if c.outcome and c.outcome.kind == "failure")),
        "errors": str(sum(1 for c in cases if c.outcome and c.outcome.kind == "error")),
    }
    if time_s is not None:
        attributes["time"] = f"{time_s:.1f}"
    if timestamp is not None:
        attributes["timestamp"] = timestamp
    root = ElementTree.Element("testsuite", attributes)
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


def render_junit(results: Mapping[str, Any], *, suite: str) -> str:
    """A run's junit.xml: one case per checker, failed when it found anomalies."""
    cases = []
    for name, found in sorted(results.get("checkers", {}).items()):
        outcome = None
        if found.get("valid") is False:
            counts = {k: v for k, v in found.get("counts", {}).items() if v}
            samples = {k: v[:5] for k, v in found.get("anomalies", {}).items() if v}
            text = json.dumps(samples, default=str, indent=1)
            outcome = JUnitOutcome("failure", ", ".join(sorted(counts)), text)
        elif found.get("valid") is not True:
            outcome = JUnitOutcome("error", "unknown: nothing could be checked")
        cases.append(JUnitCase(name, outcome=outcome))
    if results.get("interrupted"):
        message = "interrupted: the run was stopped before its time limit; not a verdict"
        cases.append(JUnitCase("run", outcome=JUnitOutcome("error", message)))
    return render_suite(suite, cases)
