"""Runs sharing one Docker engine leave each other alone (issue 17): two `squall run`s at once,
each with its own store, both complete; a third, SIGKILLed mid-run, leaves its containers;
the next run's start-up clean removes exactly those leftovers and nothing of a run in
progress.

    .venv/bin/python bench/concurrent_runs.py [--time-limit 60] [--kill-after 40] [--out F]

Every run is a real `squall run` subprocess on the docker runtime (safe configuration,
default faults). Each second the script lists the squall containers by run (label
`squall.run`) and records, per run, when its containers appeared and disappeared; a run
whose containers vanished while its process was still running was touched by another run.
Prints one JSON line per run, the checks, and writes everything to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import docker

ROOT = Path(__file__).resolve().parent.parent
LABEL_RUN = "squall.run"


@dataclass
class Launched:
    """One `squall run` subprocess and what became of it."""

    name: str
    store: str
    process: subprocess.Popen[str] = field(repr=False)
    started: float
    ended: float | None = None
    exit_code: int | None = None
    killed: bool = False
    run_id: str | None = None
    output: dict[str, Any] | None = None


def record(run: Launched) -> dict[str, Any]:
    """The run as JSON-ready data, without its process."""
    data = {f.name: getattr(run, f.name) for f in fields(run) if f.name != "process"}
    data["seconds"] = round((run.ended or run.started) - run.started, 1)
    return data


def launch(name: str, store: Path, time_limit: float) -> Launched:
    command = [
        sys.executable,
        "-m",
        "squall",
        "run",
        "--name",
        name,
        "--runtime",
        "docker",
        "--time-limit",
        str(time_limit),
        "--acks",
        "-1",
        "--replication-factor",
        "3",
        "--min-insync-replicas",
        "2",
        "--store",
        str(store),
        "--quiet",
    ]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    return Launched(name, str(store), process, time.monotonic())


class Watcher:
    """Samples the engine's squall containers every second: run id -> seen (first, last)."""

    def __init__(self) -> None:
        self.client = docker.from_env()
        self.seen: dict[str, list[float]] = {}
        self.counts: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic()
            runs: dict[str, int] = defaultdict(int)
            for container in self.client.containers.list(all=True, filters={"label": LABEL_RUN}):
                runs[(container.labels or {}).get(LABEL_RUN, "?")] += 1
            for run, count in runs.items():
                first_last = self.seen.setdefault(run, [now, now])
                first_last[1] = now
                self.counts[run].append((now, count))
            self.stop.wait(1.0)

    def present(self, run_id: str) -> bool:
        label = {"label": f"{LABEL_RUN}={run_id}"}
        return bool(self.client.containers.list(all=True, filters=label))


def run_id_of(store: Path) -> str | None:
    """The run id a run wrote into its test.json (once its cluster is up)."""
    for test in store.glob("*/2*/test.json"):
        try:
            return str(json.loads(test.read_text()).get("run_id"))
        except (OSError, ValueError):
            return None
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--kill-after", type=float, default=40.0, help="SIGKILL the third run")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="squall-concurrent-"))
    watcher = Watcher()
    watcher.thread.start()
    runs = [launch(f"conc-{i}", work / f"store-{i}", args.time_limit) for i in (1, 2, 3)]
    deadline = time.monotonic() + args.kill_after
    while time.monotonic() < deadline and runs[2].process.poll() is None:
        time.sleep(0.5)
    victim = runs[2]
    victim.run_id = run_id_of(Path(victim.store))
    if victim.process.poll() is None:
        os.kill(victim.process.pid, signal.SIGKILL)
        victim.killed = True
    for run in runs:
        out, _ = run.process.communicate()
        run.ended, run.exit_code = time.monotonic(), run.process.returncode
        run.run_id = run.run_id or run_id_of(Path(run.store))
        lines = [line for line in (out or "").splitlines() if line.startswith("{")]
        run.output = json.loads(lines[-1]) if lines else None
    leftovers_before = victim.run_id is not None and watcher.present(victim.run_id)
    fourth = launch("conc-4", work / "store-4", 20.0)
    out, _ = fourth.process.communicate()
    fourth.ended, fourth.exit_code = time.monotonic(), fourth.process.returncode
    fourth.run_id = run_id_of(Path(fourth.store))
    leftovers_after = victim.run_id is not None and watcher.present(victim.run_id)
    watcher.stop.set()
    watcher.thread.join()
    everything = [*runs, fourth]
    touched = []
    for run in runs[:2]:
        seen = watcher.seen.get(run.run_id or "")
        if seen is None or run.ended is None:
            touched.append(run.name)
            continue
        counts = [c for t, c in watcher.counts[run.run_id or ""] if t < run.ended - 20]
        if counts and min(counts) < max(counts):
            touched.append(run.name)  # containers vanished while the run still needed them
    checks = {
        "both concurrent runs reached a verdict (exit 0 or 1)": all(
            r.exit_code in (0, 1) for r in runs[:2]
        ),
        "neither concurrent run lost containers mid-run": not touched,
        "the SIGKILLed run left its containers": leftovers_before,
        "the next run reached a verdict": fourth.exit_code in (0, 1),
        "the next run's start-up clean removed the SIGKILLed run's leftovers": not leftovers_after,
    }
    for run in everything:
        print(json.dumps(record(run), default=str))
    for check, held in checks.items():
        print(f"{'PASS' if held else 'FAIL'}  {check}")
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "runs": [record(r) for r in everything],
                    "checks": checks,
                },
                indent=2,
                default=str,
            )
        )
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
