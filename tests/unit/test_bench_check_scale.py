"""bench/check_scale.py's synthetic histories are consistent with their test.json: no `ok`
acks=-1 send is acknowledged while the SUT's events say its key's ISR is smaller than
min.insync.replicas (such a history makes every later send an `ack-below-min-isr` that its
truth does not hold)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest


@pytest.mark.parametrize("shape", ["squall", "jepsen"])
def test_no_acks_all_send_is_acknowledged_under_an_isr_below_the_minimum(
    tmp_path: Path, shape: str
) -> None:
    try:
        check_scale = importlib.import_module("bench.check_scale")
    except ImportError as err:
        pytest.fail(f"bench.check_scale does not import: {err}")
    minimum = check_scale.TEST_JSON["topic"]["min_insync_replicas"]
    path = tmp_path / "history.jsonl"
    history = check_scale.SyntheticHistory(path, 60_000, 3, keys=16, shape=shape)
    truth = history.run(3)
    assert truth["unclean-loss-window"]  # the elections that shrink an ISR are there
    isr: dict[str, list[int]] = {}
    below = []
    for line in path.read_text().splitlines():
        op = json.loads(line)
        if op["process"] == "sut" and op["f"] in ("leader-election", "isr-change"):
            isr[op["value"]["key"]] = op["value"]["isr"]
        elif op["f"] == "send" and op["type"] == "ok":
            below += [
                (op["index"], send[1])
                for send in op["value"]
                if len(isr.get(send[1], range(minimum))) < minimum
            ]
    assert below == []
    assert not truth["ack-below-min-isr"]
