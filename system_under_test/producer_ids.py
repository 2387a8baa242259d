"""Producer ids for idempotent producers (InitProducerId), handed out by each broker from blocks
of ids it claims in ZooKeeper, as Kafka's ZooKeeper era did: ids are unique across the cluster
and across restarts, since a block is never claimed twice and a restarted broker claims a new
one."""

from __future__ import annotations

import threading
from collections.abc import Callable

BLOCK_SIZE = 1000


class ProducerIdManager:
    """The next producer id of this broker; ``claim(size)`` gets a new block (first, last)."""

    def __init__(
        self, claim: Callable[[int], tuple[int, int]], *, block_size: int = BLOCK_SIZE
    ) -> None:
        if block_size < 1:
            raise ValueError(f"a block of producer ids holds at least one, got {block_size}")
        self._claim = claim
        self._block_size = block_size
        self._lock = threading.Lock()
        self._next = 0
        self._last = -1

    def next_id(self) -> int:
        with self._lock:
            if self._next > self._last:
                self._next, self._last = self._claim(self._block_size)
            producer_id = self._next
            self._next += 1
            return producer_id
