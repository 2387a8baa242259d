"""``squall check PATH``: the Spark checkers over a run, a history.jsonl, a Parquet history or
a Jepsen history.edn; the terminal report, or results.json on stdout with --json."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from squall.collector import loading
from squall.commands._common import fail
from squall.commands.choices import ExpectedLossName, LoaderName
from squall.commands.spark import SparkMasterOption, SparkRemoteOption, require_spark, spark_target
from squall.exit_codes import ExitCode

_RUNS = ("run", "edn")  # a directory holding the history (not a bare history.parquet/)


def check(
    ctx: typer.Context,
    path: Path = typer.Argument(
        ...,
        metavar="PATH",
        help="A run directory, history.jsonl, history.parquet/ or history.edn.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print results.json on stdout instead of the report."
    ),
    spark_master: str | None = SparkMasterOption,
    spark_remote: str | None = SparkRemoteOption,
    sample: int = typer.Option(
        8, "--sample", min=0, metavar="N", help="Anomalies kept per type (counts are complete)."
    ),
    expect_loss: list[ExpectedLossName] = typer.Option(
        [],
        "--expect-loss",
        metavar="acks0|acks1|unclean|retries",
        help="Losses to report as expected, not invalid (retries: duplicates of retried "
        "sends); repeatable.",
    ),
    loader: LoaderName = typer.Option(
        LoaderName.AUTO,
        "--loader",
        metavar="auto|exact",
        help="How history.jsonl becomes Parquet: auto (bulk, exact where it must) or exact.",
    ),
    write: bool = typer.Option(
        True, "--write/--no-write", help="Write results.json into the run directory."
    ),
) -> None:
    """Check a history; exit 0 valid, 1 anomalies, 2 invalid input, 3 Spark unavailable.

    Each check starts Spark (seconds); for many, `squall spark start` once and then
    `squall check --spark-remote URL` checks in that running server.
    """
    with loading():
        from checkers import (
            CheckConfig,
            CheckerError,
            HistoryNotFoundError,
            SparkUnavailableError,
            TestConfigError,
            check_history,
            stop_spark,
            write_results,
        )
        from checkers.session import import_connect_client
        from histories import HistoryFormatError
        from squall.report.console import print_results

    if not path.exists():
        fail(
            f"{path} does not exist; give a run directory, a history.jsonl, a history.parquet/ "
            "or a Jepsen history.edn",
            ExitCode.USAGE,
        )
    try:
        config = CheckConfig(
            sample=sample,
            expect_loss=frozenset(loss.literal for loss in expect_loss),
            loader=loader.literal,
        )
    except (ValueError, TypeError) as err:
        fail(str(err), ExitCode.USAGE)
    spark_master, spark_remote = spark_target(ctx, spark_master, spark_remote)
    if spark_remote is not None:
        with loading():
            import_connect_client()
    require_spark(spark_master, spark_remote)
    try:
        results = check_history(
            path, spark_master=spark_master, spark_remote=spark_remote, config=config
        )
    except (HistoryFormatError, HistoryNotFoundError, TestConfigError) as err:
        fail(str(err), ExitCode.USAGE)
    except SparkUnavailableError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)
    except CheckerError as err:
        fail(str(err), ExitCode.USAGE)
    except ValueError as err:  # malformed EDN or history content the readers reject
        fail(str(err), ExitCode.USAGE)
    except OSError as err:
        fail(f"cannot read or convert {path}: {err}", ExitCode.INFRASTRUCTURE)
    except Exception as err:  # Spark or its JVM failing mid-run (py4j errors)
        if type(err).__module__.startswith(("py4j", "pyspark")):
            fail(f"Spark failed while checking {path}: {err}", ExitCode.INFRASTRUCTURE)
        raise
    finally:
        if spark_remote is not None:
            stop_spark()  # the server keeps a session until it is released
    run_dir = path if path.is_dir() and results.get("history", {}).get("kind") in _RUNS else None
    if run_dir is not None:
        from squall.report.scenarios import scenario_section_of

        scenarios = scenario_section_of(run_dir)
        if scenarios is not None:
            results = {**results, "scenarios": scenarios}
    if run_dir is not None and write:
        write_results(results, run_dir / "results.json")
    if as_json:
        print(json.dumps(results, default=str))
    else:
        print_results(results, run_dir=run_dir)
    valid = results.get("valid")
    raise typer.Exit(
        ExitCode.VALID
        if valid is True
        else ExitCode.ANOMALIES
        if valid is False
        else ExitCode.INFRASTRUCTURE
    )
