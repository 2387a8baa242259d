"""Real runs with a fixed fault schedule, for tests whose verdict is known in advance.

A scenario is a TestSpec plus a schedule of role-targeted faults (``leader:squall-queue-0``,
``followers:...``, ``isr:...``) resolved live when they strike, run by the TestRunner exactly
as `squall run` runs it: cluster, workload, nemesis, heal, final read, SUT events, checkers;
the runs of one test session are checked in one SparkSession, as a campaign's cases are: the
checker tests' (tests/spark_session.py), started by the first run that needs it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from nemesis import Fault, Schedule, ScheduledFault
from squall.runner import RunOutcome, TestRunner
from squall.spec import TestSpec
from squall.store import RunStore
from tests.spark_session import shared_spark
from workloads import WorkloadSpec

TOPIC = "squall-queue"
KEY = f"{TOPIC}-0"
WORKLOAD: dict[str, Any] = {
    "partitions": 1,
    "replication_factor": 3,
    "producers": 2,
    "consumers": 2,
    "producer_mode": "sync",
    "rate": 200.0,
    "final_read_deadline_s": 30.0,
}
"""One partition (so roles name one leader), two sync producers, two group consumers."""


def topic_config(min_insync: int, *, unclean: bool) -> dict[str, str]:
    return {
        "min.insync.replicas": str(min_insync),
        "unclean.leader.election.enable": str(unclean).lower(),
    }


@dataclass(frozen=True)
class Step:
    """A fault at `at_s` seconds; `heals` names the step (by position, from 1) it undoes."""

    at_s: float
    f: str
    value: Mapping[str, Any]
    heals: int | None = None


@dataclass(frozen=True)
class Verdict:
    """A finished run: its outcome, results.json and history, for assertions."""

    outcome: RunOutcome
    results: dict[str, Any]
    history: list[dict[str, Any]]
    console: str

    @property
    def elections(self) -> list[dict[str, Any]]:
        return [op for op in self.history if op["f"] == "leader-election"]

    @property
    def applied(self) -> list[dict[str, Any]]:
        return [op for op in self.history if op["process"] == "nemesis"]

    def ok_sends(self) -> int:
        return sum(1 for op in self.history if op["f"] == "send" and op["type"] == "ok")

    def explain(self) -> str:
        """What a failing assertion should show: verdict, counts, faults and elections."""
        brief = {
            "exit": self.outcome.exit_code,
            "valid": self.results.get("valid"),
            "anomaly_types": self.results.get("anomaly_types"),
            "expected_anomaly_types": self.results.get("expected_anomaly_types"),
            "counts": {
                name: section.get("counts")
                for name, section in self.results.get("checkers", {}).items()
            },
            "faults": [
                (op["f"], op["value"].get("targets"), op["value"].get("error"))
                for op in self.applied
            ],
            "elections": [op["value"] for op in self.elections],
            "run_dir": str(self.outcome.run_dir.path),
        }
        return json.dumps(brief, indent=1, default=str) + "\n" + self.console[-4000:]


def run_scenario(
    root: Path,
    name: str,
    *,
    runtime: str,
    workload: Mapping[str, Any],
    broker: Mapping[str, str],
    steps: Sequence[Step],
    time_limit_s: float,
    recovery_wait_s: float = 6.0,
) -> Verdict:
    """Run one scenario under `root` (its store and cluster state) and read what it wrote."""
    spec = TestSpec(
        name=name,
        workload=WorkloadSpec(topic=TOPIC, **workload),
        runtime=runtime,
        nodes=3,
        seed=7,
        time_limit_s=time_limit_s,
        recovery_wait_s=recovery_wait_s,
        broker=dict(broker),
    )
    schedule = Schedule(
        tuple(
            ScheduledFault(step.at_s, Fault(step.f, dict(step.value)), number, step.heals)
            for number, step in enumerate(steps, start=1)
        ),
        seed=7,
    )
    console = Console(record=True, width=140, force_terminal=False)
    runner = TestRunner(
        spec, store=RunStore(root / "store"), console=console, replay_schedule=schedule
    )
    shared_spark()  # the runner checks in the running session
    outcome = runner.run()
    history = [
        json.loads(line) for line in outcome.run_dir.history.read_text().splitlines() if line
    ]
    return Verdict(outcome, outcome.results or {}, history, console.export_text())
