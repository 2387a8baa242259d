"""One key's log in memory: what the history says about it, as columns.

The per-key pass (`checkers.key_pass`) brings the micro-operations of each key together
with one shuffle and builds a `KeyLog` from them; the checkers' per-key functions read it.
Every definition is that of `checkers.evidence`:

- reads: every record returned by a completed poll (any completion type), with its offset;
- writes: one row per send micro-op, with its operation's completion (`status` ok, fail or
  info; a send never completed counts as info, `pending`) and the offset if known;
- committed: `ok`, or `info` with one of its operation's sent values read by an `ok`
  operation (Jepsen's `must-have-committed?`): read in this key, or, for an operation
  that sent to several keys, in another (`op_seen` of `SharedFacts.told`, from
  `SharedFacts.seen`);
- contents: distinct (offset, value) of the reads and the committed writes with an offset;
  its distinct offsets, numbered from 0, are the dense index (`checkers.dense`).

The pass hands each key's rows with the columns of `INPUT_COLUMNS`, the micro-operation's
own (see `histories.parquet_schema`); the key's `ok` and `info` commits come as rows too (`f`
"commit", `offset` the committed offset). What no key knows alone comes as `SharedFacts`,
among it what the rows of an operation that did not complete `ok` must know of its
completion (`SharedFacts.told`, looked up by `invoke_index`).

Each of the log's frames is kept as `Columns` (`KeyLog.columns`, `checkers.columns`): the
checks of most keys find nothing on a few arrays and never make the pandas frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from checkers.columns import Columns, integer_values, isin

INPUT_COLUMNS = (
    "index",
    "invoke_index",
    "time",
    "process_id",
    "type",
    "op_f",
    "final",
    "acks",
    "mop_index",
    "f",
    "key",
    "value",
    "offset",
    "poll_seq",
)
"""The columns the pass gives each key: the micro-operation's own."""
LOG_ENDS = "log-ends"
"""The final read's question of where every log ends: `ok` with `{key: end}`
(docs/history.md; `SharedFacts.log_ends`)."""


@dataclass(frozen=True)
class ReplicationEvent:
    """A SUT `leader-election`, `isr-change`, `truncation` or `log-recovery` of one key (a
    truncation has `from_offset` and `to_offset`: the replica's log end before and after
    it, and the rule that chose the point, `reason`; a log recovery `to_offset`, the log end
    after loading, and its `reason`, the problem it found; a leader's ISR change what the
    leader knew when it decided: `previous_isr`, `high_watermark` and `log_end_offsets` by
    broker). `broker` is the event's writer (the replica that truncated or recovered, the
    controller that elected), `node` the node whose event log held it."""

    index: int
    time: int
    f: str
    leader: int | None
    leader_epoch: int | None
    isr: tuple[int, ...] | None
    previous_leader: int | None
    unclean: bool
    from_offset: int | None = None
    to_offset: int | None = None
    previous_isr: tuple[int, ...] | None = None
    high_watermark: int | None = None
    log_end_offsets: Mapping[int, int] | None = None
    broker: int | None = None
    """The broker that logged the event (for a truncation, the replica that truncated)."""
    reason: str | None = None
    node: str | None = None
    zk_version: int | None = None
    """The version of the partition state an election or ISR change wrote (ZooKeeper's)."""
    previous_zk_version: int | None = None
    """The version of the partition state an election was made from."""
    elr: tuple[int, ...] | None = None
    """The eligible leader replicas (KIP-966) an election or ISR change wrote: replicas out
    of the ISR that hold everything committed, which a clean election may pick."""
    previous_elr: tuple[int, ...] | None = None
    """The eligible leader replicas of the partition state an election was made from."""


@dataclass(frozen=True)
class SharedFacts:
    """What the pass tells every key: `assignments`, every
    `ok` or `info` assign/subscribe (process_id, index, invoke_index, keys: null when
    unknown, positions: the offsets the consumer said it starts each key at, parallel to
    keys, null when not said), in history order; `members`, the processes with an `ok` subscribe or a completed commit
    (a consumer group's); `commits`, how many `ok` commits the history holds; `seen`, the
    `invoke_index` of the `info` (or never completed) send operations that sent to more
    than one key and one of whose values an `ok` poll read; `told`,
    what a key's rows must be told of their operation (`TOLD`), one row per operation that
    did not complete `ok` or had an error, sorted by `invoke_index` (None: too many to
    send with the pass's function, they come as columns of the key's rows instead);
    `log_ends`, per key and final-read process, the end of the key's log (the offset after
    its last record) as that process's last `ok` `log-ends` operation (`final: true`)
    recorded it (none in histories written before the final read recorded them)."""

    assignments: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(
            columns=["process_id", "index", "invoke_index", "keys", "positions"]
        )
    )
    members: Set[int] = frozenset()
    commits: int = 0
    told: pd.DataFrame | None = field(default_factory=lambda: _no_told())
    seen: Set[int] = frozenset()
    log_ends: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    def holding(self) -> Mapping[str, np.ndarray]:
        """Per key, the positions in `assignments` of the assigns/subscribes whose keys
        hold it, in order: worked out once for every key, not searched for on each (kept
        on the instance; not a `functools.cached_property`, whose lock the pass's function
        could not be pickled with)."""
        known: Mapping[str, np.ndarray] | None = self.__dict__.get("_holding")
        if known is None:
            known = self._holding_of_keys()
            object.__setattr__(self, "_holding", known)
        return known

    def _holding_of_keys(self) -> dict[str, np.ndarray]:
        found: dict[str, list[int]] = {}
        for at, keys in enumerate(self.assignments["keys"]):
            if keys is None or isinstance(keys, float):  # unknown keys hold no key
                continue
            for key in dict.fromkeys(keys):
                if isinstance(key, str):
                    found.setdefault(key, []).append(at)
        return {key: np.array(at, dtype=np.int64) for key, at in found.items()}

    def rebalanced_since(self) -> np.ndarray:
        """Per row of `assignments`, where a group member's rebalance may have begun: for a
        row right after the same process's assignment of no keys (everything revoked: the
        eager rebalance as docs/history.md writes it), the completion index of the
        process's last assignment of some keys before that, else of its first row (its
        subscribe); -1 for every other row. A member learns of a rebalance inside a poll
        and writes it after, so its invocation says too late when it began. Kept on the
        instance, as `holding`."""
        known: np.ndarray | None = self.__dict__.get("_rebalanced_since")
        if known is None:
            known = np.full(len(self.assignments), -1, dtype=np.int64)
            first: dict[int, int] = {}
            given: dict[int, int] = {}
            revoked: set[int] = set()
            processes = self.assignments["process_id"].to_numpy()
            indexes = self.assignments["index"].to_numpy(dtype=np.int64)
            for at, (process, index, keys) in enumerate(
                zip(processes, indexes, self.assignments["keys"], strict=True)
            ):
                some = keys is not None and not isinstance(keys, float) and len(keys) > 0
                if process in revoked:
                    known[at] = given.get(process, first[process])
                first.setdefault(process, int(index))
                if some:
                    given[process] = int(index)
                    revoked.discard(process)
                elif keys is not None and not isinstance(keys, float):
                    revoked.add(process)
            object.__setattr__(self, "_rebalanced_since", known)
        return known

    def assignment_column(self, name: str) -> np.ndarray:
        """The column `name` of `assignments` as a numpy array, worked out once (kept on the
        instance, as `holding`)."""
        known: dict[str, np.ndarray] = self.__dict__.setdefault("_assignment_columns", {})
        if name not in known:
            known[name] = self.assignments[name].to_numpy()
        return known[name]

    def told_columns(self) -> Mapping[str, np.ndarray]:
        """`told`'s columns as numpy arrays (`told_columns`), worked out once (kept on the
        instance, as `holding`); `told` must be given."""
        known: Mapping[str, np.ndarray] | None = self.__dict__.get("_told_columns")
        if known is None:
            assert self.told is not None
            known = told_columns(self.told)
            object.__setattr__(self, "_told_columns", known)
        return known

    def holds(self, key: str) -> np.ndarray:
        """Whether each of `assignments` holds `key` (`holding`), as a mask."""
        mask = np.zeros(len(self.assignments), dtype=bool)
        mask[self.holding().get(key, np.zeros(0, dtype=np.int64))] = True
        return mask


TOLD = {
    "invoke_index": np.int64,
    "unsettled": bool,
    "op_type": object,
    "op_complete_index": "Int64",
    "op_complete_time": "Int64",
    "error": object,
    "op_seen": bool,
}
"""`SharedFacts.told`'s columns: the operation's `invoke_index`; whether it is a send that
did not complete `ok` (`unsettled`), and then its completion's type, index and time (null:
it never completed); its completion's `error`; and, for an indeterminate send that sent to
several keys, whether another key's `ok` poll read one of its values (`op_seen`: in
`SharedFacts.seen`)."""


def told_columns(told: pd.DataFrame) -> dict[str, np.ndarray]:
    """The columns of `told` (`TOLD`) as numpy arrays; each of pandas' nullable integers
    as its integers (0 for null) and, suffixed `_null`, its mask of null."""
    out: dict[str, np.ndarray] = {}
    for name in TOLD:
        column = told[name]
        if TOLD[name] == "Int64":
            out[name] = column.to_numpy(dtype=np.int64, na_value=0)
            out[f"{name}_null"] = column.isna().to_numpy()
        else:
            out[name] = column.to_numpy()
    out["invoke_index"] = out["invoke_index"].astype(np.int64)
    return out


def _no_told() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series([], dtype=kind) for name, kind in TOLD.items()})


def told_frame(table: pa.Table) -> pd.DataFrame:
    """`SharedFacts.told` from an Arrow table with `TOLD`'s columns, any number of rows an
    operation: one an operation, sorted by `invoke_index`."""
    # Integers as pandas' nullable integers: a time in nanoseconds does not fit a float.
    frame = table.select(list(TOLD)).to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    return (
        frame.astype(TOLD)
        .drop_duplicates("invoke_index")
        .sort_values("invoke_index", ignore_index=True)
    )


READ_COLUMNS = (
    "offset",
    "value",
    "type",
    "index",
    "invoke_index",
    "process_id",
    "mop_index",
    "poll_seq",
    "final",
    "time",
)
"""`KeyLog.reads`' columns."""


def _int(series: pd.Series) -> pd.Series:
    return series.astype("Int64")


def _integers(values: Any) -> Any:
    """`values` (an array) as pandas' nullable integers, as `_int` makes them: straight
    from numpy's integers, or its floats of whole numbers with NaN for null."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        return pd.arrays.IntegerArray(values.astype(np.int64), np.zeros(len(values), dtype=bool))
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        missing = np.isnan(values)
        whole = np.where(missing, 0.0, values)
        if (whole == np.trunc(whole)).all() and (np.abs(whole) < 2.0**53).all():
            return pd.arrays.IntegerArray(whole.astype(np.int64), missing)
    return _int(pd.Series(values)).array


def _integer_parts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """`values` as `_integers` makes them, as the integers and the mask of null of pandas'
    nullable integers (0 under the mask); None where `_integers` would convert by pandas."""
    if values.dtype.kind in "iu":
        return values.astype(np.int64), np.zeros(len(values), dtype=bool)
    if values.dtype.kind == "f":
        missing = np.isnan(values)
        whole = np.where(missing, 0.0, values)
        if (whole == np.trunc(whole)).all() and (np.abs(whole) < 2.0**53).all():
            return whole.astype(np.int64), missing
    return None


def _joined_integers(
    first: np.ndarray | tuple[np.ndarray, np.ndarray],
    then: np.ndarray | tuple[np.ndarray, np.ndarray],
) -> Any:
    """Two parts of a column of integers as one of pandas' nullable integers, as `_joined`
    joins their `_integers`: each part an array, or already integers and their mask."""
    parts = [part if isinstance(part, tuple) else _integer_parts(part) for part in (first, then)]
    if parts[0] is None or parts[1] is None:
        return _joined(
            *(
                pd.arrays.IntegerArray(*part) if isinstance(part, tuple) else _integers(part)
                for part in (first, then)
            )
        )
    return pd.arrays.IntegerArray(
        np.concatenate([parts[0][0], parts[1][0]]), np.concatenate([parts[0][1], parts[1][1]])
    )


def _first_rows(groups: np.ndarray) -> np.ndarray:
    """The position of each group's first row, groups numbered from 0 in order of
    appearance: where the greatest number so far grows."""
    if len(groups) == 0 or groups[0] != 0:
        first: np.ndarray = np.unique(groups, return_index=True)[1]
        return first
    grows = np.empty(len(groups), dtype=bool)
    grows[0] = True
    running = np.maximum.accumulate(groups)
    np.not_equal(running[1:], running[:-1], out=grows[1:])
    return np.flatnonzero(grows)


def _reduced(ufunc: np.ufunc, groups: np.ndarray, first: np.ndarray, column: Any) -> np.ndarray:
    """`ufunc` (np.minimum or np.maximum) of `column` (a Series or an array) per group (the
    groups' `first` rows, `_first_rows`), nulls skipped as pandas skips them; integers stay
    integers (no group of them can be all null)."""
    data: np.ndarray = column if isinstance(column, np.ndarray) else column.to_numpy()
    count = len(first)
    if data.dtype.kind in "iu":
        out: np.ndarray = data[first]
        ufunc.at(out, groups, data)
        return out
    out = np.full(count, np.nan)
    # fmin and fmax keep the number where one side is NaN: a group all NaN stays NaN
    (np.fmin if ufunc is np.minimum else np.fmax).at(out, groups, data.astype(np.float64))
    return out


def _ok_aggregates(
    groups: np.ndarray, first: np.ndarray, ok: np.ndarray, index: Any, time: Any
) -> dict[str, np.ndarray]:
    """`reads` (ok rows), `first_reader` (least ok index) and `last_read_time` (greatest ok
    time) per group (their `first` rows): floats with NaN where some row is not ok, as
    pandas' `where` makes."""
    count = len(first)
    if ok.all():
        return {
            "reads": np.bincount(groups, minlength=count).astype(np.int64),
            "first_reader": _reduced(np.minimum, groups, first, index),
            "last_read_time": _reduced(np.maximum, groups, first, time),
        }
    return {
        "reads": np.bincount(groups, ok, minlength=count).astype(np.int64),
        "first_reader": _reduced(np.minimum, groups, first, pd.Series(index).where(ok)),
        "last_read_time": _reduced(np.maximum, groups, first, pd.Series(time).where(ok)),
    }


def _left_joined(left: pd.DataFrame, right: pd.DataFrame, on: list[str]) -> pd.DataFrame:
    """`left.merge(right, on=on, how="left")`, by one lookup of `left`'s keys in `right`'s:
    a merge's fixed cost is a key's own several times over. Only where `right`'s keys are
    unique and known and its other columns numpy's numbers or objects (an unmatched row then
    holds NaN, as the merge has it, integers turning floats); anything else is merged."""
    added = [name for name in right.columns if name not in on]
    at = None
    if (
        len(left) > 0
        and len(right) > 0
        and not set(added) & set(left.columns)
        and all(
            isinstance(right[name].dtype, np.dtype) and right[name].dtype.kind in "iufO"
            for name in added
        )
        and all(left[name].dtype == right[name].dtype for name in on)
    ):
        at = _positions(left, right, on)
    if at is None:
        return left.merge(right, on=on, how="left")
    unmatched = at < 0
    out = left.reset_index(drop=True)
    for name in added:
        taken = right[name].to_numpy()[at]
        if unmatched.any():
            if taken.dtype.kind != "O":
                taken = taken.astype(np.float64)
            taken[unmatched] = np.nan
        out[name] = taken
    return out


def _settled(writes: pd.DataFrame) -> pd.DataFrame:
    """`writes` (with `seen` and the values' `reads`) with `was_read` and `committed`."""
    writes["was_read"] = writes["reads"].notna()
    info = (writes["status"] == "info").to_numpy()
    # An indeterminate operation was seen when one of its values was read here, or, for
    # one that sent to several keys, in another (`op_seen`).
    read_here = writes.loc[info & writes["was_read"].to_numpy(), "invoke_index"]
    seen = writes.pop("seen").to_numpy() | writes["invoke_index"].isin(read_here).to_numpy()
    writes["committed"] = (writes["status"] == "ok").to_numpy() | (info & seen)
    return writes


def _looked_up(left: Mapping[str, Any], right: Columns, on: str) -> dict[str, Any] | None:
    """The columns `_left_joined` adds to a frame of the columns `left` from `right` on the
    string column `on`, where it would add them by lookup; None where it would merge."""
    wanted = left[on]
    added = [name for name in right if name != on]
    if (
        len(wanted) == 0
        or right.rows == 0
        or set(added) & set(left)
        or not isinstance(wanted, np.ndarray)
        or wanted.dtype.kind != "O"
        or right[on].dtype != wanted.dtype
        or not all(
            isinstance(right[name].dtype, np.dtype) and right[name].dtype.kind in "iufO"
            for name in added
        )
    ):
        return None
    at = _object_positions(right[on], wanted)
    if at is None:
        return None
    return {name: _taken(right[name], at) for name in added}


def _object_positions(known: Any, wanted: Any) -> np.ndarray | None:
    """Where each of `wanted` is in `known` (-1: nowhere), as `pd.Index(known).get_indexer`
    finds them, by a dict (pandas' index costs more than a key's few values); None where
    `known` is not unique or either holds null."""
    if pd.isna(known).any() or pd.isna(wanted).any():
        return None
    listed = np.asarray(known, dtype=object).tolist()
    where = {value: at for at, value in enumerate(listed)}
    if len(where) != len(listed):
        return None
    found = [where.get(value, -1) for value in np.asarray(wanted, dtype=object).tolist()]
    return np.array(found, dtype=np.int64)


_MOP_BITS = 20
"""(invoke_index, mop_index) as one integer: invoke_index * 2**20 + mop_index."""


def _positions(
    left: pd.DataFrame | Columns, right: pd.DataFrame | Columns, on: list[str]
) -> np.ndarray | None:
    """Where each row of `left` has its `on` in `right` (-1: nowhere), or None where this
    lookup cannot stand for a merge's: keys not unique, null, or not one string column or
    two integer ones of a size that packs into one integer."""
    if len(on) == 1 and left[on[0]].dtype.kind == "O":
        return _object_positions(right[on[0]], left[on[0]])
    if len(on) != 2 or not all(left[name].dtype.kind in "iu" for name in on):
        return None
    packed = []
    for frame in (left, right):
        high, low = (frame[name].to_numpy(dtype=np.int64) for name in on)
        if len(low) and (
            low.min() < 0 or low.max() >= 1 << _MOP_BITS or high.min() < 0 or high.max() >= 1 << 42
        ):
            return None
        packed.append((high << _MOP_BITS) | low)
    wanted, known = packed
    order = np.argsort(known, kind="stable")
    ordered = known[order]
    if len(ordered) > 1 and not (ordered[1:] != ordered[:-1]).all():
        return None
    at = np.minimum(np.searchsorted(ordered, wanted), len(ordered) - 1)
    return np.where(ordered[at] == wanted, order[at], -1)


def _packed(high: np.ndarray, low: np.ndarray) -> np.ndarray | None:
    """(invoke_index, mop_index) columns as one integer each (`_MOP_BITS`), or None where
    they are not integers, or floats of whole numbers without NaN (a column with null that
    none of these rows has), of a size that packs."""
    for part in (high, low):
        if part.dtype.kind == "f" and not (part == np.trunc(part)).all():  # NaN or fraction
            return None
        if part.dtype.kind not in "iuf":
            return None
    high, low = high.astype(np.int64), low.astype(np.int64)
    if len(low) and (
        low.min() < 0 or low.max() >= 1 << _MOP_BITS or high.min() < 0 or high.max() >= 1 << 42
    ):
        return None
    packed: np.ndarray = (high << _MOP_BITS) | low
    return packed


def _invoke_times(invokes: np.ndarray, times: np.ndarray, invoke_index: Any) -> pd.array:
    """The time of each of `invoke_index`, from the operations' invocation rows (their
    `invokes` and `times`; null where the key's rows do not hold the invoke)."""
    known, first = np.unique(invokes.astype(np.int64), return_index=True)
    times = times.astype(np.int64)[first]
    wanted = np.asarray(invoke_index, dtype=np.int64)
    if len(known) == 0:
        return pd.array([None] * len(wanted), dtype="Int64")
    at = np.minimum(np.searchsorted(known, wanted), len(known) - 1)
    found = known[at] == wanted
    return pd.arrays.IntegerArray(times[at], ~found)


def _taken(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """`values` at `at`, NaN where `at` is -1, as a left merge's column holds them
    (integers turn floats where any is missing)."""
    taken = values[at] if len(values) else np.zeros(len(at), dtype=values.dtype)
    missing = at < 0
    if missing.any():
        if taken.dtype.kind != "O":
            taken = taken.astype(np.float64)
        taken[missing] = np.nan
    return taken


def _completions(
    rows: Mapping[str, np.ndarray] | pd.DataFrame, sends: np.ndarray, done: np.ndarray
) -> np.ndarray:
    """For each of the rows `sends` (invocations), the position in `done` (completion rows)
    of its first completion, matched on (invoke_index, mop_index); -1: none."""
    keys = ["invoke_index", "mop_index"]
    if len(sends) == 0 or len(done) == 0:
        return np.full(len(sends), -1, dtype=np.int64)
    high, low = (np.asarray(rows[name]) for name in keys)
    wanted, completed = _packed(high[sends], low[sends]), _packed(high[done], low[done])
    if wanted is not None and completed is not None:
        # np.unique's first occurrences are drop_duplicates' kept rows
        known, first = np.unique(completed, return_index=True)
        near = np.minimum(np.searchsorted(known, wanted), len(known) - 1)
        found: np.ndarray = np.where(known[near] == wanted, first[near], -1)
        return found
    left = pd.DataFrame({"invoke_index": high[sends], "mop_index": low[sends]})
    right = pd.DataFrame({"invoke_index": high[done], "mop_index": low[done]})
    right = right.assign(_at=np.arange(len(done))).drop_duplicates(keys)
    at = _positions(left, right, keys)
    if at is not None:
        found = np.where(at >= 0, right["_at"].to_numpy()[at], -1)
        return found
    merged = left.merge(right, on=keys, how="left")["_at"]
    found = merged.to_numpy(dtype=np.float64, na_value=-1).astype(np.int64)
    return found


def _plain_numbers(values: Any) -> bool:
    """Whether `values` are a numpy array of numbers without NaN."""
    return (
        isinstance(values, np.ndarray)
        and values.dtype.kind in "iuf"
        and not (values.dtype.kind == "f" and np.isnan(values).any())
    )


def _joined(first: Any, then: Any) -> Any:
    """Two parts of a column (arrays of one dtype) as one, as `pd.concat` joins them."""
    if isinstance(first, pd.arrays.IntegerArray) and isinstance(then, pd.arrays.IntegerArray):
        return pd.arrays.IntegerArray(
            np.concatenate(
                [first.to_numpy(np.int64, na_value=0), then.to_numpy(np.int64, na_value=0)]
            ),
            np.concatenate([first.isna(), then.isna()]),
        )
    if isinstance(first, pd.api.extensions.ExtensionArray) or isinstance(
        then, pd.api.extensions.ExtensionArray
    ):
        first, then = (
            part.to_numpy() if isinstance(part, pd.arrays.NumpyExtensionArray) else part
            for part in (first, then)
        )
    if isinstance(first, np.ndarray) and isinstance(then, np.ndarray) and first.dtype == then.dtype:
        return np.concatenate([first, then])
    return pd.concat([pd.Series(first), pd.Series(then)], ignore_index=True).array


class KeyLog:
    """The reads, writes and contents of one key, built from its micro-operations: as
    columns (`columns`), and as pandas frames (`writes`, `reads`...) made on first use."""

    def __init__(
        self,
        key: str,
        rows: pa.Table,
        shared: SharedFacts,
        events: Sequence[ReplicationEvent] = (),
    ) -> None:
        self.key = key
        self.shared = shared
        self.events = events
        """The key's leader elections and ISR changes, in history order."""
        self._told: Mapping[str, np.ndarray]
        if shared.told is None:  # the pass joined what the rows are told onto them
            told = told_frame(rows.filter(pc.is_valid(rows.column("unsettled"))))
            self._told = told_columns(told)
            rows = rows.drop_columns([name for name in TOLD if name != "invoke_index"])
        else:
            self._told = shared.told_columns()
        # Each column as `to_pandas` makes the frame's (integers with null as floats with
        # NaN, strings and booleans with null as objects), without the frame: the key is
        # `key`.
        self._compared: dict[tuple[str, str], np.ndarray] = {}
        self._rows: dict[str, np.ndarray] = {
            name: rows.column(name).to_numpy(zero_copy_only=False)
            for name in rows.column_names
            if name != "key"
        }
        # Built at once, in dependency order, as columns (`Columns`): the checks of most
        # keys read a few of them and make no frame.
        self.columns: dict[str, Columns] = {}
        """Each frame of the log (`commits`, `writes`...) as its columns."""
        made = self.columns
        made["commits"] = self._commits()
        made["info_commits"] = self._commits("info")
        made["reads"] = self._reads()
        made["read_records"] = self._read_records()
        made["read_values"] = self._read_values()
        made["writes"] = self._writes()
        made["contents"] = self._contents()
        self.offsets: np.ndarray = self._offsets()
        made["offset_values"] = self._offset_values()
        made["values"] = self._values()
        made["located_writes"] = self._located_writes()
        self.max_read_offset: int | None = self._max_read_offset()
        del self._rows, self._told, self._compared

    @property
    def commits(self) -> pd.DataFrame:
        """The key's `ok` commits: process_id, index, invoke_index, time, committed; in
        history order."""
        return self.columns["commits"].frame

    @property
    def info_commits(self) -> pd.DataFrame:
        """The key's commits completed `info` with their value: they may have landed."""
        return self.columns["info_commits"].frame

    @property
    def reads(self) -> pd.DataFrame:
        """Every record read by a completed poll (`READ_COLUMNS`), in history order."""
        return self.columns["reads"].frame

    @property
    def read_records(self) -> pd.DataFrame:
        """Per (offset, value) read by any completed poll (`_read_records`)."""
        return self.columns["read_records"].frame

    @property
    def read_values(self) -> pd.DataFrame:
        """Per value read by an `ok` operation (`_read_values`)."""
        return self.columns["read_values"].frame

    @property
    def writes(self) -> pd.DataFrame:
        """One row per send micro-op (`_writes`)."""
        return self.columns["writes"].frame

    @property
    def contents(self) -> pd.DataFrame:
        """Distinct (offset, value) of the evidence."""
        return self.columns["contents"].frame

    @property
    def offset_values(self) -> pd.DataFrame:
        """Per offset in the evidence, in order: didx, value_count."""
        return self.columns["offset_values"].frame

    @property
    def values(self) -> pd.DataFrame:
        """Per value in the evidence: first_offset, last_offset, offset_count."""
        return self.columns["values"].frame

    @property
    def located_writes(self) -> pd.DataFrame:
        """The writes with their value's first and last offset (`_located_writes`)."""
        return self.columns["located_writes"].frame

    @property
    def unclean_elections(self) -> list[ReplicationEvent]:
        """The key's unclean leader elections, by time."""
        return sorted(
            (e for e in self.events if e.f == "leader-election" and e.unclean),
            key=lambda e: (e.time, e.index),
        )

    def sightings(self) -> pd.DataFrame:
        """Where each value of the key was seen: (value, offset, time) of every `ok` read and
        every acknowledged send; made once."""
        known: pd.DataFrame | None = self.__dict__.get("_sightings")
        if known is None:
            reads = self.reads
            reads = reads.loc[reads["type"] == "ok", ["value", "offset", "time"]]
            writes = self.located_writes
            acked = writes[(writes["status"] == "ok") & writes["offset"].notna()]
            acked = pd.DataFrame(
                {"value": acked["value"], "offset": acked["offset"], "time": acked["complete_time"]}
            )
            known = pd.concat([reads, acked], ignore_index=True)
            known["offset"] = known["offset"].astype("int64")
            known["time"] = known["time"].astype("int64")
            self.__dict__["_sightings"] = known
        return known

    def last_read_times(self, offsets: np.ndarray, by: np.ndarray) -> np.ndarray:
        """Per pair of `offsets` and `by` (times): when an `ok` read last returned that
        offset at or before that time; `by` itself where none did."""
        reads = self.columns["reads"]
        ok = reads["type"] == "ok"
        read_offsets = reads["offset"][ok].astype(np.int64)
        read_times = reads["time"][ok].astype(np.int64)
        out = np.asarray(by, dtype=np.int64).copy()
        for at, (offset, until) in enumerate(zip(offsets, out, strict=True)):
            seen = read_times[(read_offsets == int(offset)) & (read_times <= until)]
            if len(seen):
                out[at] = int(seen.max())
        return out

    def _is(self, column: str, *values: str) -> np.ndarray:
        """Where `column` (of strings) of the key's rows is one of `values` (each compared
        once a key)."""
        found: np.ndarray = self._equal(column, values[0])
        for value in values[1:]:
            found = found | self._equal(column, value)
        return found

    def _equal(self, column: str, value: str) -> np.ndarray:
        known = self._compared.get((column, value))
        if known is None:
            known = self._compared[column, value] = self._rows[column] == value
        return known

    def _commits(self, *types: str) -> Columns:
        """The key's commits completed with one of `types` (default `ok`): process_id,
        index, invoke_index, time, committed; in history order."""
        rows = self._rows
        mask = self._is("f", "commit") & self._is("type", *(types or ("ok",)))
        names = ("process_id", "index", "invoke_index", "time", "offset")
        picked = {name: rows[name][mask] for name in names}
        if not np.isnan(picked["offset"].astype(np.float64)).any():
            # numpy's stable sort of the index is the frame's, without the frame twice
            at = np.argsort(picked["index"], kind="stable")
            picked["committed"] = picked.pop("offset").astype(np.int64)
            return Columns({name: values[at] for name, values in picked.items()})
        frame = pd.DataFrame(rows)
        commits = frame[mask] if mask.any() else frame.iloc[:0]  # most keys: no commit
        frame = pd.DataFrame(
            {
                "process_id": commits["process_id"],
                "index": commits["index"],
                "invoke_index": commits["invoke_index"],
                "time": commits["time"],
                "committed": commits["offset"].astype(np.int64),
            }
        ).sort_values("index", kind="stable", ignore_index=True)
        return Columns.of(frame)

    def _reads(self) -> Columns:
        """Every record read by a completed poll: offset, value, type, index, invoke_index,
        process_id, mop_index, poll_seq, final, time; in history order."""
        rows = self._rows
        polls = ~self._is("type", "invoke") & self._is("f", "poll") & ~pd.isna(rows["offset"])
        order = ["index", "mop_index", "poll_seq"]
        at = np.flatnonzero(polls)
        keys = [rows[name][at] for name in reversed(order)]
        plain = all(_plain_numbers(key) for key in keys)
        if plain:
            # numpy's stable sort of the keys is the frame's, without making it twice; each
            # column then taken once
            at = at[np.lexsort(keys)]
        picked = {name: rows[name][at] for name in READ_COLUMNS}
        final = picked["final"]
        if final.dtype != bool:  # null: not final
            picked["final"] = np.where(pd.isna(final), False, final).astype(bool)
        picked["offset"] = picked["offset"].astype(np.int64)
        if plain:
            return Columns(picked)
        out = pd.DataFrame(picked)
        return Columns.of(out.sort_values(order, kind="stable").reset_index(drop=True))

    def _read_records(self) -> Columns:
        """Per (offset, value) read by any completed poll: `reads` (by `ok` polls), the first
        such reader and the last such read's time (null: no `ok` read); in order of first
        reading."""
        reads = self.columns["reads"]
        known = ~pd.isna(reads["value"])
        offsets = np.asarray(reads["offset"][known], dtype=np.int64)
        values = np.asarray(reads["value"][known], dtype=object)
        value_codes, distinct = pd.factorize(values)
        groups, _ = pd.factorize(offsets * max(len(distinct), 1) + value_codes)
        first = _first_rows(groups)
        ok = np.asarray(reads["type"][known], dtype=object) == "ok"
        index, time = (reads[name][known] for name in ("index", "time"))
        return Columns(
            {
                "offset": offsets[first],
                "value": values[first],
                **_ok_aggregates(groups, first, ok, index, time),
            }
        )

    def _read_values(self) -> Columns:
        """Per value read by an `ok` operation: reads, first_reader, last_read_time; in order
        of first reading."""
        records = self.columns["read_records"]
        read = records["reads"] > 0
        seen = {name: records[name][read] for name in records}
        values = np.asarray(seen["value"], dtype=object)
        groups, _ = pd.factorize(values)
        first = _first_rows(groups)
        count = len(first)
        return Columns(
            {
                "value": values[first],
                "reads": np.bincount(groups, seen["reads"], minlength=count).astype(np.int64),
                "first_reader": _reduced(np.minimum, groups, first, seen["first_reader"]),
                "last_read_time": _reduced(np.maximum, groups, first, seen["last_read_time"]),
            }
        )

    def _writes(self) -> Columns:
        """One row per send micro-op: value, offset, status, pending, invoke_index,
        complete_index, mop_index, process_id, acks, complete_time, op_f, error,
        invoke_time, reads, last_read_time, first_reader, was_read, committed."""
        # Picked as arrays and made one frame, in the columns' order: the `ok` sends
        # (settled) and then the others' invocations with what they are told (unsettled).
        rows = self._rows
        send = self._is("f", "send")
        ok = send & self._is("type", "ok")
        invoke_index = rows["invoke_index"]
        invoked = self._is("type", "invoke") | (invoke_index == rows["index"])
        sent = np.flatnonzero(send & invoked)
        told = self._told
        at, found = self._told_at(invoke_index[sent])
        unsettled = found.copy()
        unsettled[found] = told["unsettled"][at[found]]
        others, at = sent[unsettled], at[unsettled]
        done = np.flatnonzero(send & self._is("type", "fail", "info"))
        # A send has one completion row at most: its first, where it has any.
        completion = _completions(rows, others, done)
        op_type = told["op_type"][at]
        value = rows["value"]
        done_value = _taken(value[done], completion)
        acks = rows["acks"]
        done_acks = _taken(acks[done], completion)
        count = int(ok.sum())
        made = {
            "value": _joined(
                value[ok], np.where(pd.isna(done_value), value[others], done_value).astype(object)
            ),
            "offset": _joined_integers(
                rows["offset"][ok], _taken(rows["offset"][done], completion)
            ),
            "status": _joined(
                np.full(count, "ok", dtype=object),
                np.where(pd.isna(op_type), "info", op_type).astype(object),
            ),
            "pending": _joined(np.zeros(count, dtype=bool), pd.isna(op_type)),
            "invoke_index": _joined(invoke_index[ok], invoke_index[others]),
            "complete_index": _joined_integers(
                rows["index"][ok],
                (told["op_complete_index"][at], told["op_complete_index_null"][at]),
            ),
            "mop_index": _joined(rows["mop_index"][ok], rows["mop_index"][others]),
            "process_id": _joined(rows["process_id"][ok], rows["process_id"][others]),
            "acks": _joined_integers(
                acks[ok], np.where(pd.isna(done_acks), acks[others], done_acks)
            ),
            "complete_time": _joined_integers(
                rows["time"][ok], (told["op_complete_time"][at], told["op_complete_time_null"][at])
            ),
            "op_f": _joined(rows["op_f"][ok], rows["op_f"][others]),
            "error": _joined(self._errors(invoke_index[ok]), told["error"][at]),
            "seen": _joined(np.zeros(count, dtype=bool), told["op_seen"][at]),
        }
        made["invoke_time"] = _invoke_times(
            invoke_index[sent], rows["time"][sent], made["invoke_index"]
        )
        looked_up = _looked_up(made, self.columns["read_values"], "value")
        if looked_up is None:
            read_values = self.columns["read_values"].frame
            return Columns.of(_settled(_left_joined(pd.DataFrame(made), read_values, ["value"])))
        # As `_settled` does it, on the arrays, the frame made once.
        seen = np.asarray(made.pop("seen"), dtype=bool)
        made.update(looked_up)
        was_read = ~pd.isna(made["reads"])
        status = np.asarray(made["status"])
        info = status == "info"
        read_here = info & was_read
        if read_here.any():
            invoked_by = made["invoke_index"]
            seen = seen | isin(invoked_by, invoked_by[read_here])
        committed = (status == "ok") | (info & seen)
        return Columns({**made, "was_read": was_read, "committed": committed})

    def _errors(self, invoke_index: np.ndarray) -> np.ndarray:
        """The completion's error of each of the operations `invoke_index` (None: none)."""
        at, found = self._told_at(invoke_index)
        errors = np.full(len(found), None, dtype=object)
        errors[found] = self._told["error"][at[found]]
        return errors

    def _told_at(self, invoke_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each of `invoke_index` is in `SharedFacts.told` (its position, and
        whether it is there at all: an operation that completed ok without error is not)."""
        known = self._told["invoke_index"]
        wanted = np.asarray(invoke_index, dtype=np.int64)
        at = np.searchsorted(known, wanted)
        found = at < len(known)
        found[found] = known[at[found]] == wanted[found]
        return at, found

    def _contents(self) -> Columns:
        """Distinct (offset, value) of the evidence: what each offset was seen holding."""
        writes = self.columns["writes"]
        offset = writes["offset"]
        committed = np.asarray(writes["committed"], dtype=bool) & ~pd.isna(offset)
        reads = self.columns["reads"]
        offsets = np.concatenate([np.asarray(reads["offset"]), integer_values(offset)[committed]])
        values = np.concatenate(
            [
                np.asarray(reads["value"], dtype=object),
                np.asarray(writes["value"], dtype=object)[committed],
            ]
        )
        if (
            offsets.dtype == np.int64
            and len(values)
            and np.abs(offsets).max() < 1 << 40
            and not pd.isna(values).any()
        ):
            # drop_duplicates' first occurrences, of the pairs numbered as one integer each
            value_codes, distinct = pd.factorize(values)
            first = _first_rows(pd.factorize(offsets * len(distinct) + value_codes)[0])
            return Columns({"offset": offsets[first], "value": values[first]})
        seen = pd.DataFrame({"offset": offsets, "value": values})
        return Columns.of(seen.drop_duplicates(ignore_index=True))

    def _offsets(self) -> np.ndarray:
        """The distinct offsets of the evidence, sorted: position i has dense index i."""
        return np.unique(np.asarray(self.columns["contents"]["offset"], dtype=np.int64))

    def dense(self, offsets: pd.Series | np.ndarray) -> pd.Series:
        """The dense index of each of `offsets` (null where the evidence has no such offset)."""
        wanted = pd.Series(offsets)
        at = self.dense_positions(wanted)
        return pd.Series(at, index=wanted.index).astype("Int64").where(at >= 0)

    def dense_positions(self, offsets: Any) -> np.ndarray:
        """The dense index of each of `offsets` (a Series or an array) as integers, -1 where
        the evidence has no such offset or the offset is null."""
        known = self.offsets
        if isinstance(offsets, np.ndarray) and offsets.dtype.kind in "iuf":
            wanted = offsets.astype(np.float64)
        elif isinstance(offsets, pd.arrays.IntegerArray):
            wanted = offsets.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            wanted = pd.Series(offsets).to_numpy(dtype=np.float64, na_value=np.nan)
        if len(known) == 0:
            return np.full(len(wanted), -1, dtype=np.int64)
        present = ~np.isnan(wanted)
        filled = np.where(present, wanted, -1).astype(np.int64)
        at = np.searchsorted(known, filled)
        found = present & (at < len(known)) & (known[np.minimum(at, len(known) - 1)] == filled)
        return np.where(found, at, -1)

    def _offset_values(self) -> Columns:
        """Per offset in the evidence, in order: didx, value_count."""
        offsets = self.columns["contents"]["offset"]
        if offsets.dtype == np.int64:  # the groupby's sorted groups and sizes
            known, sizes = np.unique(offsets, return_counts=True)
            return Columns(
                {
                    "offset": known,
                    "value_count": sizes.astype(np.int64),
                    "didx": np.arange(len(known), dtype=np.int64),
                }
            )
        counts = self.contents.groupby("offset", sort=True).size()
        return Columns(
            {
                "offset": counts.index.to_numpy(dtype=np.int64),
                "value_count": counts.to_numpy(),
                "didx": np.arange(len(counts), dtype=np.int64),
            }
        )

    def _values(self) -> Columns:
        """Per value in the evidence: first_offset, last_offset, offset_count."""
        offsets = self.columns["contents"]["offset"]
        values = self.columns["contents"]["value"]
        if offsets.dtype == np.int64 and len(values) and not pd.isna(values).any():
            # the groupby's groups (in order of appearance) as numbers, reduced by numpy
            groups, distinct = pd.factorize(values)
            count = len(distinct)
            first = _first_rows(groups)
            low, high = offsets[first], offsets[first]
            np.minimum.at(low, groups, offsets)
            np.maximum.at(high, groups, offsets)
            return Columns(
                {
                    "value": np.asarray(distinct, dtype=object),
                    "first_offset": low,
                    "last_offset": high,
                    "offset_count": np.bincount(groups, minlength=count).astype(np.int64),
                }
            )
        grouped = self.contents.groupby("value", sort=False)["offset"]
        return Columns.of(
            pd.DataFrame(
                {
                    "first_offset": grouped.min(),
                    "last_offset": grouped.max(),
                    "offset_count": grouped.size(),
                }
            ).reset_index()
        )

    def values_at(self, offsets: pd.Series) -> list[list[str]]:
        """The sorted distinct values seen at each of `offsets` (for samples)."""
        if len(offsets) == 0:  # most keys: no offset holds several values
            return []
        seen = self.contents[self.contents["offset"].isin(offsets)]
        listed = seen.sort_values("value").groupby("offset")["value"].agg(list)
        return [listed.get(offset, []) for offset in offsets]

    def offsets_of(self, values: pd.Series) -> list[list[int]]:
        """The sorted offsets holding each of `values` (for samples)."""
        if len(values) == 0:  # most keys: no value sits at several offsets
            return []
        seen = self.contents[self.contents["value"].isin(values)]
        listed = seen.sort_values("offset").groupby("value")["offset"].agg(list)
        return [listed.get(value, []) for value in values]

    def _located_writes(self) -> Columns:
        """The writes with their value's first and last offset (null: not in the log)."""
        positions = self.columns["values"]
        writes = self.columns["writes"]
        bounds = ("first_offset", "last_offset")
        at = None
        if positions.rows and all(positions[name].dtype == np.int64 for name in bounds):
            at = _positions(writes, positions, ["value"])
        if at is None:
            located = _left_joined(self.writes, self.values[["value", *bounds]], ["value"])
            located["first_offset"] = _int(located["first_offset"])
            located["last_offset"] = _int(located["last_offset"])
            return Columns.of(located)
        # Straight into nullable integers, as the merge's columns would be made.
        return writes.with_columns(
            {name: pd.arrays.IntegerArray(positions[name][at], at < 0) for name in bounds}
        )

    def _max_read_offset(self) -> int | None:
        """The highest offset an `ok` read reached (None: no `ok` read)."""
        reads = self.columns["reads"]
        ok = reads["type"] == "ok"
        return int(reads["offset"][ok].max()) if ok.any() else None
