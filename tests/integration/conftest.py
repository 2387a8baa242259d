"""Fixtures for integration tests: real services on this machine."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from squall.cluster.zookeeper_server import ZooKeeperServer

CHROOT_PARENT = "/squall-tests"


@pytest.fixture(scope="package")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the integration tests; they isolate themselves with `zookeeper`.

    Tests that kill, pause or restart ZooKeeper use `zookeeper_server_factory` instead.
    Package-scoped: it and its admin client stop when the integration tests end. A kazoo
    client calls the global `random` on every heartbeat, which Hypothesis warns about in
    the property tests that run later in the same session.
    """
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture(scope="package")
def _zookeeper_admin(zookeeper_server: ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper_server.connect_string, timeout=10)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zookeeper(
    zookeeper_server: ZooKeeperServer,
    _zookeeper_admin: KazooClient,
    request: pytest.FixtureRequest,
) -> Iterator[str]:
    """A connect string with a fresh chroot on the shared server, as Kafka's
    `zookeeper.connect` takes it: `127.0.0.1:PORT/squall-tests/<test>-<random>`."""
    if zookeeper_server.paused:
        zookeeper_server.resume()
    if not zookeeper_server.is_running():  # a test broke the rule above; heal it for the rest
        zookeeper_server.start()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    chroot = f"{CHROOT_PARENT}/{name}-{uuid.uuid4().hex[:8]}"
    _zookeeper_admin.ensure_path(chroot)
    yield zookeeper_server.connect_string + chroot
    # Ephemeral nodes of a still-live session can make this fail; the chroot is unique anyway.
    with contextlib.suppress(KazooException):
        _zookeeper_admin.delete(chroot, recursive=True)


@pytest.fixture
def zookeeper_server_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ZooKeeperServer]]:
    """Start dedicated servers (keyword options as ZooKeeperServer's); all stopped at teardown."""
    servers: list[ZooKeeperServer] = []

    def make(**options: Any) -> ZooKeeperServer:
        server = ZooKeeperServer(Path(tmp_path_factory.mktemp("zookeeper")), **options)
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.kill()
