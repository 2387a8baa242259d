"""A frame's columns as arrays, the pandas frame made only when first asked for.

A key's log (`checkers.key_log.KeyLog`) is a dozen frames, and most keys of a long history
find nothing: their checks read a few columns and stop. Making a pandas frame, and reading
a column of one, costs far more than the work on a key of a hundred rows (issue 34), so the
log keeps its frames as `Columns` and the checks read arrays until they find something.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Set
from typing import Any

import numpy as np
import pandas as pd


def _array(column: Any) -> Any:
    """`column` as an array: numpy's where its dtype is numpy's, else pandas' own array."""
    if type(column) is np.ndarray:  # most columns: nothing to look into
        return column
    if isinstance(column, pd.Series):
        return column.to_numpy() if isinstance(column.dtype, np.dtype) else column.array
    if isinstance(column, pd.arrays.NumpyExtensionArray):
        return column.to_numpy()
    return column


TABLE_SPAN = 1 << 20
"""`isin` looks integers up in a table of flags where they span fewer than this many."""


def isin(values: Any, among: Any) -> np.ndarray:
    """Which of `values` (an array) are among `among`, by hash as pandas' `isin` does (numpy's
    sorts, and compares objects one by one); signed integers among signed integers (a
    key's process ids, say) in a table of flags, and objects without null among objects in
    a set: on a key's few values, a twentieth and a half of pandas' call."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "i":
        wanted = np.asarray(list(among) if isinstance(among, Set) else among)
        if len(values) == 0 or len(wanted) == 0:
            return np.zeros(len(values), dtype=bool)
        if wanted.dtype.kind == "i":
            low = min(int(values.min()), int(wanted.min()))
            span = max(int(values.max()), int(wanted.max())) - low + 1
            if span < TABLE_SPAN:
                table = np.zeros(span, dtype=bool)
                table[wanted - low] = True
                flags: np.ndarray = table[values - low]
                return flags
    if (
        isinstance(values, np.ndarray)
        and values.dtype.kind == "O"
        and isinstance(among, np.ndarray)
        and among.dtype.kind == "O"
        and not (pd.isna(values).any() or pd.isna(among).any())
    ):  # strings (a key's values) in a set
        known = set(among.tolist())
        return np.array([value in known for value in values.tolist()], dtype=bool)
    found: np.ndarray = pd.Series(values, copy=False).isin(among).to_numpy(dtype=bool)
    return found


def integer_values(values: Any) -> np.ndarray:
    """`values` (pandas' nullable integers, or what pandas makes them of) as numpy's
    integers, 0 for null: for picking out those not null without pandas' indexing."""
    if not isinstance(values, pd.arrays.IntegerArray):
        values = pd.array(values, dtype="Int64")
    integers: np.ndarray = values.to_numpy(dtype=np.int64, na_value=0)
    return integers


class Columns(Mapping[str, Any]):
    """Named columns of one length (numpy arrays, or pandas' arrays of its nullable
    dtypes), and the pandas frame of them (`frame`), made once, when first asked for."""

    def __init__(self, arrays: Mapping[str, Any], frame: pd.DataFrame | None = None) -> None:
        self._given = dict(arrays)
        self._arrays = {name: _array(values) for name, values in self._given.items()}
        self._frame = frame

    @classmethod
    def of(cls, frame: pd.DataFrame) -> Columns:
        """The columns of `frame`, which is kept as their frame."""
        return cls({name: frame[name] for name in frame.columns}, frame)

    def __getitem__(self, name: str) -> Any:
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    @property
    def rows(self) -> int:
        """How many rows the columns have."""
        if self._frame is not None:
            return len(self._frame)
        return len(next(iter(self._arrays.values()))) if self._arrays else 0

    @property
    def frame(self) -> pd.DataFrame:
        """The columns as a pandas frame, made on first use and kept."""
        if self._frame is None:
            self._frame = pd.DataFrame(self._given)
        return self._frame

    def with_columns(self, added: Mapping[str, Any]) -> Columns:
        """These columns and `added` (new names, after them)."""
        return Columns({**self._given, **added})
