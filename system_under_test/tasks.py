"""Ending a background task for good.

On Python 3.11 (the nodes' Debian Python) ``asyncio.wait_for`` loses a cancellation that
arrives while the future it waits for completes (CPython gh-86296, fixed in 3.12): a task
looping on ``wait_for`` then runs on, and awaiting it after one ``cancel()`` never returns.
A broker stopping its fetchers hung that way until it was killed, an unclean shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib

CANCEL_AGAIN_S = 0.05
"""How long to wait for a cancelled task before cancelling it again."""


async def cancel_and_wait(task: asyncio.Task[object] | asyncio.Task[None]) -> None:
    """Cancel ``task`` until it has ended (again whenever a cancellation was lost), then
    wait for it; its own error or cancellation is not raised here."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_AGAIN_S)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()
