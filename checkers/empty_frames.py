"""Frames made from an empty frame, made once for each kind of empty frame.

Most keys of a long history find nothing, yet building the empty frame of a finding (its
columns and dtypes) costs the per-key pass about as much as building a full one: a
millisecond or so, several times a key. What a function makes of an empty frame depends
only on the frame's kind (its columns, dtypes and index) and the function, so it is made
once and each key gets a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import pandas as pd

_MADE: dict[tuple[Any, ...], pd.DataFrame] = {}


def kind_of(frame: pd.DataFrame) -> tuple[Any, ...]:
    """What an empty `frame` is: its columns, their dtypes and its index."""
    return (
        tuple(frame.columns),
        tuple(map(str, frame.dtypes)),
        repr(frame.index),
        frame.index.name,
    )


def made_once(
    purpose: Hashable, frame: pd.DataFrame, make: Callable[[pd.DataFrame], pd.DataFrame]
) -> pd.DataFrame:
    """`make(frame)` of the empty `frame`: a copy of the frame `make` made of the first empty
    frame of its kind (`kind_of`) for `purpose`, which must name everything else `make`
    depends on."""
    if not frame.empty:
        raise ValueError("made_once makes frames of empty frames only")
    kind = (purpose, *kind_of(frame))
    made = _MADE.get(kind)
    if made is None:
        made = _MADE[kind] = make(frame)
    return made.copy()
