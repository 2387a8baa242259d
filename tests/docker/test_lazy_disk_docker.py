"""A broker on its lazy disk in a container: a power loss (the broker killed, then everything
not fsynced dropped) loses exactly the tail its flush policy had not fsynced.

``log.flush.interval.messages=5``: the log is fsynced after every fifth message, so of 23
records sent one by one the first 20 are durable and the last 3 are not.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.cluster.cluster import Cluster
from squall.cluster.docker import DockerRuntime
from squall.cluster.services import ServiceError
from system_under_test.client import AdminClient, BrokerError, Consumer, Producer

pytestmark = pytest.mark.docker

FLUSH_EVERY = 5
SENT = 23


@pytest.fixture(scope="module")
def lazy_cluster(squall_home: Path, docker_runtime: DockerRuntime) -> Iterator[Cluster]:
    run_id = f"test-{secrets.token_hex(3)}"
    cluster = docker_runtime.up(
        run_id, 1, settings={"log.flush.interval.messages": str(FLUSH_EVERY)}
    )
    try:
        yield cluster
    finally:
        cluster.close()
        docker_runtime.clean(run_id)


def squall_cli(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "squall", *args],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=True,
    )
    return result.stdout


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    """Every record of partition 0, read until two seconds pass with nothing new (once the
    partition has a leader again: a restarted broker is elected a moment after it listens)."""
    seen: list[bytes] = []
    with Consumer(bootstrap) as consumer:
        consumer.assign([(topic, 0)])
        deadline = time.monotonic() + 60
        while True:
            try:
                consumer.seek_to_beginning()
                break
            except BrokerError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        quiet_since = time.monotonic()
        deadline = time.monotonic() + 60
        while time.monotonic() - quiet_since < 2 and time.monotonic() < deadline:
            records = [r.value for r in consumer.poll(500) if r.value is not None]
            if records:
                seen += records
                quiet_since = time.monotonic()
    return seen


def test_the_brokers_log_dirs_are_on_the_lazy_disk(lazy_cluster: Cluster) -> None:
    assert lazy_cluster.capabilities.lazy_disk
    status = squall_cli("cluster", "status", "--run-id", lazy_cluster.run_id, "--json")
    assert json.loads(status)["nodes"][0]["lazy_disk"]["alive"] is True
    broker = lazy_cluster.broker("n1")
    mounts = lazy_cluster.node("n1").run("cat /proc/mounts").output
    assert f" {broker.log_dir} fuse.lazyfs " in mounts
    config = lazy_cluster.node("n1").run(f"cat {broker.config_file}").output
    assert f"log.dirs={broker.log_dir}\n" in config


def test_a_power_loss_loses_exactly_the_unsynced_tail(lazy_cluster: Cluster) -> None:
    bootstrap = lazy_cluster.bootstrap
    with AdminClient(bootstrap) as admin:
        admin.create_topic("power", 1, replication_factor=1)
    values = [f"value-{i}".encode() for i in range(SENT)]
    with Producer(bootstrap, acks=1) as producer:
        offsets = [producer.send("power", v, partition=0).result().offset for v in values]
    assert offsets == list(range(SENT))

    disks = lazy_cluster.disks
    assert disks is not None
    unsynced = disks.unsynced("n1")
    assert unsynced["bytes"] > 0
    broker = lazy_cluster.broker("n1")
    assert broker.kill()
    dropped = disks.lose_unsynced("n1")
    assert dropped["bytes"] == unsynced["bytes"]
    broker.start()
    durable = SENT - SENT % FLUSH_EVERY
    assert read_all(bootstrap, "power") == values[:durable]


def test_a_broker_does_not_start_when_its_disk_died(lazy_cluster: Cluster) -> None:
    broker = lazy_cluster.broker("n1")
    disk = lazy_cluster.lazy_disk("n1")
    broker.kill()
    assert lazy_cluster.node("n1").signal_daemon(disk.pidfile, "KILL")
    with pytest.raises(ServiceError, match=r"not started: .*daemon is gone"):
        broker.start()
    disk.mount()  # the dead mount is replaced; the backing directory kept every byte written
    assert (
        f" {disk.mountpoint} fuse.lazyfs " in lazy_cluster.node("n1").run("cat /proc/mounts").output
    )
    broker.start()
    assert len(read_all(lazy_cluster.bootstrap, "power")) == SENT - SENT % FLUSH_EVERY
