"""The SUT's event logs read during a run: squall's implementation of
``nemesis.protocols.EventSource``.

Each broker appends its events (elections, ISR changes, truncations, controller moves) to a
file on its node, one JSON line each. The tail reads the lines each broker added since the
last read over the node's command channel; a line that does not parse yet (still being
written) is read again next time. A node that does not answer is skipped until it does.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from nemesis.errors import ClusterError
from squall.cluster.cluster import Cluster


class EventTail:
    """Follows every broker's event log, from its start."""

    def __init__(self, cluster: Cluster, *, timeout_s: float = 10.0) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        self._lines: dict[str, int] = {}
        """Complete lines already read, per broker node."""

    def read(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for name in sorted(self.cluster.brokers):
            events += self._read_node(name)
        return events

    def _read_node(self, name: str) -> list[dict[str, Any]]:
        broker = self.cluster.broker(name)
        done = self._lines.get(name, 0)
        command = f"tail -n +{done + 1} {shlex.quote(broker.event_log)} 2>/dev/null"
        try:
            result = broker.node.run(command, timeout=self.timeout_s, check=False)
        except (ClusterError, OSError):
            return []
        if result.exit_code != 0:
            return []
        events: list[dict[str, Any]] = []
        for line in result.output.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                break  # a line still being written: read from here next time
            done += 1
            if isinstance(event, dict):
                events.append(event)
        self._lines[name] = done
        return events
