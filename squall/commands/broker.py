"""``squall broker``: one broker of the replicated log, in the foreground."""

from __future__ import annotations

from pathlib import Path

import typer

from squall.commands._common import fail
from squall.exit_codes import ExitCode
from system_under_test.config import BrokerConfig, ConfigError


def broker(
    config_file: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="A server.properties-style file."
    ),
    settings: list[str] = typer.Option(
        [],
        "--set",
        metavar="KEY=VALUE",
        help="A setting, Kafka's names, over the file's; repeatable.",
    ),
    standalone: bool = typer.Option(False, "--standalone", help="Run without ZooKeeper."),
) -> None:
    """Run one broker of the replicated log in the foreground (SIGTERM shuts it down cleanly)."""
    from system_under_test.server import run_broker

    try:
        config = BrokerConfig.load(config_file, settings)
    except ConfigError as err:
        fail(str(err), ExitCode.USAGE)
    raise typer.Exit(run_broker(config, standalone=standalone or config.standalone))
