"""What the consumers had read, over time: their lag per key, and the acknowledged writes no
read had seen yet (Jepsen's Kafka `unseen`).

Both come from `mops.parquet` (one row per send micro-op, and per record a poll returned;
`histories.parquet_schema`), in a few vectorised passes over its columns:

- lag: per key, at every moment, the highest offset acknowledged so far (by `ok` sends)
  minus the highest offset that the latest `ok` poll reading the key read there (-1 before
  any), at least 0: a step function, which grows while writes are acknowledged and nobody
  reads, and jumps when a consumer starts again from an earlier offset. The final read,
  which reads every key from its start, is left out.
- unseen: at each moment, how many values acknowledged (`ok` sends) had not yet been read
  by any `ok` poll (final read included), per key and in all. A value read before its send
  was acknowledged is never unseen; one never read stays unseen to the end.

A value identifies its send by (key, value), as the checkers take it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from histories.parquet_schema import MOPS_SCHEMA
from squall.report.timeline import natural_key

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

COLUMNS = [MOPS_SCHEMA.field(n).name for n in ("index", "time", "type", "f", "final", "key")]
COLUMNS += [MOPS_SCHEMA.field(n).name for n in ("value", "offset")]


@dataclass(frozen=True)
class Series:
    """Points of one line: seconds since the history began, and the values there."""

    time_s: Floats
    values: Ints


@dataclass(frozen=True)
class Consumption:
    """Lag per key, and unseen values per key and in all (step functions, value from each
    point on)."""

    lag: dict[str, Series] = field(default_factory=dict)
    unseen: dict[str, Series] = field(default_factory=dict)
    unseen_total: Series = field(
        default_factory=lambda: Series(np.zeros(0, np.float64), np.zeros(0, np.int64))
    )
    acknowledged: int = 0
    """Distinct values acknowledged (`ok` sends)."""


def read_mops(parquet_dir: Path) -> pa.Table:
    """The columns of `mops.parquet` that consumption needs."""
    return pq.read_table(parquet_dir / "mops.parquet", columns=COLUMNS)


def consumption(mops: pa.Table) -> Consumption:
    """Lag and unseen values of a history's micro-operations (a table with `COLUMNS`)."""
    ok = pc.equal(mops["type"], "ok")
    sends = mops.filter(pc.and_(ok, pc.equal(mops["f"], "send")))
    polls = mops.filter(
        pc.and_(ok, pc.and_(pc.equal(mops["f"], "poll"), pc.is_valid(mops["value"])))
    )
    unseen, total, acknowledged = _unseen(sends, polls)
    return Consumption(_lag(sends, polls), unseen, total, acknowledged)


def _numpy(column: pa.ChunkedArray | pa.Array) -> Ints:
    return np.asarray(column.to_numpy(zero_copy_only=False), np.int64)


def _lag(sends: pa.Table, polls: pa.Table) -> dict[str, Series]:
    acked = sends.filter(pc.is_valid(sends["offset"]))
    read = polls.filter(pc.and_(pc.is_valid(polls["offset"]), pc.invert(_final(polls))))
    # The highest offset each poll read per key, at the poll's time.
    per_poll = read.group_by(["index", "key"], use_threads=False).aggregate(
        [("offset", "max"), ("time", "min")]
    )
    out: dict[str, Series] = {}
    for key in sorted(set(acked["key"].to_pylist()) - {None}, key=natural_key):
        sent = acked.filter(pc.equal(acked["key"], key))
        order = np.argsort(_numpy(sent["time"]), kind="stable")
        sent_at = _numpy(sent["time"])[order]
        highest = np.maximum.accumulate(_numpy(sent["offset"])[order])
        polled = per_poll.filter(pc.equal(per_poll["key"], key))
        order = np.argsort(_numpy(polled["time_min"]), kind="stable")
        read_at = _numpy(polled["time_min"])[order]
        position = _numpy(polled["offset_max"])[order]
        time = np.union1d(sent_at, read_at)
        # Index -1 (nothing yet) picks the -1 appended to each.
        head = np.append(highest, -1)[np.searchsorted(sent_at, time, side="right") - 1]
        reached = np.append(position, -1)[np.searchsorted(read_at, time, side="right") - 1]
        out[key] = Series(time / 1e9, np.maximum(head - reached, 0))
    return out


def _final(table: pa.Table) -> pa.ChunkedArray:
    return pc.fill_null(table["final"], False)


def _unseen(sends: pa.Table, polls: pa.Table) -> tuple[dict[str, Series], Series, int]:
    acked = sends.group_by(["key", "value"], use_threads=False).aggregate([("time", "min")])
    first_read = polls.group_by(["key", "value"], use_threads=False).aggregate([("time", "min")])
    joined = acked.join(
        first_read.rename_columns(["key", "value", "read_min"]),
        keys=["key", "value"],
        join_type="left outer",
        use_threads=False,
    )
    acked_at = _numpy(joined["time_min"])
    read_at = _numpy(pc.fill_null(joined["read_min"], np.iinfo(np.int64).max))
    unseen = read_at > acked_at  # read before the acknowledgement: never unseen
    keys = joined["key"].to_pylist()
    names = sorted({k for k in keys if k is not None}, key=natural_key)
    index = {k: i for i, k in enumerate(names)}
    codes = np.asarray([index.get(k, -1) for k in keys], np.int64)
    # +1 when a value is acknowledged, -1 when it is first read (if it ever is).
    never = read_at == np.iinfo(np.int64).max
    starts, ends = acked_at[unseen], read_at[unseen & ~never]
    time = np.concatenate([starts, ends])
    step = np.concatenate([np.ones(len(starts), np.int64), -np.ones(len(ends), np.int64)])
    code = np.concatenate([codes[unseen], codes[unseen & ~never]])
    order = np.lexsort((step, time))  # at a tie, the read (-1) before the acknowledgement
    time, step, code = time[order], step[order], code[order]
    per_key: dict[str, Series] = {}
    for i, key in enumerate(names):
        mine = code == i
        per_key[key] = Series(time[mine] / 1e9, np.cumsum(step[mine]))
    return per_key, Series(time / 1e9, np.cumsum(step)), joined.num_rows
