"""The ssh runtime's inventory file: parsing, defaults, host-key pinning and every error."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from squall.cluster.cluster import ClusterState, NodeState
from squall.cluster.inventory import (
    InventoryError,
    inventory_text,
    load_inventory,
    parse_inventory,
)


def public_key() -> str:
    raw = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return raw.decode()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "id_test").write_text("not read while parsing\n")
    return tmp_path


def parse(text: str, home: Path):
    return parse_inventory(text, source="hosts.toml", base_dir=home)


def valid(home: Path, key: str) -> str:
    return f"""
[defaults]
key_file = "id_test"
port = 2222

[[brokers]]
name = "n1"
host = "192.0.2.11"
host_key = "{key} comment"

[[brokers]]
name = "n2"
host = "192.0.2.12"
host_key = "{key}"
user = "squall"
root = "/srv/squall"

[zookeeper]
host = "192.0.2.20"
host_key = "{key}"
"""


def test_a_valid_inventory(home: Path) -> None:
    key = public_key()
    inventory = parse(valid(home, key), home)
    n1, n2 = inventory.brokers
    assert (n1.name, n1.host, n1.port, n1.user, n1.root) == (
        "n1",
        "192.0.2.11",
        2222,
        "root",
        "/opt/squall",
    )
    assert (n2.user, n2.root) == ("squall", "/srv/squall")
    assert n1.key_file == str(home / "id_test")
    assert n1.host_key == key  # the comment is dropped
    assert inventory.zookeeper.name == "zk1"
    state = inventory.cluster_state("r1", settings={"min.insync.replicas": 2})
    assert state.runtime == "ssh" and state.settings == {"min.insync.replicas": "2"}
    assert state.brokers[0] == NodeState(
        "n1", "192.0.2.11", 2222, "root", str(home / "id_test"), key
    )


def test_host_key_from_known_hosts(home: Path) -> None:
    key = public_key()
    (home / "known_hosts").write_text(f"[192.0.2.11]:2222 {key}\n192.0.2.20 {key}\n")
    text = """
[defaults]
key_file = "id_test"
known_hosts = "known_hosts"
[[brokers]]
name = "n1"
host = "192.0.2.11"
port = 2222
[zookeeper]
host = "192.0.2.20"
"""
    inventory = parse(text, home)
    assert inventory.brokers[0].host_key == key
    assert inventory.zookeeper.host_key == key


def test_written_state_reads_back(home: Path) -> None:
    key = public_key()
    nodes = [
        NodeState(name, f"10.0.0.{i}", key_file=str(home / "id_test"), host_key=key, container="c")
        for i, name in enumerate(["n1", "n2", "zk1"], start=1)
    ]
    state = ClusterState("r2", "docker", brokers=nodes[:2], zookeeper=nodes[2])
    (home / "hosts.toml").write_text(inventory_text(state))
    back = load_inventory(home / "hosts.toml").cluster_state("r2")
    assert [(b.name, b.address, b.host_key) for b in back.brokers] == [
        ("n1", "10.0.0.1", key),
        ("n2", "10.0.0.2", key),
    ]
    assert back.zookeeper.address == "10.0.0.3"


def with_zookeeper(text: str, table: str) -> str:
    """The inventory with its [zookeeper] table replaced."""
    return text.split("[zookeeper]")[0] + "[zookeeper]\n" + table


def shared_host(text: str) -> str:
    text = text.replace('host = "192.0.2.12"', 'host = "192.0.2.11"')
    return text.replace('root = "/srv/squall"', 'root = "/opt/squall"')


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t + "\n[extra]\n",
            r"extra: unknown key\. Valid keys: defaults, brokers, zookeeper",
        ),
        (
            lambda t: t.replace("user =", "usr ="),
            r'brokers\[1\]\.usr: unknown key; did you mean "user"\?',
        ),
        (
            lambda t: t.replace('"n2"', '"broker2"'),
            r'brokers\[1\]\.name = "broker2": must be "n<broker id>"',
        ),
        (lambda t: t.replace('"n2"', '"n1"'), r"n1: named twice"),
        (
            lambda t: t.replace("2222", '"ssh"'),
            r'\[defaults\]\.port = "ssh": must be a valid integer',
        ),
        (
            lambda t: t.replace("2222", "70000"),
            r"\.port = 70000: must be less than or equal to 65535",
        ),
        (lambda t: t.replace('key_file = "id_test"', ""), r"n1\)\.key_file: missing"),
        (lambda t: t.replace('"id_test"', '"nope"'), r"key_file: .*nope does not exist"),
        (
            lambda t: t.replace('"/srv/squall"', '"relative"'),
            r'brokers\[1\]\.root = "relative": must be an absolute path',
        ),
        (lambda t: t.replace('host = "192.0.2.12"', ""), r"brokers\[1\]\.host: missing"),
        (shared_host, r"n2: shares host 192.0.2.11:2222 and root /opt/squall with n1"),
        (lambda t: t.split("[zookeeper]")[0], r"zookeeper: missing"),
        (
            lambda t: t.replace("[zookeeper]", '[zookeeper]\nname = "zk2"'),
            r'\[zookeeper\]\.name = "zk2": the ZooKeeper node is always "zk1"',
        ),
        (
            lambda t: with_zookeeper(t, 'host = "192.0.2.20"\nhost_key = "ssh-ed25519 AAAAbad"\n'),
            r"zookeeper \(zk1\)\.host_key: not a usable ssh-ed25519 public key",
        ),
        (
            lambda t: with_zookeeper(t, 'host = "192.0.2.20"\n'),
            r"zookeeper \(zk1\): no host key: add host_key",
        ),
        (lambda t: "[defaults]\nkey_file = 'id_test'\n", r"brokers: missing"),
        (lambda t: t + "\n[[brokers]\n", r"not valid TOML"),
    ],
)
def test_errors_name_the_file_the_field_and_the_fix(home: Path, edit, message: str) -> None:
    with pytest.raises(InventoryError, match=message) as raised:
        parse(edit(valid(home, public_key())), home)
    assert str(raised.value).startswith("hosts.toml: ")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.replace('"192.0.2.12"', '"192.0.2.12; reboot"'),
            r'brokers\[1\]\.host = "192\.0\.2\.12; reboot": must be an IP address or a DNS name',
        ),
        (
            lambda t: t.replace('"192.0.2.20"', '"$(touch /tmp/x)"'),
            r"\[zookeeper\]\.host = .*must be an IP address or a DNS name",
        ),
        (lambda t: t.replace('"192.0.2.11"', '"-oProxyCommand=x"'), r"brokers\[0\]\.host = "),
        (lambda t: t.replace('"192.0.2.11"', '"fe80::1%$(x)"'), r"brokers\[0\]\.host = "),
        (lambda t: t.replace('"/srv/squall"', '"/"'), r'root = "/": .*system directory'),
        (lambda t: t.replace('"/srv/squall"', '"/usr/"'), r"root = .*system directory"),
        (lambda t: t.replace('"/srv/squall"', '"//etc"'), r"root = .*system directory"),
        (lambda t: t.replace('"/srv/squall"', '"/opt"'), r"root = .*system directory"),
        (lambda t: t.replace('"/srv/squall"', '"/tmp"'), r"root = .*system directory"),
        (lambda t: t.replace('"/srv/squall"', '"/home"'), r"root = .*system directory"),
        (lambda t: t.replace('"/srv/squall"', '"/opt/squall/../.."'), r"must not contain"),
        (lambda t: t.replace('"/srv/squall"', '"/opt/./squall"'), r"must not contain"),
        (
            lambda t: t.replace('user = "squall"', "python = \"python3 -c 'import os'\""),
            r"brokers\[1\]\.python = .*must be the Python command or its path",
        ),
        (
            lambda t: t.replace('user = "squall"', 'python = "python3;reboot"'),
            r"python = .*must be the Python command",
        ),
    ],
)
def test_values_that_reach_a_shell_are_checked(home: Path, edit, message: str) -> None:
    """Issue 17: hosts, roots and the Python command from an inventory reach shells."""
    with pytest.raises(InventoryError, match=message):
        parse(edit(valid(home, public_key())), home)


@pytest.mark.parametrize(
    ("host", "root", "python"),
    [
        ("n1.example.org", "/opt/squall/", "/usr/bin/python3.11"),
        ("fd00::11", "/srv/squall-2", "python3"),
        ("node_1.lab", "/data/squall", "pypy3"),
    ],
)
def test_ordinary_hosts_roots_and_pythons_are_accepted(
    home: Path, host: str, root: str, python: str
) -> None:
    text = valid(home, public_key()).replace('"192.0.2.12"', f'"{host}"')
    text = text.replace('"/srv/squall"', f'"{root}"')
    text = text.replace('user = "squall"', f'python = "{python}"')
    n2 = parse(text, home).brokers[1]
    assert (n2.host, n2.root, n2.python) == (host, root.rstrip("/"), python)


def test_known_hosts_without_the_host(home: Path) -> None:
    (home / "known_hosts").write_text(f"192.0.2.99 {public_key()}\n")
    text = """
[defaults]
key_file = "id_test"
known_hosts = "known_hosts"
[[brokers]]
name = "n1"
host = "192.0.2.11"
[zookeeper]
host = "192.0.2.20"
"""
    with pytest.raises(InventoryError, match=r"has no key for 192.0.2.11; add it \(`ssh-keyscan"):
        parse(text, home)


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"cannot read the inventory .*absent.toml"):
        load_inventory(tmp_path / "absent.toml")
