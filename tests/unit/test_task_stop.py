"""Background tasks end when stopped, however a cancellation races what they wait for
(`system_under_test.tasks`): a broker's fetcher asked to stop just as it was woken ran on
under Python 3.11, and the broker's clean shutdown hung until it was killed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from pathlib import Path

from system_under_test.metadata_cache import BrokerEndpoint
from system_under_test.replication.fetcher import ReplicaFetcher
from system_under_test.replication.partition import Partition
from system_under_test.tasks import cancel_and_wait
from tests.unit.test_log import make_log

HANG_GUARD_S = 30.0
"""Far beyond what stopping takes: only a task that never ends reaches it."""


async def ended(stopping: Coroutine[object, object, None]) -> bool:
    """Whether awaiting `stopping` ended within the guard, left alone meanwhile (a guard
    that cancelled it, as ``wait_for`` does, would end it by that second cancellation)."""
    task = asyncio.ensure_future(stopping)
    done, _ = await asyncio.wait({task}, timeout=HANG_GUARD_S)
    while not task.done():  # clean up after a failure
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
    return bool(done)


async def _woken_loop(wakeup: asyncio.Event) -> None:
    while True:
        wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wakeup.wait(), 0.5)


def test_a_task_cancelled_as_it_is_woken_ends() -> None:
    async def scenario() -> bool:
        wakeup = asyncio.Event()
        task = asyncio.get_running_loop().create_task(_woken_loop(wakeup))
        await asyncio.sleep(0.01)
        wakeup.set()
        return await ended(cancel_and_wait(task)) and task.done()

    assert asyncio.run(scenario())


def follower(tmp_path: Path, partition: int) -> Partition:
    key = f"t-{partition}"
    return Partition("t", partition, make_log(tmp_path / key), local_broker_id=2, replicas=[1, 2])


def test_a_fetcher_stopped_just_after_a_partition_was_added_stops(tmp_path: Path) -> None:
    """The fetcher idles (held back), a LeaderAndIsr adds a partition (waking it), and the
    broker stops it at once, as a clean shutdown right after an election does."""

    async def scenario() -> bool:
        fetcher = ReplicaFetcher(
            2,
            BrokerEndpoint(1, "127.0.0.1", 9),
            truncation="leader-epoch",
            max_wait_ms=500,
            max_bytes=1 << 20,
            request_timeout_s=5.0,
        )
        fetcher.paused = True
        fetcher.add(follower(tmp_path, 0), truncate=False)
        await asyncio.sleep(0.01)
        fetcher.add(follower(tmp_path, 1), truncate=False)
        return await ended(fetcher.stop())

    assert asyncio.run(scenario())
