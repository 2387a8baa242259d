"""The ssh runtime's inventory file: which hosts run the brokers and ZooKeeper, and how to log in.

A TOML file. ``[defaults]`` applies to every host; each ``[[brokers]]`` entry is one broker
node (``n1``, ``n2``...: the number is the broker id); ``[zookeeper]`` is the ``zk1`` node::

    [defaults]                          # optional; any host field except name and host
    user = "root"                       # squall needs root on the nodes (iptables, tc)
    port = 22
    key_file = "~/.ssh/squall_ed25519"  # unencrypted OpenSSH private key; relative paths are
    known_hosts = "~/.ssh/known_hosts"  # relative to this file
    root = "/opt/squall"                # where squall keeps the SUT, data and logs
    python = "python3"                  # 3.11 or newer, on every broker node

    [[brokers]]
    name = "n1"
    host = "192.0.2.11"
    host_key = "ssh-ed25519 AAAAC3Nz..."   # pins the host key; else looked up in known_hosts

    [[brokers]]
    name = "n2"
    host = "192.0.2.12"

    [zookeeper]
    host = "192.0.2.20"                 # name is always zk1

Host keys are never trusted on first use: each host needs ``host_key`` or an entry in
``known_hosts`` (``ssh-keyscan -p PORT HOST``, after checking the fingerprint).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import paramiko

from squall.cluster.cluster import ZOOKEEPER_NODE, ClusterState, NodeState

HOST_FIELDS = (
    "name",
    "host",
    "port",
    "user",
    "key_file",
    "host_key",
    "known_hosts",
    "root",
    "python",
)
DEFAULT_FIELDS = tuple(f for f in HOST_FIELDS if f not in ("name", "host"))
KEY_PREFERENCE = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "rsa-sha2-512",
    "ssh-rsa",
)
_BROKER_NAME = re.compile(r"^n[1-9][0-9]*$")


class InventoryError(ValueError):
    """The inventory file is missing, not TOML, or has a bad or missing field."""


@dataclass(frozen=True)
class HostEntry:
    """One node of the inventory, with its host key resolved."""

    name: str
    host: str
    key_file: str
    host_key: str
    port: int = 22
    user: str = "root"
    root: str = "/opt/squall"
    python: str = "python3"

    def node_state(self) -> NodeState:
        return NodeState(
            name=self.name,
            address=self.host,
            ssh_port=self.port,
            user=self.user,
            key_file=self.key_file,
            host_key=self.host_key,
            root=self.root,
            python=self.python,
        )


@dataclass(frozen=True)
class Inventory:
    """The hosts of an ssh cluster."""

    brokers: tuple[HostEntry, ...]
    zookeeper: HostEntry
    source: str

    def cluster_state(
        self, run_id: str, *, runtime: str = "ssh", settings: Mapping[str, object] | None = None
    ) -> ClusterState:
        return ClusterState(
            run_id=run_id,
            runtime=runtime,
            brokers=[b.node_state() for b in self.brokers],
            zookeeper=self.zookeeper.node_state(),
            settings={k: str(v) for k, v in (settings or {}).items()},
            created=datetime.now(UTC).isoformat(timespec="seconds"),
        )


def load_inventory(path: Path) -> Inventory:
    """Read and check an inventory file; InventoryError saying what to fix."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise InventoryError(
            f"cannot read the inventory {path}: {err.strerror}; pass the TOML file that names "
            "the hosts (format: squall/cluster/inventory.py)"
        ) from None
    return parse_inventory(text, source=str(path), base_dir=Path(path).resolve().parent)


def parse_inventory(
    text: str, *, source: str = "<inventory>", base_dir: Path | None = None
) -> Inventory:
    """Parse inventory TOML; relative paths are taken relative to ``base_dir``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InventoryError(f"{source}: not valid TOML ({err}); fix the syntax") from None
    return _Parser(source, base_dir or Path.cwd()).inventory(doc)


class _Parser:
    def __init__(self, source: str, base_dir: Path) -> None:
        self.source = source
        self.base_dir = base_dir

    def fail(self, where: str, problem: str) -> InventoryError:
        return InventoryError(f"{self.source}: {where}: {problem}")

    def inventory(self, doc: dict[str, Any]) -> Inventory:
        unknown = sorted(set(doc) - {"defaults", "brokers", "zookeeper"})
        if unknown:
            raise self.fail(
                ", ".join(unknown),
                "unknown section; the sections are [defaults], [[brokers]], [zookeeper]",
            )
        defaults = doc.get("defaults", {})
        if not isinstance(defaults, dict):
            raise self.fail("defaults", "must be a table ([defaults])")
        self.check_fields("defaults", defaults, DEFAULT_FIELDS)
        brokers_doc = doc.get("brokers")
        if not isinstance(brokers_doc, list) or not brokers_doc:
            raise self.fail(
                "brokers",
                'missing; add one [[brokers]] table per broker host (name = "n1", host = ...)',
            )
        brokers = tuple(
            self.host(f"brokers[{i}]", entry, defaults, broker=True)
            for i, entry in enumerate(brokers_doc)
        )
        zk_doc = doc.get("zookeeper")
        if not isinstance(zk_doc, dict):
            raise self.fail("zookeeper", "missing; add a [zookeeper] table with the ZooKeeper host")
        zookeeper = self.host("zookeeper", zk_doc, defaults, broker=False)
        self.check_unique(brokers, zookeeper)
        return Inventory(brokers, zookeeper, self.source)

    def check_fields(self, where: str, table: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            raise self.fail(
                where, f"unknown field(s) {', '.join(unknown)}; known: {', '.join(allowed)}"
            )

    def host(
        self, where: str, entry: Any, defaults: Mapping[str, Any], *, broker: bool
    ) -> HostEntry:
        if not isinstance(entry, dict):
            raise self.fail(where, "must be a table of host fields")
        name = entry.get("name", None if broker else ZOOKEEPER_NODE)
        self.check_fields(
            f"{where} ({name})" if isinstance(name, str) else where, entry, HOST_FIELDS
        )
        if broker and (not isinstance(name, str) or not _BROKER_NAME.match(name)):
            raise self.fail(f"{where}.name", f'must be "n<broker id>" (n1, n2...), got {name!r}')
        if not broker and name != ZOOKEEPER_NODE:
            raise self.fail(
                f"{where}.name", f'the ZooKeeper node is always "{ZOOKEEPER_NODE}", got {name!r}'
            )
        name = str(name)
        where = f"{where} ({name})"
        merged = {**defaults, **entry}
        host = self.text(where, "host", merged.get("host"))
        port = merged.get("port", 22)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise self.fail(f"{where}.port", f"must be an integer 1-65535, got {port!r}")
        user = self.text(where, "user", merged.get("user", "root"))
        root = self.text(where, "root", merged.get("root", "/opt/squall"))
        if not root.startswith("/"):
            raise self.fail(f"{where}.root", f"must be an absolute path on the host, got {root!r}")
        python = self.text(where, "python", merged.get("python", "python3"))
        if "key_file" not in merged:
            raise self.fail(
                f"{where}.key_file",
                "missing; name the private key to log in with (here or in [defaults])",
            )
        key_file = self.path(where, "key_file", merged["key_file"])
        return HostEntry(
            name=name,
            host=host,
            key_file=str(key_file),
            host_key=self.host_key(where, host, port, entry, merged),
            port=port,
            user=user,
            root=root,
            python=python,
        )

    def text(self, where: str, field: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            problem = "missing" if value is None else f"must be a non-empty string, got {value!r}"
            raise self.fail(f"{where}.{field}", problem)
        return value.strip()

    def path(self, where: str, field: str, value: Any) -> Path:
        path = Path(self.text(where, field, value)).expanduser()
        path = path if path.is_absolute() else self.base_dir / path
        if not path.is_file():
            raise self.fail(f"{where}.{field}", f"{path} does not exist or is not a file")
        return path

    def host_key(
        self, where: str, host: str, port: int, entry: Mapping[str, Any], merged: Mapping[str, Any]
    ) -> str:
        if "host_key" in entry or ("host_key" in merged and "known_hosts" not in merged):
            text = self.text(where, "host_key", merged["host_key"])
            try:
                return _normalised_key(text)
            except ValueError as err:
                raise self.fail(
                    f"{where}.host_key",
                    f"{err}; copy the line of the host's /etc/ssh/ssh_host_ed25519_key.pub",
                ) from None
        if "known_hosts" not in merged:
            raise self.fail(
                where,
                'no host key: add host_key = "<type> <base64>" or known_hosts = "<file>" '
                "(host keys are pinned, never trusted on first use)",
            )
        known_hosts = self.path(where, "known_hosts", merged["known_hosts"])
        known_as = host if port == 22 else f"[{host}]:{port}"
        try:
            keys = paramiko.HostKeys(str(known_hosts)).lookup(known_as)
        except (OSError, paramiko.SSHException) as err:
            raise self.fail(f"{where}.known_hosts", f"cannot read {known_hosts}: {err}") from None
        if not keys:
            raise self.fail(
                f"{where}.known_hosts",
                f"{known_hosts} has no key for {known_as}; add it (`ssh-keyscan -p {port} {host}`, "
                "after checking the fingerprint) or give host_key",
            )
        name = next((t for t in KEY_PREFERENCE if t in keys), next(iter(keys)))
        key = keys[name]
        return f"{key.get_name()} {key.get_base64()}"

    def check_unique(self, brokers: tuple[HostEntry, ...], zookeeper: HostEntry) -> None:
        seen: dict[str, str] = {}
        places: dict[tuple[str, int, str], str] = {}
        for entry in (*brokers, zookeeper):
            if entry.name in seen:
                raise self.fail(entry.name, "named twice; every broker needs its own n<id>")
            seen[entry.name] = entry.host
            place = (entry.host, entry.port, entry.root)
            if place in places:
                raise self.fail(
                    entry.name,
                    f"shares host {entry.host}:{entry.port} and root {entry.root} with "
                    f"{places[place]}; give each node its own host or root",
                )
            places[place] = entry.name


def _normalised_key(text: str) -> str:
    """``<type> <base64>`` of an OpenSSH public key line, checked by paramiko."""
    parts = text.split()
    if len(parts) < 2:
        raise ValueError(f"not an OpenSSH public key `<type> <base64>`: {text!r}")
    try:
        paramiko.PKey.from_type_string(parts[0], base64.b64decode(parts[1], validate=True))
    except (binascii.Error, paramiko.SSHException, paramiko.UnknownKeyType) as err:
        raise ValueError(f"not a usable {parts[0]} public key ({err})") from None
    return f"{parts[0]} {parts[1]}"


def inventory_text(state: ClusterState) -> str:
    """An inventory describing a cluster's nodes (e.g. a docker cluster, as if remote hosts)."""

    def table(header: str, node: NodeState) -> str:
        fields: dict[str, object] = {
            "name": node.name,
            "host": node.address,
            "port": node.ssh_port,
            "user": node.user,
            "key_file": node.key_file,
            "host_key": node.host_key,
            "root": node.root,
            "python": node.python,
        }
        body = "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items() if v is not None)
        return f"{header}\n{body}\n"

    head = f"# squall inventory of cluster {state.run_id} ({state.runtime})\n\n"
    brokers = "".join(table("[[brokers]]", b) for b in state.brokers)
    return head + brokers + table("[zookeeper]", state.zookeeper)


def write_inventory(state: ClusterState, path: Path) -> Path:
    path.write_text(inventory_text(state))
    return path
