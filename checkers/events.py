"""The history's nemesis and SUT events, collected once: a history holds few of them.

The statistics pair the nemesis events into fault intervals (`checkers.stats`), the per-key
pass tells each key its leader elections and ISR changes (`checkers.key_pass`), and the
unclean checker counts the elections: one Spark job serves all three.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.key_log import ReplicationEvent

REPLICATION_EVENTS = ("leader-election", "isr-change", "truncation", "log-recovery")
"""The SUT events the per-key pass tells each key of."""
REPLICA_READ = "replica-read"
"""A replica's final read; the pass tells each key where each such line's records start and
end (`from_offset`, `to_offset`: the first and last offset it lists), not the records."""
NemesisEvent = tuple[int, int, str, str | None]
"""index, time, f, value (JSON text)."""


@dataclass(frozen=True)
class HistoryEvents:
    """`nemesis`: the nemesis events in history order; `replication`: the SUT's leader
    elections, ISR changes, truncations and log recoveries by key, in history order, with the spans of the
    replicas' final reads (`replica-read`); `elections`: the SUT's leader
    elections counted (`leader_elections`, `unclean_elections`)."""

    nemesis: list[NemesisEvent] = field(default_factory=list)
    replication: dict[str, list[ReplicationEvent]] = field(default_factory=dict)
    elections: dict[str, int] = field(
        default_factory=lambda: {"leader_elections": 0, "unclean_elections": 0}
    )


def collect_events(events: DataFrame) -> HistoryEvents:
    """The nemesis events and the SUT's elections and ISR changes, in one job."""
    nemesis = F.col("process") == "nemesis"
    replication = (F.col("process") == "sut") & F.col("f").isin(*REPLICATION_EVENTS)
    replica = (F.col("process") == "sut") & (F.col("f") == REPLICA_READ)
    rows = sorted(
        events.filter(nemesis | replication | replica)
        .select(
            "process",
            "index",
            "time",
            "f",
            F.when(
                nemesis | F.col("f").isin(*REPLICATION_EVENTS),
                F.col("value_json"),
            ).alias("value_json"),
            "node",
            "key",
            "leader",
            "leader_epoch",
            "isr",
            "previous_leader",
            "unclean",
            *(
                F.when(replica, F.get_json_object("value_json", f"$.{name}").cast("long")).alias(
                    name
                )
                for name in ("first_offset", "last_offset")
            ),
        )
        .collect(),
        key=lambda row: row["index"],
    )
    out = HistoryEvents()
    for row in rows:
        if row["process"] == "nemesis":
            out.nemesis.append((row["index"], row["time"], row["f"], row["value_json"]))
            continue
        unclean = row["unclean"] is True
        if row["f"] == "leader-election":
            out.elections["leader_elections"] += 1
            out.elections["unclean_elections"] += unclean
        if row["key"] is None:
            continue
        if row["f"] == REPLICA_READ:
            if row["first_offset"] is not None:
                out.replication.setdefault(str(row["key"]), []).append(
                    ReplicationEvent(
                        int(row["index"]),
                        int(row["time"]),
                        REPLICA_READ,
                        None,
                        None,
                        None,
                        None,
                        False,
                        from_offset=int(row["first_offset"]),
                        to_offset=int(row["last_offset"]),
                    )
                )
            continue
        value = _value(row["value_json"])
        recovery = row["f"] == "log-recovery"
        out.replication.setdefault(str(row["key"]), []).append(
            ReplicationEvent(
                int(row["index"]),
                int(row["time"]),
                str(row["f"]),
                _maybe_int(row["leader"]),
                _maybe_int(row["leader_epoch"]),
                None if row["isr"] is None else tuple(int(b) for b in row["isr"]),
                _maybe_int(row["previous_leader"]),
                unclean,
                from_offset=_int_of(value, "from_offset"),
                to_offset=_int_of(value, "log_end_offset" if recovery else "to_offset"),
                previous_isr=_brokers(value.get("previous_isr")),
                high_watermark=_int_of(value, "high_watermark"),
                log_end_offsets=_ends(value.get("log_end_offsets")),
                broker=_int_of(value, "broker"),
                reason=_text_of(value, "problem" if recovery else "reason"),
                node=row["node"],
                zk_version=_int_of(value, "zk_version"),
                previous_zk_version=_int_of(value, "previous_zk_version"),
                elr=_brokers(value.get("elr")),
                previous_elr=_brokers(value.get("previous_elr")),
            )
        )
    return out


def _value(value_json: str | None) -> dict[str, Any]:
    """A truncation's or ISR change's value ({} where it is not an object)."""
    try:
        value = json.loads(value_json) if value_json is not None else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _int_of(value: dict[str, Any], name: str) -> int | None:
    item = value.get(name)
    return item if type(item) is int else None


def _text_of(value: dict[str, Any], name: str) -> str | None:
    item = value.get(name)
    return item if isinstance(item, str) else None


def _brokers(items: Any) -> tuple[int, ...] | None:
    if not isinstance(items, list) or not all(type(b) is int for b in items):
        return None
    return tuple(items)


def _ends(items: Any) -> dict[int, int] | None:
    """`log_end_offsets` ({"2": 17, ...}) with integer brokers; None where malformed."""
    if not isinstance(items, dict):
        return None
    try:
        return {int(b): end for b, end in items.items() if type(end) is int}
    except ValueError:
        return None


def _maybe_int(item: object) -> int | None:
    return None if item is None else int(item)  # type: ignore[call-overload]
