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

Every value that reaches a shell on a node is checked here (and quoted there): ``host`` is a
DNS name or an IP address, ``python`` a command name or path, and ``root`` an absolute
directory of squall's own, never a system directory such as ``/``, ``/usr`` or ``/opt``
itself (squall deletes its data, logs, run and config directories under it).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import paramiko
from pydantic import AfterValidator, Field, field_validator

from squall.cluster.cluster import ZOOKEEPER_NODE, ClusterState, NodeState
from squall.cluster.owner import owner_label
from squall.config import (
    ConfigModel,
    ConfigurationError,
    Text,
    parse_toml,
    read_toml,
    validate,
)

KEY_PREFERENCE = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "rsa-sha2-512",
    "ssh-rsa",
)
_BROKER_NAME = re.compile(r"^n[1-9][0-9]*$")
_FORMAT_HINT = "; pass the TOML file that names the hosts (format: squall/cluster/inventory.py)"
_HOST_LABEL = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")
_PYTHON = re.compile(r"^[A-Za-z0-9_./+-]+$")
SYSTEM_DIRECTORIES = frozenset(
    {
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib32",
        "/lib64",
        "/media",
        "/mnt",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/srv",
        "/sys",
        "/tmp",
        "/usr",
        "/usr/bin",
        "/usr/lib",
        "/usr/local",
        "/usr/sbin",
        "/usr/share",
        "/var",
        "/var/lib",
        "/var/log",
        "/var/tmp",
    }
)
"""Directories that can never be a node's root: squall deletes directories under its root."""


class InventoryError(ConfigurationError):
    """The inventory file is missing, not TOML, or has a bad or missing field."""


def check_root(root: str) -> str:
    """``root`` as a normalised absolute path of squall's own (no trailing slash); ValueError
    for a relative path, a ``..`` or ``.`` in it, a control character, or a system directory."""
    if not root.startswith("/"):
        raise ValueError("must be an absolute path on the host")
    if any(part in (".", "..") for part in root.split("/")):
        raise ValueError("must not contain '.' or '..' (name the directory itself)")
    if any(ord(c) < 32 or ord(c) == 127 for c in root):
        raise ValueError("must not contain control characters")
    normalised = "/" + posixpath.normpath(root).lstrip("/")
    if normalised in SYSTEM_DIRECTORIES:
        raise ValueError(
            "is a system directory; squall deletes its data, logs, run and config "
            "directories under root, so give it a directory of its own (e.g. /opt/squall)"
        )
    return normalised


def check_host(host: str) -> str:
    """``host`` if it is an IP address or a DNS name; ValueError otherwise."""
    if "%" not in host:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            return host
    name = host.removesuffix(".")
    if 0 < len(name) <= 253 and all(_HOST_LABEL.match(label) for label in name.split(".")):
        return host
    raise ValueError(
        "must be an IP address or a DNS name (letters, digits, '-' and '_' in dot-separated "
        "labels, none starting or ending with '-')"
    )


def check_python(python: str) -> str:
    """``python`` if it is a command name or a path (no spaces, quotes or shell syntax)."""
    if not _PYTHON.match(python) or python.startswith("-"):
        raise ValueError(
            "must be the Python command or its path (letters, digits and _ . / + -), "
            'e.g. "python3" or "/usr/bin/python3.11"'
        )
    return python


class HostSettings(ConfigModel):
    """``[defaults]``: how to log in to every host; a host's own table overrides it."""

    port: Annotated[int, Field(strict=True, ge=1, le=65535)] | None = None
    """The SSH port (default 22)."""
    user: Text | None = None
    """The user to log in as (default root: squall needs root for iptables and tc)."""
    key_file: Text | None = None
    """An unencrypted OpenSSH private key; a relative path is relative to the inventory."""
    host_key: Text | None = None
    """The host's public key, "<type> <base64>": pinned, never trusted on first use."""
    known_hosts: Text | None = None
    """A known_hosts file holding the host's key (instead of host_key)."""
    root: Annotated[Text, AfterValidator(check_root)] | None = None
    """Where squall keeps the SUT, data and logs on the host (default /opt/squall)."""
    python: Annotated[Text, AfterValidator(check_python)] | None = None
    """The host's Python, 3.11 or newer (default python3)."""


class BrokerHost(HostSettings):
    """``[[brokers]]``: one broker node."""

    name: Annotated[str, Field(json_schema_extra={"pattern": _BROKER_NAME.pattern})]
    """The node's name, n<broker id>: n1, n2..."""
    host: Annotated[Text, AfterValidator(check_host)]
    """The host's address or DNS name."""

    @field_validator("name")
    @classmethod
    def _broker_id(cls, name: str) -> str:
        if not _BROKER_NAME.match(name):
            raise ValueError('must be "n<broker id>" (n1, n2...)')
        return name


class ZooKeeperHost(HostSettings):
    """``[zookeeper]``: the ZooKeeper node, always named zk1."""

    name: Annotated[str, Field(json_schema_extra={"const": ZOOKEEPER_NODE})] = ZOOKEEPER_NODE
    """Always zk1."""
    host: Annotated[Text, AfterValidator(check_host)]
    """The host's address or DNS name."""

    @field_validator("name")
    @classmethod
    def _zk1(cls, name: str) -> str:
        if name != ZOOKEEPER_NODE:
            raise ValueError(f'the ZooKeeper node is always "{ZOOKEEPER_NODE}"')
        return name


class InventoryFile(ConfigModel):
    """An inventory for the ssh runtime: the hosts of the brokers and of ZooKeeper."""

    defaults: HostSettings = HostSettings()
    """Settings for every host."""
    brokers: Annotated[list[BrokerHost], Field(min_length=1)]
    """One [[brokers]] table per broker host (name = "n1", host = ...)."""
    zookeeper: ZooKeeperHost
    """The [zookeeper] table: the ZooKeeper host."""


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
        self,
        run_id: str,
        *,
        runtime: str = "ssh",
        settings: Mapping[str, object] | None = None,
        kept: bool = False,
    ) -> ClusterState:
        return ClusterState(
            run_id=run_id,
            runtime=runtime,
            brokers=[b.node_state() for b in self.brokers],
            zookeeper=self.zookeeper.node_state(),
            settings={k: str(v) for k, v in (settings or {}).items()},
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            owner=owner_label(kept=kept),
        )


def load_inventory(path: Path) -> Inventory:
    """Read and check an inventory file; InventoryError saying what to fix."""
    doc = read_toml(path, what="the inventory", hint=_FORMAT_HINT, error=InventoryError)
    return _inventory(doc, source=str(path), base_dir=Path(path).resolve().parent)


def parse_inventory(
    text: str, *, source: str = "<inventory>", base_dir: Path | None = None
) -> Inventory:
    """Parse inventory TOML; relative paths are taken relative to ``base_dir``."""
    doc = parse_toml(text, source=source, error=InventoryError)
    return _inventory(doc, source=source, base_dir=base_dir or Path.cwd())


def _inventory(doc: Mapping[str, Any], *, source: str, base_dir: Path) -> Inventory:
    inventory = validate(InventoryFile, doc, source=source, error=InventoryError)
    resolver = HostResolver(source, base_dir, inventory.defaults)
    brokers = tuple(
        resolver.entry(f"brokers[{i}]", broker) for i, broker in enumerate(inventory.brokers)
    )
    zookeeper = resolver.entry("zookeeper", inventory.zookeeper)
    _check_unique(source, (*brokers, zookeeper))
    return Inventory(brokers, zookeeper, source)


class HostResolver:
    """Turns a validated host table into a HostEntry: defaults merged, key file found, host
    key pinned (given, or read from known_hosts)."""

    def __init__(self, source: str, base_dir: Path, defaults: HostSettings) -> None:
        self.source = source
        self.base_dir = base_dir
        self.defaults = defaults.model_dump(exclude_none=True)

    def fail(self, where: str, problem: str) -> InventoryError:
        return InventoryError(f"{self.source}: {where}: {problem}")

    def entry(self, where: str, table: BrokerHost | ZooKeeperHost) -> HostEntry:
        where = f"{where} ({table.name})"
        given = table.model_dump(exclude_none=True)
        merged = {**self.defaults, **given}
        if "key_file" not in merged:
            raise self.fail(
                f"{where}.key_file",
                "missing; name the private key to log in with (here or in [defaults])",
            )
        port = int(merged.get("port", 22))
        return HostEntry(
            name=table.name,
            host=table.host,
            key_file=str(self.path(where, "key_file", merged["key_file"])),
            host_key=self.host_key(where, table.host, port, given, merged),
            port=port,
            user=str(merged.get("user", "root")),
            root=str(merged.get("root", "/opt/squall")),
            python=str(merged.get("python", "python3")),
        )

    def path(self, where: str, field: str, value: str) -> Path:
        path = Path(value).expanduser()
        path = path if path.is_absolute() else self.base_dir / path
        if not path.is_file():
            raise self.fail(f"{where}.{field}", f"{path} does not exist or is not a file")
        return path

    def host_key(
        self, where: str, host: str, port: int, given: Mapping[str, Any], merged: Mapping[str, Any]
    ) -> str:
        if "host_key" in given or ("host_key" in merged and "known_hosts" not in merged):
            try:
                return _normalised_key(merged["host_key"])
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


def _check_unique(source: str, entries: tuple[HostEntry, ...]) -> None:
    """InventoryError for a node named twice, or two nodes sharing a host and root."""
    seen: set[str] = set()
    places: dict[tuple[str, int, str], str] = {}
    for entry in entries:
        if entry.name in seen:
            raise InventoryError(
                f"{source}: {entry.name}: named twice; every broker needs its own n<id>"
            )
        seen.add(entry.name)
        place = (entry.host, entry.port, entry.root)
        if place in places:
            raise InventoryError(
                f"{source}: {entry.name}: shares host {entry.host}:{entry.port} and root "
                f"{entry.root} with {places[place]}; give each node its own host or root"
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
