"""The cyclic garbage collector of the ``squall`` script's process (`squall.script`): paused
while a command loads its heavy modules, and what they made frozen after. Only in the
script: a process that calls squall in its own (the tests, a program embedding squall)
keeps its collector as it is, as freezing keeps cyclic garbage of the caller's for good.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_script = False
"""Whether this process is the ``squall`` script (`in_script`)."""


def in_script() -> None:
    """Mark this process as the ``squall`` script, so that `loading` acts."""
    global _script
    _script = True


@contextmanager
def loading() -> Iterator[None]:
    """Import a command's heavy modules inside: in the script, without collecting while
    they import, and with what they made frozen after."""
    if not _script:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
