"""Campaigns: a matrix of test specs run one after another, as ducktape's ``@matrix``.

::

    [base]                                  # a test spec (squall.spec), shared by every case
    name = "nightly"
    time_limit_s = 60
    [base.workload]
    replication_factor = 3

    [matrix]                                # the product of the listed values
    "workload/acks" = [-1, 1]
    "workload/topic_config/min.insync.replicas" = ["1", "2"]
    "nemesis/faults" = [{ kill = 1 }, { partition = 1 }]

    [[case]]                                # explicit cases, added after the matrix
    "workload/acks" = -1
    "broker/replica.truncation" = "high-watermark"

Paths name a spec key through its tables with ``/`` (Kafka's keys contain dots). Each case
runs in its own store directory; a failed case does not stop the campaign. At the end: a
summary table, ``summary.json`` and a campaign ``junit.xml`` (one test case per run).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from squall.spec import SpecError, TestSpec


class CampaignError(ValueError):
    """A campaign file that cannot be run."""


@dataclass(frozen=True)
class CampaignCase:
    """One test of the campaign: its parameters and its spec."""

    parameters: dict[str, Any]
    spec: TestSpec


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split("/")
    for key in parents:
        child = doc.setdefault(key, {})
        if not isinstance(child, dict):
            raise CampaignError(f"path {path!r}: {key!r} is not a table in the base spec")
        doc = child
    doc[last] = value


def _slug(value: Any) -> str:
    if isinstance(value, Mapping):
        text = "+".join(f"{k}{'' if v == 1 else _slug(v)}" for k, v in sorted(value.items()))
    else:
        text = str(value)
    return re.sub(r"[^A-Za-z0-9.]+", "", text.replace("-1", "all")) or "x"


ABBREVIATIONS = {
    "replication_factor": "rf",
    "min.insync.replicas": "minisr",
    "unclean.leader.election.enable": "unclean",
    "replica.truncation": "trunc",
    "faults": "",
}


def _case_name(base: str, parameters: Mapping[str, Any]) -> str:
    parts = []
    for path, value in parameters.items():
        key = path.rsplit("/", 1)[-1]
        label = ABBREVIATIONS.get(key, key.replace(".", ""))
        parts.append(f"{label}-{_slug(value)}" if label else _slug(value))
    return "-".join([base, *parts])[:100].strip("-.")


def load_campaign(path: Path) -> tuple[str, list[CampaignCase]]:
    """The campaign's name and its cases, every spec validated before anything runs."""
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as err:
        raise CampaignError(f"cannot read campaign {path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise CampaignError(f"{path}: not valid TOML: {err}") from None
    unknown = sorted(set(doc) - {"base", "matrix", "case", "name"})
    if unknown:
        raise CampaignError(
            f"{path}: unknown top-level key(s) {', '.join(unknown)}; use [base], [matrix], [[case]]"
        )
    base = doc.get("base", {})
    name = str(doc.get("name") or base.get("name") or path.stem)
    matrix: Mapping[str, Any] = doc.get("matrix", {})
    for key, values in matrix.items():
        if not isinstance(values, list) or not values:
            raise CampaignError(f"{path}: [matrix] {key!r} must be a non-empty list of values")
    combos: list[dict[str, Any]] = (
        [
            dict(zip(matrix.keys(), values, strict=True))
            for values in itertools.product(*matrix.values())
        ]
        if matrix
        else []
    )
    explicit = doc.get("case", [])
    if not isinstance(explicit, list):
        raise CampaignError(f"{path}: `case` must be an array of tables ([[case]])")
    combos += [dict(c) for c in explicit]
    if not combos:
        combos = [{}]
    cases: list[CampaignCase] = []
    names: set[str] = set()
    for number, parameters in enumerate(combos, start=1):
        spec_doc = copy.deepcopy(dict(base))
        for key, value in parameters.items():
            if key == "name":
                continue
            _set(spec_doc, key, value)
        case_name = str(parameters.get("name") or _case_name(name, parameters))
        while case_name in names:
            case_name = f"{case_name}-{number}"
        names.add(case_name)
        spec_doc["name"] = case_name
        try:
            spec = TestSpec.from_mapping(spec_doc, source=f"{path} case {number} ({case_name})")
        except SpecError as err:
            raise CampaignError(str(err)) from None
        cases.append(CampaignCase(parameters, spec))
    return name, cases


@dataclass
class CaseResult:
    """How one case ended."""

    name: str
    parameters: dict[str, Any]
    exit_code: int
    valid: Any
    anomaly_types: list[str]
    run_dir: str | None
    seconds: float
    error: str | None = None


def junit_xml(campaign: str, results: list[CaseResult]) -> str:
    """One test case per run: a failure when anomalies were found, an error when infrastructure failed."""
    suite = ElementTree.Element(
        "testsuite",
        name=campaign,
        tests=str(len(results)),
        failures=str(sum(1 for r in results if r.exit_code == 1)),
        errors=str(sum(1 for r in results if r.exit_code not in (0, 1))),
        time=f"{sum(r.seconds for r in results):.1f}",
        timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    for r in results:
        case = ElementTree.SubElement(
            suite, "testcase", classname=campaign, name=r.name, time=f"{r.seconds:.1f}"
        )
        detail = json.dumps({"parameters": r.parameters, "run_dir": r.run_dir}, default=str)
        if r.exit_code == 1:
            failure = ElementTree.SubElement(
                case, "failure", message=f"anomalies: {', '.join(r.anomaly_types)}"
            )
            failure.text = detail
        elif r.exit_code != 0:
            error = ElementTree.SubElement(
                case, "error", message=r.error or f"exit code {r.exit_code}"
            )
            error.text = detail
        ElementTree.SubElement(case, "system-out").text = detail
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True)


def run_campaign(
    path: Path, *, store: Path, spark_master: str | None = None
) -> tuple[Path, list[CaseResult]]:
    """Run every case; write summary.json and junit.xml under store/<campaign>/<stamp>/."""
    from squall.runner import TestRunner
    from squall.store import RunStore

    name, cases = load_campaign(path)
    run_store = RunStore(store)
    out_dir = RunStore(store / "campaigns").new_run(name).path
    results: list[CaseResult] = []
    for case in cases:
        started = time.monotonic()
        try:
            outcome = TestRunner(case.spec, store=run_store, spark_master=spark_master).run()
            found = outcome.results or {}
            result = CaseResult(
                case.spec.name,
                case.parameters,
                outcome.exit_code,
                found.get("valid"),
                list(found.get("anomaly_types", [])),
                str(outcome.run_dir.path),
                time.monotonic() - started,
            )
        except Exception as err:  # one case's failure must not stop the campaign
            result = CaseResult(
                case.spec.name,
                case.parameters,
                3,
                "unknown",
                [],
                None,
                time.monotonic() - started,
                error=f"{type(err).__name__}: {err}",
            )
        results.append(result)
        (out_dir / "summary.json").write_text(
            json.dumps(
                {"campaign": name, "file": str(path), "cases": [r.__dict__ for r in results]},
                indent=2,
                default=str,
            )
        )
        (out_dir / "junit.xml").write_text(junit_xml(name, results))
        if getattr(outcome, "interrupted", False):
            break
    return out_dir, results
