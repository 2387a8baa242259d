"""The ``squall`` script's process: its start and its end, kept short.

Much of a short command's time is not its work but the cyclic garbage collector walking
the objects that pyspark, pandas, pyarrow and grpc create when they are imported: several
hundred thousand, which live as long as the process. Measured on a demo-sized ``squall
check --spark-remote`` (1.7 s in all): about 0.1 s of collections while they are imported,
more in the collections after, and 0.2 s at exit, where the interpreter collects once more
before it ends.

So the script loads a command's heavy modules with the collector paused and then freezes
what exists (`squall.collector.loading`; `gc.freeze`: the collector no longer visits it),
and freezes everything again before the interpreter ends. Atexit handlers, flushing and thread joins run as always.
Only the script does this: `squall.cli.main` called in a process of its own (the tests, a
program embedding squall) leaves the collector alone, as freezing keeps cyclic garbage of
the caller's for good.
"""

from __future__ import annotations

import gc

from squall import collector
from squall.cli import main


def run() -> int:
    """The ``squall`` script: `squall.cli.main`'s exit code, the collector frozen at exit."""
    collector.in_script()
    try:
        return main()
    finally:
        gc.freeze()
