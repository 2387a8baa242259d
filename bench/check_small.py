"""Small histories fast: `squall check --json` on a demo-sized history, cold and warm.

Cold: a new `squall check` process that starts its own Spark (`--spark-master local[2]`),
after a first one, timed apart, that records the JVM's class-data archive (as the first
local check on a machine does, once).
Warm: a new `squall check` process against a running Spark Connect server (`squall spark
start`, which checks a small history of its own a few times before it returns;
`--spark-remote`), after `--warmup` untimed checks (default 3) that warm the server's JIT
further, as the checks before it warm a server in use. Each is
timed N times, wall clock of the whole process; the table shows the median, min and max
against the goals (10 s cold, 2 s warm), and whether every check found the same `checkers`
section. The history is converted to Parquet once beforehand, so that both time the check.
CPU seconds per check are shown too (cold: the squall process and its JVM; warm: the squall
process and the server's JVM while it checked), since on a busy machine wall-clock seconds
say more about the machine than about squall; the load average is printed with them.

    .venv/bin/python bench/check_small.py                       # a generated 4,000-line history
    .venv/bin/python bench/check_small.py store/queue/latest    # a stored run
    .venv/bin/python bench/check_small.py --runs 5 --remote sc://127.0.0.1:15002

Without --remote the bench starts its own server (in a private cache directory, so a server
of yours is left alone) and stops it at the end; with --remote no server CPU is counted.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from checkers.load import convert_history, locate_history

GOALS_S = {"cold": 10.0, "warm": 2.0}
TEST_JSON = {
    "topic": {"replication_factor": 3, "min_insync_replicas": 2, "unclean_leader_election": False},
    "workload": {"acks": -1},
}


def generate(run_dir: Path, lines: int, seed: int) -> Path:
    """A synthetic history of about `lines` lines with anomalies (bench/check_scale.py's)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from check_scale import SyntheticHistory  # type: ignore[import-not-found]

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "test.json").write_text(json.dumps(TEST_JSON))
    history = run_dir / "history.jsonl"
    target = lines
    for _ in range(3):  # the generator writes fewer lines than asked of a small history
        SyntheticHistory(history, target, seed).run(1)
        with history.open("rb") as written:
            made = sum(1 for _ in written)
        target = round(target * lines / made)
    return run_dir


def squall(args: list[str], env: dict[str, str], timeout: float = 600) -> tuple[float, Any]:
    """Seconds of `python -m squall ARGS` and what it printed on stdout (JSON if it is)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "squall", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"squall {' '.join(args)} exited {done.returncode}: {done.stderr}")
    try:
        return seconds, json.loads(done.stdout)
    except ValueError:
        return seconds, done.stdout.strip()


def adopt_orphans() -> bool:
    """Become the parent of the processes our children leave behind (Linux): a squall
    check's JVM outlives it by a moment and is then reaped here, so its CPU is counted."""
    try:
        return int(ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def reap_all(timeout: float = 60.0) -> None:
    """Wait until every child is gone (none but a check's JVM may be left)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.05)
        except ChildProcessError:
            return


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int | None) -> float:
    """CPU seconds `pid` has used so far (0 when unknown)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_checks(
    history: Path,
    spark: list[str],
    runs: int,
    env: dict[str, str],
    *,
    server: int | None = None,
    reap: bool = False,
) -> tuple[list[float], list[float], set[str]]:
    """Wall and CPU seconds of each of `runs` checks (CPU: the check's processes, and the
    server's while it checked), and the distinct `checkers` sections they found."""
    seconds, cpu, sections = [], [], set()
    for _ in range(runs):
        before = children_cpu() + process_cpu(server)
        took, results = squall(["check", "--json", "--no-write", *spark, str(history)], env)
        if reap:
            reap_all()
        seconds.append(round(took, 2))
        cpu.append(round(children_cpu() + process_cpu(server) - before, 2))
        sections.add(json.dumps(results["checkers"], sort_keys=True))
    return seconds, cpu, sections


def table(figures: dict[str, Any]) -> Table:
    out = Table(
        "mode",
        "runs",
        "median s",
        "min s",
        "max s",
        "goal s",
        "met",
        "CPU s",
        title=f"squall check, {figures['lines']:,} lines "
        f"(load average {figures['load_average']:.1f} on {os.cpu_count()} cores)",
    )
    for mode in ("cold", "warm"):
        times = figures[mode]["seconds"]
        median = statistics.median(times)
        out.add_row(
            f"{mode} ({figures[mode]['spark']})",
            str(len(times)),
            f"{median:.2f}",
            f"{min(times):.2f}",
            f"{max(times):.2f}",
            f"{GOALS_S[mode]:g}",
            "yes" if median <= GOALS_S[mode] else "no",
            f"{statistics.median(figures[mode]['cpu_seconds']):.2f}",
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history", type=Path, nargs="?", help="a run directory or history")
    parser.add_argument("--lines", type=int, default=4000, help="lines of a generated history")
    parser.add_argument("--runs", type=int, default=3, help="timed checks of each mode")
    parser.add_argument("--warmup", type=int, default=3, help="untimed warm checks first")
    parser.add_argument("--remote", help="a running Spark Connect server (default: start one)")
    parser.add_argument("--memory", default="2g", help="the started server's heap")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="squall-check-small-"))
    history = args.history or generate(scratch / "run", args.lines, args.seed)
    location = locate_history(history)
    convert_history(location)
    lines = 0
    if location.source is not None:
        with location.source.open("rb") as source:
            lines = sum(1 for _ in source)
    env = {k: v for k, v in os.environ.items() if k not in ("SQUALL_SPARK_REMOTE", "SPARK_REMOTE")}
    if args.remote is None:
        cache = scratch / "cache"
        cache.mkdir(mode=0o700)
        env["XDG_CACHE_HOME"] = str(cache)

    figures: dict[str, Any] = {"history": str(history), "lines": lines}
    reap = adopt_orphans()
    local = ["--spark-master", "local[2]"]
    # The first local check on a machine records the JVM's class-data archive (once per
    # Java and Spark installation, checkers/jvm_archive.py): timed apart, not as a cold check.
    archiving, _, sections = timed_checks(history, local, 1, env, reap=reap)
    cold, cold_cpu, cold_sections = timed_checks(history, local, args.runs, env, reap=reap)
    sections |= cold_sections
    figures["cold"] = {
        "spark": "local[2]",
        "seconds": cold,
        "cpu_seconds": cold_cpu,
        "first_s": archiving[0],
    }
    remote, server = args.remote, None
    try:
        if remote is None:
            took, remote = squall(["spark", "start", "--port", "0", "--memory", args.memory], env)
            figures["server_start_s"] = round(took, 2)
            server = squall(["spark", "status", "--json"], env)[1]["pid"]
        spark = ["--spark-remote", str(remote)]
        first, _, first_sections = timed_checks(
            history, spark, max(args.warmup, 1), env, server=server
        )
        warm, warm_cpu, warm_sections = timed_checks(history, spark, args.runs, env, server=server)
        figures["warm"] = {
            "spark": "Spark Connect",
            "seconds": warm,
            "cpu_seconds": warm_cpu,
            "first_s": first[0],
        }
        sections |= first_sections | warm_sections
    finally:
        if args.remote is None:
            squall(["spark", "stop"], env)
            reap_all()
        shutil.rmtree(scratch, ignore_errors=True)
    figures["load_average"] = os.getloadavg()[0]
    figures["same_checkers_section"] = len(sections) == 1
    Console().print(table(figures))
    print(
        f"first local check (records the class-data archive) {figures['cold']['first_s']} s, "
        f"server start {figures.get('server_start_s', '-')} s, first warm check "
        f"{figures['warm']['first_s']} s; every check found the same checkers section: "
        f"{figures['same_checkers_section']}"
    )
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
