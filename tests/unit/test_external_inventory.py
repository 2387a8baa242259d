"""The inventory of a cluster squall did not deploy: bootstrap servers, hosts, and the
commands filled in per broker; every error names the place and what to write."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from squall.cluster.external import ExternalInventory, external_inventory, load_external_inventory
from squall.cluster.inventory import InventoryError
from tests.unit.test_inventory import public_key

COMMANDS = """
[commands]
running = "systemctl is-active --quiet kafka"
kill = "systemctl kill --signal=KILL kafka"
start = "systemctl start kafka"
stop = "systemctl stop kafka"
pause = "systemctl kill --signal=STOP kafka"
resume = "systemctl kill --signal=CONT kafka"
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "id_test").write_text("not read while parsing\n")
    return tmp_path


def inventory(home: Path, body: str, *, commands: str = COMMANDS) -> ExternalInventory:
    key = public_key()
    text = f"""
[kafka]
bootstrap = "192.0.2.11:9092, 192.0.2.12:9092"
{commands}
[defaults]
key_file = "id_test"
host_key = "{key}"
{body}
"""
    return external_inventory(tomllib.loads(text), source="cluster.toml", base_dir=home)


TWO_BROKERS = """
[[brokers]]
name = "n1"
host = "192.0.2.11"

[[brokers]]
name = "n7"
host = "kafka-7.example"

[brokers.commands]
kill = "pkill -KILL -f 'broker.id={id}' # {name} on {host}"
"""


def test_commands_are_shared_filled_in_and_overridden_per_broker(home: Path) -> None:
    found = inventory(home, TWO_BROKERS)
    assert found.bootstrap == "192.0.2.11:9092,192.0.2.12:9092"
    assert [b.name for b in found.brokers] == ["n1", "n7"]
    assert found.commands["n1"].kill == "systemctl kill --signal=KILL kafka"
    assert found.commands["n7"].kill == "pkill -KILL -f 'broker.id=7' # n7 on kafka-7.example"
    assert found.commands["n7"].start == "systemctl start kafka"
    state = found.cluster_state("ext-1")
    assert state.runtime == "external" and state.inventory == "cluster.toml"
    assert state.kafka_listener and [b.address for b in state.brokers] == [
        "192.0.2.11",
        "kafka-7.example",
    ]


def test_partitions_are_allowed_only_by_the_inventory(home: Path) -> None:
    assert inventory(home, TWO_BROKERS).partitions is False
    allowed = inventory(home, TWO_BROKERS, commands=COMMANDS + "\n[network]\npartitions = true\n")
    assert allowed.partitions is True
    with pytest.raises(InventoryError, match=r"\[network\]\.netem: unknown key"):
        inventory(home, TWO_BROKERS, commands=COMMANDS + "\n[network]\nnetem = true\n")


def test_a_missing_command_names_the_broker_and_where_to_give_it(home: Path) -> None:
    partial = COMMANDS.replace('pause = "systemctl kill --signal=STOP kafka"\n', "")
    with pytest.raises(InventoryError, match=r"brokers\[0\] \(n1\): no command to pause it"):
        inventory(home, TWO_BROKERS, commands=partial)


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("kill -9 {pid}", r"names \{pid\}; only \{name\}, \{id\} and \{host\}"),
        ("awk '{print $1}'", r"names \{print \$1\}"),
        ("   ", "must have at least 1 character"),
        ("kill {", "is not a valid template"),
    ],
)
def test_a_command_naming_what_squall_does_not_fill_in_is_refused(
    home: Path, command: str, says: str
) -> None:
    commands = COMMANDS.replace('"systemctl kill --signal=KILL kafka"', repr(command))
    with pytest.raises(InventoryError, match=r"cluster\.toml.*commands.*kill") as caught:
        inventory(home, TWO_BROKERS, commands=commands)
    assert caught.match(says)


def test_literal_braces_are_written_twice(home: Path) -> None:
    commands = COMMANDS.replace(
        '"systemctl kill --signal=KILL kafka"', "\"pkill -KILL -f x; awk '{{print $1}}'\""
    )
    found = inventory(home, TWO_BROKERS, commands=commands)
    assert found.commands["n1"].kill == "pkill -KILL -f x; awk '{print $1}'"


def test_bootstrap_servers_must_be_host_and_port(home: Path) -> None:
    key = public_key()
    text = f"""
[kafka]
bootstrap = "192.0.2.11"
{COMMANDS}
[[brokers]]
name = "n1"
host = "192.0.2.11"
key_file = "id_test"
host_key = "{key}"
"""
    with pytest.raises(InventoryError, match=r"'192\.0\.2\.11' is not host:port"):
        external_inventory(tomllib.loads(text), source="cluster.toml", base_dir=home)


def test_no_brokers_or_no_kafka_table_says_what_to_add(home: Path) -> None:
    with pytest.raises(InventoryError, match=r"no \[\[brokers\]\]"):
        inventory(home, "")
    with pytest.raises(InventoryError, match="kafka"):
        external_inventory(
            tomllib.loads('[[brokers]]\nname = "n1"\nhost = "h"\n'), source="c", base_dir=home
        )


def test_brokers_are_named_by_their_broker_id_once_each(home: Path) -> None:
    with pytest.raises(InventoryError, match='must be "n<broker id>"'):
        inventory(home, '[[brokers]]\nname = "kafka1"\nhost = "192.0.2.11"\n')
    twice = '[[brokers]]\nname = "n1"\nhost = "192.0.2.11"\n' * 2
    with pytest.raises(InventoryError, match=r"\(n1\): named twice"):
        inventory(home, twice)
    # Two brokers on one host (each its own commands) are a cluster too.
    one_host = '[[brokers]]\nname = "n1"\nhost = "h"\n[[brokers]]\nname = "n2"\nhost = "h"\n'
    assert [b.host for b in inventory(home, one_host).brokers] == ["h", "h"]


def test_a_file_that_is_not_there_or_not_toml_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"cluster\.toml"):
        load_external_inventory(tmp_path / "cluster.toml")
    (tmp_path / "bad.toml").write_text("[kafka\n")
    with pytest.raises(InventoryError, match=r"bad\.toml"):
        load_external_inventory(tmp_path / "bad.toml")
