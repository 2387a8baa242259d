"""What every subcommand shares: error output and the exit code that goes with it."""

from __future__ import annotations

import os
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

stderr = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int) -> NoReturn:
    """Print ``error: message`` on stderr and exit with code."""
    stderr.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def crash_log_dir() -> Path:
    """Where tracebacks of squall's own failures go: $XDG_CACHE_HOME/squall, else ~/.cache."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "squall" / "crashes"


def report_crash(err: BaseException) -> Path | None:
    """A failure of squall itself: the traceback to a log file, a short message on stderr
    (escaped, never read as markup); the log's path, or None when it could not be written."""
    text = "".join(traceback.format_exception(err))
    path: Path | None = None
    try:
        directory = crash_log_dir()
        directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        path = directory / f"squall-{stamp}-{os.getpid()}.log"
        path.write_text(text)
    except OSError:
        path = None
    where = f"the traceback is in {path}" if path else f"traceback:\n{text}"
    stderr.print(
        f"[bold red]squall failed:[/] {escape(f'{type(err).__name__}: {err}')[:2000]}; "
        f"{escape(where)}. This is a failure of squall itself (exit 3), not a verdict.",
        highlight=False,
    )
    return path
