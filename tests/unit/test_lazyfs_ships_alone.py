"""lazyfs is uploaded to the nodes alone (as the top-level package ``lazyfs`` beside
mfusepy's module): it must import and show its help with nothing of squall around it."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

from squall.cluster import lazyfs


def test_lazyfs_imports_and_runs_from_a_copy_of_its_own_directory(tmp_path: Path) -> None:
    shutil.copytree(Path(lazyfs.__file__).parent, tmp_path / "lazyfs")
    spec = importlib.util.find_spec("mfusepy")
    assert spec is not None and spec.origin is not None
    shutil.copy(spec.origin, tmp_path)
    probe = (
        "import sys, lazyfs.filesystem, lazyfs.control, lazyfs.journal, lazyfs.directories, "
        "lazyfs.mounts; "
        "print(sorted(m.split('.')[0] for m in sys.modules if m.split('.')[0] in "
        "{'squall', 'system_under_test', 'nemesis', 'workloads', 'histories', 'checkers'}))"
    )
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    helped = subprocess.run(
        [sys.executable, "-S", "-m", "lazyfs", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert helped.returncode == 0, helped.stderr
    assert "mount" in helped.stdout
