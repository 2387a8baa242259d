"""What every subcommand shares: error output and the exit code that goes with it."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from squall.exit_codes import ExitCode

# Transitional names for commands/run.py, cluster.py and nemesis.py, which still import
# them; the values are ExitCode's, defined nowhere else.
EXIT_ANOMALIES = ExitCode.ANOMALIES
EXIT_USAGE = ExitCode.USAGE
EXIT_INFRASTRUCTURE = ExitCode.INFRASTRUCTURE

stderr = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int) -> NoReturn:
    """Print ``error: message`` on stderr and exit with code."""
    stderr.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)
