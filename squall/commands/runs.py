"""``squall runs`` lists the run store; ``squall serve`` serves it over HTTP."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from squall.commands._common import fail, stderr
from squall.exit_codes import ExitCode
from squall.store import DEFAULT_STORE

_STYLES = {
    "VALID": "bold green",
    "INVALID": "bold red",
    "UNKNOWN": "bold yellow",
    "INTERRUPTED": "bold yellow",
}


def runs(
    store: Path = typer.Option(DEFAULT_STORE, "--store", metavar="DIR", help="The run store."),
    test: str | None = typer.Option(
        None, "--test", metavar="NAME", help="Only the runs of this test."
    ),
    limit: int = typer.Option(
        20, "--limit", "-n", min=0, metavar="N", help="At most N runs (0: all)."
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per run, newest first."),
) -> None:
    """List the store's runs, newest first: test, start time, verdict, anomalies, duration."""
    from squall.store_listing import describe_findings, list_runs

    if not store.is_dir():
        fail(f"--store: {store} is not a directory; runs go to ./store unless --store says", 2)
    if test is not None and not (store / test).is_dir():
        fail(f"--test: no test {test!r} in {store}; `squall runs --store {store}` lists them", 2)
    found = list_runs(store, test, limit or None)
    if as_json:
        for run in found:
            print(json.dumps(run.to_json()))
        raise typer.Exit(ExitCode.SUCCESS)
    if not found:
        stderr.print(f"no runs in {store}", highlight=False)
        raise typer.Exit(ExitCode.SUCCESS)
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("test", overflow="fold")
    table.add_column("started (UTC)", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("anomalies", overflow="fold")
    table.add_column("time", justify="right", no_wrap=True)
    for run in found:
        started = (run.started or run.stamp).replace("+00:00", "").replace("T", " ")[:16]
        table.add_row(
            run.test,
            started,
            f"[{_STYLES.get(run.verdict, 'dim')}]{run.verdict}[/]",
            describe_findings(run) or "-",
            f"{run.duration_s:.0f} s" if run.duration_s is not None else "-",
        )
    console = Console(highlight=False)
    console.print(table)
    raise typer.Exit(ExitCode.SUCCESS)


def serve(
    store: Path = typer.Option(DEFAULT_STORE, "--store", metavar="DIR", help="The run store."),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        metavar="ADDRESS",
        help="Address to listen on (loopback only by default).",
    ),
    port: int = typer.Option(
        8080, "--port", "-p", min=0, max=65535, metavar="PORT", help="Port (0: any free one)."
    ),
    verbose: bool = typer.Option(False, "--verbose", help="Log every request on stderr."),
) -> None:
    """Serve the store's reports over HTTP until Ctrl-C: an index of the runs at /."""
    from squall.serve import make_server

    if not store.is_dir():
        fail(f"--store: {store} is not a directory; runs go to ./store unless --store says", 2)
    try:
        server = make_server(store, host, port, verbose=verbose)
    except OSError as err:
        fail(f"cannot listen on {host}:{port}: {err.strerror or err}; try another --port", 3)
    bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
    try:
        loopback = ipaddress.ip_address(str(bound_host)).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        stderr.print(
            f"warning: serving {store} to every host that reaches {bound_host}; the reports "
            "hold node logs and settings",
            highlight=False,
        )
    print(f"serving {store} at http://{bound_host}:{bound_port}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    raise typer.Exit(ExitCode.SUCCESS)
