"""Replica assignment for a new topic: Kafka's round-robin, rack-unaware algorithm.

The first replica of partition p is broker (start + p) mod n; the followers are shifted by
a step that grows by one every n partitions, so leaders and followers both spread evenly.
Kafka picks ``start`` and the initial shift at random; here they come from a hash of the
topic name, so a replayed test lays out its topics the same way.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence


class AssignmentError(ValueError):
    """The topic cannot be laid out on the live brokers."""


def assign_replicas(
    topic: str,
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
) -> dict[int, list[int]]:
    """partition -> replicas (the first is the preferred leader)."""
    ordered = sorted(brokers)
    n = len(ordered)
    if replication_factor > n:
        raise AssignmentError(
            f"replication factor {replication_factor} is larger than the {n} live broker(s) "
            f"{ordered}; start more brokers or lower --replication-factor"
        )
    if partitions < 1 or replication_factor < 1:
        raise AssignmentError("partitions and replication factor must be at least 1")
    start = start_index if start_index is not None else zlib.crc32(topic.encode()) % n
    shift = start
    out: dict[int, list[int]] = {}
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[(first + 1 + (shift + j) % (n - 1)) % n])
        out[p] = replicas
    return out
