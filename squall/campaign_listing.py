"""What a campaign directory holds (``store/campaigns/<campaign>/<stamp>/``): its summary.json
read together with each case's run directory, for the campaign's report.html and
``squall serve``.

A case's run is found in the same store as the campaign (``<store>/<test>/<stamp>``, the
last two parts of the run directory summary.json names), so that a store read from another
directory, or moved, still links its runs.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.run_log import RUN_LOG
from squall.store_listing import RunSummary, read_json_object, summarise_run

CAMPAIGNS = "campaigns"
"""The store's directory of campaigns."""
SUMMARY = "summary.json"
REPORT = "report.html"
_STAMP = re.compile(r"^\d{8}T\d{6}(?:-\d+)?$")
_LOGGED = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?P<level>[A-Z]+) \S+ \[[^]]*\]: ")


@dataclass(frozen=True)
class CaseSummary:
    """One case of a campaign as its report shows it."""

    name: str
    parameters: dict[str, Any]
    verdict: str
    """VALID, INVALID, UNKNOWN, INTERRUPTED or NO VERDICT (as a run's, store_listing)."""
    run: RunSummary | None
    """The case's run directory as listed; None when it has none in the store."""
    test: dict[str, Any] | None
    """The run's test.json."""
    seconds: float | None
    acknowledged_lost: int | None
    allowed_lost: int | None
    explanation: str = ""
    why_no_verdict: str | None = None
    """For a case without results.json: the error, or run.log's reason."""


@dataclass(frozen=True)
class CampaignSummary:
    """One campaign directory: what ran, and how each case ended."""

    name: str
    path: Path
    file: str | None
    started: str | None
    ended: str | None
    """ISO 8601 UTC; None while the campaign runs, when it was killed, or not recorded."""
    finished: bool
    """Whether it wrote its end (a summary.json from before campaigns recorded it counts as
    finished)."""
    interrupted: bool
    case_count: int | None
    """How many cases the campaign was to run (None: not recorded)."""
    cases: list[CaseSummary] = field(default_factory=list)

    @property
    def stamp(self) -> str:
        return self.path.name

    @property
    def verdict(self) -> str:
        """INVALID when any case is; else INTERRUPTED, NO VERDICT (unfinished: running, or
        stopped before it wrote its end), UNKNOWN (a case without a valid verdict), VALID."""
        verdicts = {case.verdict for case in self.cases}
        if "INVALID" in verdicts:
            return "INVALID"
        if self.interrupted or "INTERRUPTED" in verdicts:
            return "INTERRUPTED"
        if not self.finished:
            return "NO VERDICT"
        if verdicts != {"VALID"} or len(self.cases) < (self.case_count or 0):
            return "UNKNOWN"
        return "VALID"

    def tally(self) -> str:
        """Such as ``3 of 4 cases: 1 VALID, 2 INVALID``."""
        counts = Counter(case.verdict for case in self.cases)
        ran = len(self.cases)
        total = f"{ran} of {self.case_count}" if self.case_count not in (None, ran) else f"{ran}"
        listed = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
        planned = self.case_count if self.case_count is not None else ran
        return f"{total} case{'' if planned == 1 else 's'}" + (f": {listed}" if listed else "")

    def lost(self) -> str:
        """The acknowledged writes the cases lost, summed, and how many allowed; "" when none."""
        lost = sum(c.acknowledged_lost or 0 for c in self.cases)
        if not lost:
            return ""
        allowed = sum(c.allowed_lost or 0 for c in self.cases)
        return f"{lost:,} acknowledged writes lost" + (f" ({allowed:,} allowed)" if allowed else "")

    def run_link(self, case: CaseSummary, file: str = "") -> str | None:
        """The relative link from the campaign's directory to a case's run (or a file of it)."""
        if case.run is None:
            return None
        return f"../../../{case.run.test}/{case.run.stamp}/{file}"


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _run_directory(store: Path, recorded: Any) -> Path | None:
    """The case's run directory in `store`, from the path summary.json recorded."""
    if not isinstance(recorded, str) or not recorded:
        return None
    parts = Path(recorded).parts
    if len(parts) < 2 or not _STAMP.match(parts[-1]):
        return None
    found = store / parts[-2] / parts[-1]
    return found if found.is_dir() and not found.is_symlink() else None


def why_no_verdict(run_dir: Path) -> str | None:
    """Why a run ended without a verdict, from its run.log: the reason the runner logged
    (``no verdict: ...``), else its last error; None without a run.log or an error in it."""
    try:
        lines = (run_dir / RUN_LOG).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    reason = None
    for line in lines:
        logged = _LOGGED.match(line)
        if logged is None or logged.group("level") not in ("ERROR", "CRITICAL"):
            continue
        message = line[logged.end() :]
        if message.startswith("no verdict: "):
            reason = message.removeprefix("no verdict: ")
        elif reason is None or not reason.startswith("infrastructure failure"):
            reason = message
    return reason


def _verdict(valid: Any) -> str:
    return "VALID" if valid is True else "INVALID" if valid is False else "NO VERDICT"


def _case(store: Path, doc: dict[str, Any]) -> CaseSummary:
    run_dir = _run_directory(store, doc.get("run_dir"))
    run = summarise_run(run_dir) if run_dir is not None else None
    error = doc.get("error")
    why = str(error) if error else None
    if run_dir is not None and not (run_dir / "results.json").is_file():
        why = why or why_no_verdict(run_dir) or f"no results.json, and no reason in {RUN_LOG}"
    elif run_dir is None and why is None and not isinstance(doc.get("valid"), bool):
        why = "its run directory is not in this store"
    parameters = doc.get("parameters")
    seconds = doc.get("seconds")
    return CaseSummary(
        name=str(doc.get("name", "?")),
        parameters=dict(parameters) if isinstance(parameters, dict) else {},
        verdict=run.verdict if run is not None else _verdict(doc.get("valid")),
        run=run,
        test=read_json_object(run_dir / "test.json") if run_dir is not None else None,
        seconds=float(seconds) if isinstance(seconds, int | float) else None,
        acknowledged_lost=_int_or_none(doc.get("acknowledged_lost")),
        allowed_lost=_int_or_none(doc.get("allowed_lost")),
        explanation=str(doc.get("explanation") or ""),
        why_no_verdict=why,
    )


def read_campaign(campaign_dir: Path) -> CampaignSummary | None:
    """The campaign of ``store/campaigns/<campaign>/<stamp>/``; None without a readable
    summary.json."""
    doc = read_json_object(campaign_dir / SUMMARY)
    if doc is None:
        return None
    store = campaign_dir.parent.parent.parent
    cases = doc.get("cases")
    started = doc.get("started")
    ended = doc.get("ended")
    return CampaignSummary(
        name=str(doc.get("campaign") or campaign_dir.parent.name),
        path=campaign_dir,
        file=str(doc["file"]) if doc.get("file") is not None else None,
        started=str(started) if started else _started_from_stamp(campaign_dir.name),
        ended=str(ended) if ended else None,
        finished="ended" not in doc or bool(ended),
        interrupted=doc.get("interrupted") is True,
        case_count=_int_or_none(doc.get("case_count")),
        cases=[_case(store, c) for c in cases if isinstance(c, dict)]
        if isinstance(cases, list)
        else [],
    )


def _started_from_stamp(stamp: str) -> str | None:
    if not _STAMP.match(stamp):
        return None
    return (
        f"{stamp[0:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]}+00:00"
    )


def campaign_directories(store: Path) -> list[Path]:
    """Every campaign directory of the store, newest first; links are not campaigns."""
    root = store / CAMPAIGNS
    if not root.is_dir() or root.is_symlink():
        return []
    found = [
        stamp
        for campaign in root.iterdir()
        if campaign.is_dir() and not campaign.is_symlink()
        for stamp in campaign.iterdir()
        if _STAMP.match(stamp.name) and stamp.is_dir() and not stamp.is_symlink()
    ]
    return sorted(found, key=lambda p: (p.name, p.parent.name), reverse=True)


def list_campaigns(store: Path) -> list[CampaignSummary]:
    """The store's campaigns with a summary.json, newest first."""
    return [c for d in campaign_directories(store) if (c := read_campaign(d)) is not None]
