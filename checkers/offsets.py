"""Offset consistency: `inconsistent-offsets` and `duplicate` (docs/anomalies.md, as Jepsen).

- inconsistent-offsets: an offset of a key holds two or more distinct values, by the
  evidence (every poll, every committed send). It is counted as expected when a write at
  that offset was lossy by configuration (acks=0/1, or lost in an allowed unclean window):
  a lost record's offset is reused by the next leader.
- duplicate: one value appears at more than one offset of a key. It is counted as
  expected when the producer may have retried the send without idempotence and a retry
  explains it (`checkers.losses`); its sample then lists the value's send operations.

Where unclean leader election is allowed, an unclean leader's log replaces the old
leader's from where the two diverged: an offset seen holding one value before an unclean
election of its key and another after it, or a value seen at one offset before and at
another after (an idempotent producer's retry that landed on the old leader's lineage, whose
first attempt survived on the unclean leader's), is expected, with that election as the
reason.

Both are found per key, in the per-key pass (`checkers.key_pass`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from checkers.checker import CheckContext
from checkers.empty_frames import made_once
from checkers.key_findings import FindingRow, key_finding, keyed, rows_of
from checkers.key_log import KeyLog, ReplicationEvent
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
    elections = allowed_unclean_elections(log, losses)
    if elections:
        at_offset = dict(tuple(log.sightings().groupby("offset")))
        diverged = [
            _offset_across(at_offset.get(int(offset), _NO_SIGHTINGS), elections)
            if pd.isna(reason)
            else reason
            for offset, reason in zip(several["offset"], several["expected_reason"], strict=True)
        ]
        several["expected_reason"] = pd.Series(diverged, index=several.index, dtype=object)
    several["expected"] = several["expected_reason"].notna()
    return several


def allowed_unclean_elections(log: KeyLog, losses: KeyLosses) -> list[ReplicationEvent]:
    """The key's unclean elections, by time, where the configuration allows them."""
    return log.unclean_elections if losses.rules.unclean_allowed else []


_NO_SIGHTINGS = pd.DataFrame({"value": [], "offset": [], "time": []})


def _across(
    earlier: pd.DataFrame, later: pd.DataFrame, elections: Sequence[ReplicationEvent]
) -> ReplicationEvent | None:
    """The first election with a sighting of `earlier` before it and of `later` after it."""
    if earlier.empty or later.empty:
        return None
    first, last = int(earlier["time"].min()), int(later["time"].max())
    return next((e for e in elections if first < e.time < last), None)


def _offset_across(seen: pd.DataFrame, elections: Sequence[ReplicationEvent]) -> str | None:
    """Why an offset seen holding several values (`seen`: its sightings) is expected: one
    value before an allowed unclean election, another after it (None: none was)."""
    for value, before in seen.groupby("value", sort=False):
        election = _across(before, seen[seen["value"] != value], elections)
        if election is not None:
            return (
                f"held {value} before the unclean election at index {election.index} and "
                "another value after it: the unclean leader's log replaced the old one's"
            )
    return None


def _value_across(seen: pd.DataFrame, elections: Sequence[ReplicationEvent]) -> str | None:
    """Why a value seen at several offsets (`seen`: its sightings) is expected: at one
    offset before an allowed unclean election, at another after it (None: it was not)."""
    for offset, before in seen.groupby("offset", sort=False):
        elsewhere = seen[seen["offset"] != offset]
        election = _across(before, elsewhere, elections)
        if election is not None:
            later = int(elsewhere.loc[elsewhere["time"] > election.time, "offset"].iloc[0])
            return (
                f"seen at offset {offset} before the unclean election at index "
                f"{election.index} and at offset {later} after it: the unclean leader's log "
                "replaced the old one's"
            )
    return None


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
        several = several.assign(expected=False, expected_reason=None)
        return _diverged_duplicates(log, losses, several)
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
    return _diverged_duplicates(log, losses, losses.classify_duplicates(several))


def _diverged_duplicates(log: KeyLog, losses: KeyLosses, several: pd.DataFrame) -> pd.DataFrame:
    """`several` (duplicates) with those an allowed unclean election explains expected."""
    elections = allowed_unclean_elections(log, losses)
    if not elections:
        return several
    by_value = dict(tuple(log.sightings().groupby("value")))
    reasons = [
        reason if expected else _value_across(by_value.get(value, _NO_SIGHTINGS), elections)
        for value, expected, reason in zip(
            several["value"], several["expected"], several["expected_reason"], strict=True
        )
    ]
    several = several.copy()
    several["expected_reason"] = pd.Series(reasons, index=several.index, dtype=object)
    several["expected"] = several["expected_reason"].notna()
    return several


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
            expected="expected"
            if losses.rules.retries_may_duplicate or losses.rules.unclean_allowed
            else None,
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
