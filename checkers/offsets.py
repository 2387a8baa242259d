"""Offset consistency: `inconsistent-offsets` and `duplicate` (docs/anomalies.md, as Jepsen).

- inconsistent-offsets: an offset of a key holds two or more distinct values, by the
  evidence (every poll, every committed send). It is counted as expected when a write at
  that offset was lossy by configuration (acks=0/1, or lost in an allowed unclean window):
  a lost record's offset is reused by the next leader.
- duplicate: one value appears at more than one offset of a key. It is counted as
  expected when the producer may have retried the send without idempotence and a retry
  explains it (`checkers.losses`); its sample then lists the value's send operations.

Both are found per key, in the per-key pass (`checkers.key_pass`).
"""

from __future__ import annotations

import pandas as pd

from checkers.checker import CheckContext
from checkers.empty_frames import made_once
from checkers.key_findings import FindingRow, key_finding, keyed, rows_of
from checkers.key_log import KeyLog
from checkers.losses import KeyLosses
from checkers.results import CheckerReport

CHECKER = "offsets"
ANOMALIES = ("inconsistent-offsets", "duplicate")


def key_inconsistent_offsets(log: KeyLog, losses: KeyLosses) -> pd.DataFrame:
    """`inconsistent_offsets` on one key."""
    per_offset = log.offset_values
    kept = per_offset["value_count"].to_numpy() > 1
    if not kept.any():  # most keys
        return made_once(CHECKER, per_offset[kept], lambda none: _inconsistent(log, none))
    several = per_offset[kept].copy()
    several["values"] = log.values_at(several["offset"])
    writes = log.located_writes
    committed = writes[writes["committed"]].copy()
    committed["offset"] = committed["offset"].fillna(committed["first_offset"])
    at_offsets = committed[committed["offset"].isin(several["offset"])]
    lossy = losses.classify(at_offsets)
    lossy = lossy[lossy["expected"]]
    reasons = lossy.groupby(lossy["offset"].astype("int64"))["expected_reason"].min()
    several["expected_reason"] = several["offset"].map(reasons)
    several["expected"] = several["expected_reason"].notna()
    return several


def _inconsistent(log: KeyLog, none: pd.DataFrame) -> pd.DataFrame:
    """`key_inconsistent_offsets` where no offset holds several values (`none`)."""
    several = none.copy()
    several["values"] = log.values_at(several["offset"])
    return several.assign(expected=False, expected_reason=None)


def _duplicates(log: KeyLog, several: pd.DataFrame) -> pd.DataFrame:
    """`several` (values at several offsets) with their offsets and the first one's dense
    index."""
    several = several.copy()
    several["offsets"] = log.offsets_of(several["value"])
    several["first_idx"] = log.dense(several["first_offset"]).to_numpy()
    return several


def key_duplicates(log: KeyLog, losses: KeyLosses) -> pd.DataFrame:
    """Values at several offsets of one key, with `sends` where retries may duplicate."""
    values = log.values
    kept = values["offset_count"].to_numpy() > 1
    if not kept.any():  # most keys
        return made_once(
            "duplicate",
            values[kept],
            lambda none: _duplicates(log, none).assign(expected=False, expected_reason=None),
        )
    several = _duplicates(log, values[kept])
    if not losses.rules.retries_may_duplicate:
        return several.assign(expected=False, expected_reason=None)
    writes = log.writes[log.writes["value"].isin(several["value"])]
    sends = {
        value: [
            {
                "invoke_index": row.invoke_index,
                "index": row.complete_index,
                "type": row.status,
                "error": row.error,
                "offset": row.offset,
                "pending": True if row.pending else None,
            }
            for row in group.sort_values(
                ["invoke_index", "complete_index"], na_position="first"
            ).itertuples()
        ]
        for value, group in writes.groupby("value", sort=False)
    }
    several["sends"] = several["value"].map(sends)
    return losses.classify_duplicates(several)


def check_offsets_key(log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
    """The findings of this checker on one key (the per-key pass)."""
    several_values = log.columns["offset_values"]["value_count"] > 1
    if not several_values.any() and not (log.columns["values"]["offset_count"] > 1).any():
        return []  # most keys: no offset holds several values, no value several offsets
    inconsistent = key_inconsistent_offsets(log, losses)
    duplicates = key_duplicates(log, losses)
    duplicate_detail = [
        ("key", "key"),
        ("value", "value"),
        ("offsets", "offsets"),
        ("count", "offset_count"),
        ("index", "first_idx"),
    ]
    if losses.rules.retries_may_duplicate:
        duplicate_detail.append(("sends", "sends"))
    return [
        *rows_of(
            CHECKER,
            "inconsistent-offsets",
            keyed(inconsistent, log.key),
            order="offset",
            detail=[("key", "key"), ("offset", "offset"), ("index", "didx"), ("values", "values")],
            expected="expected",
        ),
        *rows_of(
            CHECKER,
            "duplicate",
            keyed(duplicates, log.key),
            order="first_offset",
            detail=duplicate_detail,
            expected="expected" if losses.rules.retries_may_duplicate else None,
        ),
    ]


class OffsetsChecker:
    """The `Checker` of this module, a per-key check."""

    name = CHECKER
    anomalies = ANOMALIES

    def check_key(self, log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
        return check_offsets_key(log, losses)

    def check(self, context: CheckContext) -> CheckerReport:
        finding = key_finding(
            context.key_findings, CHECKER, ANOMALIES, json_fields=("value", "values")
        )
        return CheckerReport(self.name, [finding])
