"""Consumers followed across processes: each consumer process anchored at the committed
offset it started from.

A consumer process starts reading a key at its group's committed offset (a crashed
consumer's successor resumes there). The history shows the group's `ok` commits, so for
each `ok` assign/subscribe that holds the key, the anchor is the least committed offset the
group can have held when the process started: of the last `ok` commit of the key completed
before the assign began (its invocation; for an assignment a group member was given in a
rebalance, which the member learnt of inside a poll and wrote after it, the completion of
its previous assignment, or of its subscribe: `SharedFacts.rebalanced_since`), and of
every `ok` or `info` commit of the key that may have
landed after it (invoked before the assign completed, completed after that commit was
invoked; an `info` commit, indeterminate, is taken to have landed, if at all, before its
completion).
Commits of several processes interleave legitimately (with subscribe every consumer
commits every key to the one group); the least of those that may have been last is the
bound. Where the assign's completion says where the consumer starts the key (`positions`,
docs/history.md), the anchor is the greater of that and the commits' bound; without
either there is no anchor.

- `poll-below-anchor`: the process's first `ok` read of the key after the assign starts
  below its anchor: it went back past what its group had consumed.
- `commit-backwards`: the process commits the key below its anchor, or below its own
  earlier `ok` commit of the key since the assign.

Both are expected (explained) when something the history shows moved the log's end below
the higher offset: a SUT `truncation` of the key to below it in between that removed
committed records (it cut below the high watermark then: below an offset an `ok` read had
returned, an acks=-1 write had been acknowledged at, a commit had named, or an ISR change
gave as its high watermark, by the truncation's time widened by the clock tolerance; by
the time of the key's last election when the replica that truncated is the leader that
election deposed, whose records above that may be a divergent tail; and otherwise the
replica that truncated was in the ISR about then, its records there the committed ones:
a replica dropping records never committed explains nothing), an unclean election of the
key at any time before, while unclean election is allowed (offsets read from the deposed
leader may be committed after the election), or, where the flush policy allows it, a write
of the key below the higher offset lost with power after an `ok` read last returned the
record just below the higher offset before its commit, and before the finding
(`checkers.power_losses`): the offsets may be committed after the power loss that cut them;
or a power loss in between that may have taken the group's commits themselves from the
offsets topic (`LossRules.group_state_losses`). Final reads (`final`) start from the
log's beginning by design and are not judged. `info` commits lower an anchor (they may
have landed) but are not compared as the process's own. Found per key, in the per-key pass (`checkers.key_pass`); sessions and
commits are few beside the reads, and each is placed with numpy searches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from checkers.catalogue import ANOMALIES as CATALOGUE
from checkers.checker import CheckContext
from checkers.columns import Columns
from checkers.key_findings import FindingRow, key_finding, rows_of, same_named
from checkers.key_log import KeyLog, ReplicationEvent
from checkers.losses import KeyLosses
from checkers.results import CheckerReport

CHECKER = "consumer_anchors"
ANOMALIES = ("poll-below-anchor", "commit-backwards")


def sessions(log: KeyLog) -> pd.DataFrame:
    """The `ok` assigns/subscribes that hold the key (`_sessions`), as a frame."""
    held = _sessions(log)
    if held is None:
        return pd.DataFrame(columns=["process_id", "index", "invoke_index", "anchor"])
    return held.frame


def _sessions(log: KeyLog) -> Columns | None:
    """The `ok` assigns/subscribes that hold the key: process_id, index, invoke_index,
    `position` (where the consumer said it starts the key; null: not said), `anchor` (the
    greater of the commits' bound and `position`; null: neither), `anchor_from` (`commit`
    or `position`), `anchor_commit` (the commit that set the commits' bound) and `next`
    (`_next_of_process`). Worked out on arrays, as columns; None where no assign holds the
    key."""
    changes = log.shared.assignments
    holds = log.shared.holds(log.key)
    if not holds.any():  # most keys of a long history: no consumer was given them
        return None
    column = log.shared.assignment_column
    position = [
        _position_of(log.key, keys, positions)
        for keys, positions in zip(
            column("keys")[holds],
            column("positions")[holds]
            if "positions" in changes.columns
            else [None] * int(holds.sum()),
            strict=True,
        )
    ]
    process, index, invoke = (
        column(name)[holds] for name in ("process_id", "index", "invoke_index")
    )
    since = log.shared.rebalanced_since()[holds]
    began = np.where(since >= 0, np.minimum(invoke.astype(np.int64), since), invoke)
    commits, info = log.columns["commits"], log.columns["info_commits"]
    done = np.asarray(commits["index"], dtype=np.int64)
    invoked = np.asarray(commits["invoke_index"], dtype=np.int64)
    # Candidates: `ok` commits, and `info` ones, which may have landed before they completed.
    every_done, every_invoked, every_committed = (
        np.concatenate([np.asarray(frame[name], dtype=np.int64) for frame in (commits, info)])
        for name in ("index", "invoke_index", "committed")
    )
    order = np.argsort(every_done, kind="stable")
    every_done, every_invoked = every_done[order], every_invoked[order]
    every_committed = every_committed[order]
    anchors = np.full(len(index), -1, dtype=np.int64)
    setters = np.full(len(index), -1, dtype=np.int64)
    last = np.searchsorted(done, began.astype(np.int64)) - 1
    # A commit invoked before `until` completed before `until + span`.
    span = int((every_done - every_invoked).max()) + 1 if len(every_done) else 0
    for row, (k, until) in enumerate(zip(last, index.astype(np.int64), strict=True)):
        if k < 0:
            continue
        # the last `ok` commit completed before the assign began, and every commit
        # completed after that one was invoked and invoked before the assign completed, may
        # be the one the group held
        start = int(np.searchsorted(every_done, invoked[k], side="right"))
        end = int(np.searchsorted(every_done, until + span))
        maybe = np.flatnonzero(every_invoked[start:end] < until) + start
        at = maybe[np.argmin(every_committed[maybe])]
        anchors[row], setters[row] = every_committed[at], every_done[at]
    # Where the consumer said where it starts, it may not read or commit below that either.
    said = np.array([np.nan if p is None else p for p in position], dtype=np.float64)
    known = np.where(anchors >= 0, anchors, np.nan)
    from_position = ~np.isnan(said) & (np.isnan(known) | (said > known))
    higher = np.fmax(known, said)
    held = {
        "process_id": process,
        "index": index,
        "invoke_index": invoke,
        "position": pd.arrays.IntegerArray(
            np.array([0 if p is None else p for p in position], dtype=np.int64),
            np.array([p is None for p in position], dtype=bool),
        ),
        "anchor": pd.arrays.IntegerArray(
            np.where(np.isnan(higher), 0, higher).astype(np.int64), np.isnan(higher)
        ),
        "anchor_from": [
            "position" if p else (None if np.isnan(k) else "commit")
            for p, k in zip(from_position, known, strict=True)
        ],
        "anchor_commit": pd.arrays.IntegerArray(np.maximum(setters, 0), setters < 0),
    }
    return Columns({**held, "next": _next_of_process(held)})


def _position_of(key: str, keys: Any, positions: Any) -> int | None:
    """The offset an assign said its consumer starts `key` at (None: not said)."""
    if positions is None or keys is None:
        return None
    for name, offset in zip(keys, positions, strict=False):
        if name == key:
            return None if offset is None or pd.isna(offset) else int(offset)
    return None


def _next_of_process(held: Mapping[str, Any]) -> np.ndarray:
    """The index of the same process's next session (infinite: none)."""
    process = np.asarray(held["process_id"])
    index = np.asarray(held["index"], dtype=np.float64)
    order = np.argsort(process, kind="stable")  # each process's sessions, in their order
    out = np.full(len(process), np.inf)
    same = process[order][1:] == process[order][:-1]
    out[order[:-1][same]] = index[order[1:][same]]
    return out


_PROCESS_SHIFT = 1 << 40
"""(process, index) as one integer, process * 2**40 + index: history indices stay below
2**40 and process numbers below 2**23."""


def _session_of(held: Mapping[str, Any], process: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The position in `held` (the sessions, a frame or columns) of the session each
    (process, index) falls in (-1: none), with one search over the sessions sorted by
    (process, index)."""
    held_process = np.asarray(held["process_id"], dtype=np.int64)
    starts = held_process * _PROCESS_SHIFT + np.asarray(held["index"], dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    wanted = process.astype(np.int64) * _PROCESS_SHIFT + index.astype(np.int64)
    at = np.searchsorted(starts[order], wanted, side="right") - 1
    found = order[np.maximum(at, 0)]
    inside = (
        (at >= 0) & (held_process[found] == process) & (index < np.asarray(held["next"])[found])
    )
    return np.where(inside, found, -1)


def polls_below_anchor(log: KeyLog, held: pd.DataFrame) -> pd.DataFrame:
    """Each session's first `ok` read of the key, where it starts below the anchor."""
    reads = log.reads
    reads = reads[(reads["type"] == "ok").to_numpy() & ~reads["final"].to_numpy(dtype=bool)]
    if reads.empty or held["anchor"].isna().all():
        return pd.DataFrame()
    session = _session_of(
        held, reads["process_id"].to_numpy(dtype=np.int64), reads["index"].to_numpy(dtype=np.int64)
    )
    reads = reads.assign(session=session)[session >= 0]
    first = reads.drop_duplicates("session")  # reads are in history order
    first = first.merge(held, left_on="session", right_index=True, suffixes=("", "_assign"))
    below = first[first["anchor"].notna() & (first["offset"] < first["anchor"])]
    return pd.DataFrame(
        {
            "key": log.key,
            "process": below["process_id"],
            "reader": below["index"],
            "assign": below["index_assign"],
            "anchor": below["anchor"],
            "anchor_commit": below["anchor_commit"],
            "anchor_from": below["anchor_from"],
            "position": below["position"],
            "offset": below["offset"],
            "value": below["value"],
            "time": below["time"],
        }
    )


def _nothing_below(log: KeyLog, held: Columns) -> bool:
    """Whether the key has neither a poll below its session's anchor (`polls_below_anchor`)
    nor a commit backwards (`commits_backwards`), decided on the log's columns."""
    anchor = held["anchor"].to_numpy(dtype=np.float64, na_value=np.nan)
    reads = log.columns["reads"]
    chosen = (np.asarray(reads["type"]) == "ok") & ~np.asarray(reads["final"], dtype=bool)
    if chosen.any() and not np.isnan(anchor).all():
        session = _session_of(
            held,
            np.asarray(reads["process_id"], dtype=np.int64)[chosen],
            np.asarray(reads["index"], dtype=np.int64)[chosen],
        )
        inside = session >= 0
        # the first read of each session (reads are in history order)
        opened, first = np.unique(session[inside], return_index=True)
        offsets = np.asarray(reads["offset"], dtype=np.float64)[chosen][inside][first]
        if (offsets < anchor[opened]).any():
            return False
    commits = log.columns["commits"]
    if commits.rows == 0:
        return True
    session = _session_of(
        held,
        np.asarray(commits["process_id"], dtype=np.int64),
        np.asarray(commits["index"], dtype=np.int64),
    )
    inside = session >= 0
    committed = np.asarray(commits["committed"], dtype=np.float64)[inside]
    session = session[inside]
    # the process's own earlier commits in the session: the running greatest before each
    highest: dict[int, float] = {}
    running = np.empty(len(session))
    for at, (slot, offset) in enumerate(zip(session.tolist(), committed.tolist(), strict=True)):
        running[at] = highest[slot] = max(highest.get(slot, offset), offset)
    same = np.concatenate(([False], session[1:] == session[:-1]))
    earlier = np.where(same, np.concatenate(([np.nan], running[:-1])), np.nan)
    return not (committed < np.fmax(anchor[session], earlier)).any()


def commits_backwards(log: KeyLog, held: pd.DataFrame) -> pd.DataFrame:
    """Each `ok` commit of the key below its session's anchor or the process's earlier
    commit of the key in the session, with that offset (`above`) and where it came from."""
    commits = log.commits.sort_values("index", kind="stable").reset_index(drop=True)
    if commits.empty:
        return pd.DataFrame()
    session = _session_of(
        held,
        commits["process_id"].to_numpy(dtype=np.int64),
        commits["index"].to_numpy(dtype=np.int64),
    )
    commits = commits.assign(session=session)[session >= 0]
    if commits.empty:
        return pd.DataFrame()
    anchor = held["anchor"].to_numpy(dtype=np.float64, na_value=np.nan)[commits["session"]]
    earlier = commits.groupby("session", sort=False)["committed"].cummax().shift(1)
    earlier = earlier.where(commits["session"].eq(commits["session"].shift(1)))
    bound = np.fmax(anchor, earlier.to_numpy(dtype=np.float64))
    below = commits[commits["committed"].to_numpy() < bound]
    from_anchor = np.isnan(earlier.to_numpy(dtype=np.float64)) | (anchor >= earlier.to_numpy())
    chosen_anchor = from_anchor[commits["committed"].to_numpy() < bound]
    return pd.DataFrame(
        {
            "key": log.key,
            "process": below["process_id"],
            "commit": below["index"],
            "committed": below["committed"],
            "above": bound[commits["committed"].to_numpy() < bound].astype(np.int64),
            "since": np.where(chosen_anchor, "anchor", "own-commit"),
            "time": below["time"],
            "session": below["session"],
        }
    )


def _explained(
    log: KeyLog, losses: KeyLosses, found: pd.DataFrame, since: np.ndarray, above: np.ndarray
) -> tuple[np.ndarray, list[str | None]]:
    """Whether a truncation of the key to below `above` that removed committed records
    came between `since` and each finding's `time`, an allowed unclean election before it,
    or an allowed loss with power of a record below `above` between them; and the reason.

    An unclean election explains from any earlier time: offsets read from the deposed
    leader before it may still be committed after it, and they name records it discarded."""
    tolerance = losses.rules.settings.event_tolerance_ns
    times = found["time"].to_numpy(dtype=np.int64)
    explained = np.zeros(len(found), dtype=bool)
    reasons: list[str | None] = [None] * len(found)
    committed = _committed_marks(log, losses)
    for event in log.events:
        if event.f == "truncation" and event.to_offset is not None:
            if not _removed_committed(log, event, committed, tolerance):
                continue  # a replica's uncommitted (or divergent) records: nothing read
            cuts = event.to_offset < above
            cuts &= event.time >= since - tolerance
            why = f"truncation to offset {event.to_offset} at index {event.index}"
        elif event.f == "leader-election" and event.unclean and losses.rules.unclean_allowed:
            cuts = np.ones(len(found), dtype=bool)
            why = f"unclean leader election at index {event.index} (allowed)"
        else:
            continue
        hit = cuts & (event.time <= times + tolerance) & ~explained
        for at in np.flatnonzero(hit):
            reasons[at] = why
        explained |= hit
    powered = losses.powered_off(
        pd.Series(above, index=found.index),
        # The offsets were read before the commit that set `above`, maybe before the power
        # loss: the log held `above - 1` when it was last read.
        pd.Series(log.last_read_times(above - 1, since), index=found.index),
        pd.Series(times, index=found.index),
    ).to_numpy()
    for at in np.flatnonzero(~explained & pd.notna(powered)):
        reasons[at] = str(powered[at])
        explained[at] = True
    # The group's commits themselves lost with power on the offsets topic: the anchor (or
    # the commit above) gone, a later reader starts where an older commit left the group.
    for loss, why in losses.rules.group_state_losses():
        hit = (loss.time >= since - tolerance) & (loss.time <= times + tolerance) & ~explained
        for at in np.flatnonzero(hit):
            reasons[at] = why
        explained |= hit
    return explained, reasons


def _removed_committed(
    log: KeyLog, truncation: ReplicationEvent, committed: _CommittedMarks, tolerance: int
) -> bool:
    """Whether `truncation` removed committed records: it cut below the high watermark
    known by then. Where the event says which replica truncated: a leader deposed by the
    key's last election before it may hold records above the high watermark of that
    election that were never committed (a divergent tail), so it is that high watermark the
    cut must go below; any other replica must have been in the ISR about then, its records
    below the high watermark the committed ones (an out-of-sync replica's may be an older
    leader's, never committed)."""
    assert truncation.to_offset is not None
    late = truncation.time + tolerance
    if truncation.broker is None:
        return truncation.to_offset < committed.at(late)
    elections = [e for e in log.events if e.f == "leader-election" and e.time <= late]
    if elections and elections[-1].previous_leader == truncation.broker:
        return truncation.to_offset < committed.at(elections[-1].time + tolerance)
    if truncation.to_offset >= committed.at(late):
        return False
    early = truncation.time - tolerance
    memberships = [e for e in log.events if e.isr is not None and e.f != "truncation"]
    before = [e for e in memberships if e.time <= early]
    near = [e for e in memberships if early < e.time <= late]
    if not before and not near:
        return True  # the ISR is not known: the cut below the high watermark decides
    states = ([before[-1]] if before else []) + near
    return any(truncation.broker in (e.isr or ()) for e in states)


class _CommittedMarks:
    """How far the key's log had been committed by each time: the high watermark at least
    (`at`), from the history's evidence of it."""

    def __init__(self, times: np.ndarray, marks: np.ndarray) -> None:
        order = np.argsort(times, kind="stable")
        self.times = times[order]
        self.highest = np.maximum.accumulate(marks[order]) if len(marks) else marks

    def at(self, time: int) -> int:
        """The high watermark known by `time` (0: nothing committed known)."""
        upto = int(np.searchsorted(self.times, time, side="right"))
        return int(self.highest[upto - 1]) if upto else 0


def _committed_marks(log: KeyLog, losses: KeyLosses) -> _CommittedMarks:
    """The key's committed marks: offset + 1 of each `ok` read's record and each acks=-1
    write acknowledged `ok` (at their completions), each `ok` commit's offset, and each ISR
    change's high watermark."""
    reads = log.reads[log.reads["type"] == "ok"]
    writes = losses.with_acks(log.writes)
    acked = writes[
        (writes["status"] == "ok")
        & writes["offset"].notna()
        & writes["complete_time"].notna()
        & (writes["effective_acks"] == -1).fillna(False)
    ]
    events = [e for e in log.events if e.f == "isr-change" and e.high_watermark is not None]
    times = np.concatenate(
        [
            reads["time"].to_numpy(dtype=np.int64),
            acked["complete_time"].to_numpy(dtype=np.int64),
            log.commits["time"].to_numpy(dtype=np.int64),
            np.array([e.time for e in events], dtype=np.int64),
        ]
    )
    marks = np.concatenate(
        [
            reads["offset"].to_numpy(dtype=np.int64) + 1,
            acked["offset"].to_numpy(dtype=np.int64) + 1,
            log.commits["committed"].to_numpy(dtype=np.int64),
            np.array([e.high_watermark or 0 for e in events], dtype=np.int64),
        ]
    )
    return _CommittedMarks(times, marks)


def _time_of(log: KeyLog, index: pd.Series) -> np.ndarray:
    """The time of each commit completion in `index` (0 where unknown)."""
    commits = log.commits
    times = pd.Series(commits["time"].to_numpy(), index=commits["index"].to_numpy(np.float64))
    out: np.ndarray = index.astype("float64").map(times).fillna(0).to_numpy(dtype=np.int64)
    return out


def check_anchors_key(log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
    """The findings of this checker on one key; most keys' sessions are judged on arrays
    and find nothing (`_nothing_below`)."""
    columns = _sessions(log)
    if columns is None or _nothing_below(log, columns):
        return []
    held = columns.frame
    rows: list[FindingRow] = []
    polls = polls_below_anchor(log, held)
    if not polls.empty:
        since = _time_of(log, polls["anchor_commit"])
        explained, reasons = _explained(
            log, losses, polls, since, polls["anchor"].to_numpy(dtype=np.int64)
        )
        polls["expected"], polls["expected_reason"] = explained, reasons
        rows += rows_of(
            CHECKER,
            "poll-below-anchor",
            polls,
            order="reader",
            detail=same_named(CATALOGUE["poll-below-anchor"].checked_fields),
            expected="expected",
        )
    backwards = commits_backwards(log, held)
    if not backwards.empty:
        since = _since_commit(log, backwards, held)
        explained, reasons = _explained(
            log, losses, backwards, since, backwards["above"].to_numpy(dtype=np.int64)
        )
        backwards["expected"], backwards["expected_reason"] = explained, reasons
        rows += rows_of(
            CHECKER,
            "commit-backwards",
            backwards,
            order="commit",
            detail=same_named(CATALOGUE["commit-backwards"].checked_fields),
            expected="expected",
        )
    return rows


def _since_commit(log: KeyLog, backwards: pd.DataFrame, held: pd.DataFrame) -> np.ndarray:
    """From when a truncation explains each backward commit: its session's anchor commit,
    after which every offset it is compared with was committed (0: no anchor)."""
    setters = held["anchor_commit"].to_numpy(dtype=np.float64, na_value=np.nan)
    return _time_of(log, pd.Series(setters[backwards["session"].to_numpy()]))


class ConsumerAnchorsChecker:
    """The `Checker` of this module, a per-key check."""

    name = CHECKER
    anomalies = ANOMALIES

    def check_key(self, log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
        return check_anchors_key(log, losses)

    def check(self, context: CheckContext) -> CheckerReport:
        return CheckerReport(
            self.name,
            [key_finding(context.key_findings, CHECKER, ANOMALIES)],
        )
