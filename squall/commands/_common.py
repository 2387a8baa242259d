"""What every subcommand shares: error output and the exit code that goes with it."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

stderr = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int) -> NoReturn:
    """Print ``error: message`` on stderr and exit with code."""
    stderr.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)
