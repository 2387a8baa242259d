"""The Configuration section shows the nemesis settings that took part in the run."""

from __future__ import annotations

from squall.report.configuration import nemesis_as_run
from squall.report.html import render_html

NEMESIS = {
    "faults": {"kill": 1.0, "partition": 0.0},
    "interval_s": [10.0, 20.0],
    "duration_s": [5.0, 15.0],
    "targets": {},
    "shapes": ["isolate", "halves"],
    "partition_among": "all",
    "netem": {"delay_ms": 100.0},
    "allow_overlap": [],
    "generator": None,
    "detectors": {"session_timeout_s": 6.0},
}


def test_a_generator_s_run_shows_neither_the_kinds_schedule_nor_faults_it_never_applied() -> None:
    used, unused = nemesis_as_run({**NEMESIS, "generator": "default"}, {"start-partition"})
    assert set(used) == {"generator", "detectors", "shapes", "partition_among"}
    assert set(unused) == {
        "faults", "interval_s", "duration_s", "allow_overlap", "netem", "targets",
    }  # fmt: skip


def test_the_kinds_schedule_shows_the_kinds_that_had_a_weight() -> None:
    used, unused = nemesis_as_run(NEMESIS, {"kill", "start"})
    assert used["faults"] == {"kill": 1.0} and used["interval_s"] == [10.0, 20.0]
    assert "shapes" in unused and "netem" in unused


def test_the_report_puts_what_did_not_run_apart() -> None:
    test = {"name": "t", "nemesis": {**NEMESIS, "generator": "default"}}
    page = render_html({"valid": True}, test=test, faults=[{"f": "kill", "value": {}}])
    section = page[page.index("<h2 id='configuration'>") :]
    shown, apart = section.split("<details>", 1)
    assert "generator" in shown and "interval_s" not in shown and "delay_ms" not in shown
    assert "took no part in this run" in apart and "interval_s" in apart
