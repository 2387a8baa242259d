"""ZooKeeperServer against the real Debian ZooKeeper: lifecycle, faults, leftovers, errors."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from squall.cluster.zookeeper_server import (
    PID_FILE,
    ZooKeeperNotInstalledError,
    ZooKeeperServer,
    ZooKeeperStartError,
    find_java,
    find_zookeeper_classpath,
    kill_leftover,
)
from tests.support import wait_for as _wait_for

pytestmark = pytest.mark.integration

ServerFactory = Callable[..., ZooKeeperServer]

# A client that holds an ephemeral node until it is killed (1 s session).
EPHEMERAL_HOLDER = """
import sys, time
from kazoo.client import KazooClient
client = KazooClient(hosts=sys.argv[1], timeout=1.0)
client.start(timeout=10)
client.create("/holder", b"alive", ephemeral=True)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.fixture
def kazoo_client() -> Iterator[Callable[..., KazooClient]]:
    clients: list[KazooClient] = []

    def connect(hosts: str, timeout: float = 10.0) -> KazooClient:
        client = KazooClient(hosts=hosts, timeout=timeout)
        client.start(timeout=15)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.stop()
        client.close()


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    _wait_for(condition, timeout, what, interval=0.05, tolerate=())


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start_cli(data_dir: Path) -> subprocess.Popen[str]:
    """`python -m squall.cluster.zookeeper_server` in the foreground, as on a node."""
    module = "squall.cluster.zookeeper_server"
    command = [sys.executable, "-m", module, "--data-dir", str(data_dir), "--port", "0"]
    cli = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert cli.stdout is not None
    return cli


def test_serves_clients_and_ephemeral_nodes(zookeeper_server, zookeeper, kazoo_client):
    assert "Mode: standalone" in zookeeper_server.four_letter_word("srvr")
    assert zookeeper_server.four_letter_word("ruok") == "imok"
    client = kazoo_client(zookeeper)
    client.create("/eph", b"hello", ephemeral=True)
    data, stat = client.get("/eph")
    assert data == b"hello"
    assert stat.ephemeralOwner == client.client_id[0]


def test_answers_only_the_four_letter_words_squall_asks(zookeeper_server):
    assert "dataDir=" in zookeeper_server.four_letter_word("conf")
    for word in ("dump", "envi", "wchc", "cons", "mntr"):
        assert "not in the whitelist" in zookeeper_server.four_letter_word(word), word


def test_session_expiry_removes_ephemeral_node_of_killed_client(zookeeper, kazoo_client):
    holder = subprocess.Popen(
        [sys.executable, "-c", EPHEMERAL_HOLDER, zookeeper], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        observer = kazoo_client(zookeeper)
        assert observer.exists("/holder") is not None
        holder.kill()  # no CloseSession: only the session timeout can remove the node
        holder.wait()
        assert observer.exists("/holder") is not None
        wait_for(lambda: observer.exists("/holder") is None, 10, "the session to expire")
    finally:
        holder.kill()
        holder.wait()


def test_stop_restart_and_kill_keep_persistent_data(zookeeper_server_factory, kazoo_client):
    server: ZooKeeperServer = zookeeper_server_factory()
    port, pid = server.port, server.pid
    assert pid is not None and (server.data_dir / PID_FILE).read_text().strip() == str(pid)
    client = kazoo_client(server.connect_string)
    client.create("/kept", b"v1")
    client.stop()

    server.stop()
    assert not server.is_running() and server.pid is None
    assert not (server.data_dir / PID_FILE).exists()
    server.start()
    assert server.port == port and server.pid != pid
    assert kazoo_client(server.connect_string).get("/kept")[0] == b"v1"

    kazoo_client(server.connect_string).set("/kept", b"v2")
    server.kill()
    assert not server.is_running() and server.pid is None
    server.restart()
    assert kazoo_client(server.connect_string).get("/kept")[0] == b"v2"
    assert "binding to port" in server.log_path.read_text()


def test_pause_times_out_clients_and_resume_restores_them(zookeeper_server_factory, kazoo_client):
    server: ZooKeeperServer = zookeeper_server_factory()
    client = kazoo_client(server.connect_string, timeout=2.0)
    client.create("/data", b"x")
    suspended = threading.Event()
    client.add_listener(lambda state: suspended.set() if state != KazooState.CONNECTED else None)

    server.pause()
    assert server.paused and server.is_running()
    assert suspended.wait(10), "client never noticed the paused server"
    with pytest.raises((KazooTimeoutError, ConnectionLoss)):
        client.get_async("/data").get(timeout=1.0)

    server.resume()
    assert not server.paused
    wait_for(lambda: client.state == KazooState.CONNECTED, 15, "the client to reconnect")
    assert client.get("/data")[0] == b"x"


def test_exit_during_start_reports_the_log(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = ZooKeeperServer(tmp_path / "zk", port=taken.getsockname()[1])
        with pytest.raises(ZooKeeperStartError, match="is in use") as error:
            server.start()
    assert "java.net.BindException" in str(error.value)
    assert not server.is_running()


def test_cli_runs_in_foreground_until_sigterm(tmp_path):
    cli = start_cli(tmp_path)
    assert cli.stdout is not None
    line = cli.stdout.readline()
    assert line.startswith("zookeeper serving 127.0.0.1:")
    pid = int((tmp_path / PID_FILE).read_text())
    cli.send_signal(signal.SIGTERM)
    assert cli.wait(15) == 0
    assert not alive(pid)
    assert not (tmp_path / PID_FILE).exists()


def test_kill_leftover_kills_the_server_of_a_crashed_run(tmp_path):
    assert kill_leftover(tmp_path) is None  # no pidfile
    cli = start_cli(tmp_path)
    assert cli.stdout is not None
    assert cli.stdout.readline().startswith("zookeeper serving")
    cli.kill()  # the run crashes; its server lives on
    cli.wait()
    pid = int((tmp_path / PID_FILE).read_text())
    try:
        assert alive(pid)
        with pytest.raises(ZooKeeperStartError, match="leftover"):
            ZooKeeperServer(tmp_path).start()
        assert kill_leftover(tmp_path) == pid
        assert not alive(pid)
        assert not (tmp_path / PID_FILE).exists()
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_kill_leftover_ignores_a_recycled_pid(tmp_path):
    (tmp_path / PID_FILE).parent.mkdir(parents=True)
    (tmp_path / PID_FILE).write_text(f"{os.getpid()}\n")
    assert kill_leftover(tmp_path) is None
    assert not (tmp_path / PID_FILE).exists()


def test_missing_java_or_jars_give_install_instructions(tmp_path, monkeypatch):
    with pytest.raises(ZooKeeperNotInstalledError, match="apt-get install zookeeper"):
        ZooKeeperServer(tmp_path, java=str(tmp_path / "no-java")).start()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ZooKeeperNotInstalledError, match="no Java runtime found"):
        find_java()
    with pytest.raises(ZooKeeperNotInstalledError, match=r"zookeeper\.jar"):
        find_zookeeper_classpath(tmp_path)
