"""The ``squall`` command line: the typer app and its wiring; every command lives in
squall.commands. Exit codes are squall.exit_codes.ExitCode (docs/exit-codes.md)."""

from __future__ import annotations

import inspect
import sys
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version

import typer

from squall.commands._common import report_crash, stderr
from squall.commands.broker import broker
from squall.commands.check import check
from squall.commands.cluster import clean, cluster_app
from squall.commands.console import consume, produce
from squall.commands.hunt import hunt
from squall.commands.nemesis import nemesis_app
from squall.commands.perf import perf_app
from squall.commands.roundtrip import demo_renamed, roundtrip
from squall.commands.run import campaign, replay, report, run
from squall.commands.runs import runs, serve
from squall.commands.spark import spark_app
from squall.commands.topic import topic_app
from squall.exit_codes import ExitCode, exit_code_table

HELP_SETTINGS = {
    "help_option_names": ["-h", "--help"],
    # click wraps at the terminal's width, at most this many columns
    "max_content_width": 100,
    "show_default": True,
}
"""Every command's help: -h as well as --help, defaults shown, wrapped to the terminal."""

app = typer.Typer(
    name="squall",
    help="Jepsen-style fault injection for a Kafka-style replicated log.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    # click's plain help: option names in full, help wrapped beneath them; rich's panels
    # cut long option names at 80 columns and read [base] or [[case]] as markup
    rich_markup_mode=None,
    context_settings=HELP_SETTINGS,
    epilog=exit_code_table(),
)


def squall_version() -> str:
    """squall's version, from the installed package's metadata."""
    try:
        return package_version("squall")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        print(f"squall {squall_version()}")
        raise typer.Exit(ExitCode.SUCCESS)


@app.callback()
def _squall(
    _version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_print_version,
        is_eager=True,
        show_default=False,
        help="Print squall's version and exit.",
    ),
) -> None:
    pass


app.add_typer(topic_app, name="topic", short_help="Create and describe topics, elect leaders.")
app.add_typer(perf_app, name="perf", short_help="Producer throughput and latency.")
app.add_typer(
    cluster_app, name="cluster", short_help="Bring a cluster up by hand, inspect it, tear it down."
)
app.add_typer(
    nemesis_app, name="nemesis", short_help="Apply one fault to the current cluster, or heal it."
)
app.add_typer(
    spark_app,
    name="spark",
    short_help="A Spark Connect server here: repeated checks skip Spark's start.",
)
app.command("clean", short_help="Remove everything squall left behind.")(clean)
app.command("run", short_help="Run one test: workload under faults, check, report.")(run)
app.command("replay", short_help="Run a test again: same spec, seed and fault schedule.")(replay)
app.command("report", short_help="Write a run's report again from its results.json.")(report)
app.command("campaign", short_help="Run a matrix of tests one after another.")(campaign)
app.command("hunt", short_help="Run a test with fresh seeds until something is found.")(hunt)
app.command("check", short_help="Check a history with the Spark checkers.")(check)
app.command("broker", short_help="Run one broker in the foreground.")(broker)
app.command("produce", short_help="Console producer: a record per line of stdin.")(produce)
app.command("consume", short_help="Console consumer: a JSON line per record.")(consume)
app.command("runs", short_help="List the store's runs: verdicts, anomalies, durations.")(runs)
app.command("serve", short_help="Serve the store's reports over HTTP.")(serve)
app.command("roundtrip", short_help="Produce, crash, recover, read back: a standalone broker.")(
    roundtrip
)
app.command("demo", hidden=True)(demo_renamed)


def _whole_summaries(typer_app: typer.Typer) -> None:
    """Command lists show each command's whole first paragraph, wrapped, rather than click's
    cut to the width (``Start the targets' processes again (default: every broker...``)."""
    for info in typer_app.registered_commands:
        doc = info.help or (info.callback.__doc__ if info.callback else None)
        if info.short_help is None and doc:
            info.short_help = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _whole_summaries(group.typer_instance)


_whole_summaries(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``squall`` script: the command's exit code (ExitCode)."""
    try:
        code = app(args=argv, standalone_mode=False)
    except typer.Exit as done:
        return int(done.exit_code)
    except typer.Abort:
        stderr.print("aborted")
        return ExitCode.INTERRUPTED
    except typer.TyperException as err:  # usage errors: unknown option, bad choice, missing value
        show = getattr(err, "show", None)
        if callable(show):
            show(file=sys.stderr)
        else:
            stderr.print(f"error: {err.message}", highlight=False)
        return ExitCode.USAGE
    except Exception as err:  # squall's own failure: exit 3, never 1 ("anomalies found")
        report_crash(err)
        return ExitCode.INFRASTRUCTURE
    return code if isinstance(code, int) else ExitCode.SUCCESS
