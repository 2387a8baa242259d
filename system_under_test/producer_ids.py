"""Producer ids for idempotent producers (InitProducerId), handed out by each broker from blocks
of ids it claims, as Kafka's ZooKeeper era did: ids are unique across the cluster and across
restarts, since a block is never claimed twice and a restarted broker claims a new one. In a
cluster the blocks are claimed in ZooKeeper (``ClusterMetadataStore.claim_producer_id_block``);
a standalone broker claims them in a file of its first log dir (``FileBlockClaim``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from system_under_test.log.checkpoint import replace_file

BLOCK_SIZE = 1000
PRODUCER_ID_BLOCK_FILE = "producer-id-block.json"


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


class FileBlockClaim:
    """Blocks claimed in ``<log dir>/producer-id-block.json`` (the last block's end), replaced
    atomically and fsynced before any id of the block is handed out."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / PRODUCER_ID_BLOCK_FILE

    def __call__(self, size: int) -> tuple[int, int]:
        first = 0
        if self.path.exists():
            try:
                first = int(json.loads(self.path.read_text())["block_end"]) + 1
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(
                    f"{self.path} is damaged ({err}); producer ids cannot be handed out without "
                    "reusing some: restore it, or write a block_end above every id handed out"
                ) from None
        last = first + size - 1
        block = {"version": 1, "block_start": first, "block_end": last}
        replace_file(self.path, json.dumps(block).encode())
        return first, last
