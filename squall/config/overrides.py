"""Override paths: ``workload/topic_config/min.insync.replicas`` names a key through its tables.

Paths use ``/`` because Kafka's keys contain dots. The CLI's flags and a campaign's matrix and
cases set values into a spec document this way, before it is validated.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from squall.config.errors import ConfigurationError


def set_path(
    doc: MutableMapping[str, Any],
    path: str,
    value: Any,
    *,
    source: str,
    error: type[ConfigurationError] = ConfigurationError,
) -> None:
    """Set `value` at `path` in `doc`, creating the tables on the way; `error` (naming
    `source`) when a step of the path is a value, not a table."""
    *parents, last = path.split("/")
    table = doc
    for number, key in enumerate(parents):
        child = table.setdefault(key, {})
        if not isinstance(child, MutableMapping):
            where = "/".join(parents[: number + 1])
            raise error(f"{source}: cannot set {path!r}: {where!r} is {child!r}, not a table")
        table = child
    table[last] = value
