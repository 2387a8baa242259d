"""The runtimes by name, the default one, and reattaching to the cluster that is up."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from squall.cluster.cluster import Cluster, ClusterState

Progress = Callable[[str], None]

RUNTIMES = ("docker", "ssh", "local", "external")


class RuntimeUnavailableError(RuntimeError):
    """A runtime cannot be used on this machine."""


class Runtime(Protocol):
    """Where clusters live: brings one up, reattaches to it, takes it down, cleans leftovers."""

    name: str

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
        """A cluster of ``nodes`` brokers and ZooKeeper with the SUT deployed and running, its
        state saved. docker and local make the nodes (``nodes`` defaults to 3); ssh takes
        them from ``inventory``. ``lazy_disk``: the brokers' log.dirs on lazyfs, disks that
        can lose what was not fsynced (None: the runtime's default, on for docker only).
        ``kept``: it outlives this process (``squall cluster up``), and no run's start-up
        clean removes it."""
        ...

    def attach(self, state: ClusterState) -> Cluster:
        """The cluster of a saved state, from any process."""
        ...

    def down(self, state: ClusterState) -> list[str]:
        """Take the cluster down and forget its state; what was removed."""
        ...

    def clean(self, run_id: str | None = None, *, kept_too: bool = False) -> list[str]:
        """Remove what runs (one, or all) left behind; what was removed. Kept clusters
        (``squall cluster up``) only with ``kept_too`` (an explicit ``squall clean``)."""
        ...


def new_run_id() -> str:
    """A short id for container, network and directory names."""
    return secrets.token_hex(4)


def docker_available() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return None


def default_runtime() -> str:
    """docker where an engine answers, else local (docs/architecture.md)."""
    return "docker" if docker_available() is None else "local"


def runtime_named(name: str) -> Runtime:
    """The runtime object for a name; RuntimeUnavailableError with what to do otherwise."""
    factories: dict[str, Callable[[], Runtime]] = {
        "local": _local,
        "docker": _docker,
        "ssh": _ssh,
        "external": _external,
    }
    if name not in factories:
        raise RuntimeUnavailableError(f"unknown runtime {name!r}; use one of {', '.join(RUNTIMES)}")
    return factories[name]()


def _local() -> Runtime:
    from squall.cluster.local import LocalRuntime

    return LocalRuntime()


def _docker() -> Runtime:
    reason = docker_available()
    if reason is not None:
        raise RuntimeUnavailableError(
            f"the docker runtime needs a Docker engine, and none answers ({reason}); start "
            "one, or use --runtime local"
        )
    from squall.cluster.docker import DockerRuntime

    return DockerRuntime()


def _ssh() -> Runtime:
    from squall.cluster.ssh_runtime import SshRuntime

    return SshRuntime()


def _external() -> Runtime:
    from squall.cluster.external import ExternalRuntime

    return ExternalRuntime()


def attach(run_id: str | None = None) -> Cluster:
    """The cluster that is up (or the named one), rebuilt from its saved state."""
    state = ClusterState.load(run_id)
    return runtime_named(state.runtime).attach(state)
