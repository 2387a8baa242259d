"""`squall run --runtime external` against a cluster squall did not deploy: our brokers in
containers, taken out of squall's hands and started by hand with a control script of their
own (as an operator's systemd unit would), reached through their Kafka listeners and over
SSH, killed, paused, bounced and started by the inventory's commands."""

from __future__ import annotations

import json
import secrets
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from squall.cluster.cluster import Cluster
from squall.cluster.docker import DockerRuntime
from squall.cluster.services import KAFKA_PORT
from tests.support import run_squall

pytestmark = pytest.mark.docker

CONTROL = "/usr/local/bin/broker-ctl"


def control_script(command: list[str], env: dict[str, str], directory: str) -> str:
    """An operator's control script for one broker: running, start, stop, kill, pause,
    resume; the broker's pid in a file of its own."""
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f"""#!/bin/sh
PID={directory}/broker.pid
alive() {{
    pid=$(cat "$PID" 2>/dev/null) || return 1
    state=$(sed -n 's/^State:[[:space:]]*\\([A-Z]\\).*/\\1/p' /proc/"$pid"/status 2>/dev/null)
    [ -n "$state" ] && [ "$state" != Z ]
}}
case "$1" in
    running) alive ;;
    start)
        alive && exit 0
        cd {directory} && env {assignments} setsid nohup {shlex.join(command)} \\
            >> {directory}/broker.log 2>&1 < /dev/null &
        echo $! > "$PID" ;;
    stop)
        alive || exit 0
        kill -CONT "$pid"; kill -TERM "$pid"
        for _ in $(seq 300); do alive || exit 0; sleep 0.1; done
        kill -KILL "$pid" ;;
    kill) alive && kill -KILL "$pid" ;;
    pause) alive && kill -STOP "$pid" ;;
    resume) alive && kill -CONT "$pid" ;;
    *) echo "usage: $0 running|start|stop|kill|pause|resume" >&2; exit 2 ;;
esac
"""


@pytest.fixture(scope="module")
def by_hand(squall_home: Path, docker_runtime: DockerRuntime) -> Iterator[Cluster]:
    """Three brokers with Kafka listeners whose processes squall no longer runs: each is
    stopped and started again by its host's control script."""
    run_id = f"test-{secrets.token_hex(3)}"
    cluster = docker_runtime.up(
        run_id, 3, settings={"min.insync.replicas": "2"}, kafka_listener=True, lazy_disk=False
    )
    try:
        for name, node in cluster.brokers.items():
            broker = cluster.broker(name)
            script = control_script(
                broker.command(),
                {"PYTHONPATH": f"{broker.root}/sut", "PYTHONUNBUFFERED": "1"},
                "/opt/by-hand",
            )
            broker.stop()
            node.run(
                f"mkdir -p /opt/by-hand && cat > {CONTROL} <<'EOF'\n{script}EOF\n"
                f"chmod +x {CONTROL} && {CONTROL} start"
            )
        yield cluster
    finally:
        cluster.close()
        docker_runtime.clean(run_id)


def inventory_bootstrap(cluster: Cluster) -> str:
    return ",".join(f"{s.address}:{KAFKA_PORT}" for s in cluster.state.brokers)


def inventory(cluster: Cluster, path: Path, *, partitions: bool = True) -> Path:
    brokers = "".join(
        f'[[brokers]]\nname = "{s.name}"\nhost = "{s.address}"\nhost_key = "{s.host_key}"\n\n'
        for s in cluster.state.brokers
    )
    first = cluster.state.brokers[0]
    commands = "".join(
        f'{op} = "{CONTROL} {op}"\n'
        for op in ("running", "kill", "start", "stop", "pause", "resume")
    )
    path.write_text(
        f'[kafka]\nbootstrap = "{inventory_bootstrap(cluster)}"\n\n'
        f"[commands]\n{commands}\n"
        f"[network]\npartitions = {'true' if partitions else 'false'}\n\n"
        f'[defaults]\nuser = "{first.user}"\nkey_file = "{first.key_file}"\n\n{brokers}'
    )
    return path


def squall_run(
    cluster: Cluster, tmp_path: Path, *flags: str, client: str = "confluent-kafka"
) -> subprocess.CompletedProcess[str]:
    """`squall run` against the cluster through `client`, as a user runs it."""
    hosts = inventory(cluster, tmp_path / "cluster.toml")
    return run_squall(
        "run",
        "--runtime",
        "external",
        "--inventory",
        str(hosts),
        "--client",
        client,
        "--store",
        str(tmp_path / "store"),
        *flags,
        cwd=tmp_path,
        home=tmp_path / ".squall",
        timeout=600,
    )


def test_a_run_against_a_cluster_squall_did_not_deploy(by_hand: Cluster, tmp_path: Path) -> None:
    done = squall_run(
        by_hand,
        tmp_path,
        "--time-limit",
        "15",
        "--faults",
        "kill=1,pause=1,bounce=1,partition=1",
        "--interval",
        "2,3",
        "--duration",
        "1,3",
        "--replication-factor",
        "3",
        "--min-insync-replicas",
        "2",
        "--seed",
        "7",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = next((tmp_path / "store" / "queue").glob("2*"))
    test = json.loads((run_dir / "test.json").read_text())
    assert test["runtime"] == "external" and test["zookeeper"] is None
    assert test["kafka_bootstrap"] == test["bootstrap"]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is True
    faults = [
        json.loads(line)
        for line in (run_dir / "history.jsonl").read_text().splitlines()
        if '"process":"nemesis"' in line.replace(" ", "")
    ]
    acted = {f["f"] for f in faults if f.get("value", {}).get("outcome")}
    assert {"kill", "pause"} & acted, sorted(acted)
    # squall took nothing down: every broker runs under its own control script again,
    # squall's iptables chain is gone, and the cluster's state is forgotten.
    for node in by_hand.brokers.values():
        assert node.run(f"{CONTROL} running", check=False).ok
        assert not node.run("iptables -w -n -L SQUALL", check=False).ok
    assert not list((tmp_path / ".squall" / "clusters").glob("*.json"))


def test_squall_s_own_client_runs_there_with_its_consumers_in_the_group(
    by_hand: Cluster, tmp_path: Path
) -> None:
    spec = tmp_path / "members.toml"
    spec.write_text(
        'name = "members"\n\n[workload]\ntopic = "members"\ngroup_membership = true\n\n'
        "[workload.consumer_config]\n"
        '"session.timeout.ms" = 6000\n"heartbeat.interval.ms" = 1000\n'
    )
    done = squall_run(
        by_hand,
        tmp_path,
        "--spec",
        str(spec),
        "--time-limit",
        "15",
        "--faults",
        "kill=1",
        "--interval",
        "3,4",
        "--duration",
        "1,2",
        "--seed",
        "8",
        client="squall",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = next((tmp_path / "store" / "members").glob("2*"))
    test = json.loads((run_dir / "test.json").read_text())
    assert test["workload"]["client"] == "squall" and test["workload"]["group_membership"]
    assert json.loads((run_dir / "results.json").read_text())["valid"] is True


def test_a_broker_the_inventory_says_is_down_stops_the_run_before_anything_changes(
    by_hand: Cluster, tmp_path: Path
) -> None:
    n3 = by_hand.brokers["n3"]
    n3.run(f"{CONTROL} stop")
    try:
        done = squall_run(by_hand, tmp_path, "--time-limit", "5")
    finally:
        n3.run(f"{CONTROL} start")
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    assert "n3 not running" in done.stdout + done.stderr
    assert "start the cluster before testing it" in done.stdout + done.stderr
    # The next test finds the cluster whole again: n3 among the brokers Kafka's metadata
    # lists.
    admin = AdminClient({"bootstrap.servers": inventory_bootstrap(by_hand)})
    deadline = time.monotonic() + 60
    while len(admin.list_topics(timeout=10).brokers) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)


def test_squall_cluster_and_nemesis_commands_act_on_it_and_down_leaves_it_running(
    by_hand: Cluster, tmp_path: Path
) -> None:
    """`squall cluster up --runtime external` makes it the current cluster; `squall nemesis`
    pauses and kills the leader of a partition found in Kafka's metadata, resumes and
    starts it; `squall cluster down` forgets it and stops nothing."""
    hosts = inventory(by_hand, tmp_path / "cluster.toml")
    home = tmp_path / ".squall"

    def squall(*args: str) -> dict[str, Any]:
        """The command's first JSON line."""
        done = run_squall(*args, cwd=tmp_path, home=home, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        return json.loads(lines[0]) if lines else {}

    up = squall("cluster", "up", "--runtime", "external", "--inventory", str(hosts))
    assert up["runtime"] == "external"
    status = squall("cluster", "status", "--json")
    assert [n["broker_running"] for n in status["nodes"]] == [True, True, True]
    assert status["registered_brokers"] == [1, 2, 3]
    # A topic to find a leader of, created as any Kafka client would.
    admin = AdminClient({"bootstrap.servers": str(up["bootstrap"])})
    admin.create_topics([NewTopic("roles", 1, 3)])["roles"].result(30)
    leader = f"n{admin.list_topics('roles', timeout=30).topics['roles'].partitions[0].leader}"
    pid_of = "cat /opt/by-hand/broker.pid"

    def state() -> str:
        pid = by_hand.brokers[leader].run(pid_of).output.strip()
        return by_hand.brokers[leader].run(f"sed -n 's/^State:\\s*//p' /proc/{pid}/status").output

    squall("nemesis", "pause", "--target", "leader:roles-0")
    assert state().startswith("T")
    squall("nemesis", "resume", "--target", leader)
    assert not state().startswith("T")
    squall("nemesis", "kill", "--target", leader)
    assert not by_hand.brokers[leader].run(f"{CONTROL} running", check=False).ok
    squall("nemesis", "start", "--target", leader)
    assert by_hand.brokers[leader].run(f"{CONTROL} running", check=False).ok
    # Partitions among the brokers only: there is no ZooKeeper node to cut off.
    cut = squall("nemesis", "partition", "--shape", "isolate", "--target", leader)
    grudge = cut["value"]["grudge"]
    assert sorted(grudge) == ["n1", "n2", "n3"], cut
    rules = by_hand.brokers[leader].run("iptables -w -S SQUALL").output
    others = [s.address for s in by_hand.state.brokers if s.name != leader]
    assert all(f"-s {address}/32 -j DROP" in rules for address in others), rules
    squall("nemesis", "heal")
    assert "DROP" not in by_hand.brokers[leader].run("iptables -w -S SQUALL").output
    squall("cluster", "down")
    for node in by_hand.brokers.values():
        assert node.run(f"{CONTROL} running", check=False).ok
        assert not node.run("iptables -w -n -L SQUALL", check=False).ok
