"""``squall hunt``: run one configuration with fresh seeds until something is found, and
optionally shrink the fault schedule of the run that found it (squall.hunt)."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

import squall.hunt as hunting
from squall.commands._common import fail
from squall.commands.choices import RuntimeName
from squall.commands.run import (
    AcksOption,
    ClientOption,
    DurationOption,
    FaultsOption,
    GroupMembershipOption,
    IdempotenceOption,
    IdempotentProducersOption,
    IntervalOption,
    InventoryOption,
    MinInsyncOption,
    NameOption,
    NodesOption,
    PartitionsOption,
    ProducerRetriesOption,
    RateOption,
    ReplicationFactorOption,
    RuntimeOption,
    SeedOption,
    SettingsOption,
    SpecOption,
    StoreOption,
    SubscriptionOption,
    TimeLimitOption,
    TruncationOption,
    UncleanOption,
    spec_from_flags,
)
from squall.commands.spark import (
    SparkMasterOption,
    SparkRemoteOption,
    require_spark,
    spark_target,
)
from squall.exit_codes import ExitCode
from squall.hunt import RunReport, ShrinkResult
from squall.spec import TestSpec
from squall.store import RunStore, StoreError

log = logging.getLogger(__name__)

WIDTH = 80
VERDICTS = {
    "invalid": ("INVALID", "bold red"),
    "allowed-losses": ("ALLOWED LOSSES", "bold magenta"),
    "valid": ("valid", "green"),
    "unknown": ("unknown", "yellow"),
    "failed": ("FAILED", "bold yellow"),
}


def _console(*, stderr: bool, quiet: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False, quiet=quiet)
    console.width = min(console.width, WIDTH)
    return console


def _verdict_line(label: str, report: RunReport) -> Group:
    """``hunt run 3  seed 42  INVALID  142 s`` and, indented below, what it found and where."""
    word, style = VERDICTS[report.verdict]
    head = Text.assemble(f"{label}  seed {report.seed:<10}  ", (f"{word:<14}", style))
    head.append(f" {report.seconds:4.0f} s")
    details = Table.grid(padding=(0, 1))
    details.add_column(style="dim")
    details.add_column(overflow="fold")
    if report.anomaly_types:
        details.add_row("invalid:", Text(", ".join(report.anomaly_types), style=style))
    if report.expected_anomaly_types:
        details.add_row("allowed:", Text(", ".join(report.expected_anomaly_types), style=style))
    if report.error:
        details.add_row("error:", Text(report.error, style="yellow"))
    if report.run_dir:
        details.add_row("run:", Text(report.run_dir, style="dim"))
    return Group(head, Padding(details, (0, 0, 0, 4)))


class _Runs:
    """Runs tests in-process through the TestRunner, one at a time."""

    def __init__(
        self,
        store: Path,
        spark_master: str | None,
        console: Console,
        spark_remote: str | None = None,
    ) -> None:
        self.store = RunStore(store)
        self.spark_master = spark_master
        self.spark_remote = spark_remote
        self.console = console

    def run(self, spec: TestSpec, seed: int, schedule: Any = None) -> RunReport:
        from squall.runner import TestRunner

        started = time.monotonic()
        try:
            outcome = TestRunner(
                spec.model_copy(update={"seed": seed}),
                store=self.store,
                console=self.console,
                replay_schedule=schedule,
                spark_master=self.spark_master,
                spark_remote=self.spark_remote,
            ).run()
        except Exception as err:  # squall itself failed: a run without a verdict
            log.exception("the run with seed %s failed", seed)
            error = f"{type(err).__name__}: {err}"
            return RunReport(seed, None, None, seconds=time.monotonic() - started, error=error)
        return RunReport.of(
            seed,
            str(outcome.run_dir.path),
            outcome.results,
            exit_code=outcome.exit_code,
            seconds=time.monotonic() - started,
            interrupted=outcome.interrupted,
        )


def _schedule_table(schedule: Any) -> Table:
    table = Table("id", "at s", "fault", "targets", "scenario", title="shrunk schedule")
    for entry in schedule.faults:
        value = entry.fault.value
        targets = ",".join(value.get("targets") or [])
        if entry.fault.f == "start-partition" and value.get("shape"):
            targets = f"{value['shape']} {targets}".strip()
        table.add_row(
            str(entry.id), f"{entry.at_s:.1f}", entry.fault.f, targets or "-", entry.scenario or "-"
        )
    return table


def hunt(
    ctx: typer.Context,
    spec_file: Path | None = SpecOption,
    name: str | None = NameOption,
    runtime: RuntimeName | None = RuntimeOption,
    nodes: int | None = NodesOption,
    time_limit: float | None = TimeLimitOption,
    seed: int | None = SeedOption,
    client: str | None = ClientOption,
    idempotence: bool | None = IdempotenceOption,
    idempotent_producers: int | None = IdempotentProducersOption,
    producer_retries: int | None = ProducerRetriesOption,
    subscription: str | None = SubscriptionOption,
    group_membership: bool | None = GroupMembershipOption,
    acks: int | None = AcksOption,
    partitions: int | None = PartitionsOption,
    replication_factor: int | None = ReplicationFactorOption,
    min_insync: int | None = MinInsyncOption,
    unclean: bool | None = UncleanOption,
    truncation: str | None = TruncationOption,
    rate: float | None = RateOption,
    faults: str | None = FaultsOption,
    interval: str | None = IntervalOption,
    duration: str | None = DurationOption,
    settings: list[str] = SettingsOption,
    inventory: Path | None = InventoryOption,
    budget: float = typer.Option(
        1800.0,
        "--budget",
        min=1,
        metavar="SECONDS",
        help="Seconds of hunting; a run started within it finishes.",
    ),
    max_runs: int | None = typer.Option(
        None, "--max-runs", min=1, metavar="N", help="Stop after N runs.  [default: no limit]"
    ),
    shrink: bool = typer.Option(
        False, "--shrink", help="Minimise the fault schedule of the run that found something."
    ),
    shrink_replays: int = typer.Option(
        2,
        "--shrink-replays",
        min=1,
        metavar="N",
        help="Replays of each smaller schedule; one failure keeps it.",
    ),
    shrink_budget: float | None = typer.Option(
        None,
        "--shrink-budget",
        min=1,
        metavar="SECONDS",
        help="Seconds of shrinking.  [default: until done]",
    ),
    store: Path = StoreOption,
    spark_master: str | None = SparkMasterOption,
    spark_remote: str | None = SparkRemoteOption,
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="No progress, runs' panels or summary table; only the final JSON line on stdout.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print hunt.json's summary (every run, the detection, the shrink) as one JSON "
        "object on stdout instead of the summary table and the final line.",
    ),
) -> None:
    """Run one test again and again with fresh seeds until a run is invalid or shows losses
    its configuration allows, or the budget ends; print the time to first detection.

    Takes the configuration flags of `squall run`; --seed (or the spec's) is the first seed,
    later ones are drawn from it. Every run is an ordinary run in the store; hunt.json (and
    with --shrink the smallest failing schedule, shrunk-schedule.json) goes to
    store/<name>-hunt/<stamp>/. Exit 1 found, 0 nothing found, 2 bad input, 3 no run
    reached a verdict (infrastructure).
    """
    spec = spec_from_flags(
        spec_file,
        name=name,
        runtime=runtime,
        nodes=nodes,
        time_limit=time_limit,
        seed=seed,
        acks=acks,
        partitions=partitions,
        replication_factor=replication_factor,
        min_insync=min_insync,
        unclean=unclean,
        truncation=truncation,
        rate=rate,
        faults=faults,
        interval=interval,
        duration=duration,
        settings=settings,
        inventory=inventory,
        client=client,
        idempotence=idempotence,
        idempotent_producers=idempotent_producers,
        producer_retries=producer_retries,
        subscription=subscription,
        group_membership=group_membership,
    )
    spark_master, spark_remote = spark_target(ctx, spark_master, spark_remote)
    require_spark(spark_master, spark_remote)
    try:
        hunt_dir = hunting.new_hunt_dir(store, spec.name)
    except StoreError as err:
        fail(str(err), ExitCode.USAGE)
    progress, out = (
        _console(stderr=True, quiet=quiet),
        _console(stderr=False, quiet=quiet or as_json),
    )
    runs = _Runs(store, spark_master, progress, spark_remote)
    summary: dict[str, Any] = {
        "name": spec.name,
        "hunt_dir": str(hunt_dir),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": spec.to_json(),
        "budget_s": budget,
        "max_runs": max_runs,
    }
    done: list[RunReport] = []

    def save() -> None:
        hunting.write_json(hunt_dir / hunting.HUNT_JSON, summary)

    def on_run(number: int, report: RunReport) -> None:
        done.append(report)
        progress.print(_verdict_line(f"hunt run {number}", report))
        summary.update(stopped=None, seeds=[r.seed for r in done], runs=hunting.runs_json(done))
        save()

    save()
    progress.print(
        f"[bold]hunting[/] {spec.name}: budget {budget:.0f} s"
        + (f", at most {max_runs} runs" if max_runs else "")
        + f"; summary in {hunt_dir}"
    )
    from checkers import stop_spark

    try:  # every run is checked in one SparkSession
        result = hunting.hunt(
            lambda s: runs.run(spec, s),
            seeds=hunting.fresh_seeds(spec.seed),
            budget_s=budget,
            max_runs=max_runs,
            on_run=on_run,
        )
        summary.update(result.to_json())
        save()
        found = result.detection
        shrunk: ShrinkResult | None = None
        if found is not None and shrink:
            shrunk = _shrink(
                spec, found, runs, hunt_dir, summary, replays=shrink_replays, budget_s=shrink_budget
            )
    finally:
        stop_spark()
    _print_summary(out, result, shrunk, summary)
    if as_json:
        print(json.dumps({"hunt": str(hunt_dir / hunting.HUNT_JSON), **summary}, default=str))
        raise typer.Exit(result.exit_code)
    print(
        json.dumps(
            {
                "hunt": str(hunt_dir / hunting.HUNT_JSON),
                "exit_code": result.exit_code,
                "runs": len(result.runs),
                "detected": None if found is None else found.run_dir,
                "time_to_detection_s": summary["time_to_detection_s"],
                "shrunk_schedule": None
                if shrunk is None
                else str(hunt_dir / hunting.SHRUNK_SCHEDULE),
            }
        )
    )
    raise typer.Exit(result.exit_code)


def _shrink(
    spec: TestSpec,
    found: RunReport,
    runs: _Runs,
    hunt_dir: Path,
    summary: dict[str, Any],
    *,
    replays: int,
    budget_s: float | None,
) -> ShrinkResult | None:
    """Shrink the detecting run's schedule, replaying each candidate with that run's spec and
    seed; shrunk-schedule.json always holds the smallest failing schedule so far."""
    from nemesis import FaultError, Schedule
    from squall.config.errors import ConfigurationError
    from squall.store import load_schedule

    console = runs.console
    source = Path(found.run_dir or ".") / "schedule.json"
    try:
        schedule = load_schedule(source)
    except (FaultError, ConfigurationError) as err:
        console.print(f"[yellow]nothing to shrink:[/] {err}")
        summary["shrink"] = {"skipped": str(err)}
        return None
    started = time.monotonic()
    interrupted = False
    shrunk_path = hunt_dir / hunting.SHRUNK_SCHEDULE
    record: dict[str, Any] = {
        "from": found.run_dir,
        "seed": found.seed,
        "target_anomaly_types": sorted(found.found),
        "replays_per_candidate": replays,
        "faults_before": len(schedule),
        "faults_after": len(schedule),
        "schedule": str(shrunk_path),
        "reproduced_by": found.run_dir,
        "complete": False,
        "replays": 0,
        "tries": [],
    }
    summary["shrink"] = record

    def run_candidate(candidate: Schedule) -> bool:
        nonlocal interrupted
        reports: list[RunReport] = []
        for _ in range(replays):
            try:
                report = runs.run(spec, found.seed, candidate)
            except KeyboardInterrupt:
                interrupted = True
                break
            reports.append(report)
            console.print(_verdict_line(f"  replay {len(reports)}/{replays}", report))
            interrupted = interrupted or report.interrupted
            if report.reproduces(found) or report.interrupted:
                break
        record["replays"] += len(reports)
        record["tries"].append({"replays": [r.to_json() for r in reports]})
        return bool(reports) and reports[-1].reproduces(found)

    def on_try(candidate: hunting.Candidate, failed: bool) -> None:
        tried = record["tries"][-1]
        tried.update(removed=list(candidate.removed), what=candidate.what, failed=failed)
        console.print(
            f"shrink: without {candidate.what} (faults {_ids(candidate.removed)}): "
            + ("[red]still fails[/]" if failed else "[green]passes[/]")
            + f"; {len(candidate.schedule)} faults left"
        )
        if failed:
            hunting.write_json(shrunk_path, candidate.schedule.to_json())
            record.update(
                faults_after=len(candidate.schedule),
                reproduced_by=tried["replays"][-1]["run_dir"],
            )
        hunting.write_json(hunt_dir / hunting.HUNT_JSON, summary)

    def should_stop() -> bool:
        spent = budget_s is not None and time.monotonic() - started >= budget_s
        return interrupted or spent

    console.print(
        f"[bold]shrinking[/] the schedule of {found.run_dir} ({len(schedule)} faults), "
        f"{replays} replays per candidate"
    )
    hunting.write_json(shrunk_path, schedule.to_json())
    result = hunting.shrink(schedule, run_candidate, should_stop=should_stop, on_try=on_try)
    outcome = result.to_json()
    record.update(
        complete=result.complete,
        kept=outcome["kept"],
        removed=outcome["removed"],
        seconds=round(time.monotonic() - started, 1),
    )
    hunting.write_json(hunt_dir / hunting.HUNT_JSON, summary)
    return result


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids)


def _print_summary(
    out: Console, result: hunting.HuntResult, shrunk: ShrinkResult | None, summary: dict[str, Any]
) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    found = result.detection
    if found is not None:
        word, style = VERDICTS[found.verdict]
        grid.add_row("found", Text(f"{word}: {', '.join(sorted(found.found))}", style=style))
        runs = len(result.runs)
        grid.add_row(
            "detected",
            f"after {result.time_to_detection_s or 0:.0f} s and {runs} run{'s' * (runs > 1)} "
            "(time to first detection)",
        )
        grid.add_row("run", f"{found.run_dir} (seed {found.seed})")
    else:
        grid.add_row("found", Text("nothing", style="green"))
        grid.add_row("stopped", f"{result.stopped} after {result.elapsed_s:.0f} s")
        grid.add_row("runs", str(len(result.runs)))
    grid.add_row("summary", str(Path(summary["hunt_dir"]) / hunting.HUNT_JSON))
    out.print(grid)
    if shrunk is not None:
        record = summary["shrink"]
        out.print(
            f"shrunk {len(shrunk.original)} faults to {len(shrunk.schedule)} in "
            f"{len(shrunk.tries)} candidates, {record['replays']} replays"
            + ("" if shrunk.complete else " (stopped early: the smallest so far)")
        )
        out.print(_schedule_table(shrunk.schedule))
        out.print(f"schedule: {record['schedule']}")
        out.print(
            f"replay it: squall replay {record['reproduced_by']} --schedule {record['schedule']}"
        )
