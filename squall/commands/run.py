"""``squall run``, ``squall replay`` and ``squall report``: tests from flags or a spec file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from squall.commands._common import fail
from squall.commands.choices import RuntimeName
from squall.commands.spark import (
    SparkMasterOption,
    SparkRemoteOption,
    require_spark,
    spark_target,
)
from squall.exit_codes import ExitCode
from squall.spec import TOP_LEVEL, SpecError, TestSpec
from squall.store import DEFAULT_STORE, RunStore, StoreError
from workloads import WorkloadSpec


def _pair(text: str, flag: str) -> list[float]:
    try:
        low, high = (float(x) for x in text.split(","))
    except ValueError:
        fail(f"{flag} {text!r}: expected MIN,MAX seconds, e.g. 5,10", ExitCode.USAGE)
    return [low, high]


def _weights(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in text.split(","):
        name, _, weight = item.partition("=")
        try:
            out[name.strip()] = float(weight) if weight else 1.0
        except ValueError:
            fail(
                f"--faults {text!r}: expected KIND[=WEIGHT],..., e.g. kill=1,partition=2",
                ExitCode.USAGE,
            )
    return out


def _nemesis_overrides(
    faults: str | None, interval: str | None, duration: str | None
) -> dict[str, Any]:
    """The [nemesis] overrides of --faults, --interval and --duration.

    Kinds of fault alone keep the weighted-kinds schedule (a fault every --interval, healed
    after --duration); a scenario name (or ``default``) among them makes a generator: a
    weighted mix, one after another, --interval apart.
    """
    from nemesis.generator import DEFAULT_GENERATORS, SINGLE_KINDS

    overrides: dict[str, Any] = {}
    weights = _weights(faults) if faults not in (None, "none") else {}
    if weights and all(name in SINGLE_KINDS for name in weights):
        overrides["nemesis/faults"] = weights
        if interval is not None:
            overrides["nemesis/interval_s"] = _pair(interval, "--interval")
        if duration is not None:
            overrides["nemesis/duration_s"] = _pair(duration, "--duration")
        return overrides
    named = list(weights)
    if len(named) == 1 and named[0] in DEFAULT_GENERATORS and (interval, duration) == (None, None):
        overrides["nemesis/generator"] = named[0]
    elif weights:
        span = _pair(duration, "--duration") if duration is not None else None
        choices = [
            {
                "weight": weight,
                "do": {"fault": name, **({"duration": span} if span else {})}
                if name in SINGLE_KINDS
                else name,
            }
            for name, weight in weights.items()
        ]
        stagger: dict[str, Any] = {"stagger": {"mix": choices}}
        if interval is not None:
            stagger["gap"] = _pair(interval, "--interval")
        overrides["nemesis/generator"] = stagger
        overrides["nemesis/faults"] = {}
    elif interval is not None or duration is not None:
        fail("--interval and --duration go with --faults KIND,...", ExitCode.USAGE)
    return overrides


def build_spec(spec_file: Path | None, overrides: dict[str, Any]) -> TestSpec:
    """A spec file (if any) with flags layered on top."""
    from squall.config import ConfigurationError, read_toml, set_path

    try:
        doc: dict[str, Any] = {}
        source = "flags"
        if spec_file is not None:
            doc = read_toml(spec_file, what="spec", error=SpecError)
            source = f"{spec_file} and flags"
        for path, value in overrides.items():
            if value is not None:
                set_path(doc, path, value, source=source, error=SpecError)
        doc.setdefault("name", "queue")
        return TestSpec.from_mapping(doc, source=source)
    except ConfigurationError as err:
        fail(str(err), ExitCode.USAGE)


def _or_spec(default: object) -> str:
    """The default a configuration flag falls back to: the --spec file's value, else this."""
    return f"  [default: the spec's, else {default}]"


_SPEC = TestSpec.model_fields
_WORKLOAD = WorkloadSpec.model_fields

# The options of a test's configuration, shared by the commands that run tests (run, hunt).
# Each leaves its key to the --spec file (or the spec's default) when not given.
SpecOption = typer.Option(
    None, "--spec", metavar="FILE", help="A TOML test spec; the flags below override it."
)
NameOption = typer.Option(
    None, "--name", metavar="NAME", help="Test name (its store directory)." + _or_spec("queue")
)
RuntimeOption = typer.Option(
    None,
    "--runtime",
    metavar="docker|ssh|local|external",
    help="Where the nodes run; external: a running cluster squall did not deploy "
    "(--inventory).  [default: the spec's, else docker where an engine answers, else local]",
)
NodesOption = typer.Option(
    None, "--nodes", min=1, metavar="N", help="Brokers." + _or_spec(_SPEC["nodes"].default)
)
TimeLimitOption = typer.Option(
    None,
    "--time-limit",
    metavar="SECONDS",
    help="Seconds of workload under faults." + _or_spec(f"{_SPEC['time_limit_s'].default:g}"),
)
SeedOption = typer.Option(
    None,
    "--seed",
    metavar="N",
    help="Seed for the workload and the fault schedule.  [default: the spec's, else drawn "
    "and recorded]",
)
ClientOption = typer.Option(
    None,
    "--client",
    metavar="squall|confluent-kafka|kafka-python",
    help="The client library the workload runs through (docs/clients.md); a Kafka client "
    "talks to the brokers' Kafka listeners, which it turns on." + _or_spec("squall"),
)
IdempotenceOption = typer.Option(
    None,
    "--idempotence/--no-idempotence",
    help="Every producer idempotent: a retried send lands once, and any duplicate is an "
    "anomaly (needs acks -1 and --producer-retries >= 1)." + _or_spec("no"),
)
IdempotentProducersOption = typer.Option(
    None,
    "--idempotent-producers",
    metavar="N",
    help="How many of the producers are idempotent, the others not (needs acks -1)."
    + _or_spec("half of them with acks -1, else none"),
)
SubscriptionOption = typer.Option(
    None,
    "--subscription",
    metavar="subscribe|assign",
    help="subscribe: the consumers are members of the group, whose coordinator shares the "
    "partitions out and rebalances them; assign: the workload shares them out itself."
    + _or_spec(_WORKLOAD["subscription"].default),
)
GroupMembershipOption = typer.Option(
    None,
    "--group-membership/--no-group-membership",
    help="With subscribe: each consumer a member of the group; --no-group-membership gives "
    "every consumer every partition outside any group (docs/clients.md)."
    + _or_spec("yes with subscribe, no with assign"),
)
ProducerRetriesOption = typer.Option(
    None,
    "--producer-retries",
    metavar="N",
    help="How often the producer client resends a failed send itself."
    + _or_spec(_WORKLOAD["producer_retries"].default),
)
AcksOption = typer.Option(
    None,
    "--acks",
    metavar="-1|0|1",
    help="Producer acks." + _or_spec(_WORKLOAD["acks"].default),
)
PartitionsOption = typer.Option(
    None,
    "--partitions",
    metavar="N",
    help="Partitions of the topic." + _or_spec(_WORKLOAD["partitions"].default),
)
ReplicationFactorOption = typer.Option(
    None,
    "--replication-factor",
    metavar="N",
    help="Replicas of each partition." + _or_spec(_WORKLOAD["replication_factor"].default),
)
MinInsyncOption = typer.Option(
    None,
    "--min-insync-replicas",
    metavar="N",
    help="ISR size an acks=-1 produce needs (topic setting)." + _or_spec("1"),
)
UncleanOption = typer.Option(
    None,
    "--unclean-leader-election/--no-unclean-leader-election",
    help="Whether an out-of-sync replica may become leader (topic setting)." + _or_spec("no"),
)
TruncationOption = typer.Option(
    None,
    "--truncation",
    metavar="leader-epoch|high-watermark",
    help="How followers truncate (replica.truncation)." + _or_spec("leader-epoch"),
)
RateOption = typer.Option(
    None,
    "--rate",
    metavar="OPS",
    help="Operations per second across all clients." + _or_spec(f"{_WORKLOAD['rate'].default:g}"),
)
FaultsOption = typer.Option(
    None,
    "--faults",
    metavar="NAME[=W],...",
    help=(
        "Scenarios (docs/scenarios.md) and fault kinds (kill, pause, partition, bounce, "
        "freeze, netem, slow, corrupt, truncate, rollback, power-loss) with weights; "
        "'default' (the default mix, storage scenarios included where the runtime can apply "
        "them; 'default-with-disks' is another name of it), 'default-without-disks' (without "
        "the storage scenarios) or 'none'." + _or_spec("default")
    ),
)
IntervalOption = typer.Option(
    None,
    "--interval",
    metavar="MIN,MAX",
    help="Seconds between faults (or scenarios), e.g. 5,10; goes with --faults.",
)
DurationOption = typer.Option(
    None,
    "--duration",
    metavar="MIN,MAX",
    help="Seconds a single fault lasts, e.g. 5,10; goes with --faults.",
)
SettingsOption = typer.Option(
    [],
    "--set",
    metavar="KEY=VALUE",
    help="A broker setting, Kafka's names (log.segment.bytes=1048576); repeatable.",
)
InventoryOption = typer.Option(
    None,
    "--inventory",
    metavar="FILE",
    help="The hosts, for --runtime ssh; the running cluster, for --runtime external "
    "(docs/external.md).",
)
StoreOption = typer.Option(
    DEFAULT_STORE, "--store", metavar="DIR", help="Where run directories go."
)
KeepClusterOption = typer.Option(False, "--keep-cluster", help="Leave the cluster up afterwards.")
LazyDiskOption = typer.Option(
    None,
    "--lazy-disk/--no-lazy-disk",
    help="The brokers' data on lazyfs, disks that can lose what was not fsynced (power-loss "
    "faults need it).  [default: the spec's, else on for docker, off for ssh and local]",
)
QuietOption = typer.Option(
    False,
    "--quiet",
    "-q",
    help="No live panel or report on stderr; only the final JSON line on stdout.",
)


def spec_from_flags(
    spec_file: Path | None,
    *,
    name: str | None,
    runtime: RuntimeName | None,
    nodes: int | None,
    time_limit: float | None,
    seed: int | None,
    acks: int | None,
    partitions: int | None,
    replication_factor: int | None,
    min_insync: int | None,
    unclean: bool | None,
    truncation: str | None,
    rate: float | None,
    faults: str | None,
    interval: str | None,
    duration: str | None,
    settings: list[str],
    inventory: Path | None,
    lazy_disk: bool | None = None,
    client: str | None = None,
    idempotence: bool | None = None,
    idempotent_producers: int | None = None,
    producer_retries: int | None = None,
    subscription: str | None = None,
    group_membership: bool | None = None,
) -> TestSpec:
    """The test the configuration flags describe, over the spec file if any; exits USAGE
    when they do not make a valid test."""
    from system_under_test.config import ConfigError, parse_assignments

    try:
        broker = parse_assignments(settings)
    except ConfigError as err:
        fail(str(err), ExitCode.USAGE)
    topic_config: dict[str, str] = {}
    if min_insync is not None:
        topic_config["min.insync.replicas"] = str(min_insync)
    if unclean is not None:
        topic_config["unclean.leader.election.enable"] = str(unclean).lower()
    overrides: dict[str, Any] = {
        "name": name,
        "runtime": runtime,
        "nodes": nodes,
        "time_limit_s": time_limit,
        "seed": seed,
        "inventory": str(inventory) if inventory else None,
        "lazy_disk": lazy_disk,
        "workload/acks": acks,
        "workload/client": client,
        "workload/idempotence": idempotence,
        "workload/idempotent_producers": idempotent_producers,
        "workload/producer_retries": producer_retries,
        "workload/subscription": subscription,
        "workload/group_membership": group_membership,
        "workload/partitions": partitions,
        "workload/replication_factor": replication_factor,
        "workload/rate": rate,
    }
    for key, value in topic_config.items():
        overrides[f"workload/topic_config/{key}"] = value
    if truncation is not None:
        overrides["broker/replica.truncation"] = truncation
    for key, value in broker.items():
        overrides[f"broker/{key}"] = value
    overrides.update(_nemesis_overrides(faults, interval, duration))
    spec = build_spec(spec_file, overrides)
    if faults == "none":
        spec = spec.model_copy(update={"nemesis": None})
    return spec


def run(
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
    lazy_disk: bool | None = LazyDiskOption,
    store: Path = StoreOption,
    keep_cluster: bool = KeepClusterOption,
    spark_master: str | None = SparkMasterOption,
    spark_remote: str | None = SparkRemoteOption,
    quiet: bool = QuietOption,
) -> None:
    """Run one test: provision, workload under faults, heal, final read, check, report.

    Prints {"run_dir": ..., "exit_code": ..., "valid": ...} at the end. Exit 0 valid, 1
    invalid, 3 unknown or no verdict, 2 for a spec or flag that is not valid.
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
        lazy_disk=lazy_disk,
        client=client,
        idempotence=idempotence,
        idempotent_producers=idempotent_producers,
        producer_retries=producer_retries,
        subscription=subscription,
        group_membership=group_membership,
    )
    spark_master, spark_remote = spark_target(ctx, spark_master, spark_remote)
    _execute(
        spec,
        store=store,
        keep_cluster=keep_cluster,
        spark_master=spark_master,
        spark_remote=spark_remote,
        quiet=quiet,
    )


def progress_console(*, quiet: bool) -> Console:
    """Where a run's live panel and report go: stderr, or nowhere with --quiet."""
    return Console(stderr=True, quiet=quiet)


def _execute(
    spec: TestSpec,
    *,
    store: Path,
    keep_cluster: bool,
    spark_master: str | None,
    spark_remote: str | None = None,
    replay_schedule: Any = None,
    quiet: bool = False,
) -> None:
    from checkers import stop_spark
    from squall.cluster.runtimes import RuntimeUnavailableError
    from squall.runner import TestRunner

    require_spark(spark_master, spark_remote)
    try:
        outcome = TestRunner(
            spec,
            store=RunStore(store),
            console=progress_console(quiet=quiet),
            keep_cluster=keep_cluster,
            replay_schedule=replay_schedule,
            spark_master=spark_master,
            spark_remote=spark_remote,
        ).run()
    except (StoreError, SpecError) as err:
        fail(str(err), ExitCode.USAGE)
    except RuntimeUnavailableError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)
    finally:
        stop_spark()
    report = Path(outcome.run_dir.path) / "report.html"
    print(
        json.dumps(
            {
                "run_dir": str(outcome.run_dir.path),
                "exit_code": outcome.exit_code,
                "valid": outcome.results.get("valid") if outcome.results else None,
                "report": str(report) if report.is_file() else None,
            }
        )
    )
    raise typer.Exit(outcome.exit_code)


def replay(
    ctx: typer.Context,
    run_dir: Path = typer.Argument(
        ..., metavar="RUN_DIR", help="A run directory (or store/<test>/latest)."
    ),
    store: Path = StoreOption,
    keep_cluster: bool = KeepClusterOption,
    spark_master: str | None = SparkMasterOption,
    spark_remote: str | None = SparkRemoteOption,
    schedule_file: Path | None = typer.Option(
        None,
        "--schedule",
        metavar="FILE",
        help="Another schedule.json to apply (e.g. a hunt's shrunk-schedule.json).  "
        "[default: the run's schedule.json]",
    ),
    quiet: bool = QuietOption,
) -> None:
    """Run a test again with the same spec, seed and fault schedule (resolved targets).

    Output and exit codes as `squall run`.
    """
    from nemesis import FaultError
    from squall.config.errors import ConfigurationError
    from squall.store import load_schedule

    spark_master, spark_remote = spark_target(ctx, spark_master, spark_remote)
    try:
        run = RunStore.open(run_dir)
        test = run.read_test()
        spec = TestSpec.from_mapping(
            # A run without faults says "nemesis": null, which must stay "no faults".
            {k: v for k, v in test.items() if k in TOP_LEVEL and (v is not None or k == "nemesis")},
            source=str(run.test_json),
        )
        source = schedule_file or (run.schedule if run.schedule.exists() else None)
        schedule = load_schedule(source) if source is not None else None
    except (StoreError, ConfigurationError, FaultError) as err:
        fail(str(err), ExitCode.USAGE)
    _execute(
        spec,
        store=store,
        keep_cluster=keep_cluster,
        spark_master=spark_master,
        spark_remote=spark_remote,
        replay_schedule=schedule,
        quiet=quiet,
    )


def report(
    run_dir: Path = typer.Argument(
        ..., metavar="RUN_DIR", help="A run directory with results.json."
    ),
) -> None:
    """The run's report again: terminal, report.html with plots, junit.xml (from results.json)."""
    from squall.report.console import print_results

    try:
        run = RunStore.open(run_dir)
        results = json.loads(run.results.read_text())
    except (StoreError, OSError, ValueError) as err:
        fail(
            f"{run_dir}: no readable results.json ({err}); run `squall check {run_dir}` first",
            ExitCode.USAGE,
        )
    from squall.runner import write_reports

    write_reports(run, results)
    print_results(results, run_dir=run.path)
    print(json.dumps({"report": str(run.report_html), "junit": str(run.junit)}))


def campaign(
    ctx: typer.Context,
    campaign_file: Path = typer.Argument(
        ..., metavar="FILE", help="A campaign TOML: [base], [matrix], [[case]]."
    ),
    store: Path = StoreOption,
    runtime: RuntimeName | None = typer.Option(
        None,
        "--runtime",
        metavar="docker|ssh|local|external",
        help="Where every case's nodes run, over the file's.  [default: the file's, else "
        "docker where an engine answers, else local]",
    ),
    inventory: Path | None = typer.Option(
        None,
        "--inventory",
        metavar="FILE",
        help="The ssh or external runtime's inventory, for every case.",
    ),
    spark_master: str | None = SparkMasterOption,
    spark_remote: str | None = SparkRemoteOption,
    list_only: bool = typer.Option(
        False, "--list", help="Print each case as JSON ({name, parameters}) and exit."
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print the summary (summary.json, with the paths of it, junit.xml and "
        "report.html) as one JSON object instead of the table.",
    ),
    quiet: bool = QuietOption,
) -> None:
    """Run a matrix of tests one after another; a summary, summary.json, junit.xml and the
    campaign's report.html at the end.

    The tests are the file's [base] spec crossed with its [matrix] (paths such as
    "workload/acks" = [-1, 1]) plus its [[case]] entries. A case that fails does not stop
    the others; an interrupted case ends the campaign. Exit: the highest exit code of its
    tests; 2 for a campaign file that is not valid.
    """
    from rich.markup import escape
    from rich.table import Table

    from checkers import stop_spark
    from squall.campaign import CampaignError, load_campaign, run_campaign

    spark_master, spark_remote = spark_target(ctx, spark_master, spark_remote)
    overrides: dict[str, Any] = {}
    if runtime is not None:
        overrides["runtime"] = runtime.value
    if inventory is not None:
        overrides["inventory"] = str(inventory)
    try:
        name, cases = load_campaign(campaign_file, overrides)
    except CampaignError as err:
        fail(str(err), ExitCode.USAGE)
    if list_only:
        for case in cases:
            print(json.dumps({"name": case.spec.name, "parameters": case.parameters}, default=str))
        return
    from squall.runner import check_runnable
    from squall.spec import SpecError

    for case in cases:
        try:
            check_runnable(case.spec)
        except SpecError as err:
            fail(f"{campaign_file}, case {case.spec.name}: {err}", ExitCode.USAGE)
    require_spark(spark_master, spark_remote)
    try:  # every case is checked in one SparkSession
        out_dir, results = run_campaign(
            campaign_file,
            store=store,
            spark_master=spark_master,
            spark_remote=spark_remote,
            console=progress_console(quiet=quiet),
            overrides=overrides,
        )
    finally:
        stop_spark()
    paths = {
        "summary": str(out_dir / "summary.json"),
        "junit": str(out_dir / "junit.xml"),
        "report": str(out_dir / "report.html"),
    }
    worst = max((r.exit_code for r in results), default=0)
    if as_json:
        written = out_dir / "summary.json"
        summary = json.loads(written.read_text()) if written.exists() else {"campaign": name}
        print(json.dumps({**summary, **paths}, default=str))
        raise typer.Exit(worst)
    table = Table("test", "verdict", "found", "seconds", title=f"campaign {name}")
    for r in results:
        verdict = {True: "[green]valid[/]", False: "[red]INVALID[/]"}.get(
            r.valid, "[yellow]unknown[/]"
        )
        table.add_row(escape(r.name), verdict, escape(_case_found(r)), f"{r.seconds:.0f}")
    console = Console()
    console.print(table)
    # Paths on lines of their own, never cut to the terminal's width.
    for r in results:
        if r.explanation:
            console.print(f"[bold]{escape(r.name)}[/]: {escape(r.explanation)}", highlight=False)
        if r.run_dir:
            report = Path(r.run_dir) / "report.html"
            shown = report if report.is_file() else Path(r.run_dir)
            console.print(f"  {shown}", highlight=False, soft_wrap=True)
    console.print(
        f"summary: {paths['summary']}\njunit: {paths['junit']}\n"
        f"campaign report: {paths['report']}\n"
        f"browse the campaign's and every run's report: squall serve --store {store}",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(worst)


def _case_found(r: Any) -> str:
    """A campaign case's findings for its table: the acknowledged writes lost first, then
    the anomaly types, or the allowed ones, or its error."""
    lost = ""
    if r.acknowledged_lost:
        allowed = " (all allowed)" if r.allowed_lost == r.acknowledged_lost else ""
        lost = f"{r.acknowledged_lost:,} acked writes lost{allowed}; "
    if r.anomaly_types:
        return lost + ", ".join(r.anomaly_types)
    if r.expected_anomaly_types:
        return lost + "allowed: " + ", ".join(r.expected_anomaly_types)
    return lost + (r.error or "-")
