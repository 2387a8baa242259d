"""AcknowledgedSends: where each key's acknowledged sends landed, for the final read.

Producers note every `ok` send with an offset; the final read then knows how far each key
must be read before every acknowledged offset has been seen.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from histories import Operation


class AcknowledgedSends:
    """Acknowledged (key, offset, value) triples; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, dict[int, int | str]] = {}

    def add(self, key: str, offset: int, value: int | str) -> None:
        with self._lock:
            offsets = self._by_key.get(key)
            if offsets is None:
                offsets = self._by_key[key] = {}
            offsets[offset] = value

    def add_completion(self, op: Operation | None) -> None:
        """Note the acknowledged sends of one completion (anything else is ignored)."""
        if op is None or op.type != "ok" or op.f not in ("send", "txn"):
            return
        for mop in op.value:
            if mop[0] == "send" and isinstance(mop[2], list):
                self.add(mop[1], mop[2][0], mop[2][1])

    @classmethod
    def from_history(cls, ops: Iterable[Operation]) -> AcknowledgedSends:
        """The acknowledged sends of a history (e.g. one recorded by an earlier process)."""
        acknowledged = cls()
        for op in ops:
            if op.is_client:
                acknowledged.add_completion(op)
        return acknowledged

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._by_key)

    def offsets(self, key: str) -> dict[int, int | str]:
        """Acknowledged offset -> value for `key`."""
        with self._lock:
            return dict(self._by_key.get(key, {}))

    def end_offset(self, key: str) -> int:
        """One past the highest acknowledged offset of `key` (0 if none)."""
        with self._lock:
            offsets = self._by_key.get(key)
            return max(offsets) + 1 if offsets else 0

    def count(self) -> int:
        with self._lock:
            return sum(len(offsets) for offsets in self._by_key.values())
