"""Ordering: how reads and sends move through each key's log, by dense index (docs/anomalies.md).

Between operations of one process, per key (Jepsen's poll-skip+nonmonotonic-cases and
nonmonotonic-send-cases):
- poll-skip / nonmonotonic-poll: a completed poll's first record of a key is more than
  one index after / at or before the last record of the process's previous `ok` read of
  that key. An `ok` or `info` assign/subscribe that drops the key (or whose keys are not
  known) resets the pairing.
- nonmonotonic-send: the first send of an `ok`/`info` operation to a key lands at or
  before the last send of the process's previous such operation to that key (same
  resets, as Jepsen does). A send's index is its value's first dense index.
Inside one completed operation, consecutive records/sends of a key:
- int-poll-skip / int-nonmonotonic-poll: more than one index apart / not forward.
- int-send-skip (allowed: another producer wrote between) / int-nonmonotonic-send.
Positions that are unknown (a value never seen in the log) are not compared.

A nonmonotonic-poll or nonmonotonic-send between operations is an expected consequence,
not an anomaly, when the previous position was a write whose loss the configuration allows
(`LossRules.truncated_positions`), or when an allowed unclean election, or a power loss
the flush policy allows to lose writes, that lost acknowledged writes of the key came
between the two operations: the log was truncated and its offsets reused (a consumer past
the new end resets, a producer lands lower).

All are found per key, in the per-key pass (`checkers.key_pass`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from checkers.checker import CheckContext
from checkers.columns import integer_values, isin
from checkers.key_findings import FindingRow, key_finding, rows_of
from checkers.key_log import KeyLog
from checkers.losses import KeyLosses
from checkers.results import CheckerReport

CHECKER = "order"
ANOMALIES = (
    "poll-skip",
    "nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "nonmonotonic-send",
    "int-send-skip",
    "int-nonmonotonic-send",
)
ALLOWED = frozenset({"int-send-skip"})
COUNTED = ["ok", "info"]
"""The completions of the send operations that a later operation's first send follows."""


def _resets(log: KeyLog, processes: Any) -> tuple[np.ndarray, np.ndarray]:
    """(process_id, index) where an `ok`/`info` assign/subscribe of one of `processes`
    dropped the key (its keys do not hold it, or are not known), as two arrays."""
    changed = log.shared.assignment_column("process_id")
    if len(changed) == 0:
        return changed, log.shared.assignment_column("index")
    mine = isin(changed, np.asarray(processes))
    dropped = mine & ~log.shared.holds(log.key)
    return changed[dropped], log.shared.assignment_column("index")[dropped]


def _floats(values: Any, missing: float) -> np.ndarray:
    """`values` (a Series or an array) as floats, `missing` for null, as pandas'
    `to_numpy(dtype=float, na_value=missing)` makes them."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        out = values.astype(np.float64)
        out[np.isnan(out)] = missing
        return out
    floats: np.ndarray
    if isinstance(values, pd.arrays.IntegerArray):
        floats = values.to_numpy(dtype=np.float64, na_value=missing)
    else:
        floats = pd.Series(values).to_numpy(dtype=np.float64, na_value=missing)
    return floats


def _preceding(
    rows: Mapping[str, Any], counted: np.ndarray, resets: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of `rows` (process_id, index, mop_index), as positions in `rows` (-1: none):
    `prev`, the row before it in its process's history where that is of the same operation
    (`inner`); else `prev_counted`, the last `counted` row before it where no reset came
    after that one (`follows`)."""
    size = len(rows["index"])
    reset_process, reset_index = resets
    process = np.concatenate((np.asarray(rows["process_id"], dtype=np.int64), reset_process))
    index = np.concatenate((np.asarray(rows["index"], dtype=np.int64), reset_index))
    # a reset sorts before the micro-operations of an operation at its index
    mop = np.concatenate((_floats(rows["mop_index"], -np.inf), np.full(len(reset_index), -np.inf)))
    if len(mop) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort((mop, index, process))  # stable: rows before resets where tied
    process, index = process[order], index[order]
    row = np.concatenate((np.arange(size), np.full(len(reset_index), -1)))[order]
    is_reset = row < 0
    at = np.arange(len(row))
    opens = np.concatenate(([True], process[1:] != process[:-1]))
    group_start = np.maximum.accumulate(np.where(opens, at, 0))

    def last_before(mask: np.ndarray) -> np.ndarray:
        latest = np.maximum.accumulate(np.where(mask, at, -1))
        before = np.concatenate(([-1], latest[:-1]))
        return np.where(before >= group_start, before, -1)

    prev = np.where(at > group_start, at - 1, -1)
    inner = (prev >= 0) & ~is_reset[prev] & (index[prev] == index)
    counted_at = last_before(
        np.concatenate((counted, np.zeros(len(reset_index), dtype=bool)))[order]
    )
    # In history order, so a reset before the counted row came before its operation.
    follows = ~inner & (counted_at >= 0) & (last_before(is_reset) < counted_at)
    prev_row = np.full(size, -1)
    prev_counted = np.full(size, -1)
    mine = ~is_reset
    prev_row[row[mine]] = np.where(inner, row[prev], -1)[mine]
    prev_counted[row[mine]] = np.where(follows, row[counted_at], -1)[mine]
    return prev_row, prev_counted


STEP_COLUMNS = {
    "process_id": np.int64,
    "index": np.int64,
    "status": object,
    "inner": bool,
    "before_index": np.int64,
    "before_value": object,
    "before_offset": "Int64",
    "offset": "Int64",
    "value": object,
    "pos": "Int64",
    "prev_pos": "Int64",
    "delta": np.int64,
}
"""The columns of `_uneven_steps`, as an empty frame has them."""


NO_STEPS = pd.DataFrame({name: pd.Series(dtype=kind) for name, kind in STEP_COLUMNS.items()})
"""`_uneven_steps` without a step, made once (most keys have none)."""


def _no_steps() -> pd.DataFrame:
    """`_uneven_steps` without a step: a copy of `NO_STEPS`."""
    return NO_STEPS.copy()


def _uneven(
    log: KeyLog,
    positions: Any,
    earlier: np.ndarray,
    later: np.ndarray,
    inner: np.ndarray,
    skips_between: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Which steps from `earlier` to `later` (positions into `positions`) `_uneven_steps`
    keeps, and every step's `delta` in dense index."""
    dense = log.dense_positions(positions)
    delta = dense[later] - dense[earlier]
    uneven = (dense[earlier] >= 0) & (dense[later] >= 0) & (delta != 1)
    if not skips_between:
        uneven &= inner | (delta < 1)
    return uneven, delta


def _uneven_steps(
    log: KeyLog,
    ops: pd.DataFrame,
    earlier: np.ndarray,
    later: np.ndarray,
    inner: np.ndarray,
    *,
    status: str = "status",
    pos: str = "pos",
    skips_between: bool = True,
) -> pd.DataFrame:
    """The steps from row `earlier` to row `later` of `ops` (process_id, index, `status`,
    offset, value, and `pos`, the position) that are not one index forward, with `delta`
    in dense index; steps where either position is unknown are left out, and, without
    `skips_between`, skips forward between operations (not `inner`). Most keys have none
    left: their rows are not picked out at all."""
    uneven, delta = _uneven(log, ops[pos], earlier, later, inner, skips_between)
    if not uneven.any():
        return _no_steps()
    earlier, later = earlier[uneven], later[uneven]
    before = ops.iloc[earlier].reset_index(drop=True)
    after = ops.iloc[later].reset_index(drop=True)
    return pd.DataFrame(
        {
            "process_id": after["process_id"],
            "index": after["index"],
            "status": after[status],
            "inner": inner[uneven],
            "before_index": before["index"],
            "before_value": before["value"],
            "before_offset": before["offset"],
            "offset": after["offset"],
            "value": after["value"],
            "pos": after[pos],
            "prev_pos": before[pos],
            "delta": delta[uneven].astype(np.int64),
        }
    )


def read_steps(log: KeyLog) -> pd.DataFrame:
    """Every step of a reader that is not one index forward: between neighbouring records of
    a poll, or into a poll's first record from the record before it in the same operation
    (`inner`) or from the last record of the process's previous `ok` read of the key
    (`follows`); `delta` in dense index, `before_*` the earlier record."""
    steps = _read_steps(log)
    return _no_steps() if steps is None else steps


def _read_steps(log: KeyLog) -> pd.DataFrame | None:
    """`read_steps`, None where there is none (most keys): found on the log's columns,
    the frame of the reads made only for a step."""
    reads = log.columns["reads"]
    if reads.rows == 0:
        return None
    index = reads["index"]
    mop = reads["mop_index"]
    offset = reads["offset"]
    opens = np.concatenate(([True], (index[1:] != index[:-1]) | (mop[1:] != mop[:-1])))
    inside = np.flatnonzero(~opens & (offset - np.concatenate((offset[:1], offset[:-1])) != 1))
    first = np.flatnonzero(opens)
    last = np.concatenate((first[1:], [reads.rows])) - 1
    polls = {name: reads[name][first] for name in ("process_id", "index", "mop_index", "type")}
    prev, prev_counted = _preceding(
        polls, np.asarray(polls["type"] == "ok"), _resets(log, polls["process_id"])
    )
    origin = np.where(prev >= 0, prev, prev_counted)
    into = np.flatnonzero(origin >= 0)
    steps = (
        np.concatenate((inside - 1, last[origin[into]])),
        np.concatenate((inside, first[into])),
        np.concatenate((np.ones(len(inside), dtype=bool), prev[into] >= 0)),
    )
    # A read's status is its type, its position its offset.
    if not _uneven(log, offset, *steps, True)[0].any():
        return None
    return _uneven_steps(log, log.reads, *steps, status="type", pos="offset")


def send_steps(log: KeyLog, *, skips_between: bool = True) -> pd.DataFrame:
    """Every completed send that is not one index after the send before it in its operation
    (`inner`) or, for an `ok`/`info` operation's first send to a key, after the last send of
    the process's previous such operation (`follows`); `delta` in dense index where both
    positions are known. A send's position is its value's first offset in the log. Without
    `skips_between`, skips forward between operations are left out."""
    steps = _send_steps(log, skips_between)
    return _no_steps() if steps is None else steps


def _send_steps(log: KeyLog, skips_between: bool) -> pd.DataFrame | None:
    """`send_steps`, None where there is none (most keys)."""
    columns = log.columns["located_writes"]
    complete_index = columns["complete_index"]
    completed = ~np.asarray(pd.isna(complete_index), dtype=bool)
    # Who sent what when, on arrays; the frame of the sends only where a step is kept.
    sends = {
        "process_id": np.asarray(columns["process_id"])[completed],
        "index": integer_values(complete_index)[completed],
        "mop_index": np.asarray(columns["mop_index"])[completed],
    }
    status = np.asarray(columns["status"])[completed]
    counted = np.zeros(len(status), dtype=bool)
    for name in COUNTED:
        counted |= status == name
    prev, prev_counted = _preceding(sends, counted, _resets(log, sends["process_id"]))
    origin = np.where(prev >= 0, prev, np.where(counted, prev_counted, -1))
    into = np.flatnonzero(origin >= 0)
    steps = (origin[into], into, prev[into] >= 0)
    first_offset = _floats(columns["first_offset"], np.nan)[completed]
    if not _uneven(log, first_offset, *steps, skips_between)[0].any():
        return None
    writes = log.located_writes
    sent = writes[completed]
    ops = pd.DataFrame(
        {
            "process_id": sent["process_id"],
            "index": sent["complete_index"].astype(np.int64),
            "mop_index": sent["mop_index"],
            "status": sent["status"],
            "offset": sent["offset"],
            "value": sent["value"],
            "pos": sent["first_offset"],
        }
    ).reset_index(drop=True)
    return _uneven_steps(log, ops, *steps, skips_between=skips_between)


def _truncated_positions(log: KeyLog, losses: KeyLosses) -> pd.Series:
    """`LossRules.truncated_positions` on one key: value -> reason."""
    writes = log.writes
    unread = losses.with_acks(writes[writes["committed"] & ~writes["was_read"]])
    lossy = unread[unread["effective_acks"].isin([0, 1]).fillna(False).to_numpy(dtype=bool)]
    acks = lossy["effective_acks"].astype("string")
    by_acks = pd.Series(
        ("the log lost the previous position (sent with acks=" + acks + ")").to_numpy(object),
        index=lossy["value"].to_numpy(),
    )
    by_window = pd.Series(
        {
            value: "the log lost the previous position in the unclean-loss window of the "
            f"leader election at index {election}"
            for value, election in losses.windows.items()
        },
        dtype=object,
    )
    by_power = pd.Series(
        {
            value: f"the log lost the previous position: {reason}"
            for value, reason in losses.power_reasons.items()
        },
        dtype=object,
    )
    reasons = pd.concat([by_acks, by_window, by_power])
    return reasons[~reasons.index.duplicated()]


def _expected_reasons(steps: pd.DataFrame, log: KeyLog, losses: KeyLosses) -> pd.Series:
    """Why a step back between operations is expected (null: it is not): it follows a
    position the log lost, or crosses an allowed unclean election that lost data."""
    back = (~steps["inner"] & (steps["delta"] < 1)).to_numpy(dtype=bool)
    reasons = pd.Series(None, index=steps.index, dtype=object)
    if not back.any():
        return reasons
    reasons[back] = steps["before_value"][back].map(_truncated_positions(log, losses))
    elections = np.array(sorted(set(losses.windows.values())), dtype=np.int64)
    crossing = (
        back[:, None]
        & (steps["before_index"].to_numpy(dtype=np.int64)[:, None] < elections)
        & (steps["index"].to_numpy(dtype=np.int64)[:, None] > elections)
    )
    for at in np.flatnonzero(reasons.isna().to_numpy() & crossing.any(axis=1)):
        election = elections[crossing[at].argmax()]
        reasons.iloc[at] = (
            f"the unclean leader election at index {election} truncated the log between the "
            "two operations"
        )
    cuts = np.array(sorted(set(losses.power_indexes.values())), dtype=np.int64)
    crossing = (
        back[:, None]
        & (steps["before_index"].to_numpy(dtype=np.int64)[:, None] < cuts)
        & (steps["index"].to_numpy(dtype=np.int64)[:, None] > cuts)
    )
    for at in np.flatnonzero(reasons.isna().to_numpy() & crossing.any(axis=1)):
        cut = cuts[crossing[at].argmax()]
        reasons.iloc[at] = (
            f"the power loss at index {cut} took acknowledged writes the flush policy allows "
            "to lose, truncating the log between the two operations"
        )
    return reasons


def _with_detail(steps: pd.DataFrame, log: KeyLog, losses: KeyLosses) -> pd.DataFrame:
    """`steps` with the columns of their detail (`_detail`), `expected` and
    `expected_reason`."""
    if steps.empty:  # no finding: nothing to describe
        return steps
    inner = steps["inner"].to_numpy(dtype=bool)
    steps = steps.assign(
        key=log.key,
        ops=[
            None if within else [before, index]
            for within, before, index in zip(
                inner, steps["before_index"], steps["index"], strict=True
            )
        ],
        op=steps["index"].astype("Int64").where(inner),
        shown_status=steps["status"].where(inner, None),
        values=[list(pair) for pair in zip(steps["before_value"], steps["value"], strict=True)],
        offsets=[list(pair) for pair in zip(steps["before_offset"], steps["offset"], strict=True)],
        expected_reason=_expected_reasons(steps, log, losses),
    )
    return steps.assign(expected=steps["expected_reason"].notna())


def _detail(status_field: str) -> list[tuple[str, str]]:
    """Between operations: ops, values, offsets of the two; inside one: the op and the pair."""
    return [
        ("key", "key"),
        ("process", "process_id"),
        ("ops", "ops"),
        ("op", "op"),
        (status_field, "shown_status"),
        ("values", "values"),
        ("offsets", "offsets"),
        ("delta", "delta"),
    ]


def check_order_key(log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
    """The findings of this checker on one key (the per-key pass); a kind of step without
    any (most keys) costs nothing more."""
    found: list[FindingRow] = []
    steps = _read_steps(log)
    reads = None if steps is None else _with_detail(steps, log, losses)
    if reads is not None and not reads.empty:
        inner, delta = reads["inner"], reads["delta"]
        reads["skipped"] = (delta - 1).astype("Int64").where(~inner & (delta > 1))
        found += rows_of(
            CHECKER,
            {
                "int-poll-skip": inner & (delta > 1),
                "int-nonmonotonic-poll": inner & (delta < 1),
                "poll-skip": ~inner & (delta > 1),
                "nonmonotonic-poll": ~inner & (delta < 1),
            },
            reads,
            order="index",
            detail=[*_detail("type"), ("skipped", "skipped")],
            expected="expected",
        )
    # A skip forward between two operations is no anomaly (other producers wrote between):
    # most of a long history's steps, left out before their frame is built.
    steps = _send_steps(log, skips_between=False)
    if steps is not None and not steps.empty:
        sends = _with_detail(steps.reset_index(drop=True), log, losses)
        send_inner, send_delta = sends["inner"], sends["delta"]
        found += rows_of(
            CHECKER,
            {
                "int-send-skip": send_inner & (send_delta > 1),
                "int-nonmonotonic-send": send_inner & (send_delta < 1),
                "nonmonotonic-send": ~send_inner & (send_delta < 1),
            },
            sends,
            order="index",
            detail=_detail("status"),
            expected="expected",
        )
    return found


class OrderChecker:
    """The `Checker` of this module, a per-key check."""

    name = CHECKER
    anomalies = ANOMALIES

    def check_key(self, log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
        return check_order_key(log, losses)

    def check(self, context: CheckContext) -> CheckerReport:
        finding = key_finding(
            context.key_findings, CHECKER, ANOMALIES, json_fields=("values",), allowed=ALLOWED
        )
        return CheckerReport(self.name, [finding])
