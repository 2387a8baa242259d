"""The chaos tools as a person drives them: `squall cluster up`, `squall nemesis ...`, and a
control process SIGKILLed in the middle of a partition, after which `squall clean` leaves
nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from squall.cluster.runtimes import attach
from system_under_test.client import AdminClient, Producer
from tests.support import run_squall
from tests.support import wait_for as _wait_for

pytestmark = pytest.mark.docker


def squall(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return run_squall(*args, home=home, timeout=timeout)


def last_json(text: str) -> Any:
    return json.loads(text.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def cli_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    home = tmp_path_factory.mktemp("squall-cli-home")
    up = squall(
        home,
        "cluster",
        "up",
        "--runtime",
        "docker",
        "--nodes",
        "3",
        "--set",
        "replica.lag.time.max.ms=3000",
        "--set",
        "zookeeper.session.timeout.ms=6000",
    )
    assert up.returncode == 0, up.stderr
    info = last_json(up.stdout)
    created = squall(
        home,
        "topic",
        "create",
        "--bootstrap",
        info["bootstrap"],
        "--topic",
        "t",
        "--replication-factor",
        "3",
        "--min-insync-replicas",
        "2",
    )
    assert created.returncode == 0, created.stderr
    yield home, info
    squall(home, "clean")


def describe(bootstrap: str) -> Any:
    with AdminClient(bootstrap, request_timeout_ms=5000) as admin:
        return admin.describe_topics(["t"])[0].partitions[0]


def wait_for(condition: Any, timeout: float = 60.0, what: str = "condition") -> Any:
    return _wait_for(condition, timeout, what, interval=0.25, tolerate=(Exception,))


def test_kill_then_start_brings_the_broker_back_into_the_isr(cli_cluster) -> None:
    home, info = cli_cluster
    killed = squall(home, "nemesis", "kill", "--target", "follower:t-0")
    assert killed.returncode == 0, killed.stderr
    (node,) = last_json(killed.stdout)["value"]["targets"]
    broker_id = int(node[1:])
    wait_for(lambda: broker_id not in describe(info["bootstrap"]).isr, what="the ISR to shrink")
    started = squall(home, "nemesis", "start", "--target", node)
    assert started.returncode == 0, started.stderr
    wait_for(
        lambda: broker_id in describe(info["bootstrap"]).isr, what="the broker back in the ISR"
    )


def test_pause_stops_progress_and_resume_restores_it(cli_cluster) -> None:
    home, info = cli_cluster
    paused = squall(home, "nemesis", "pause", "--target", "follower:t-0")
    assert paused.returncode == 0, paused.stderr
    (node,) = last_json(paused.stdout)["value"]["targets"]
    os.environ["SQUALL_HOME"] = str(home)  # attach to the CLI's cluster from this process
    try:
        cluster = attach()
        log_dir = cluster.broker(node).log_dir
        size = lambda: int(cluster.node(node).run(f"du -sb {log_dir}/t-0").output.split()[0])  # noqa: E731
        before = size()
        # A paused broker takes connections but answers nothing: bootstrapped from it, the
        # producer would wait out its request timeout before asking another broker.
        live = ",".join(cluster.broker(n).bootstrap for n in cluster.brokers if n != node)
        with Producer(live, acks=1, mode="async") as producer:
            for i in range(2000):
                producer.send("t", f"p{i}".encode() * 20, partition=0)
            producer.flush()
        time.sleep(1.0)
        assert size() == before, "a paused broker must not make progress"
        resumed = squall(home, "nemesis", "resume", "--target", node)
        assert resumed.returncode == 0, resumed.stderr
        wait_for(lambda: size() > before, what="the resumed broker to catch up")
        wait_for(
            lambda: int(node[1:]) in describe(info["bootstrap"]).isr, what="it to rejoin the ISR"
        )
        cluster.close()
    finally:
        os.environ.pop("SQUALL_HOME", None)


def test_sigkilled_control_process_mid_partition_then_clean_leaves_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    up = squall(home, "cluster", "up", "--runtime", "docker", "--nodes", "3")
    assert up.returncode == 0, up.stderr
    run_id = last_json(up.stdout)["run_id"]
    # A control process applies a partition and would heal it later; it is SIGKILLed first.
    script = (
        "import random, time\n"
        "from nemesis import Fault, Nemesis\n"
        "from squall.cluster.runtimes import attach\n"
        "c = attach()\n"
        "Nemesis(c, rng=random.Random(1)).apply(Fault('start-partition', {'shape': 'halves'}))\n"
        "print('partitioned', flush=True)\n"
        "time.sleep(600)\n"
    )
    control = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SQUALL_HOME": str(home)},
    )
    assert control.stdout is not None
    assert control.stdout.readline().strip() == "partitioned"
    client = docker.from_env()
    label = f"squall.run={run_id}"
    rules = client.containers.get(f"squall-{run_id}-n1").exec_run("iptables -w -S SQUALL").output
    assert (
        b"-j DROP" in rules
        or b"DROP"
        in client.containers.get(f"squall-{run_id}-zk1").exec_run("iptables -w -S SQUALL").output
    )
    control.send_signal(signal.SIGKILL)
    control.wait(timeout=10)
    cleaned = squall(home, "clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not client.containers.list(all=True, filters={"label": label})
    assert not client.networks.list(filters={"label": label})
    again = squall(home, "clean")  # idempotent
    assert again.returncode == 0 and last_json(again.stdout)["removed"] == []
