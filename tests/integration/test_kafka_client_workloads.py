"""The queue workload through real Kafka clients (confluent-kafka, kafka-python) against a
real local cluster's Kafka listeners: the same history, whichever client ran it."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from checkers import check_history as check_with_spark
from histories import HistoryWriter
from squall.cluster.cluster import Cluster
from squall.cluster.local import LocalRuntime
from tests.integration.test_queue_workload import (
    BROKER_SETTINGS,
    check_history,
    run_through_a_kill_of_n1,
    spec_for,
)
from tests.spark_session import shared_spark
from workloads import QueueWorkload
from workloads.clients import client_factory
from workloads.final_read import FinalReadResult
from workloads.queue_workload import WorkloadRunSummary

pytestmark = pytest.mark.integration

KAFKA_CLIENTS = ("confluent-kafka", "kafka-python")
EVERY_CLIENT = ("squall", *KAFKA_CLIENTS)
"""squall's own client speaks the same protocol, on either listener."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQUALL_HOME", str(tmp_path_factory.mktemp("squall-home")))
        runtime = LocalRuntime()
        up = runtime.up(
            f"kc-{uuid.uuid4().hex[:8]}", 3, settings=BROKER_SETTINGS, kafka_listener=True
        )
        try:
            yield up
        finally:
            runtime.down(up.state)


def kafka_bootstrap(cluster: Cluster) -> str:
    bootstrap = cluster.kafka_bootstrap
    assert bootstrap is not None
    return bootstrap


def run_for(
    workload: QueueWorkload,
    cluster: Cluster,
    path: Path,
    *,
    seconds: float,
    seed: int,
    until_assigns: int = 0,
    at_most_s: float = 90.0,
) -> tuple[WorkloadRunSummary, FinalReadResult]:
    """Run the workload for `seconds` (and, with `until_assigns`, on until that many `ok`
    assigns were recorded, `at_most_s` in all: group rebalances come slowly on a loaded
    machine), then its final read, into the history at `path`."""
    bootstrap = kafka_bootstrap(cluster)
    stop = threading.Event()

    def enough() -> None:
        deadline = time.monotonic() + seconds
        while not stop.wait(0.2):
            assigns = workload.counters.snapshot().by_f.get("assign", {}).get("ok", 0)
            if time.monotonic() >= deadline and assigns >= until_assigns:
                stop.set()

    watcher = threading.Thread(target=enough, daemon=True)
    if until_assigns:
        watcher.start()
    try:
        with HistoryWriter(path) as writer:
            summary = workload.run(
                bootstrap,
                cluster.zookeeper_connect,
                writer,
                stop_event=stop,
                time_limit_s=at_most_s if until_assigns else seconds,
                rng=random.Random(seed),
            )
            return summary, workload.final_read(bootstrap, writer)
    finally:
        stop.set()
        if until_assigns:
            watcher.join(5)


@pytest.mark.parametrize("client", KAFKA_CLIENTS)
def test_a_healthy_run_through_a_kafka_client_reads_every_acknowledged_value(
    cluster: Cluster, tmp_path: Path, client: str
) -> None:
    topic = f"healthy-{client}"
    # Consumers outside any group, each on every partition (members: the group tests below).
    spec = spec_for(topic, client=client, in_flight=4, group_membership=False)
    workload = QueueWorkload(spec, client_factory=client_factory(client))
    bootstrap = kafka_bootstrap(cluster)
    workload.prepare(bootstrap)
    path = tmp_path / "history.jsonl"
    summary, final = run_for(workload, cluster, path, seconds=5.0, seed=21)
    assert summary.stopped_by == "time-limit" and summary.abandoned == 0
    assert summary.counters.ok > 300
    ops, counts = check_history(path, final)
    not_ok = counts[("send", "fail")] + counts[("send", "info")]
    assert not_ok <= 0.02 * counts[("send", "invoke")], f"no faults, yet: {counts}"
    assert counts[("commit", "ok")] > 0 and counts[("subscribe", "ok")] >= 2
    # Consumers after a crash resume where their group committed (positions recorded).
    starts = [op for op in ops if op.f == "subscribe" and op.type == "ok" and not op.final]
    assert starts and all(set(op.extra["positions"]) == set(workload.spec.keys) for op in starts)


def test_a_leader_killed_under_confluent_kafka_loses_nothing_acknowledged(
    cluster: Cluster, tmp_path: Path
) -> None:
    workload = QueueWorkload(
        spec_for("killed-confluent", client="confluent-kafka"),
        client_factory=client_factory("confluent-kafka"),
    )
    bootstrap = kafka_bootstrap(cluster)
    workload.prepare(bootstrap)
    path = tmp_path / "history.jsonl"
    final = run_through_a_kill_of_n1(workload, cluster, bootstrap, path, seed=22)
    ops, counts = check_history(path, final)
    uncertain = sum(n for (f, t), n in counts.items() if f in ("send", "poll") and t != "ok")
    assert uncertain > 0, f"a leader was killed but every send and poll succeeded: {counts}"
    killed_at = next(op.index for op in ops if op.f == "kill")
    later = [op for op in ops[killed_at:] if op.f == "send" and op.type == "ok"]
    assert len({op.key for op in later}) == 3, "a key was never written again after the kill"


@pytest.mark.parametrize("client", EVERY_CLIENT)
def test_group_members_share_the_partitions_through_rebalances_and_the_checkers_agree(
    cluster: Cluster, tmp_path: Path, client: str
) -> None:
    """group_membership through each Kafka client: three consumers join the group, whose
    coordinator shares six partitions out and rebalances them as consumers crash and come
    back; each rebalance is in the history (everything revoked, then what was given, with
    where each partition resumed, and its generation where the client tells it), every
    acknowledged value is read by some member, and the checkers find nothing wrong in a
    history full of rebalances."""
    spec = spec_for(
        f"grouped-{client}",
        client=client,
        partitions=6,
        consumers=3,
        long_lived_consumers=1,
        consumer_crash_interval_s=3.0,
        group_membership=True,
        consumer_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
    )
    workload = QueueWorkload(spec, client_factory=client_factory(client))
    bootstrap = kafka_bootstrap(cluster)
    workload.prepare(bootstrap)
    path = tmp_path / "history.jsonl"
    # Each rebalance records two assigns (everything revoked, then what was given).
    summary, final = run_for(workload, cluster, path, seconds=20.0, seed=23, until_assigns=8)
    assert summary.abandoned == 0
    ops, counts = check_history(path, final)
    given = [op for op in ops if op.f == "assign" and op.type == "ok" and not op.final]
    revoked = [op for op in given if op.value == []]
    assert len(revoked) >= 3, f"too few rebalances to judge: {counts}"
    owned = [op for op in given if op.value]
    assert {key for op in owned for key in op.value} == set(spec.keys)
    assert all(set(op.extra["positions"]) <= set(op.value) for op in owned)
    # A member's subscribe holds no keys: the coordinator gives them.
    assert all(op.value == [] for op in ops if op.f == "subscribe" and not op.final)
    # Each assignment names its generation (librdkafka does not tell it: -1), and so does
    # each commit; within one generation, every key has one owner.
    commits = [op for op in ops if op.f == "commit" and op.type == "ok" and not op.final]
    assert commits
    if client == "confluent-kafka":
        assert all(op.extra["generation"] == -1 for op in owned + commits)
    else:
        assert all(op.extra["generation"] >= 1 for op in owned + commits)
        owners: dict[tuple[int, str], set[int]] = {}
        for op in owned:
            for key in op.value:
                owners.setdefault((op.extra["generation"], key), set()).add(op.process)
        assert all(len(processes) == 1 for processes in owners.values()), owners

    shared_spark()
    results = check_with_spark(path)
    assert results["valid"] is True, results["anomaly_types"]


@pytest.mark.parametrize("client", EVERY_CLIENT)
def test_an_idempotent_producer_through_a_leader_kill_lands_every_send_once(
    cluster: Cluster, tmp_path: Path, client: str
) -> None:
    """`idempotence = true` with retries: the clients resend what the kill left unanswered,
    the new leaders recognise what they already hold, and the checkers, told by test.json
    that the producer was idempotent, find no duplicate, expected or not."""
    spec = spec_for(f"idempotent-{client}", client=client, idempotence=True, producer_retries=5)
    workload = QueueWorkload(spec, client_factory=client_factory(client))
    bootstrap = kafka_bootstrap(cluster)
    workload.prepare(bootstrap)
    path = tmp_path / "history.jsonl"
    run_through_a_kill_of_n1(workload, cluster, bootstrap, path, seed=24)
    test_json = {
        "topic": {
            "replication_factor": 3,
            "min_insync_replicas": 2,
            "unclean_leader_election": False,
        },
        "workload": spec.to_dict(),
    }
    (tmp_path / "test.json").write_text(json.dumps(test_json))

    shared_spark()
    results = check_with_spark(path)
    assert results["config"]["test"]["idempotence"] is True
    assert results["valid"] is True, results["anomaly_types"]
    offsets = results["checkers"]["offsets"]
    assert offsets["counts"]["duplicate"] == 0 and "expected" not in offsets
