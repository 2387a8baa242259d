"""A case's cause in the reports: one line per anomaly type in the terminal, beside each
case in report.html, and marks on the timeline (`squall.report.causes`)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from squall.report.causes import LOST_LANE, anomaly_marks, cause_summary, cause_text
from squall.report.console import print_results
from squall.report.html import render_html
from squall.report.timeline import Mark, build_timeline

TEXT = (
    "n3 truncated q-0 3833→3788 (high-watermark rule) at 81.9 s, "
    "then led it (epoch 7, clean) at 85.2 s"
)
CAUSE = {
    "kind": "truncation-then-election",
    "events": [
        {"line": 901, "kind": "truncation", "time_s": 81.9, "node": "n3", "broker": 3,
         "from_offset": 3833, "to_offset": 3788, "rule": "high-watermark", "removed": 45},
        {"line": 950, "kind": "leader-election", "time_s": 85.2, "node": "n3", "leader": 3,
         "leader_epoch": 7, "unclean": False},
    ],
    "text": TEXT,
}  # fmt: skip


def lost(offset: int, **more: Any) -> dict[str, Any]:
    return {"key": "q-0", "value": offset * 10, "offset": offset, "writer": 40 + offset,
            "status": "ok", "acks": -1, "time": 76_800_000_000, **more}  # fmt: skip


RESULTS: dict[str, Any] = {
    "valid": False,
    "anomaly_types": ["lost-write"],
    "checkers": {
        "delivery": {
            "valid": False,
            "counts": {"lost-write": 3},
            "anomalies": {
                "lost-write": [
                    lost(3788, cause=CAUSE),
                    lost(3789, cause=CAUSE),
                    lost(3900, cause=None, no_cause="nothing explains it (offset 3900)"),
                ]
            },
        }
    },
}


def test_the_summary_leads_with_the_first_cause_and_counts_the_rest() -> None:
    cases = RESULTS["checkers"]["delivery"]["anomalies"]["lost-write"]
    assert cause_text(cases[0]) == TEXT
    assert cause_text(cases[2]) == "not explained: nothing explains it (offset 3900)"
    assert cause_summary(cases) == f"{TEXT} (of the 3 cases shown, 1 no event explains)"
    other = {**CAUSE, "text": "another"}
    assert cause_summary([*cases, lost(5, cause=other)]) == (
        f"{TEXT} (of the 4 cases shown, 1 has another cause, 1 no event explains)"
    )
    assert cause_summary(cases[2:]) == "not explained: nothing explains it (offset 3900)"
    assert cause_summary([lost(1)]) is None


def test_the_terminal_says_the_cause_once_per_type() -> None:
    out = io.StringIO()
    print_results(RESULTS, console=Console(file=out, width=200, color_system=None))
    lines = [line for line in out.getvalue().splitlines() if "cause: " in line]
    assert len(lines) == 1
    assert TEXT in lines[0]


def test_report_html_puts_each_cause_beside_its_case() -> None:
    page = render_html(RESULTS)
    assert "<strong>Cause:</strong> n3 truncated q-0 3833→3788" in page
    assert page.count("<span class='cause'>cause: the cause above</span>") == 2
    assert "<span class='cause'>cause: not explained: nothing explains it" in page
    # The samples' table names the events by their lines.
    assert "<td>truncation line 901, leader-election line 950</td>" in page


def test_the_timeline_marks_where_lost_writes_were_acknowledged_and_lost() -> None:
    marks = anomaly_marks(RESULTS)
    assert sorted(marks, key=lambda m: m.kind) == [
        Mark("acknowledged", LOST_LANE, 76.8, "q-0"),
        Mark("lost", "n3", 81.9, "q-0"),
    ]
    timeline = build_timeline([], nodes=["n1", "n3"], anomalies=marks)
    assert LOST_LANE in timeline.nodes
    assert set(timeline.marks) == set(marks)
