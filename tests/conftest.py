"""Test-wide set-up: Hypothesis profiles, and loud skipping of tests that need Docker."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from squall.cluster.runtimes import docker_available

settings.register_profile("dev", deadline=None, max_examples=60)
settings.register_profile(
    "ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

_docker_skip_reason: str | None = None


def _docker_engine_answers() -> str | None:
    """None when a Docker engine answers, else why not."""
    why = docker_available()
    return None if why is None else f"no Docker engine answers ({why})"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    global _docker_skip_reason
    _group_for_workers(items)
    docker_items = [item for item in items if item.get_closest_marker("docker")]
    if not docker_items:
        return
    _docker_skip_reason = _docker_engine_answers()
    if _docker_skip_reason is None:
        return
    skip = pytest.mark.skip(reason=_docker_skip_reason)
    for item in docker_items:
        item.add_marker(skip)


def _group_for_workers(items: list[pytest.Item]) -> None:
    """pytest-xdist's groups (`--dist loadgroup`, as `make test` runs): each module whole on
    one worker (its module-scoped clusters set up once), and every test that needs Docker on
    one worker, one after the other. A `squall run` cleans up clusters whose owner is gone
    before it starts, and a cluster brought up by `squall cluster up` has no live owner: on
    two workers, one test's run could remove the cluster another test brought up."""
    for item in items:
        group = "docker" if item.get_closest_marker("docker") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _docker_skip_reason is None:
        return
    skipped = len(terminalreporter.stats.get("skipped", []))
    terminalreporter.write_sep("!", "DOCKER TESTS SKIPPED", red=True, bold=True)
    terminalreporter.write_line(
        f"{_docker_skip_reason}; {skipped} test(s) skipped. Start a Docker engine and rerun "
        "`make test` to exercise the container runtime.",
        red=True,
    )
