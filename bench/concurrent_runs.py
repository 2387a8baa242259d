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


def wait_in_background(run: Launched) -> threading.Thread:
    """Collect the run's output and note the moment its process ends."""

    def wait() -> None:
        out, _ = run.process.communicate()
        run.ended, run.exit_code = time.monotonic(), run.process.returncode
        lines = [line for line in (out or "").splitlines() if line.startswith("{")]
        run.output = json.loads(lines[-1]) if lines else None

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def held_its_containers(samples: list[tuple[float, int]], seconds: float) -> bool:
    """Whether the run kept its whole set of containers (its peak count) for at least
    `seconds` without a break: its workload's time limit. Its own teardown comes after the
    final read, and the check after that, so the end of its process says nothing."""
    if not samples:
        return False
    peak = max(count for _t, count in samples)
    longest, since = 0.0, None
    for t, count in samples:
        if count == peak:
            since = t if since is None else since
            longest = max(longest, t - since)
        else:
            since = None
    return longest >= seconds


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
    waiters = [wait_in_background(run) for run in runs]
    deadline = time.monotonic() + args.kill_after
    while time.monotonic() < deadline and runs[2].process.poll() is None:
        time.sleep(0.5)
    victim = runs[2]
    victim.run_id = run_id_of(Path(victim.store))
    if victim.process.poll() is None:
        os.kill(victim.process.pid, signal.SIGKILL)
        victim.killed = True
    time.sleep(3.0)
    left_at_kill = victim.run_id is not None and watcher.present(victim.run_id)
    for run, waiter in zip(runs, waiters, strict=True):
        waiter.join()
        run.run_id = run.run_id or run_id_of(Path(run.store))
    # Any run that starts on the engine meanwhile (another user's) may clean them first.
    left_before_next = victim.run_id is not None and watcher.present(victim.run_id)
    fourth = launch("conc-4", work / "store-4", 20.0)
    wait_in_background(fourth).join()
    fourth.run_id = run_id_of(Path(fourth.store))
    leftovers_after = victim.run_id is not None and watcher.present(victim.run_id)
    watcher.stop.set()
    watcher.thread.join()
    everything = [*runs, fourth]
    touched = [
        run.name
        for run in runs[:2]
        if not held_its_containers(watcher.counts.get(run.run_id or "", []), args.time_limit)
    ]
    ours = {run.run_id for run in everything}
    others = sorted(run for run in watcher.counts if run not in ours)
    checks = {
        "both concurrent runs reached a verdict (exit 0 or 1)": all(
            r.exit_code in (0, 1) for r in runs[:2]
        ),
        "each concurrent run kept all its containers for its whole workload": not touched,
        "the SIGKILLed run left its containers (3 s after the kill)": left_at_kill,
        "the next run reached a verdict": fourth.exit_code in (0, 1),
        "the next run's start-up clean removed the SIGKILLed run's leftovers": not leftovers_after,
    }
    for run in everything:
        print(json.dumps(record(run), default=str))
    for check, held in checks.items():
        print(f"{'PASS' if held else 'FAIL'}  {check}")
    if others:
        print(f"other runs on the engine meanwhile (not ours, left alone): {', '.join(others)}")
    if not left_before_next and left_at_kill:
        print("the SIGKILLed run's leftovers were gone before conc-4 started: another run's")
        print("start-up clean on the same engine removed them")
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "runs": [record(r) for r in everything],
                    "checks": checks,
                    "containers_by_run": watcher.counts,
                },
                indent=2,
                default=str,
            )
        )
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
