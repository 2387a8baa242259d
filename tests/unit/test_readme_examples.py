"""The README's spec and inventory examples are valid as written (apart from the key file,
which the inventory example names in the user's home)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from squall.cluster.inventory import load_inventory
from squall.commands.run import build_spec

README = Path(__file__).resolve().parents[2] / "README.md"


def toml_example(name: str) -> str:
    blocks = re.findall(r"```toml\n# (\S+)\n(.*?)```", README.read_text(), re.S)
    found = [text for title, text in blocks if title == name]
    assert found, f"the README has no ```toml block starting with '# {name}'"
    return found[0]


def test_the_spec_example_is_a_valid_spec(tmp_path: Path) -> None:
    path = tmp_path / "my-test.toml"
    path.write_text(toml_example("my-test.toml"))
    spec = build_spec(path, {})
    assert spec.name == "acks-all-under-faults" and spec.nemesis is not None


def test_the_inventory_example_is_a_valid_inventory(tmp_path: Path) -> None:
    text = toml_example("hosts.toml")
    assert 'key_file = "~/.ssh/squall_ed25519"' in text
    (tmp_path / "key").write_text("")
    path = tmp_path / "hosts.toml"
    path.write_text(text.replace("~/.ssh/squall_ed25519", "key"))
    inventory = load_inventory(path)
    assert [b.name for b in inventory.brokers] == ["n1", "n2", "n3"]


@pytest.mark.parametrize("word", ["HISTORY.md", "squall demo"])
def test_the_readme_points_at_nothing_outside_the_repository(word: str) -> None:
    assert word not in README.read_text()
