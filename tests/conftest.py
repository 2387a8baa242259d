"""Test-wide set-up: Hypothesis profiles, and loud skipping of tests that need Docker."""

from __future__ import annotations

import os
from typing import Any

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
    docker_items = [item for item in items if item.get_closest_marker("docker")]
    if not docker_items:
        return
    _docker_skip_reason = _docker_engine_answers()
    if _docker_skip_reason is None:
        return
    skip = pytest.mark.skip(reason=_docker_skip_reason)
    for item in docker_items:
        item.add_marker(skip)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `--dist loadfile` (as `make test` runs): each module whole on one worker (its
    module-scoped clusters set up once), and every module under tests/docker on one worker,
    one after the other: two Docker clusters at once would share two cores, and `squall
    clean` in one test removes a cluster another test brought up with `squall cluster up`.
    (`--dist loadgroup` would say it with marks, but pytest-xdist 3.8 cannot read them
    under pytest 9.2.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndDockerTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/docker" if path.startswith("tests/docker/") else path

    return ModulesAndDockerTogether(config, log)


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
