"""Consumer groups: `at-least-once-violation`, and how often the group consumed each value.

The group's members are the processes with an `ok` subscribe or a completed commit. A commit
`{key: offset}` says the group is done with everything below `offset`. An `ok` write at a
known offset below an offset committed after the write was invoked, never read by an `ok`
poll of a member, is an at-least-once violation: the group moved past it without consuming
it.
When nobody at all read the value and its loss is allowed (acks=0/1, allowed unclean
window), the violation is expected: the record was gone before the group got there. So is
a commit of positions read before an allowed loss with power cut the log below them (the
log restarted lower, and the group resumed past records written after the loss). A workload
that consumes at most once (test.json's `workload.consumer_mode`) commits what it fetched
before delivering it, so a consumer that crashes in between skips it by design: every
violation is then expected, with that reason.
Values consumed more than once are allowed by at-least-once delivery and only counted.
Both are found per key, in the per-key pass (`checkers.key_pass`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from checkers.checker import CheckContext
from checkers.columns import isin
from checkers.empty_frames import made_once
from checkers.key_findings import (
    FindingRow,
    KeyFacts,
    KeyFindings,
    key_finding,
    keyed,
    pass_ran,
    rows_of,
)
from checkers.key_log import KeyLog
from checkers.losses import KeyLosses
from checkers.results import CheckerReport

CHECKER = "consumer_groups"
ANOMALIES = ("at-least-once-violation",)


def consumed_values(log: KeyLog) -> pd.Series:
    """Per value of the key read by an `ok` poll of a member: how many times."""
    reads = log.reads
    return reads[_consumed(log)].groupby("value", sort=False).size()


def _consumed(log: KeyLog) -> np.ndarray:
    """Which of the key's reads are `ok` polls of a member."""
    reads = log.columns["reads"]
    ok: np.ndarray = np.asarray(reads["type"]) == "ok"
    if not ok.any() or not log.shared.members:
        return np.zeros(len(ok), dtype=bool)
    member = isin(np.asarray(reads["process_id"]), list(log.shared.members))
    consumed: np.ndarray = ok & member
    return consumed


def at_least_once_violations(log: KeyLog, losses: KeyLosses) -> pd.DataFrame:
    """`ok` writes that no member consumed although a later commit moved past their offset,
    with that first commit (`commit_op`, `committed`). Only commits after the write was
    invoked count: after a truncation, an offset committed earlier may hold a newer value."""
    commits = log.commits
    writes = log.writes
    if commits.empty:  # most keys: no group's
        return made_once(
            "at-least-once-violation",
            writes.iloc[0:0],
            lambda none: losses.classify(none).assign(commit_op=None, committed=None),
        )
    candidates = writes[
        (writes["status"] == "ok")
        & writes["offset"].notna()
        & (writes["offset"] < commits["committed"].max())
        & ~writes["value"].isin(consumed_values(log).index)
    ]
    offsets = candidates["offset"].to_numpy(dtype=np.int64)
    invoked = candidates["invoke_index"].to_numpy(dtype=np.int64)
    commit_ops = commits["index"].to_numpy(dtype=np.int64)
    committed = commits["committed"].to_numpy(dtype=np.int64)
    # Commits are in history order: the first that passes the offset after the invoke.
    # Compared in blocks of candidates, so that a block's matrix stays a few MB.
    has_commit = np.zeros(len(candidates), dtype=bool)
    first = np.zeros(len(candidates), dtype=np.int64)
    block = max(1, (1 << 22) // max(1, len(commit_ops)))
    for start in range(0, len(candidates), block):
        rows = slice(start, start + block)
        past = (committed[None, :] > offsets[rows, None]) & (
            commit_ops[None, :] > invoked[rows, None]
        )
        has_commit[rows] = past.any(axis=1)
        first[rows] = past.argmax(axis=1)
    found = candidates[has_commit].copy()
    found["commit_op"] = commit_ops[first[has_commit]]
    found["committed"] = committed[first[has_commit]]
    found["commit_time"] = commits["time"].to_numpy(dtype=np.int64)[first[has_commit]]
    classified = losses.classify(found)
    classified["expected"] = classified["expected"] & ~classified["was_read"]
    judged = _committed_before_a_power_loss(log, losses, classified)
    judged = _written_below_the_group_after_a_power_loss(
        log, losses, judged, commit_ops, committed, commits["time"].to_numpy(dtype=np.int64)
    )
    if losses.rules.unclean_allowed:
        judged = _written_below_the_group(judged, commit_ops, committed)
    if losses.rules.settings.consumer_mode == "at-most-once":
        judged = _consumed_at_most_once(judged)
    return judged


BELOW_THE_GROUP = (
    "the group had committed past this offset before the record was written: the log was "
    "cut back below the group's position and the offset written again, which an unclean "
    "election (allowed here) does, so the group skipped the new record"
)


def _written_below_the_group(
    found: pd.DataFrame, commit_ops: np.ndarray, committed: np.ndarray
) -> pd.DataFrame:
    """`found` with the open cases whose offset a commit had passed before their write was
    invoked expected (`BELOW_THE_GROUP`), where unclean election is allowed."""
    open_cases = ~found["expected"].astype(bool).to_numpy()
    if not open_cases.any():
        return found
    offsets = found["offset"].to_numpy(dtype=np.int64)
    invoked = found["invoke_index"].to_numpy(dtype=np.int64)
    passed = (
        (commit_ops[None, :] < invoked[:, None]) & (committed[None, :] > offsets[:, None])
    ).any(axis=1)
    return _expected(found, open_cases & passed, BELOW_THE_GROUP)


BELOW_THE_GROUP_AFTER_POWER = (
    "the group had committed past this offset before the record was written: {lost}, which "
    "cut the log back below the group's position, came in between, and the offset was written "
    "again, so the group skipped the new record"
)


def _written_below_the_group_after_a_power_loss(
    log: KeyLog,
    losses: KeyLosses,
    found: pd.DataFrame,
    commit_ops: np.ndarray,
    committed: np.ndarray,
    commit_times: np.ndarray,
) -> pd.DataFrame:
    """`found` with the open cases expected where a commit had passed their offset before
    their write was invoked, and an allowed power loss of every broker after that commit and
    before the write was acknowledged cut the key's log back to that offset or below: records
    there were lost with the power, or a replica truncated to it after the power loss
    (`BELOW_THE_GROUP_AFTER_POWER`), as under unclean election (`_written_below_the_group`)."""
    open_cases = ~found["expected"].astype(bool).to_numpy()
    rules = losses.rules
    brokers = set((rules.settings.brokers or {}).values())
    racks = [p for p in rules.power_losses if brokers and brokers <= set(p.brokers.values())]
    if not open_cases.any() or not rules.power_loss_allowed or not racks:
        return found
    offsets = found["offset"].astype("float64").to_numpy()
    invoked = found["invoke_index"].to_numpy(dtype=np.int64)
    # It landed when it was written, before its acknowledgement (an idempotent producer's
    # batch may be written again well after its invocation).
    landed_by = found["complete_time"].astype("float64").to_numpy()
    passed = (commit_ops[None, :] < invoked[:, None]) & (committed[None, :] > offsets[:, None])
    # The first commit that had passed the offset: the widest window before the write.
    since = np.where(
        passed.any(axis=1), commit_times.astype(np.float64)[passed.argmax(axis=1)], np.nan
    )
    lost = losses.power_lost
    cut_at: list[tuple[float, float, float, str]] = []  # power, seen, offset, words
    for power in (float(p.time) for p in racks):
        for offset, at in zip(lost["offset"], lost["power_time"], strict=True):
            if float(at) == power:
                cut_at.append((power, power, float(offset), "records there lost with it"))
        for event in log.events:
            if event.f == "truncation" and event.to_offset is not None and event.time > power:
                cut_at.append(
                    (power, float(event.time), float(event.to_offset), "a replica truncated")
                )
    reasons: list[str | None] = []
    for offset, start, until in zip(offsets, since, landed_by, strict=True):
        why = next(
            (
                f"the power loss of every broker at {power / 1e9:.1f} s ({words} to "
                f"offset {int(to)}, allowed)"
                for power, seen, to, words in cut_at
                if start < power < until and seen >= power and to <= offset
            ),
            None,
        )
        reasons.append(why)
    rows = open_cases & np.array([r is not None for r in reasons], dtype=bool)
    if not rows.any():
        return found
    words = pd.Series(
        [None if r is None else BELOW_THE_GROUP_AFTER_POWER.format(lost=r) for r in reasons],
        index=found.index,
        dtype=object,
    )
    return _expected(found, rows, words[rows])


AT_MOST_ONCE = (
    "consumer_mode at-most-once: the group commits what it fetched before delivering it, so "
    "a consumer that stops in between skips it"
)


def _consumed_at_most_once(found: pd.DataFrame) -> pd.DataFrame:
    """`found` with every open case expected: at most once, a commit promises nothing."""
    return _expected(found, ~found["expected"].astype(bool).to_numpy(), AT_MOST_ONCE)


def _committed_before_a_power_loss(
    log: KeyLog, losses: KeyLosses, found: pd.DataFrame
) -> pd.DataFrame:
    """`found` with the unexpected cases whose commit's offset was read before an allowed
    loss with power of a record below it made expected: the log held `committed - 1` when a
    member last read it, then lost its records below `committed`, and the commit (often of a
    consumer's position kept through the outage) came after."""
    open_cases = found[~found["expected"].astype(bool)]
    if open_cases.empty:
        return found
    committed = open_cases["committed"].to_numpy(dtype=np.int64)
    commit_times = open_cases["commit_time"].to_numpy(dtype=np.int64)
    powered = losses.powered_off(
        open_cases["committed"],
        pd.Series(log.last_read_times(committed - 1, commit_times), index=open_cases.index),
        open_cases["commit_time"],
    )
    rows = powered.index[powered.notna()]
    reasons = (
        "the commit's offset "
        + open_cases.loc[rows, "committed"].astype("string")
        + " was read before "
        + powered[rows].astype("string")
    )
    return _expected(found, found.index.isin(rows), reasons)


def _expected(found: pd.DataFrame, rows: np.ndarray, reason: str | pd.Series) -> pd.DataFrame:
    """`found` with the cases `rows` (a mask) expected, for `reason` (one for all, or one
    per row, by index)."""
    if not rows.any():
        return found
    found = found.copy()
    found.loc[rows, "expected"] = True
    found.loc[rows, "expected_reason"] = reason
    return found


def check_consumer_groups_key(log: KeyLog, losses: KeyLosses) -> list[FindingRow | KeyFacts]:
    """The findings of this checker on one key, and how often its values were consumed."""
    # Most keys of a long history are no group's: nothing consumed, nothing to count.
    consumed = _consumed(log).any()
    if not consumed and log.columns["commits"].rows == 0:
        return []  # no commit: no violation (`at_least_once_violations`)
    times = consumed_values(log).value_counts() if consumed else pd.Series()
    found: list[FindingRow | KeyFacts] = [
        *rows_of(
            CHECKER,
            "at-least-once-violation",
            keyed(at_least_once_violations(log, losses), log.key),
            order="offset",
            detail=[
                ("key", "key"),
                ("value", "value"),
                ("offset", "offset"),
                ("writer", "complete_index"),
                ("commit", "commit_op"),
                ("committed", "committed"),
                ("acks", "effective_acks"),
                ("read_by_anyone", "was_read"),
            ],
            expected="expected",
        )
    ]
    if not times.empty:
        counts = {str(n): int(count) for n, count in times.items()}
        found.append(KeyFacts(CHECKER, log.key, {"consumption_counts": counts}))
    return found


def consumption_details(found: KeyFindings) -> dict[str, Any]:
    """Members, commits, values consumed, and how many times each was consumed."""
    members, commits = len(found.shared.members), found.shared.commits
    if members == 0:
        return {"members": 0, "commits": commits, "note": "no consumer group in the history"}
    counts: dict[int, int] = {}
    for fact in found.facts.get(CHECKER, {}).values():
        for times, n in fact["consumption_counts"].items():
            counts[int(times)] = counts.get(int(times), 0) + n
    return {
        "members": members,
        "commits": commits,
        "consumed_values": sum(counts.values()),
        "duplicates_consumed": sum(n for times, n in counts.items() if times > 1),
        "consumption_counts": {str(times): n for times, n in sorted(counts.items())},
    }


class ConsumerGroupsChecker:
    """The `Checker` of this module, a per-key check; its details say how the group
    consumed."""

    name = CHECKER
    anomalies = ANOMALIES

    def check_key(self, log: KeyLog, losses: KeyLosses) -> list[FindingRow | KeyFacts]:
        return check_consumer_groups_key(log, losses)

    def check(self, context: CheckContext) -> CheckerReport:
        found = pass_ran(context.key_findings, CHECKER)
        return CheckerReport(
            self.name,
            [key_finding(found, CHECKER, ANOMALIES)],
            details=consumption_details(found),
        )
