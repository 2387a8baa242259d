"""Creating the workload's topic and waiting until every partition has a leader and full ISR.

Idempotent: an existing topic with the right number of partitions is used as it is.
Brokers that are still registering make creation fail with INVALID_REPLICATION_FACTOR for
a moment, so creation is retried until the timeout.
"""

from __future__ import annotations

import contextlib
import time

from workloads.client import ClientFactory, OperationError, TopicRefusedError, TopicState
from workloads.errors import TopicSetupError
from workloads.spec import WorkloadSpec


def ensure_topic(
    bootstrap: str, spec: WorkloadSpec, *, client_factory: ClientFactory, timeout_s: float = 60.0
) -> None:
    """Create `spec.topic` unless it exists; wait for leaders and a full ISR everywhere."""
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    admin = client_factory.admin(bootstrap, request_timeout_ms=5000)
    with contextlib.closing(admin):
        created = existed = False
        while not created:
            try:
                existed = not admin.create_topic(
                    spec.topic,
                    spec.partitions,
                    replication_factor=spec.replication_factor,
                    config=spec.topic_config,
                )
                created = True
            except TopicRefusedError as err:
                raise TopicSetupError(
                    f"creating topic {spec.topic!r} was refused: {err}; fix the workload's "
                    "topic or topic_config"
                ) from None
            except (OperationError, OSError) as err:
                last = str(err)
                _pause_or_fail(deadline, f"creating topic {spec.topic!r} failed: {last}")
        while True:
            try:
                last = _not_ready(admin.describe_topic(spec.topic), spec, existed=existed)
            except (OperationError, OSError) as err:
                last = f"describing it failed: {err}"
            if not last:
                return
            _pause_or_fail(deadline, f"topic {spec.topic!r} is not ready: {last}")


def _not_ready(topic: TopicState | None, spec: WorkloadSpec, *, existed: bool) -> str:
    """Why the topic is not ready yet; empty when it is. A topic that existed before and
    has another shape is an error (a new one may show partial metadata for a moment)."""
    if topic is None:
        return "the cluster does not list it yet"
    if len(topic.partitions) != spec.partitions:
        if not existed:
            return f"it lists {len(topic.partitions)} of {spec.partitions} partitions"
        raise TopicSetupError(
            f"topic {spec.topic!r} exists with {len(topic.partitions)} partitions but the "
            f"workload wants {spec.partitions}; delete the topic, or use another topic name"
        )
    for partition in topic.partitions:
        if len(partition.replicas) != spec.replication_factor and existed:
            raise TopicSetupError(
                f"topic {spec.topic!r} exists with {len(partition.replicas)} replicas of "
                f"partition {partition.partition} but the workload wants "
                f"{spec.replication_factor}; delete the topic, or use another topic name"
            )
        if partition.leader is None:
            return f"partition {partition.partition} has no leader"
        if len(partition.isr) < spec.replication_factor:
            return (
                f"partition {partition.partition} has ISR {partition.isr}, not all "
                f"{spec.replication_factor} replicas"
            )
    return ""


def _pause_or_fail(deadline: float, problem: str) -> None:
    if time.monotonic() >= deadline:
        raise TopicSetupError(
            f"{problem}; gave up when the set-up timeout passed. Are enough brokers up "
            "(replication_factor) and registered in ZooKeeper?"
        )
    time.sleep(0.2)
