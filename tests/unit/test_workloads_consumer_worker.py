"""ConsumerWorker against a fake consumer: delivery, rewinds, commits and crashes per mode."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

import workloads.squall_client
from histories import HistoryWriter, Operation, pair_operations, read_history
from system_under_test.client import BrokerUnavailableError, ConsumedRecord, RequestTimeoutError
from workloads import (
    ConsumerWorker,
    OperationRecorder,
    OpMix,
    RateLimiter,
    SquallClientFactory,
    WorkloadSpec,
)
from workloads.spec import ConsumerMode

TopicPartition = tuple[str, int]


class FakeCluster:
    """The logs (values at offsets 0, 1, ...) and the group's committed offsets."""

    def __init__(self, logs: dict[int, list[int]]) -> None:
        self.logs = logs
        self.committed: dict[TopicPartition, int] = {}
        self.consumers: list[FakeConsumer] = []
        self.fail_polls_after_fetching = 0
        """The next polls fetch the first partition, then raise (as a second leader failing)."""


class FakeConsumer:
    """Just enough of system_under_test.client.Consumer; fetches at most two records per
    partition per poll."""

    cluster: FakeCluster

    def __init__(self, bootstrap: str, *, config: Mapping[str, object], client_id: str) -> None:
        assert config["group.id"] and config["zookeeper.connect"]
        self.positions: dict[TopicPartition, int] = {}
        self.closed = False
        self.cluster.consumers.append(self)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self.positions = {tp: self.cluster.committed.get(tp, 0) for tp in partitions}

    def position(self, topic: str, partition: int) -> int:
        return self.positions[(topic, partition)]

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self.positions[(topic, partition)] = offset

    def poll(self, timeout_ms: int) -> list[ConsumedRecord]:
        out: list[ConsumedRecord] = []
        for tp in sorted(self.positions):
            log = self.cluster.logs[tp[1]]
            start = self.positions[tp]
            for offset in range(start, min(start + 2, len(log))):
                out.append(ConsumedRecord(tp[0], tp[1], offset, 0, None, str(log[offset]).encode()))
                self.positions[tp] = offset + 1
            if self.cluster.fail_polls_after_fetching:
                self.cluster.fail_polls_after_fetching -= 1
                raise BrokerUnavailableError("the second leader refused the connection")
        return out

    def commit(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        self.cluster.committed.update(offsets)
        return dict(offsets)

    def close(self) -> None:
        self.closed = True


class FakeMember(FakeConsumer):
    """Just enough of system_under_test.client.GroupConsumer: the coordinator gives it every
    partition, from the group's commits, at its first poll (generation 1)."""

    def __init__(self, bootstrap: str, *, config: Mapping[str, object], client_id: str) -> None:
        assert config["group.id"] and "zookeeper.connect" not in config
        self.positions = {}
        self.closed = False
        self.assignments = 0
        self.generation = -1
        self.cluster.consumers.append(self)

    def subscribe(self, topic: str) -> None:
        self.topic = topic

    def assignment(self) -> list[TopicPartition]:
        return sorted(self.positions)

    def poll(self, timeout_ms: int) -> list[ConsumedRecord]:
        if self.assignments == 0:
            self.assign([(self.topic, p) for p in sorted(self.cluster.logs)])
            self.assignments, self.generation = 1, 1
        return super().poll(timeout_ms)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster({0: [10, 11, 12, 13, 14], 1: [20, 21, 22]})
    FakeConsumer.cluster = fake
    monkeypatch.setattr(workloads.squall_client, "Consumer", FakeConsumer)
    monkeypatch.setattr(workloads.squall_client, "SquallMember", FakeMember)
    return fake


def make_worker(
    tmp_path: Path,
    mode: ConsumerMode,
    mix: OpMix,
    *,
    clock: Callable[[], float] = time.monotonic,
    stop: threading.Event | None = None,
    **fields: Any,
) -> tuple[ConsumerWorker, HistoryWriter, Path]:
    spec = WorkloadSpec(
        topic="t",
        partitions=2,
        producers=0,
        consumers=1,
        consumer_mode=mode,
        mix=mix,
        **{
            "long_lived_consumers": 0,
            "consumer_crash_interval_s": None,
            "group_membership": False,
            **fields,
        },
    )
    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path)
    worker = ConsumerWorker(
        0,
        spec,
        "127.0.0.1:9092",
        "127.0.0.1:2181",
        client_factory=SquallClientFactory(),
        recorder=OperationRecorder(writer),
        limiter=RateLimiter(None),
        rng=random.Random(5),
        stop=stop if stop is not None else threading.Event(),
        on_failure=lambda err: pytest.fail(f"worker failed: {err}"),
        clock=clock,
    )
    return worker, writer, path


def shapes(path: Path) -> list[tuple[Any, ...]]:
    ops = read_history(path)
    pair_operations(ops, strict=True)
    return [(op.process, op.type, op.f, op.value) for op in ops]


def polled(op_value: Any) -> Any:
    return op_value[0][1]


def completions_of(path: Path) -> list[Operation]:
    return [op for op in read_history(path) if op.type != "invoke"]


def test_at_least_once_rewinds_after_a_failed_poll_and_commits_what_was_delivered(
    tmp_path: Path, cluster: FakeCluster
) -> None:
    worker, writer, path = make_worker(tmp_path, "at-least-once", OpMix(send=0, poll=1))
    assert worker.open()
    worker.poll()
    cluster.fail_polls_after_fetching = 1
    worker.poll()  # fetched t-0 offsets 2, 3, then failed: nothing delivered
    worker.poll()
    worker.commit()
    writer.close()
    ops = completions_of(path)
    assert [(op.f, op.type) for op in ops] == [
        ("subscribe", "ok"),
        ("poll", "ok"),
        ("poll", "fail"),
        ("poll", "ok"),
        ("commit", "ok"),
    ]
    assert polled(ops[1].value) == {"t-0": [[0, 10], [1, 11]], "t-1": [[0, 20], [1, 21]]}
    # The failed poll's records come again: no skip for the checkers to blame on the log.
    assert polled(ops[3].value) == {"t-0": [[2, 12], [3, 13]], "t-1": [[2, 22]]}
    assert ops[4].value == {"t-0": 4, "t-1": 3}
    assert cluster.committed == {("t", 0): 4, ("t", 1): 3}
    assert len({op.process for op in ops}) == 1


def test_a_crash_retires_the_process_and_a_fresh_client_resumes_at_the_commit(
    tmp_path: Path, cluster: FakeCluster
) -> None:
    worker, writer, path = make_worker(tmp_path, "at-least-once", OpMix(send=0, poll=1))
    worker.open()
    worker.poll()
    worker.commit()
    worker.poll()  # delivered but not committed: the next client reads it again
    worker.crash()
    assert worker.consumer is None and cluster.consumers[0].closed
    worker.open()
    worker.poll()
    writer.close()
    rows = shapes(path)
    first, second = rows[0][0], rows[-1][0]
    assert first != second
    assert [(p, t, f) for p, t, f, _ in rows if f == "crash"] == [
        (first, "invoke", "crash"),
        (first, "info", "crash"),
    ]
    assert rows[-3][1:] == ("ok", "subscribe", ["t-0", "t-1"])
    assert polled(rows[-1][3]) == {"t-0": [[2, 12], [3, 13]], "t-1": [[2, 22]]}


def test_at_most_once_commits_before_delivering(tmp_path: Path, cluster: FakeCluster) -> None:
    worker, writer, path = make_worker(tmp_path, "at-most-once", OpMix(send=0, poll=1))
    worker.open()
    worker.poll_at_most_once()
    writer.close()
    rows = shapes(path)
    assert [(t, f) for _, t, f, _ in rows] == [
        ("invoke", "subscribe"),
        ("ok", "subscribe"),
        ("invoke", "commit"),
        ("ok", "commit"),
        ("invoke", "poll"),
        ("ok", "poll"),
    ]
    assert rows[3][3] == {"t-0": 2, "t-1": 2}
    assert polled(rows[5][3]) == {"t-0": [[0, 10], [1, 11]], "t-1": [[0, 20], [1, 21]]}


def test_an_at_most_once_member_commits_what_it_fetched_before_delivering_it(
    tmp_path: Path, cluster: FakeCluster
) -> None:
    worker, writer, path = make_worker(
        tmp_path, "at-most-once", OpMix(send=0, poll=1), group_membership=True
    )
    worker.open()
    assert worker.member is not None
    worker.poll_as_member(worker.member)
    writer.close()
    rows = shapes(path)
    assert [(t, f, v) for _, t, f, v in rows if t != "invoke"][:3] == [
        ("ok", "subscribe", []),
        ("ok", "assign", []),
        ("ok", "assign", ["t-0", "t-1"]),
    ]
    assert [(t, f) for _, t, f, _ in rows[-4:]] == [
        ("invoke", "commit"),
        ("ok", "commit"),
        ("invoke", "poll"),
        ("ok", "poll"),
    ]
    assert (
        rows[-3][3]
        == {"t-0": 2, "t-1": 2}
        == {f"t-{p}": o for (_, p), o in cluster.committed.items()}
    )
    assert polled(rows[-1][3]) == {"t-0": [[0, 10], [1, 11]], "t-1": [[0, 20], [1, 21]]}


def test_at_most_once_crash_after_the_commit_loses_the_fetched_records(
    tmp_path: Path, cluster: FakeCluster
) -> None:
    # Crash weight dominates: the worker dies between the commit and the delivery.
    worker, writer, path = make_worker(
        tmp_path, "at-most-once", OpMix(send=0, poll=1e-9, commit=0, crash=1)
    )
    worker.open()
    worker.poll_at_most_once()
    worker.open()
    worker.poll_at_most_once()
    writer.close()
    rows = shapes(path)
    fs = [f for _, t, f, _ in rows if t != "invoke"]
    assert fs == ["subscribe", "commit", "crash", "subscribe", "commit", "crash"]
    assert cluster.committed == {("t", 0): 4, ("t", 1): 3}
    assert not any(f == "poll" for _, _, f, _ in rows)


class FakeTime:
    """A clock that a test moves; the limiter moves it by `step_s` a step and stops the run
    after `steps` steps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SteppingLimiter(RateLimiter):
    def __init__(self, clock: FakeTime, *, steps: int, step_s: float) -> None:
        super().__init__(None)
        self.clock, self.left, self.step_s = clock, steps, step_s

    def acquire(self, stop: threading.Event) -> bool:
        self.clock.now += self.step_s
        self.left -= 1
        return self.left >= 0


class RecordedWaits(threading.Event):
    """A stop event that is never set and records the pauses asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return False


def run_for(
    tmp_path: Path, *, steps: int, step_s: float, failing: bool = False, **fields: Any
) -> tuple[ConsumerWorker, list[Operation], RecordedWaits]:
    tmp_path.mkdir(exist_ok=True)
    clock = FakeTime()
    stop = RecordedWaits()
    worker, writer, path = make_worker(
        tmp_path,
        "at-least-once",
        OpMix(send=0, poll=1, commit=0.2),
        clock=clock,
        stop=stop,
        **fields,
    )
    worker.limiter = SteppingLimiter(clock, steps=steps, step_s=step_s)
    if failing:
        FakeConsumer.cluster.fail_polls_after_fetching = 10**9
    worker.run()
    writer.close()
    return worker, read_history(path), stop


def test_consumer_crashes_are_drawn_in_time_not_per_operation(
    tmp_path: Path, cluster: FakeCluster
) -> None:
    # 200 s of steps once a second, and the same 200 s of fast failing polls ten times as
    # many: the crashes follow the clock (mean 10 s apart), not the number of operations.
    slow, slow_ops, _ = run_for(
        tmp_path / "slow", steps=200, step_s=1.0, consumer_crash_interval_s=10.0
    )
    fast, fast_ops, _ = run_for(
        tmp_path / "fast",
        steps=2000,
        step_s=0.1,
        failing=True,
        consumer_crash_interval_s=10.0,
        poll_backoff_ms=0,
        poll_backoff_max_ms=0,
    )
    for worker, ops in ((slow, slow_ops), (fast, fast_ops)):
        pair_operations(ops, strict=True)
        crashes = sum(op.f == "crash" and op.type == "info" for op in ops)
        assert crashes == worker.crashes
        assert 5 <= crashes <= 50
    assert sum(op.f == "poll" for op in fast_ops) > 5 * sum(op.f == "poll" for op in slow_ops)
    assert all(op.type == "fail" for op in fast_ops if op.f == "poll" and op.type != "invoke")


def test_a_long_lived_consumer_never_crashes_and_backs_off_after_failed_polls(
    tmp_path: Path, cluster: FakeCluster
) -> None:
    worker, ops, stop = run_for(
        tmp_path,
        steps=300,
        step_s=1.0,
        failing=True,
        long_lived_consumers=1,
        consumer_crash_interval_s=1.0,
    )
    assert worker.long_lived and worker.crashes == 0
    assert not any(op.f == "crash" for op in ops)
    assert [op.f for op in ops if op.f in ("subscribe", "assign")] == ["subscribe", "subscribe"]
    # Every failed poll pauses: 100 ms, doubling to at most 1 s, while failures go on.
    assert stop.waits[:5] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert max(stop.waits) == 1.0
    failed = sum(op.f == "poll" and op.type == "fail" for op in ops)
    assert len(stop.waits) == failed > 100


def test_an_ok_subscribe_says_where_the_new_client_starts(
    tmp_path: Path, cluster: FakeCluster
) -> None:
    cluster.committed[("t", 1)] = 2
    worker, writer, path = make_worker(tmp_path, "at-least-once", OpMix(send=0, poll=1))
    worker.open()
    worker.poll()
    worker.commit()
    worker.crash()
    worker.open()
    writer.close()
    opened = [op for op in read_history(path) if op.f == "subscribe" and op.type == "ok"]
    assert [op.extra.get("positions") for op in opened] == [
        {"t-0": 0, "t-1": 2},
        {"t-0": 2, "t-1": 3},
    ]


def test_a_member_whose_commit_may_have_landed_is_replaced_by_a_new_member(
    tmp_path: Path, cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit completed `info` retires the member's process; a member is one process, so
    the worker throws it away (no crash of its own: the `info` retired it) and a new member
    joins under a new number, rather than carrying the old member on under it."""
    worker, writer, path = make_worker(
        tmp_path, "at-least-once", OpMix(send=0, poll=1), group_membership=True
    )
    worker.open()
    member = worker.member
    assert member is not None
    worker.poll_as_member(member)

    def lost(self: FakeMember, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        raise RequestTimeoutError("no answer within 5 s")

    monkeypatch.setattr(FakeMember, "commit", lost)
    worker.commit()
    assert worker._member_retired()
    worker.discard()
    worker.open()
    assert worker.member is not member and not worker._member_retired()
    assert [c.closed for c in cluster.consumers] == [True, False]
    writer.close()
    rows = [(p, t, f) for p, t, f, _ in shapes(path) if t != "invoke"]
    first = rows[0][0]
    assert [(t, f) for p, t, f in rows if p == first][-1] == ("info", "commit")
    assert not [f for p, t, f in rows if f == "crash"]
    assert [(t, f) for p, t, f in rows if p != first] == [("ok", "subscribe")]
