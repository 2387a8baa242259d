"""A real cluster of containers, brought up once per module: three brokers and zk1.

The base image is built on first use (about a minute and a half) and cached by its recipe's
tag; after that a cluster is up in seconds. Every test's state lives in a temporary
SQUALL_HOME, and the run's containers and network are removed at the end even if a test
fails.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.cluster.cluster import STATE_DIR_ENV, Cluster
from squall.cluster.docker import DockerRuntime


@pytest.fixture(scope="module")
def squall_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("squall-home")
    previous = os.environ.get(STATE_DIR_ENV)
    os.environ[STATE_DIR_ENV] = str(home)
    yield home
    if previous is None:
        os.environ.pop(STATE_DIR_ENV, None)
    else:
        os.environ[STATE_DIR_ENV] = previous


@pytest.fixture(scope="module")
def docker_runtime() -> DockerRuntime:
    return DockerRuntime()


@pytest.fixture(scope="module")
def docker_cluster_settings() -> dict[str, str]:
    """The brokers' settings of `docker_cluster`; a module overrides this fixture for others."""
    return {"min.insync.replicas": "2"}


@pytest.fixture(scope="module")
def docker_cluster(
    squall_home: Path, docker_runtime: DockerRuntime, docker_cluster_settings: dict[str, str]
) -> Iterator[Cluster]:
    run_id = f"test-{secrets.token_hex(3)}"
    cluster = docker_runtime.up(run_id, 3, settings=docker_cluster_settings)
    try:
        yield cluster
    finally:
        cluster.close()
        docker_runtime.clean(run_id)
