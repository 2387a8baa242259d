"""``squall roundtrip``: a real round trip on a standalone broker (the code is squall.roundtrip;
``make demo`` is something else: a test campaign)."""

from __future__ import annotations

from pathlib import Path

import typer


def roundtrip(
    records: int = typer.Option(20_000, "--records", min=1, metavar="N", help="Records to send."),
    record_size: int = typer.Option(
        1024, "--record-size", min=1, metavar="BYTES", help="Bytes of each record's value."
    ),
    workdir: Path | None = typer.Option(
        None,
        "--workdir",
        metavar="DIR",
        help="The broker's directory.  [default: a temporary directory]",
    ),
) -> None:
    """A real round trip on a standalone broker: produce, consume back, verify, summarise."""
    from squall.roundtrip import run_roundtrip

    raise typer.Exit(run_roundtrip(records=records, record_size=record_size, workdir=workdir))


def demo_renamed(
    records: int = typer.Option(20_000, "--records", min=1, metavar="N"),
    record_size: int = typer.Option(1024, "--record-size", min=1, metavar="BYTES"),
    workdir: Path | None = typer.Option(None, "--workdir", metavar="DIR"),
) -> None:
    """The old name of ``squall roundtrip``, kept for scripts."""
    from squall.commands._common import stderr

    stderr.print(
        "note: `squall demo` is now `squall roundtrip` (`make demo` runs the demo campaign)",
        highlight=False,
    )
    roundtrip(records=records, record_size=record_size, workdir=workdir)
