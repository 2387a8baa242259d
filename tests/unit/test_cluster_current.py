"""A test's run brings up its own cluster without taking the place of the one a person
brought up by hand: that one stays current (`squall cluster status` still finds it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from squall.cluster.cluster import (
    STATE_DIR_ENV,
    ClusterState,
    NodeState,
    current_kept,
    current_run_id,
)


def _state(run_id: str) -> ClusterState:
    return ClusterState(
        run_id=run_id,
        runtime="local",
        brokers=[NodeState("n1", "127.0.0.1")],
        zookeeper=NodeState("zk1", "127.0.0.1"),
    )


def test_a_run_leaves_the_hand_made_cluster_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    by_hand = _state("by-hand")
    by_hand.save()
    with current_kept():
        run = _state("run-1")
        run.save()  # saving makes a cluster current
        assert current_run_id() == "run-1"
    assert current_run_id() == "by-hand"
    run.forget()  # the run's teardown leaves the pointer alone
    assert current_run_id() == "by-hand"
    assert ClusterState.load().run_id == "by-hand"


def test_without_a_cluster_up_the_run_s_own_is_current_until_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    with current_kept():
        run = _state("run-1")
        run.save()
    assert current_run_id() == "run-1"
    run.forget()
    assert current_run_id() is None
