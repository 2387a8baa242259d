"""The squall script's process (`squall.script`): the collector paused while a command
loads, frozen after and at exit; left alone where squall is called in-process."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

from squall.collector import loading
from squall.exit_codes import ExitCode


def test_loading_in_process_leaves_the_collector_alone() -> None:
    frozen = gc.get_freeze_count()
    with loading():
        assert gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def _in_script(code: str) -> subprocess.CompletedProcess[str]:
    """`code` run in a new interpreter (marked as the squall script, where it says so)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_loading_in_the_script_pauses_then_freezes() -> None:
    done = _in_script(
        """
        import gc
        from squall import collector
        collector.in_script()
        before = gc.get_freeze_count()
        with collector.loading():
            assert not gc.isenabled()
            import json  # noqa: F401
        assert gc.isenabled()
        assert gc.get_freeze_count() > before
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_loading_in_the_script_restores_a_paused_collector() -> None:
    done = _in_script(
        """
        import gc
        from squall import collector
        collector.in_script()
        gc.disable()
        with collector.loading():
            pass
        assert not gc.isenabled()
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr


def test_the_script_passes_on_the_exit_code_and_runs_atexit() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "squall", "check", "/nonexistent/run"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == ExitCode.USAGE
    assert "does not exist" in done.stderr
    flushed = _in_script(
        """
        import atexit, sys
        import squall.script as script
        atexit.register(lambda: print("atexit ran", flush=True))
        sys.argv = ["squall", "--version"]
        code = script.run()
        import gc
        assert gc.get_freeze_count() > 0
        sys.exit(code)
        """
    )
    assert flushed.returncode == 0, flushed.stderr
    assert flushed.stdout.strip().endswith("atexit ran")
