"""The docker runtime: one container per node on a bridge network of the run's own.

Containers ``squall-<run>-n1..nN`` and ``squall-<run>-zk1`` run sshd from the locally built
base image (``image.py``) with ``NET_ADMIN`` (never privileged; broker containers also get
``/dev/fuse``, ``SYS_ADMIN`` and ``SYS_NICE`` for their lazy disk, ``lazy_disk.py``), static
addresses on the network ``squall-<run>`` and ``/etc/hosts`` entries for every node. A key pair made per run
logs in; each container's host key is read out of band (docker exec) and pinned. From there
on it is the ssh runtime's path: SshNodes, fault-support checks, deployment. Everything
carries the label ``squall.run=<run id>``, so ``clean`` finds what crashed runs left.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import shutil
import tarfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import docker
import docker.errors
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from docker.models.containers import Container

from nemesis.errors import ClusterError
from squall.cluster.cluster import (
    RUN_ID,
    ZOOKEEPER_NODE,
    Cluster,
    ClusterState,
    ClusterStateError,
    NodeState,
    state_dir,
)
from squall.cluster.image import ensure_image
from squall.cluster.owner import is_leftover, owner_label
from squall.cluster.ssh import Progress
from squall.cluster.ssh_runtime import (
    check_fault_support,
    deploy_system_under_test,
    forget_capabilities,
    ssh_cluster,
)

LABEL_RUN = "squall.run"
LABEL_NODE = "squall.node"
LABEL_OWNER = "squall.owner"
CONFLICT = 409
"""The engine's answer to removing what another request is removing, or still uses."""
SUBNET_CANDIDATES = tuple(f"10.213.{i}.0/24" for i in range(64))
"""Our own containers' subnets; one not used by another network or host route is taken."""
NODE_ROOT = "/opt/squall"
MAX_NODES = 200
OWNER_FILE = "owner"
LAZY_DISK_DEFAULT = True
"""Brokers' log.dirs on lazyfs unless a spec or the CLI turns it off."""
_HOST_KEY_SCRIPT = (
    "for i in $(seq 150); do "
    "[ -s /run/sshd.pid ] && [ -s /etc/ssh/ssh_host_ed25519_key.pub ] && "
    "exec cat /etc/ssh/ssh_host_ed25519_key.pub; sleep 0.1; done; "
    "echo 'sshd did not start within 15 s' >&2; exit 1"
)


class DockerRuntimeError(ClusterError):
    """The docker runtime could not provision or remove a cluster."""


class DockerUnavailableError(DockerRuntimeError):
    """No Docker engine answers."""


def _quiet(_message: str) -> None:
    pass


def container_name(run_id: str, node: str) -> str:
    return f"squall-{run_id}-{node}"


def network_name(run_id: str) -> str:
    return f"squall-{run_id}"


def _read_owner(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def keys_dir(run_id: str) -> Path:
    return state_dir() / "keys" / run_id


def node_addresses(subnet: str, brokers: int) -> dict[str, str]:
    """zk1 at .10 and n<i> at .10+i, as the local runtime numbers its loopback addresses."""
    base = ipaddress.ip_network(subnet).network_address
    addresses = {ZOOKEEPER_NODE: str(base + 10)}
    addresses.update({f"n{i}": str(base + 10 + i) for i in range(1, brokers + 1)})
    return addresses


def host_routes(text: str) -> list[ipaddress.IPv4Network]:
    """Destinations of ``/proc/net/route`` (little-endian hex), default route excluded."""
    networks = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        destination = ipaddress.IPv4Address(int(fields[1], 16).to_bytes(4, "little"))
        mask = ipaddress.IPv4Address(int(fields[7], 16).to_bytes(4, "little"))
        network = ipaddress.IPv4Network(f"{destination}/{mask}", strict=False)
        if network.prefixlen > 0:
            networks.append(network)
    return networks


def free_subnets(taken: list[ipaddress.IPv4Network]) -> list[str]:
    """The candidate subnets that overlap none of ``taken``."""
    return [
        c for c in SUBNET_CANDIDATES if not any(ipaddress.ip_network(c).overlaps(t) for t in taken)
    ]


def generate_key_pair(directory: Path) -> Path:
    """A new ed25519 key pair (``id_ed25519`` and ``.pub``, OpenSSH format); the private key."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    key = Ed25519PrivateKey.generate()
    private = directory / "id_ed25519"
    private.touch(mode=0o600)
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    (directory / "id_ed25519.pub").write_bytes(public + b" squall-control\n")
    return private


def _authorized_keys_archive(public_key: bytes) -> bytes:
    """A tar of ``.ssh/authorized_keys`` for ``put_archive`` into /root."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        folder = tarfile.TarInfo(".ssh")
        folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o700, int(time.time())
        tar.addfile(folder)
        entry = tarfile.TarInfo(".ssh/authorized_keys")
        entry.size, entry.mode, entry.mtime = len(public_key), 0o600, int(time.time())
        tar.addfile(entry, io.BytesIO(public_key))
    return buffer.getvalue()


class ContainerFreezer:
    """``docker pause``/``unpause`` of a node's container (``nemesis.protocols.Freezer``)."""

    def __init__(self, client: docker.DockerClient, state: ClusterState) -> None:
        self._client = client
        self._containers = {
            n.name: n.container or container_name(state.run_id, n.name)
            for n in [*state.brokers, state.zookeeper]
        }

    def _container(self, node_name: str) -> Container:
        try:
            return self._client.containers.get(self._containers[node_name])
        except KeyError:
            raise KeyError(f"no node {node_name!r}; nodes: {', '.join(self._containers)}") from None
        except docker.errors.NotFound:
            raise DockerRuntimeError(
                f"the container of {node_name} ({self._containers[node_name]}) is gone"
            ) from None

    def freeze(self, node_name: str) -> None:
        container = self._container(node_name)
        if container.status != "paused":
            container.pause()

    def unfreeze(self, node_name: str) -> None:
        """Thaw; a node that is not frozen is left alone."""
        container = self._container(node_name)
        if container.status == "paused":
            container.unpause()

    def is_frozen(self, node_name: str) -> bool:
        return bool(self._container(node_name).status == "paused")


class DockerRuntime:
    """Provisions, reattaches to, and removes clusters of containers."""

    name = "docker"

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client = client
        self._owner = owner_label()

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                client = docker.from_env(timeout=120)
                client.ping()
            except docker.errors.DockerException as err:
                raise DockerUnavailableError(
                    f"no Docker engine answers ({err}); start one (is DOCKER_HOST right?), or "
                    "use --runtime local"
                ) from None
            self._client = client
        return self._client

    def up(
        self,
        run_id: str,
        nodes: int | None = None,
        *,
        inventory: Path | None = None,
        settings: Mapping[str, object] | None = None,
        progress: Progress | None = None,
        lazy_disk: bool | None = None,
        kafka_listener: bool = False,
        kept: bool = False,
    ) -> Cluster:
        """Containers for zk1 and n1..n<nodes> (3 by default), reachable over SSH, SUT
        deployed (on lazy disks unless ``lazy_disk`` is False); the cluster, its state saved.
        On failure, what was made is removed again."""
        say = progress or _quiet
        self._owner = owner_label(kept=kept)
        if inventory is not None:
            raise ValueError("an inventory names existing hosts: use the ssh runtime for it")
        nodes = 3 if nodes is None else nodes
        if not RUN_ID.match(run_id):
            raise ValueError(f"run id {run_id!r}: use letters, digits, '_', '.', '-' (max 41)")
        if not 1 <= nodes <= MAX_NODES:
            raise ValueError(f"nodes={nodes}: between 1 and {MAX_NODES} brokers")
        client = self.client
        label = {"label": f"{LABEL_RUN}={run_id}"}
        if client.containers.list(all=True, filters=label) or client.networks.list(filters=label):
            raise DockerRuntimeError(
                f"a cluster with run id {run_id} exists already; take it down first "
                f"(`squall cluster down --run-id {run_id}`) or choose another run id"
            )
        image = ensure_image(client, progress=say)
        started = time.monotonic()
        try:
            lazy = LAZY_DISK_DEFAULT if lazy_disk is None else lazy_disk
            state = self._provision(run_id, nodes, image, settings, say, lazy, kafka_listener)
            cluster = self.attach(state)
            try:
                say("waiting for sshd on every node")
                for node in cluster.all_nodes():
                    node.run("true")
                say("checking iptables and netem")
                check_fault_support(cluster, say)
                deploy_system_under_test(cluster, say)
            except BaseException:
                cluster.close()
                raise
        except BaseException:
            with contextlib.suppress(Exception):
                self.clean(run_id)
            raise
        say(f"cluster {run_id} up in {time.monotonic() - started:.1f} s")
        return cluster

    def _provision(
        self,
        run_id: str,
        nodes: int,
        image: str,
        settings: Mapping[str, object] | None,
        say: Progress,
        lazy_disk: bool,
        kafka_listener: bool,
    ) -> ClusterState:
        key_file = generate_key_pair(keys_dir(run_id))
        (keys_dir(run_id) / OWNER_FILE).write_text(self._owner + "\n")
        public_key = key_file.with_suffix(".pub").read_bytes()
        say(f"creating network {network_name(run_id)}")
        subnet = self._create_network(run_id)
        addresses = node_addresses(subnet, nodes)
        names = [f"n{i}" for i in range(1, nodes + 1)] + [ZOOKEEPER_NODE]
        say(f"starting {len(names)} containers on {subnet}")
        containers = {
            name: self._start_container(
                run_id, name, image, addresses, fuse=lazy_disk and name != ZOOKEEPER_NODE
            )
            for name in names
        }
        node_states: dict[str, NodeState] = {}
        for name, container in containers.items():
            container.put_archive("/root", _authorized_keys_archive(public_key))
            node_states[name] = NodeState(
                name=name,
                address=addresses[name],
                key_file=str(key_file),
                host_key=self._host_key(container),
                root=NODE_ROOT,
                container=container.name,
            )
        state = ClusterState(
            run_id=run_id,
            runtime=self.name,
            brokers=[node_states[n] for n in names if n != ZOOKEEPER_NODE],
            zookeeper=node_states[ZOOKEEPER_NODE],
            settings={k: str(v) for k, v in (settings or {}).items()},
            network=network_name(run_id),
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            owner=self._owner,
            lazy_disk=lazy_disk,
            kafka_listener=kafka_listener,
        )
        state.save()
        return state

    def _create_network(self, run_id: str) -> str:
        """The network of the run on a free candidate subnet; the subnet."""
        taken: list[ipaddress.IPv4Network] = []
        for network in self.client.networks.list():
            for config in (network.attrs.get("IPAM") or {}).get("Config") or []:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    parsed = ipaddress.ip_network(config["Subnet"], strict=False)
                    if isinstance(parsed, ipaddress.IPv4Network):
                        taken.append(parsed)
        with contextlib.suppress(OSError):
            taken += host_routes(Path("/proc/net/route").read_text())
        candidates = free_subnets(taken)
        for subnet in candidates:
            gateway = str(ipaddress.ip_network(subnet).network_address + 1)
            ipam = docker.types.IPAMConfig(
                pool_configs=[docker.types.IPAMPool(subnet=subnet, gateway=gateway)]
            )
            try:
                self.client.networks.create(
                    network_name(run_id),
                    driver="bridge",
                    ipam=ipam,
                    labels={LABEL_RUN: run_id, LABEL_OWNER: self._owner},
                    check_duplicate=True,
                )
            except docker.errors.APIError as err:
                if "overlap" in str(err).lower():
                    continue  # taken meanwhile by another run
                raise DockerRuntimeError(
                    f"cannot create network {network_name(run_id)}: {err}; `squall clean` removes "
                    "networks of earlier runs"
                ) from None
            return subnet
        raise DockerRuntimeError(
            f"every candidate subnet ({SUBNET_CANDIDATES[0]} ... {SUBNET_CANDIDATES[-1]}) is "
            "in use by a docker network or a host route; `squall clean` removes squall's own"
        )

    def _start_container(
        self, run_id: str, name: str, image: str, addresses: Mapping[str, str], *, fuse: bool
    ) -> Container:
        """A node's container; ``fuse``: it can mount FUSE (/dev/fuse, SYS_ADMIN) and give
        the lazyfs daemon a higher priority than the broker it serves (SYS_NICE)."""
        network = network_name(run_id)
        try:
            container: Container = self.client.containers.run(
                image,
                name=container_name(run_id, name),
                hostname=name,
                detach=True,
                cap_add=["NET_ADMIN", "SYS_ADMIN", "SYS_NICE"] if fuse else ["NET_ADMIN"],
                devices=["/dev/fuse:/dev/fuse:rwm"] if fuse else [],
                labels={LABEL_RUN: run_id, LABEL_NODE: name, LABEL_OWNER: self._owner},
                network=network,
                networking_config={
                    network: self.client.api.create_endpoint_config(ipv4_address=addresses[name])
                },
                extra_hosts=dict(addresses),
            )
        except docker.errors.APIError as err:
            raise DockerRuntimeError(
                f"cannot start container {container_name(run_id, name)}: {err}"
            ) from None
        return container

    @staticmethod
    def _host_key(container: Container) -> str:
        """The container's ed25519 host key, read through docker exec once sshd is up."""
        result = container.exec_run(["sh", "-c", _HOST_KEY_SCRIPT])
        output = result.output.decode(errors="replace").strip()
        parts = output.split()
        if result.exit_code != 0 or len(parts) < 2 or parts[0] != "ssh-ed25519":
            logs = container.logs(tail=20).decode(errors="replace")
            raise DockerRuntimeError(
                f"{container.name}: no SSH host key ({output}); container log:\n{logs}"
            )
        return f"{parts[0]} {parts[1]}"

    def attach(self, state: ClusterState) -> Cluster:
        return ssh_cluster(state, freezer=self.freezer(state))

    def freezer(self, state: ClusterState) -> ContainerFreezer:
        return ContainerFreezer(self.client, state)

    def down(self, state: ClusterState) -> list[str]:
        """Remove the run's containers, network, key pair and state."""
        return self.clean(state.run_id)

    def clean(self, run_id: str | None = None, *, kept_too: bool = False) -> list[str]:
        """Remove the containers and network of one run, or (no run id) of every run whose
        owner is gone (``squall.cluster.owner``), with their keys and saved state; never a run
        in progress. What was removed. Idempotent."""
        label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN
        containers = self.client.containers.list(all=True, filters={"label": label})
        networks = self.client.networks.list(filters={"label": label})
        labelled = [
            *(c.labels or {} for c in containers),
            *(n.attrs.get("Labels") or {} for n in networks),
        ]
        live = set()
        if run_id is None:
            live = {
                labels.get(LABEL_RUN, "")
                for labels in labelled
                if not is_leftover(labels.get(LABEL_OWNER), kept_too=kept_too)
            }
        removed: list[str] = []
        runs = {run_id} if run_id else set()
        for container in containers:
            run = (container.labels or {}).get(LABEL_RUN, "")
            if run in live:
                continue
            runs.add(run)
            try:
                if container.status == "paused":
                    container.unpause()
                container.remove(force=True)
                removed.append(f"container {container.name}")
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as err:
                if err.status_code != CONFLICT:
                    raise  # 409: another process (its run's own down) is removing it
        for network in networks:
            run = (network.attrs.get("Labels") or {}).get(LABEL_RUN, "")
            if run in live:
                continue
            runs.add(run)
            try:
                network.remove()
                removed.append(f"network {network.name}")
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as err:
                if err.status_code != CONFLICT:
                    raise  # 409: containers still on it, being removed by another process
        if run_id is None and (state_dir() / "keys").is_dir():
            runs.update(
                p.name
                for p in (state_dir() / "keys").iterdir()
                if p.name not in live
                and is_leftover(_read_owner(p / OWNER_FILE), kept_too=kept_too)
            )
        for run in sorted(r for r in runs if r and RUN_ID.match(r)):
            removed += self._forget(run)
        return removed

    def _forget(self, run_id: str) -> list[str]:
        removed: list[str] = []
        keys = keys_dir(run_id)
        if keys.exists():
            shutil.rmtree(keys, ignore_errors=True)
            removed.append(f"keys {keys}")
        forget_capabilities(run_id)
        with contextlib.suppress(ClusterStateError):
            state = ClusterState.load(run_id)
            if state.runtime == self.name:
                state.forget()
                removed.append(f"state of cluster {run_id}")
        return removed
