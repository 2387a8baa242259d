"""The queue workload against a real local cluster: ZooKeeper and three broker processes.

One cluster (LocalRuntime) serves the module; each test uses a topic of its own with
replication factor 3 and min.insync.replicas 2, and acks=-1. Producers are the workload's
default: async, several sends in flight, no retries inside the client.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from histories import HistoryWriter, Operation, pair_operations, read_history
from squall.cluster.cluster import Cluster
from squall.cluster.local import LocalRuntime
from system_under_test.client import AdminClient
from tests.support import wait_for
from workloads import FinalReadResult, OpMix, QueueWorkload, WorkloadRunSummary, WorkloadSpec

pytestmark = pytest.mark.integration

BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "log.flush.interval.messages": "1",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQUALL_HOME", str(tmp_path_factory.mktemp("squall-home")))
        runtime = LocalRuntime()
        up = runtime.up(f"wl-{uuid.uuid4().hex[:8]}", 3, settings=BROKER_SETTINGS)
        try:
            yield up
        finally:
            runtime.down(up.state)


def spec_for(topic: str, **changes: Any) -> WorkloadSpec:
    settings: dict[str, Any] = {
        "topic": topic,
        "partitions": 3,
        "replication_factor": 3,
        "topic_config": {"min.insync.replicas": "2"},
        "acks": -1,
        "rate": 250.0,
        "producers": 2,
        "consumers": 2,
        "mix": OpMix(send=1.0, poll=1.0, commit=0.2, crash=0.02),
        "final_read_deadline_s": 20.0,
    }
    settings.update(changes)
    return WorkloadSpec(**settings)


def wait_for_full_isr(cluster: Cluster, topic: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with AdminClient(cluster.bootstrap, request_timeout_ms=2000) as admin:
        while time.monotonic() < deadline:
            try:
                (described,) = admin.describe_topics([topic])
                if all(p.leader >= 0 and len(p.isr) == 3 for p in described.partitions):
                    return
            except Exception:
                pass
            time.sleep(0.2)
    raise AssertionError(f"{topic} did not get back a full ISR in {timeout}s")


def check_history(path: Path, final: FinalReadResult) -> tuple[list[Operation], Counter[Any]]:
    """The assertions every run must pass; returns the operations and (f, type) counts."""
    ops = read_history(path)  # validates every line against the contract
    pairs = pair_operations(ops, strict=True)  # one op in flight per process, none after an info
    assert all(done is not None for _, done in pairs), "an invocation was never completed"
    counts = Counter((op.f, op.type) for op in ops if op.is_client)
    assert counts[("send", "ok")] > 0 and counts[("poll", "ok")] > 0
    read: set[Any] = set()
    for op in ops:
        if op.f == "poll" and op.type == "ok":
            for records in op.value[0][1].values():
                read.update(value for _, value in records)
    acknowledged = [op for op in ops if op.f == "send" and op.type == "ok"]
    for op in acknowledged:
        (_, key, sent) = op.value[0]
        assert isinstance(sent, list) and sent[0] >= 0, f"ok send without an offset: {op}"
        assert op.acks == -1 and op.key == key
    unread = [op.value for op in acknowledged if op.value[0][2][1] not in read]
    assert unread == [], f"{len(unread)} acknowledged values never read, e.g. {unread[:5]}"
    assert final.complete, f"final read incomplete: {final}"
    assert final.missing == {}
    finals = [op for op in ops if op.final]
    assert finals and all(op.f in ("assign", "poll", "log-ends") for op in finals)
    first_final = finals[0].index
    assert all(op.final for op in ops[first_final:] if op.is_client)
    # The final read recorded where the brokers said each log ends, and read each log to
    # exactly that end: every record below it, none beyond.
    ends = [op for op in finals if op.f == "log-ends" and op.type == "ok"]
    assert ends, "the final read recorded no log ends"
    assert ends[-1].value == final.log_ends == final.reached
    read_to: dict[str, int] = {}
    for op in finals:
        if op.f == "poll" and op.type == "ok":
            for key, records in op.value[0][1].items():
                read_to[key] = max([read_to.get(key, -1), *(offset for offset, _ in records)])
    assert {key: end - 1 for key, end in final.log_ends.items() if end > 0} == read_to
    values = [op.value[0][2] for op in ops if op.f == "send" and op.type == "invoke"]
    assert len(values) == len(set(values)), "a value was sent twice"
    return ops, counts


def run_through_a_kill_of_n1(
    workload: QueueWorkload, cluster: Cluster, bootstrap: str, path: Path, *, seed: int
) -> FinalReadResult:
    """Run `workload` into `path`, SIGKILL n1 once every key is acknowledged, start it again
    after two session timeouts, stop once every key is acknowledged again, then wait for a
    full ISR and read every key to its end."""
    stop = threading.Event()
    outcome: dict[str, WorkloadRunSummary | BaseException] = {}
    with HistoryWriter(path) as writer:

        def run() -> None:
            try:
                outcome["summary"] = workload.run(
                    bootstrap,
                    cluster.zookeeper_connect,
                    writer,
                    stop_event=stop,
                    time_limit_s=30.0,
                    rng=random.Random(seed),
                )
            except BaseException as err:
                outcome["error"] = err

        runner = threading.Thread(target=run)
        runner.start()
        try:
            # live counters, read mid-run
            wait_for(lambda: workload.counters.snapshot().ok > 0, 20, "the first acks")
            keys = workload.spec.keys
            writer.event("kill", {"n1": "killed"})
            # past the sends in flight, which may complete before the kill's line
            acked = {k: len(workload.acknowledged.offsets(k)) + 20 for k in keys}
            cluster.broker("n1").kill()
            time.sleep(4.0)  # the fault: dead for two session timeouts
            cluster.broker("n1").start()
            writer.event("start", {"n1": "started"})
            wait_for(
                lambda: all(len(workload.acknowledged.offsets(k)) > acked[k] for k in keys),
                30,
                "every key acknowledged again after the kill",
            )
        finally:
            stop.set()
            runner.join(60)
        assert "error" not in outcome, outcome.get("error")
        summary = outcome["summary"]
        assert isinstance(summary, WorkloadRunSummary) and summary.stopped_by == "stop-event"
        wait_for_full_isr(cluster, workload.spec.topic)
        return workload.final_read(bootstrap, writer)


def test_a_healthy_run_reads_every_acknowledged_value(cluster: Cluster, tmp_path: Path) -> None:
    workload = QueueWorkload(spec_for("healthy", producer_mode="async", in_flight=4))
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        summary = workload.run(
            cluster.bootstrap,
            cluster.zookeeper_connect,
            writer,
            stop_event=threading.Event(),
            time_limit_s=10.0,
            rng=random.Random(11),
        )
        final = workload.final_read(cluster.bootstrap, writer)
    assert summary.stopped_by == "time-limit" and summary.abandoned == 0
    assert summary.counters.ok > 500
    _, counts = check_history(path, final)
    not_ok = counts[("send", "fail")] + counts[("send", "info")]
    assert not_ok <= 0.02 * counts[("send", "invoke")], f"no faults, yet: {counts}"
    assert counts[("commit", "ok")] > 0 and counts[("subscribe", "ok")] >= 2


def test_a_broker_kill_gives_indeterminate_and_failed_ops_and_loses_nothing(
    cluster: Cluster, tmp_path: Path
) -> None:
    # No retries in the client: the producers must still find the new leaders by themselves.
    workload = QueueWorkload(spec_for("killed"))
    assert workload.spec.producer_retries == 0 and workload.spec.producer_mode == "async"
    workload.prepare(cluster.bootstrap)
    path = tmp_path / "history.jsonl"
    final = run_through_a_kill_of_n1(workload, cluster, cluster.bootstrap, path, seed=12)
    ops, counts = check_history(path, final)
    uncertain = sum(n for (f, t), n in counts.items() if f in ("send", "poll") and t != "ok")
    assert uncertain > 0, f"a leader was killed but every send and poll succeeded: {counts}"
    assert counts[("send", "ok")] > 0
    nemesis = [op.f for op in ops if op.process == "nemesis"]
    assert nemesis == ["kill", "start"]
    killed_at = next(op.index for op in ops if op.f == "kill")
    later = [op for op in ops[killed_at:] if op.f == "send" and op.type == "ok"]
    assert len({op.key for op in later}) == 3, "a key was never written again after the kill"
    # After every info the client went on under a new process number (pairing checked it);
    # fresh clients after crashes resumed from the group's committed offsets.
    assert counts[("crash", "info")] == counts[("crash", "invoke")]


def test_producer_crashes_end_their_sends_in_flight_as_info_and_new_producers_go_on(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Whether a crash finds sends in flight is timing (a few milliseconds each, on an idle
    machine), so the run is tried again, on a topic of its own, until one did; every run
    must keep the promises."""
    mix = OpMix(send=1.0, poll=1.0, commit=0.2, crash=0.0, producer_crash=0.02)
    crashed: list[Operation] = []
    for attempt in range(4):
        workload = QueueWorkload(spec_for(f"crashing-{attempt}", mix=mix, in_flight=8))
        path = tmp_path / f"history-{attempt}.jsonl"
        with HistoryWriter(path) as writer:
            summary = workload.run(
                cluster.bootstrap,
                cluster.zookeeper_connect,
                writer,
                stop_event=threading.Event(),
                time_limit_s=8.0,
                rng=random.Random(13 + attempt),
            )
            final = workload.final_read(cluster.bootstrap, writer)
        assert summary.stopped_by == "time-limit"
        ops, counts = check_history(path, final)
        assert counts[("crash", "invoke")] == counts[("crash", "info")] >= 3
        crashed = [op for op in ops if op.f == "send" and op.error == "crashed"]
        assert all(op.type == "info" for op in crashed)
        # Sends go on after the first crash, under processes that never sent before it (the
        # last may come as the run stops, under load, with no time left to send again).
        first_crash = min(op.index for op in ops if op.f == "crash")
        before = {op.process for op in ops[:first_crash] if op.f == "send"}
        after = [
            op for op in ops[first_crash:] if op.f == "send" and op.type == "ok" and not op.final
        ]
        assert after and {op.process for op in after} - before
        if crashed:
            break
    assert crashed, "in four runs no producer crash found a send in flight"
