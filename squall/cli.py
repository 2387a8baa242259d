"""The ``squall`` command line: the typer app and its wiring; every command lives in
squall.commands. Exit codes are squall.exit_codes.ExitCode (docs/exit-codes.md)."""

from __future__ import annotations

import sys

import typer

from squall.commands._common import report_crash, stderr
from squall.commands.broker import broker
from squall.commands.check import check
from squall.commands.cluster import clean, cluster_app
from squall.commands.console import consume, produce
from squall.commands.demo import demo
from squall.commands.hunt import hunt
from squall.commands.nemesis import nemesis_app
from squall.commands.perf import perf_app
from squall.commands.run import campaign, replay, report, run
from squall.commands.topic import topic_app
from squall.exit_codes import ExitCode

app = typer.Typer(
    name="squall",
    help="Jepsen-style fault injection for a Kafka-style replicated log.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(topic_app, name="topic")
app.add_typer(perf_app, name="perf")
app.add_typer(cluster_app, name="cluster")
app.add_typer(nemesis_app, name="nemesis")
app.command("clean")(clean)
app.command("run")(run)
app.command("replay")(replay)
app.command("report")(report)
app.command("campaign")(campaign)
app.command("hunt")(hunt)
app.command("check")(check)
app.command("broker")(broker)
app.command("produce")(produce)
app.command("consume")(consume)
app.command("demo")(demo)


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
