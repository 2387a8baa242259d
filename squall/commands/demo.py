"""``squall demo``: a real round trip on a standalone broker (the demo itself is squall.demo)."""

from __future__ import annotations

from pathlib import Path

import typer


def demo(
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
    from squall.demo import run_demo

    raise typer.Exit(run_demo(records=records, record_size=record_size, workdir=workdir))
