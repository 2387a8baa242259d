"""The exit codes of every ``squall`` command: the one definition (docs/exit-codes.md).

Scripts and CI jobs branch on them, so their values are a public contract and never change.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """How a ``squall`` command ended."""

    SUCCESS = 0
    """The command did what it was asked; for a test or a check, the history is valid."""
    VALID = 0
    """The history was checked and no anomaly was found (an alias of SUCCESS)."""
    ANOMALIES = 1
    """The checkers found anomalies (or a console tool saw records fail)."""
    USAGE = 2
    """Invalid input: an unknown option or choice, a bad spec, a missing history."""
    INFRASTRUCTURE = 3
    """A broker, ZooKeeper, a node or Spark could not be reached or run; nothing was judged."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C (SIGINT): 128 + 2, as shells report it."""
    TERMINATED = 143
    """Stopped by SIGTERM: 128 + 15, as shells report it."""


def exit_code_table() -> str:
    """The exit codes, one line each, for ``--help`` (docs/exit-codes.md has them per command)."""
    lines = [
        "Exit codes: 0 success (a valid history); 1 anomalies found (or records failed);",
        "2 bad input or usage; 3 squall's own failure (a broker, node or Spark unreachable,",
        "nothing judged); 130 Ctrl-C; 143 SIGTERM. Per command: docs/exit-codes.md.",
    ]
    return "\n".join(lines)
