"""A start-up clean removes what crashed runs left, never a run in progress, and never a
path that a run id or a label turns into."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from squall.cluster.cluster import ClusterState, ClusterStateError, NodeState, check_run_id
from squall.cluster.local import LocalRuntime
from squall.cluster.owner import KEPT, Owner, is_leftover, owner_label


def test_the_current_process_owns_and_an_ended_one_is_gone() -> None:
    me = Owner.current()
    assert Owner.parse(me.label()) == me
    assert not me.is_gone() and not is_leftover(me.label())
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    gone = Owner(me.user, me.host, int(ended.stdout), me.started)
    assert gone.is_gone() and is_leftover(gone.label())
    reused = Owner(me.user, me.host, os.getpid(), me.started + 1)  # same pid, other process
    assert reused.is_gone()
    elsewhere = Owner(me.user, socket.gethostname() + "-other", 1, 0)
    assert not elsewhere.is_gone()  # never judged from another host
    assert is_leftover(None) and is_leftover("garbage")


def _state(run_id: str, owner: str | None, root: Path) -> ClusterState:
    return ClusterState(
        run_id=run_id,
        runtime="local",
        brokers=[NodeState("n1", "127.0.9.1", root=str(root / run_id / "n1"))],
        zookeeper=NodeState("zk1", "127.0.9.10", root=str(root / run_id / "zk1")),
        owner=owner,
    )


def test_the_local_clean_keeps_runs_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQUALL_HOME", str(tmp_path))
    runtime = LocalRuntime()
    base = tmp_path / "local"
    me = Owner.current()
    crashed = Owner(me.user, me.host, 2**22 + 7, 1).label()
    for run_id, owner in (("live", me.label()), ("crashed", crashed), ("old", None)):
        (base / run_id / "n1").mkdir(parents=True)
        _state(run_id, owner, base).save()
    removed = runtime.clean()
    assert (base / "live").is_dir() and ClusterState.load("live").owner == me.label()
    assert not (base / "crashed").exists() and not (base / "old").exists()
    assert any("crashed" in line for line in removed)
    with pytest.raises(ClusterStateError):
        ClusterState.load("crashed")


def test_a_cluster_brought_up_by_hand_outlives_its_command_until_an_explicit_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`squall cluster up` ends at once; the cluster it brought up is kept: a run's
    start-up clean leaves it, an explicit `squall clean` removes it."""
    monkeypatch.setenv("SQUALL_HOME", str(tmp_path))
    me = Owner.current()
    ended = Owner(me.user, me.host, 2**22 + 9, 1).label()
    assert is_leftover(ended) and not is_leftover(KEPT + ended)
    assert is_leftover(KEPT + ended, kept_too=True)
    assert not is_leftover(KEPT + me.label(), kept_too=True)  # its command still runs
    assert owner_label(kept=True) == KEPT + me.label()
    base = tmp_path / "local"
    (base / "by-hand" / "n1").mkdir(parents=True)
    _state("by-hand", KEPT + ended, base).save()
    runtime = LocalRuntime()
    assert runtime.clean() == []
    assert (base / "by-hand").is_dir()
    assert any("by-hand" in line for line in runtime.clean(kept_too=True))
    assert not (base / "by-hand").exists()


@pytest.mark.parametrize("bad", ["../..", "/etc", "a/b", "", ".hidden", "x" * 42])
def test_run_ids_are_names_not_paths(
    bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQUALL_HOME", str(tmp_path))
    with pytest.raises(ClusterStateError, match="run id"):
        check_run_id(bad)
    with pytest.raises(ClusterStateError):
        LocalRuntime().clean(bad)
    with pytest.raises(ClusterStateError):
        ClusterState.load(bad)
