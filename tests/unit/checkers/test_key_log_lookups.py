"""The per-key pass's lookups stand for the pandas operations they replace: the same frame,
values and dtypes (issue 34: results must not change by a byte)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from checkers.key_log import SharedFacts, _completions, _left_joined

RIGHT = pd.DataFrame(
    {
        "value": ["a", "b", "c"],
        "reads": np.array([1, 2, 3], dtype=np.int64),
        "first_reader": np.array([5.0, np.nan, 7.0]),
        "note": ["x", None, "z"],
    }
)


@pytest.mark.parametrize(
    "values",
    [
        ["a", "b", "c", "a"],  # every row matched: integers stay integers
        ["b", "d", "a"],  # one unmatched: integers turn floats, objects NaN
        ["d", "e"],  # none matched
        ["a", None, "c"],  # a null key: merged as pandas merges it
        [],  # nothing to look up
    ],
)
def test_a_left_join_by_lookup_is_the_merge(values: list[str | None]) -> None:
    left = pd.DataFrame(
        {"value": pd.Series(values, dtype=object), "offset": pd.array(range(len(values)), "Int64")}
    )
    expected = left.merge(RIGHT, on="value", how="left")
    pd.testing.assert_frame_equal(_left_joined(left, RIGHT, ["value"]), expected)


def test_a_right_side_with_repeated_or_nullable_columns_is_merged() -> None:
    left = pd.DataFrame({"value": ["a", "b"]})
    repeated = pd.DataFrame({"value": ["a", "a"], "reads": [1, 2]})
    nullable = pd.DataFrame({"value": ["a"], "reads": pd.array([1], "Int64")})
    for right in (repeated, nullable):
        expected = left.merge(right, on="value", how="left")
        pd.testing.assert_frame_equal(_left_joined(left, right, ["value"]), expected)


@pytest.mark.parametrize("mop_dtype", [np.int32, np.int64, np.float64])
def test_a_send_finds_its_first_completion(mop_dtype: type) -> None:
    rows = pd.DataFrame(
        {
            "invoke_index": np.array([10, 10, 12, 10, 10, 12, 12, 14], dtype=np.int64),
            "mop_index": np.array([0, 1, 0, 0, 1, 0, 0, 0], dtype=mop_dtype),
        }
    )
    sends, done = np.array([0, 1, 2, 7]), np.array([3, 4, 5, 6])
    found = _completions(rows, sends, done)
    # (10, 0) -> done[0], (10, 1) -> done[1], (12, 0) -> its first of done[2:4], 14: none
    assert found.tolist() == [0, 1, 2, -1]
    assert _completions(rows, sends, np.array([], dtype=np.int64)).tolist() == [-1] * 4
    assert _completions(rows, np.array([], dtype=np.int64), done).tolist() == []


def test_the_assignments_holding_a_key_are_those_whose_keys_name_it() -> None:
    shared = SharedFacts(
        assignments=pd.DataFrame(
            {
                "process_id": [1, 2, 3, 4, 5],
                "index": [1, 2, 3, 4, 5],
                "invoke_index": [0, 1, 2, 3, 4],
                "keys": [["k1", "k2"], None, [], ["k2", "k2"], ["k1"]],
                "positions": [None] * 5,
            }
        )
    )
    exploded = shared.assignments["keys"].explode()
    for key in ("k1", "k2", "k3"):
        expected = (exploded == key).groupby(level=0).any().to_numpy(dtype=bool)
        assert shared.holds(key).tolist() == expected.tolist()
