"""The lazyfs control socket under a directory deeper than an AF_UNIX address allows (a
SQUALL_HOME under pytest-xdist's temporary directories reached 130 bytes): it binds and
answers where it is, named through a descriptor of its directory."""

from __future__ import annotations

import socket
from pathlib import Path

from squall.cluster.lazyfs.control import SUN_PATH_MAX, addressable


def test_a_socket_deeper_than_an_address_allows_binds_and_answers(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = str(deep / "lazyfs.sock")
    assert len(path) >= SUN_PATH_MAX
    with socket.socket(socket.AF_UNIX) as server:
        with addressable(path) as address:
            server.bind(address)
        server.listen(1)
        assert (deep / "lazyfs.sock").is_socket()
        with socket.socket(socket.AF_UNIX) as client:
            with addressable(path) as address:
                client.connect(address)
            accepted, _ = server.accept()
            with accepted:
                client.sendall(b"ping")
                assert accepted.recv(4) == b"ping"


def test_a_short_path_is_its_own_address() -> None:
    with addressable("/tmp/x.sock") as address:
        assert address == "/tmp/x.sock"
