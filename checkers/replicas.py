"""`replica-divergence`: replicas of a key that disagree below its high watermark.

After the final read, `squall run` reads every replica's log off its node's disk and
records it as `replica-read` lines (docs/history.md): per replica and key, its records as
`[offset, value]` pairs, the offsets whose CRC is wrong, and the partition's leader, ISR
and high watermark at the end. Below the high watermark every replica that holds an offset
must hold the same record there, and every member of the final ISR must hold every offset
(from its own log start): that is what the high watermark promises, and what lets any ISR
member become leader without changing what consumers read.

Per key, against a reference: the leader's record at each offset (where the leader has
none, the lowest-numbered replica's that has one). A replica disagrees at an offset where
it holds another value (`differs`), a record whose CRC is wrong (`corrupt`), or, if it is in
the final ISR, no record where the reference has one (`missing`). One case per replica of a
key that disagrees anywhere. Offsets at or above the high watermark are not judged (a
follower may lag or hold what is not yet committed), nor what a replica outside the ISR
lacks (it may have been truncated and not caught up). Never expected: an unclean election
may lose writes, but the replicas still converge on the new leader's log.

The records are exploded from the lines' JSON by Spark, brought together per key by one
shuffle (`groupBy("key").applyInArrow`) and compared with pandas/numpy per key.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from checkers.checker import CheckContext
from checkers.findings import Finding
from checkers.results import CheckerReport

CHECKER = "replicas"
ANOMALY = "replica-divergence"
ANOMALIES = (ANOMALY,)
REPLICA_READ = "replica-read"
EXAMPLES = 5
"""Offsets a case shows side by side with the reference."""

READ_SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("broker", LongType()),
        StructField("leader", LongType()),
        StructField("isr", ArrayType(LongType())),
        StructField("high_watermark", LongType()),
        StructField("log_start_offset", LongType()),
        StructField("error", StringType()),
        StructField("invalid_offsets", ArrayType(LongType())),
        StructField("records", ArrayType(ArrayType(StringType()))),
    ]
)
FINDING_SCHEMA = pa.schema(
    [
        ("checker", pa.string()),
        ("anomaly", pa.string()),
        ("key", pa.string()),
        ("order", pa.int64()),
        ("expected", pa.bool_()),
        ("detail", pa.string()),
    ]
)
FINDING_DDL = (
    "checker string, anomaly string, key string, order long, expected boolean, detail string"
)


def replica_reads(events: DataFrame) -> DataFrame:
    """The `replica-read` lines, one row each, their values parsed (`READ_SCHEMA`, with
    `index` and `node`)."""
    return events.filter((F.col("process") == "sut") & (F.col("f") == REPLICA_READ)).select(
        "index", "node", F.from_json("value_json", READ_SCHEMA).alias("r")
    )


def replica_records(reads: DataFrame) -> DataFrame:
    """One row per record each replica holds (and one without a record for a replica that
    holds none, or could not be read): key, broker, node, index, leader, isr,
    high_watermark, log_start_offset, error, offset, value (as text), corrupt."""
    exploded = reads.select(
        "index",
        "node",
        "r.key",
        "r.broker",
        "r.leader",
        "r.isr",
        "r.high_watermark",
        "r.log_start_offset",
        "r.error",
        "r.invalid_offsets",
        F.explode_outer("r.records").alias("record"),
    )
    offset = F.col("record")[0].cast("long")
    return exploded.filter(F.col("key").isNotNull() & F.col("broker").isNotNull()).select(
        "key",
        "broker",
        "node",
        "index",
        "leader",
        "isr",
        "high_watermark",
        "log_start_offset",
        "error",
        offset.alias("offset"),
        F.col("record")[1].alias("value"),
        F.coalesce(F.array_contains("invalid_offsets", offset), F.lit(False)).alias("corrupt"),
    )


def _value(text: Any) -> Any:
    """A record's value as the history writes it: an int where it is one."""
    if isinstance(text, str) and text.lstrip("-").isdigit():
        return int(text)
    return text


def _example(offset: int, reference: dict[int, Any], held: dict[int, Any]) -> dict[str, Any]:
    """One offset side by side: the reference's value and the replica's (absent: none)."""
    example = {"offset": offset}
    for name, values in (("reference", reference), ("value", held)):
        if offset in values:
            example[name] = _value(values[offset])
    return example


def _first(series: pd.Series) -> Any:
    present = series.dropna()
    return None if present.empty else present.iloc[0]


def key_divergence(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The cases of one key (`replica_records` rows of that key)."""
    key = str(rows["key"].iloc[0])
    meta = (
        rows.sort_values("index")
        .groupby("broker", sort=True)
        .agg(
            node=("node", _first),
            index=("index", "min"),
            leader=("leader", _first),
            isr=("isr", _first),
            high_watermark=("high_watermark", "max"),
            log_start_offset=("log_start_offset", _first),
            error=("error", _first),
        )
    )
    high_watermark = meta["high_watermark"].dropna()
    if high_watermark.empty:
        return []
    hw = int(high_watermark.max())
    leader = _first(meta["leader"])
    isr_value = _first(meta["isr"])
    isr = None if isr_value is None else [int(b) for b in isr_value]
    readable = meta[meta["error"].isna()].index
    held = rows[rows["offset"].notna() & rows["broker"].isin(readable)]
    held = held[(held["offset"] >= 0) & (held["offset"] < hw)]
    held = held.drop_duplicates(["broker", "offset"])
    if held.empty:
        return []
    held = held.assign(not_leader=held["broker"] != leader).sort_values(
        ["offset", "not_leader", "broker"]
    )
    reference = held.drop_duplicates("offset")[["offset", "value"]]
    ref_offsets = reference["offset"].to_numpy(dtype=np.int64)
    ref_values = reference["value"].to_numpy(dtype=object)
    cases = []
    for broker in readable:
        mine = held[held["broker"] == broker]
        offsets = mine["offset"].to_numpy(dtype=np.int64)
        at = np.searchsorted(ref_offsets, offsets)
        differs = mine["value"].to_numpy(dtype=object) != ref_values[at]
        corrupt = mine["corrupt"].to_numpy(dtype=bool)
        in_isr = isr is not None and int(broker) in isr
        missing = np.empty(0, dtype=np.int64)
        if in_isr:
            start = meta.at[broker, "log_start_offset"]
            wanted = ref_offsets if pd.isna(start) else ref_offsets[ref_offsets >= int(start)]
            missing = np.setdiff1d(wanted, offsets, assume_unique=True)
        bad = np.union1d(offsets[differs | corrupt], missing)
        if bad.size == 0:
            continue
        value_of = dict(zip(offsets.tolist(), mine["value"].tolist(), strict=True))
        reference_of = dict(zip(ref_offsets.tolist(), ref_values.tolist(), strict=True))
        cases.append(
            {
                "key": key,
                "broker": int(broker),
                "node": meta.at[broker, "node"],
                "in_isr": in_isr,
                "leader": None if leader is None else int(leader),
                "isr": isr,
                "high_watermark": hw,
                "differs": int(differs.sum()),
                "corrupt": int(corrupt.sum()),
                "missing": int(missing.size),
                "offsets": [int(bad[0]), int(bad[-1])],
                "examples": [_example(int(o), reference_of, value_of) for o in bad[:EXAMPLES]],
                "read": int(meta.at[broker, "index"]),
            }
        )
    return cases


def _divergence_batches(table: pa.Table) -> pa.Table:
    cases = key_divergence(table.to_pandas())
    return pa.table(
        {
            "checker": [CHECKER] * len(cases),
            "anomaly": [ANOMALY] * len(cases),
            "key": [c["key"] for c in cases],
            "order": [c["offsets"][0] for c in cases],
            "expected": [False] * len(cases),
            "detail": [json.dumps({k: v for k, v in c.items() if v is not None}) for c in cases],
        },
        schema=FINDING_SCHEMA,
    )


def divergence_frame(events: DataFrame) -> DataFrame:
    """The finding frame of `replica-divergence` (`checkers.findings` columns), lazily."""
    return (
        replica_records(replica_reads(events))
        .groupBy("key")
        .applyInArrow(_divergence_batches, schema=FINDING_DDL)
    )


def replica_read_details(events: DataFrame) -> dict[str, Any]:
    """What the replica reads held: keys and replicas read, the replicas that could not be
    read, keys without a high watermark (not judged)."""
    rows = (
        replica_reads(events)
        .select("node", "r.key", "r.broker", "r.error", "r.high_watermark")
        .collect()
    )
    if not rows:
        return {"replica_reads": 0}
    replicas = {(r["key"], r["broker"]) for r in rows}
    failed = sorted(
        {
            (str(r["key"]), int(r["broker"]), str(r["node"]), str(r["error"]))
            for r in rows
            if r["error"]
        }
    )
    unjudged = sorted(
        {str(r["key"]) for r in rows}
        - {str(r["key"]) for r in rows if r["high_watermark"] is not None}
    )
    return {
        "replica_reads": len(rows),
        "keys": len({r["key"] for r in rows}),
        "replicas": len(replicas),
        "unreadable_replicas": [
            {"key": k, "broker": b, "node": n, "error": e} for k, b, n, e in failed[:20]
        ],
        "keys_without_high_watermark": unjudged[:50],
    }


class ReplicasChecker:
    """The `Checker` of this module: one Spark job over the `replica-read` lines."""

    name = CHECKER
    anomalies = ANOMALIES

    def check(self, context: CheckContext) -> CheckerReport:
        details = replica_read_details(context.events)
        notes = []
        if not details["replica_reads"]:
            notes.append(
                "the history has no replica-read lines (a run before squall read every "
                "replica, or an imported history): replica-divergence is not judged"
            )
            return CheckerReport(self.name, [Finding(CHECKER, (), None)], details, notes)
        if details["unreadable_replicas"]:
            notes.append("some replicas could not be read; they are not judged")
        if details["keys_without_high_watermark"]:
            notes.append(
                "some keys' high watermark was not known at the end (no leader answered): "
                "they are not judged"
            )
        frame = divergence_frame(context.events)
        return CheckerReport(
            self.name, [Finding(CHECKER, ANOMALIES, frame, json_fields=())], details, notes
        )
