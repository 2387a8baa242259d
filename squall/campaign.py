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
runs in its own store directory; a failed case does not stop the campaign. After each case
and at the end: ``summary.json``, a campaign ``junit.xml`` (one test case per run) and the
campaign's ``report.html`` (squall.report.campaign); at the end a summary table.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field
from rich.console import Console

from squall.config import ConfigModel, ConfigurationError, read_toml, set_path, validate
from squall.exit_codes import ExitCode
from squall.report.junit import JUnitCase, JUnitOutcome, render_suite
from squall.report.verdict import explain, leader_elections
from squall.spec import TestSpec

if TYPE_CHECKING:
    from squall.store import RunStore


class CampaignError(ConfigurationError):
    """A campaign file that cannot be run."""


class CampaignFile(ConfigModel):
    """A campaign: a base spec, a matrix of values to vary, and explicit cases."""

    name: str | None = None
    """The campaign's name (default: the base spec's name, else the file's)."""
    base: dict[str, Any] = Field(default_factory=dict)
    """A test spec shared by every case."""
    matrix: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(default_factory=dict)
    """Spec paths (``workload/acks``) and the values to try; every combination is a case."""
    case: list[dict[str, Any]] = Field(default_factory=list)
    """Explicit cases: spec paths and their values, and optionally a ``name``."""


@dataclass(frozen=True)
class CampaignCase:
    """One test of the campaign: its parameters and its spec."""

    parameters: dict[str, Any]
    spec: TestSpec


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


def load_campaign(
    path: Path, overrides: Mapping[str, Any] | None = None
) -> tuple[str, list[CampaignCase]]:
    """The campaign's name and its cases, every spec validated before anything runs;
    `overrides` (spec paths such as ``runtime``) apply to every case, over the file."""
    doc = validate(
        CampaignFile,
        read_toml(path, what="campaign", error=CampaignError),
        source=str(path),
        error=CampaignError,
    )
    name = str(doc.name or doc.base.get("name") or path.stem)
    combos = [
        dict(zip(doc.matrix.keys(), values, strict=True))
        for values in itertools.product(*doc.matrix.values())
        if doc.matrix
    ]
    combos += [dict(c) for c in doc.case]
    if not combos:
        combos = [{}]
    cases: list[CampaignCase] = []
    names: set[str] = set()
    for number, parameters in enumerate(combos, start=1):
        case_name = str(parameters.get("name") or _case_name(name, parameters))
        while case_name in names:
            case_name = f"{case_name}-{number}"
        names.add(case_name)
        source = f"{path} case {number} ({case_name})"
        spec_doc = copy.deepcopy(doc.base)
        for key, value in parameters.items():
            if key != "name":
                set_path(spec_doc, key, value, source=source, error=CampaignError)
        for key, value in (overrides or {}).items():
            set_path(spec_doc, key, value, source=f"{source}, --{key}", error=CampaignError)
        spec_doc["name"] = case_name
        spec = validate(TestSpec, spec_doc, source=source, error=CampaignError)
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
    expected_anomaly_types: list[str] = field(default_factory=list)
    """Losses found that the case's configuration allows."""
    explanation: str = ""
    """What the verdict means, in a sentence or two."""
    acknowledged_lost: int | None = None
    """Distinct acknowledged writes lost (results.json `summary`; None: not counted)."""
    allowed_lost: int | None = None
    """Of those, the ones the case's configuration allows."""


def junit_xml(campaign: str, results: list[CaseResult]) -> str:
    """One test case per run: a failure when anomalies were found, an error when infrastructure failed."""
    cases = []
    for r in results:
        detail = json.dumps({"parameters": r.parameters, "run_dir": r.run_dir}, default=str)
        outcome = None
        if r.exit_code == ExitCode.ANOMALIES:
            message = r.explanation or f"anomalies: {', '.join(r.anomaly_types)}"
            outcome = JUnitOutcome("failure", message, detail)
        elif r.exit_code != ExitCode.SUCCESS:
            outcome = JUnitOutcome("error", r.error or f"exit code {r.exit_code}", detail)
        said = f"{r.explanation}\n{detail}" if r.explanation else detail
        cases.append(JUnitCase(r.name, time_s=r.seconds, outcome=outcome, system_out=said))
    return render_suite(
        campaign,
        cases,
        time_s=sum(r.seconds for r in results),
        timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
        properties={
            "campaign": campaign,
            "cases": len(results),
            "invalid": sum(1 for r in results if r.exit_code == ExitCode.ANOMALIES),
            **_lost_properties(results),
        },
    )


def _lost_properties(results: Sequence[CaseResult]) -> dict[str, object]:
    """The acknowledged writes the cases lost, and of them allowed, summed (none: no case
    counted any)."""
    counted = [r for r in results if r.acknowledged_lost]
    if not counted:
        return {}
    return {
        "acknowledged_lost": sum(r.acknowledged_lost or 0 for r in counted),
        "allowed_lost": sum(r.allowed_lost or 0 for r in counted),
    }


def progress_line(
    campaign: str, number: int, total: int, case: str, elapsed_s: float, done: Sequence[CaseResult]
) -> str:
    """Such as ``campaign bug-zoo: case 3 of 5 (unclean), 6 min 10 s in; so far 1 valid,
    1 invalid``."""
    minutes, seconds = divmod(int(elapsed_s), 60)
    tally: dict[str, int] = {}
    for r in done:
        label = (
            "invalid"
            if r.valid is False
            else "valid"
            if r.valid is True
            else "failed"
            if r.exit_code == ExitCode.INFRASTRUCTURE and r.error
            else "unknown"
        )
        tally[label] = tally.get(label, 0) + 1
    so_far = ", ".join(f"{n} {label}" for label, n in tally.items()) or "nothing yet"
    return (
        f"campaign {campaign}: case {number} of {total} ({case}), {minutes} min {seconds:02d} s "
        f"in; "
        f"so far {so_far}"
    )


def run_campaign(
    path: Path,
    *,
    store: Path,
    spark_master: str | None = None,
    spark_remote: str | None = None,
    console: Console | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[Path, list[CaseResult]]:
    """Run every case; write summary.json, junit.xml and report.html under
    store/campaigns/<campaign>/<stamp>/ after each case and when the campaign ends (also
    when it is interrupted or fails: whatever ran is reported). Before each case, `console`
    shows which of how many, the time so far and the verdicts."""
    from squall.store import RunStore

    name, cases = load_campaign(path, overrides)
    run_store = RunStore(store)
    out_dir = RunStore(store / "campaigns").new_run(name).path
    results: list[CaseResult] = []
    started = datetime.now(UTC).isoformat(timespec="seconds")
    campaign_started = time.monotonic()
    interrupted = False
    try:
        for number, case in enumerate(cases, start=1):
            if console is not None:
                console.print(
                    progress_line(
                        name,
                        number,
                        len(cases),
                        case.spec.name,
                        time.monotonic() - campaign_started,
                        results,
                    ),
                    highlight=False,
                )
            result, interrupted = _run_case(
                case,
                run_store,
                spark_master=spark_master,
                spark_remote=spark_remote,
                console=console,
            )
            results.append(result)
            write_campaign_outputs(out_dir, name, path, started, len(cases), results, ended=False)
            if interrupted:
                break
    except BaseException:  # Ctrl-C between cases, or squall's own failure: report what ran
        interrupted = True
        raise
    finally:
        write_campaign_outputs(
            out_dir, name, path, started, len(cases), results, ended=True, interrupted=interrupted
        )
    return out_dir, results


def _run_case(
    case: CampaignCase,
    run_store: RunStore,
    *,
    spark_master: str | None,
    spark_remote: str | None,
    console: Console | None,
) -> tuple[CaseResult, bool]:
    """Run one case: how it ended, and whether it was interrupted."""
    from squall.runner import TestRunner

    started = time.monotonic()
    try:
        outcome = TestRunner(
            case.spec,
            store=run_store,
            spark_master=spark_master,
            spark_remote=spark_remote,
            console=console,
        ).run()
        found = outcome.results or {}
        return CaseResult(
            case.spec.name,
            case.parameters,
            outcome.exit_code,
            found.get("valid"),
            list(found.get("anomaly_types", [])),
            str(outcome.run_dir.path),
            time.monotonic() - started,
            expected_anomaly_types=list(found.get("expected_anomaly_types", [])),
            explanation=explain(found, elections=leader_elections(outcome.run_dir.history))
            if found
            else "",
            acknowledged_lost=(found.get("summary") or {}).get("acknowledged_lost"),
            allowed_lost=(found.get("summary") or {}).get("allowed_lost"),
        ), outcome.interrupted
    except Exception as err:  # one case's failure must not stop the campaign
        return CaseResult(
            case.spec.name,
            case.parameters,
            3,
            "unknown",
            [],
            None,
            time.monotonic() - started,
            error=f"{type(err).__name__}: {err}",
        ), False


def write_campaign_outputs(
    out_dir: Path,
    name: str,
    path: Path,
    started: str,
    case_count: int,
    results: Sequence[CaseResult],
    *,
    ended: bool,
    interrupted: bool = False,
) -> None:
    """summary.json, junit.xml and report.html of what has run so far; `ended`: the
    campaign is over (finished or interrupted)."""
    from squall.report.campaign import write_campaign_report

    summary = {
        "campaign": name,
        "file": str(path),
        "started": started,
        "ended": datetime.now(UTC).isoformat(timespec="seconds") if ended else None,
        "interrupted": interrupted,
        "case_count": case_count,
        "cases": [r.__dict__ for r in results],
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (out_dir / "junit.xml").write_text(junit_xml(name, list(results)))
    write_campaign_report(out_dir)
