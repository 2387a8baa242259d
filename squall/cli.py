"""The ``squall`` command line: the typer app and its wiring; every command lives in
squall.commands. Exit codes are squall.exit_codes.ExitCode (docs/exit-codes.md)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version

import typer
import typer.core
from typer._click import Command  # typer vendors its own click

from squall.commands._common import report_crash, stderr
from squall.exit_codes import ExitCode, exit_code_table

HELP_SETTINGS = {
    "help_option_names": ["-h", "--help"],
    # click wraps at the terminal's width, at most this many columns
    "max_content_width": 100,
    "show_default": True,
}
"""Every command's help: -h as well as --help, defaults shown, wrapped to the terminal."""


@dataclass(frozen=True)
class Entry:
    """One of squall's commands, named where it lives (``module:attribute``) so that it is
    imported only when it runs or its help is shown: ``squall check`` loads neither the
    cluster nor the SUT's client."""

    target: str
    short_help: str
    group: bool = False
    hidden: bool = False


ENTRIES: dict[str, Entry] = {
    "clean": Entry("squall.commands.cluster:clean", "Remove everything squall left behind."),
    "run": Entry("squall.commands.run:run", "Run one test: workload under faults, check, report."),
    "replay": Entry(
        "squall.commands.run:replay", "Run a test again: same spec, seed and fault schedule."
    ),
    "report": Entry(
        "squall.commands.run:report", "Write a run's report again from its results.json."
    ),
    "campaign": Entry("squall.commands.run:campaign", "Run a matrix of tests one after another."),
    "hunt": Entry(
        "squall.commands.hunt:hunt", "Run a test with fresh seeds until something is found."
    ),
    "check": Entry("squall.commands.check:check", "Check a history with the Spark checkers."),
    "broker": Entry("squall.commands.broker:broker", "Run one broker in the foreground."),
    "produce": Entry(
        "squall.commands.console:produce", "Console producer: a record per line of stdin."
    ),
    "consume": Entry(
        "squall.commands.console:consume", "Console consumer: a JSON line per record."
    ),
    "runs": Entry(
        "squall.commands.runs:runs", "List the store's runs: verdicts, anomalies, durations."
    ),
    "serve": Entry("squall.commands.runs:serve", "Serve the store's reports over HTTP."),
    "roundtrip": Entry(
        "squall.commands.roundtrip:roundtrip",
        "Produce, crash, recover, read back: a standalone broker.",
    ),
    "demo": Entry("squall.commands.roundtrip:demo_renamed", "", hidden=True),
    "topic": Entry(
        "squall.commands.topic:topic_app",
        "Create and describe topics, elect leaders.",
        group=True,
    ),
    "perf": Entry("squall.commands.perf:perf_app", "Producer throughput and latency.", group=True),
    "cluster": Entry(
        "squall.commands.cluster:cluster_app",
        "Bring a cluster up by hand, inspect it, tear it down.",
        group=True,
    ),
    "nemesis": Entry(
        "squall.commands.nemesis:nemesis_app",
        "Apply one fault to the current cluster, or heal it.",
        group=True,
    ),
    "spark": Entry(
        "squall.commands.spark:spark_app",
        "A Spark Connect server here: repeated checks skip Spark's start.",
        group=True,
    ),
}
"""squall's commands in the order its help lists them: commands, then groups."""


class LazyCommands(MutableMapping[str, Command]):
    """A group's subcommands by name, each imported and built the first time it is asked
    for (click's groups look commands up in their ``commands`` mapping)."""

    def __init__(self, entries: dict[str, Entry]) -> None:
        self._entries = entries
        self._built: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            self._built[name] = _build(name, self._entries[name])
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._entries
        yield from (name for name in self._built if name not in self._entries)

    def __len__(self) -> int:
        return len(self._entries.keys() | self._built.keys())


class SquallGroup(typer.core.TyperGroup):
    """squall's top-level group: its commands come from ENTRIES, imported as they run."""

    def __init__(self, **attrs: object) -> None:
        super().__init__(**attrs)  # type: ignore[arg-type]
        eager = dict(self.commands)
        self.commands = LazyCommands(ENTRIES)
        self.commands.update(eager)


def _build(name: str, entry: Entry) -> Command:
    """The click command of one entry: its module imported, its typer wiring applied."""
    module, _, attribute = entry.target.partition(":")
    target = getattr(import_module(module), attribute)
    holder = typer.Typer(rich_markup_mode=None, context_settings=HELP_SETTINGS)
    if entry.group:
        _whole_summaries(target)
        holder.add_typer(target, name=name, short_help=entry.short_help)
    else:
        holder.command(name, short_help=entry.short_help or None, hidden=entry.hidden)(target)
    holder.callback()(lambda: None)  # a group even with one command, so it can be picked out
    group = typer.main.get_group(holder)
    return group.commands[name]


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
    cls=SquallGroup,
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
