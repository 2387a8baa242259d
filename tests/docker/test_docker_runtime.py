"""The docker runtime against real containers, and the ssh runtime driving the same ones.

One cluster (n1..n3 + zk1, SUT deployed) serves the whole module; the last test removes it
with ``clean`` and checks through the docker SDK that nothing labelled with its run id is
left. Tests at the bottom need no engine (subnet choice).
"""

from __future__ import annotations

import ipaddress
import os
import threading
import time
from pathlib import Path

import docker
import pytest

from squall.cluster.cluster import Cluster, ClusterState
from squall.cluster.docker import (
    LABEL_RUN,
    DockerRuntime,
    DockerRuntimeError,
    free_subnets,
    host_routes,
    node_addresses,
)
from squall.cluster.inventory import load_inventory, write_inventory
from squall.cluster.node import CommandFailed, CommandTimedOut, DaemonSpec, NodeError
from squall.cluster.ssh import HostKeyError, SshNode
from squall.cluster.ssh_runtime import SshRuntime
from system_under_test.client import AdminClient, BrokerError, Consumer, Producer

docker_only = pytest.mark.docker


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@docker_only
def test_cluster_is_up_and_its_state_reattaches(docker_cluster: Cluster, docker_runtime) -> None:
    assert sorted(docker_cluster.brokers) == ["n1", "n2", "n3"]
    assert docker_cluster.capabilities.partitions and docker_cluster.capabilities.freeze
    assert docker_cluster.freezer is not None
    for node in docker_cluster.all_nodes():
        assert node.run("hostname").output.strip() == node.name
    # Another process rebuilds the same cluster from the saved state.
    again = docker_runtime.attach(ClusterState.load(docker_cluster.run_id))
    try:
        assert again.bootstrap == docker_cluster.bootstrap
        assert again.kafka_bootstrap is None and docker_cluster.kafka_bootstrap is None
        assert again.capabilities == docker_cluster.capabilities
        assert again.node("zk1").run("getent hosts n2").output.split()[0] == (
            docker_cluster.node("n2").address
        )
        assert all(b.is_running() for b in (again.broker(n) for n in again.brokers))
        assert again.zookeeper_service().is_running()
    finally:
        again.close()


@docker_only
def test_a_second_cluster_with_the_same_run_id_is_refused(
    docker_cluster: Cluster, docker_runtime: DockerRuntime
) -> None:
    with pytest.raises(DockerRuntimeError, match="exists already"):
        docker_runtime.up(docker_cluster.run_id, 1)
    assert docker_cluster.node("n1").run("true").ok  # the first one is untouched


@docker_only
def test_kazoo_is_vendored_and_imports_on_a_broker(docker_cluster: Cluster) -> None:
    output = (
        docker_cluster.node("n1")
        .run(
            "PYTHONPATH=/opt/squall/sut python3 -c 'import kazoo, sys; print(kazoo.__file__, sys.version_info[:2])'"
        )
        .output
    )
    assert output.startswith("/opt/squall/sut/kazoo/") and "(3, 11)" in output


@docker_only
def test_replicated_topic_round_trip_with_acks_all(docker_cluster: Cluster) -> None:
    with AdminClient(docker_cluster.bootstrap) as admin:
        admin.create_topic("rf3", 1, replication_factor=3)

        def isr_size() -> int:
            try:  # metadata reaches the brokers shortly after the controller creates the topic
                return len(admin.describe_topics(["rf3"])[0].partitions[0].isr)
            except BrokerError:
                return 0

        wait_until(lambda: isr_size() == 3, 30, "all three replicas in the ISR")
    values = [f"value-{i}".encode() for i in range(20)]
    with Producer(docker_cluster.bootstrap, acks=-1) as producer:
        offsets = [producer.send("rf3", v, partition=0).result().offset for v in values]
    assert offsets == list(range(20))
    seen: list[bytes] = []
    with Consumer(docker_cluster.bootstrap) as consumer:
        consumer.assign([("rf3", 0)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 20
        while len(seen) < len(values) and time.monotonic() < deadline:
            seen += [r.value for r in consumer.poll(1000) if r.value is not None]
    assert seen == values


@docker_only
def test_large_output_is_read_without_hanging(docker_cluster: Cluster) -> None:
    result = docker_cluster.node("n2").run(
        "head -c 5000000 /dev/zero | tr '\\0' x; echo; echo on-stderr >&2", timeout=30
    )
    assert result.output.count("x") == 5_000_000
    assert result.output.rstrip().endswith("on-stderr")


@docker_only
def test_command_past_its_timeout_is_killed(docker_cluster: Cluster) -> None:
    node = docker_cluster.node("n1")
    started = time.monotonic()
    with pytest.raises(CommandTimedOut):
        node.run("sleep 30 && echo finished", timeout=1)
    assert time.monotonic() - started < 5
    assert node.run("pgrep -x sleep", check=False).exit_code == 1
    with pytest.raises(CommandFailed) as failed:
        node.run("echo out; echo err >&2; exit 3")
    assert failed.value.exit_code == 3 and "out" in failed.value.output
    assert node.run("exit 4", check=False).exit_code == 4


@docker_only
def test_two_threads_run_commands_on_one_node_at_once(docker_cluster: Cluster) -> None:
    node = docker_cluster.node("n3")
    outputs: list[str] = []
    threads = [
        threading.Thread(target=lambda i=i: outputs.append(node.run(f"sleep 1; echo {i}").output))
        for i in range(4)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(o.strip() for o in outputs) == ["0", "1", "2", "3"]
    assert time.monotonic() - started < 3


@docker_only
def test_upload_and_download_a_directory(docker_cluster: Cluster, tmp_path: Path) -> None:
    source = tmp_path / "tree"
    (source / "sub" / "__pycache__").mkdir(parents=True)
    (source / "top.txt").write_text("top\n")
    (source / "sub" / "data.bin").write_bytes(os.urandom(300_000))
    (source / "sub" / "__pycache__" / "skip.pyc").write_bytes(b"x")
    script = source / "run.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o755)
    node = docker_cluster.node("n2")
    node.upload(source, "/tmp/up/tree")
    node.upload(source / "top.txt", "/tmp/up/single/copy.txt")
    assert node.run("/tmp/up/tree/run.sh").output.strip() == "ran"
    assert node.run("test -e /tmp/up/tree/sub/__pycache__", check=False).exit_code == 1
    back = tmp_path / "back"
    node.download("/tmp/up/tree", back)
    node.download("/tmp/up/single/copy.txt", back / "copy.txt")
    node.download("/tmp/up/missing", back / "missing")
    assert (back / "top.txt").read_text() == "top\n"
    assert (back / "sub" / "data.bin").read_bytes() == (source / "sub" / "data.bin").read_bytes()
    assert (back / "copy.txt").read_text() == "top\n"
    assert not (back / "missing").exists()


@docker_only
def test_daemon_start_signal_and_liveness(docker_cluster: Cluster) -> None:
    node = docker_cluster.node("n1")
    spec = DaemonSpec(
        name="sleeper",
        command=["sh", "-c", 'echo "$GREETING from $(pwd)"; exec sleep 300'],
        pidfile="/tmp/daemon/run/sleeper.pid",
        logfile="/tmp/daemon/logs/sleeper.log",
        env={"GREETING": "hello there"},
        cwd="/tmp",
    )
    pid = node.start_daemon(spec)
    assert node.run(f"cat {spec.pidfile}").output.strip() == str(pid)
    assert node.daemon_running(spec.pidfile)
    wait_until(
        lambda: "hello there from /tmp" in node.run(f"cat {spec.logfile}").output, 5, "the log"
    )
    assert node.signal_daemon(spec.pidfile, "STOP")
    assert node.daemon_running(spec.pidfile)  # stopped still counts as running
    assert node.run(f"grep -c '^State:.*T' /proc/{pid}/status").output.strip() == "1"
    assert node.signal_daemon(spec.pidfile, "CONT")
    assert node.signal_daemon(spec.pidfile, "KILL")
    wait_until(lambda: not node.daemon_running(spec.pidfile), 5, "the daemon to die")
    assert not node.signal_daemon(spec.pidfile, "TERM")
    assert not node.daemon_running("/tmp/daemon/run/never-started.pid")


@docker_only
def test_freeze_and_unfreeze_a_node(docker_cluster: Cluster, docker_runtime) -> None:
    freezer = docker_runtime.freezer(docker_cluster.state)
    node = docker_cluster.node("n3")
    node.run("true")
    freezer.freeze("n3")
    try:
        assert freezer.is_frozen("n3")
        with pytest.raises(NodeError):
            node.run("true", timeout=1)
    finally:
        freezer.unfreeze("n3")
    freezer.unfreeze("n3")  # thawing a running node does nothing
    assert not freezer.is_frozen("n3")
    assert node.run("echo thawed").output.strip() == "thawed"
    assert docker_cluster.broker("n3").is_running()


@docker_only
def test_a_wrong_host_key_is_rejected(docker_cluster: Cluster) -> None:
    n1, n2 = docker_cluster.state.brokers[0], docker_cluster.state.brokers[1]
    assert n1.host_key != n2.host_key  # every container made its own
    impostor = SshNode(
        "n1", n1.address, host_key=n2.host_key or "", key_file=n1.key_file or "", connect_wait=5
    )
    with pytest.raises(HostKeyError, match="not the pinned one"):
        impostor.run("true")
    impostor.close()


@docker_only
def test_ssh_runtime_drives_the_containers_from_an_inventory(
    docker_cluster: Cluster, tmp_path: Path
) -> None:
    inventory = write_inventory(docker_cluster.state, tmp_path / "hosts.toml")
    assert load_inventory(inventory).zookeeper.host == docker_cluster.zookeeper.address
    runtime = SshRuntime()
    cluster = runtime.up(f"{docker_cluster.run_id}-ssh", inventory=inventory)
    try:
        assert cluster.runtime == "ssh" and not cluster.capabilities.freeze
        for node in cluster.all_nodes():
            assert node.run("hostname").output.strip() == node.name
        with AdminClient(cluster.bootstrap) as admin:
            wait_until(lambda: len(admin.brokers()) == 3, 30, "three registered brokers")
    finally:
        cluster.close()
        stopped = runtime.down(cluster.state)
    daemons = [line for line in stopped if line.startswith(("broker on", "zookeeper on"))]
    assert len(daemons) == 4, stopped  # three brokers and ZooKeeper (then undone host changes)


@docker_only
def test_clean_removes_everything_labelled_with_the_run(
    docker_cluster: Cluster, docker_runtime: DockerRuntime
) -> None:
    run_id = docker_cluster.run_id
    removed = docker_runtime.clean(run_id)
    assert {f"container squall-{run_id}-{n}" for n in ("n1", "n2", "n3", "zk1")} <= set(removed)
    assert f"network squall-{run_id}" in removed
    client = docker.from_env()
    try:
        label = {"label": f"{LABEL_RUN}={run_id}"}
        assert client.containers.list(all=True, filters=label) == []
        assert client.networks.list(filters=label) == []
    finally:
        client.close()
    assert docker_runtime.clean(run_id) == []


# --- no engine needed ------------------------------------------------------------------


def test_host_routes_are_parsed_and_avoided() -> None:
    table = (
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n"
        "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\n"
        "eth0\t0000D50A\t00000000\t0001\t0\t0\t0\t0000FFFF\n"
        "docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\n"
    )
    routes = host_routes(table)
    assert routes == [ipaddress.ip_network("10.213.0.0/16"), ipaddress.ip_network("172.17.0.0/16")]
    assert free_subnets(routes) == []
    assert free_subnets([ipaddress.IPv4Network("10.213.0.0/23")])[0] == "10.213.2.0/24"


def test_node_addresses_follow_the_local_runtime_numbering() -> None:
    assert node_addresses("10.213.5.0/24", 2) == {
        "zk1": "10.213.5.10",
        "n1": "10.213.5.11",
        "n2": "10.213.5.12",
    }
