"""The queue workload through a leader change, on real containers: while one partition's
leader is killed or paused, the producers go on sending to the other partitions and the
consumers go on reading them; every send's outcome is recorded, however late. The consumers
read every partition outside any group (`group_membership = false`), so that what they read
does not hang on where the group's coordinator sits or whether the group is rebalancing.

Counted, not timed: the outage is the stretch of the history from the fault to the first
`ok` of a send to the lost partition invoked after it (its new leader's, elected by the
controller once the broker's ZooKeeper session ends).
"""

from __future__ import annotations

import random
import secrets
import threading
from pathlib import Path

import pytest

from histories import HistoryWriter, Operation, pair_operations, read_history
from squall.cluster.cluster import Cluster
from system_under_test.client import AdminClient
from tests.support import wait_for
from workloads import QueueWorkload, WorkloadRunSummary, WorkloadSpec

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def docker_cluster_settings() -> dict[str, str]:
    """Detectors that make the outage show and keep it short: the other partitions' leaders
    drop the lost broker from their ISRs after the 3 s lag time and acknowledge acks=-1
    sends again, 6 s before its 9 s session ends and the lost partition gets a new leader
    (the broker's own defaults, 10 s and 18 s, made each test wait 18 s)."""
    return {
        "zookeeper.session.timeout.ms": "9000",
        "replica.lag.time.max.ms": "3000",
        "min.insync.replicas": "2",
    }


def leaders_of(cluster: Cluster, topic: str) -> dict[int, int]:
    with AdminClient(cluster.bootstrap, request_timeout_ms=3000) as admin:
        (described,) = admin.describe_topics([topic])
    return {p.partition: p.leader for p in described.partitions}


def ok_sends(ops: list[Operation], key: str, after: int) -> int:
    return sum(op.f == "send" and op.type == "ok" and op.key == key and op.index > after
               for op in ops)  # fmt: skip


@pytest.mark.parametrize("fault", ["kill", "pause"])
def test_the_other_partitions_keep_being_written_and_read_while_one_leader_is_gone(
    docker_cluster: Cluster, tmp_path: Path, fault: str
) -> None:
    topic = f"change-{fault}-{secrets.token_hex(3)}"
    spec = WorkloadSpec(
        topic=topic,
        group_membership=False,
        partitions=3,
        replication_factor=3,
        topic_config={"min.insync.replicas": "2"},
        rate=300.0,
        producers=2,
        consumers=3,
        long_lived_consumers=1,
        final_read_deadline_s=60.0,
    )
    workload = QueueWorkload(spec)
    workload.prepare(docker_cluster.bootstrap)
    leaders = leaders_of(docker_cluster, topic)
    victim = leaders[0]
    node = f"n{victim}"
    lost, others = spec.key(0), [spec.key(p) for p, b in leaders.items() if b != victim]
    assert others, f"broker {victim} leads every partition: {leaders}"
    broker = docker_cluster.broker(node)
    path = tmp_path / "history.jsonl"
    stop = threading.Event()
    outcome: dict[str, WorkloadRunSummary | BaseException] = {}
    with HistoryWriter(path) as writer:

        def run() -> None:
            try:
                outcome["summary"] = workload.run(
                    docker_cluster.bootstrap,
                    docker_cluster.zookeeper_connect,
                    writer,
                    stop_event=stop,
                    time_limit_s=600.0,
                    rng=random.Random(29),
                )
            except BaseException as err:
                outcome["error"] = err

        runner = threading.Thread(target=run)
        runner.start()
        try:
            wait_for(lambda: workload.counters.snapshot().ok > 300, what="the workload to start")
            assert broker.kill() if fault == "kill" else broker.pause()
            writer.event(fault, {"targets": [node]})  # once the broker can answer no more
            wait_for(
                lambda: leaders_of(docker_cluster, topic)[0] not in (victim, -1),
                timeout=90,
                what=f"a new leader of {lost}",
            )
        finally:
            if fault == "kill":
                broker.start()
                writer.event("start", {"targets": [node]})
            else:
                broker.resume()
                writer.event("resume", {"targets": [node]})
            acked_before = len(workload.acknowledged.offsets(lost))
            wait_for(
                lambda: len(workload.acknowledged.offsets(lost)) > acked_before + 50,
                timeout=120,
                what=f"sends to {lost} acknowledged again",
            )
            stop.set()
            runner.join(120)
        assert "error" not in outcome, outcome.get("error")
        final = workload.final_read(docker_cluster.bootstrap, writer)
    ops = read_history(path)
    pairs = pair_operations(ops, strict=True)
    assert all(done is not None for _, done in pairs), "a send or poll was never completed"
    assert final.complete, final
    struck = next(op.index for op in ops if op.f == fault and op.process == "nemesis")
    invoked_at = {done.index: invoke.index for invoke, done in pairs if done is not None}
    back = next(
        op.index
        for op in ops
        if op.f == "send" and op.type == "ok" and op.key == lost and invoked_at[op.index] > struck
    )  # the first acknowledgement of a send made after the fault: a new leader's
    outage = [op for op in ops if struck < op.index < back]
    invoked = {k: sum(op.f == "send" and op.type == "invoke" and op.key == k for op in outage)
               for k in spec.keys}  # fmt: skip
    acked = {k: sum(op.f == "send" and op.type == "ok" and op.key == k for op in outage)
             for k in spec.keys}  # fmt: skip
    polled = {
        k
        for op in outage
        if op.f == "poll" and op.type == "ok"
        for k, records in op.value[0][1].items()
        if records
    }
    print(f"{fault} of {node} (leader of {lost}): outage invoked {invoked}, acked {acked}")
    # The other partitions kept being written and read throughout the outage...
    for key in others:
        assert invoked[key] >= 50 and acked[key] >= 50, (invoked, acked)
    assert set(others) <= polled, polled
    # ...while the lost partition's sends failed or timed out (each recorded, however late).
    refused = [op for op in outage if op.key == lost and op.type in ("fail", "info")]
    assert refused, "the lost partition's sends all waited: the outage was not seen"
    assert ok_sends(ops, lost, back) > 0
