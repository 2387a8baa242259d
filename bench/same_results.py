"""Results unchanged: the `checkers` sections of results.json of this tree's checkers against
those of another commit's, byte for byte, on generated histories.

A change meant to make the checkers faster must not change what they say. This bench
generates a few small histories with `bench/check_scale.py`'s generator (both shapes, several
seeds, and test.json's allowances varied so that expected losses, retries and unclean
elections are judged too), adds Jepsen's own history of the unit tests, checks every one
with this tree's checkers and, in a second process, with the checkers of `--against` (its
`checkers/` and `histories/` exported with `git archive`), and compares the `checkers`
sections of the two results.json, serialised with sorted keys. Prints one JSON document;
exits 1 on any difference.

    .venv/bin/python bench/same_results.py --against 4e0898a
    .venv/bin/python bench/same_results.py --against 4e0898a --lines 300000 --seeds 1 2 3 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
JEPSEN_CASE = ROOT / "tests/unit/data/histories/jepsen_kafka_history.edn"
ALLOWANCES: tuple[dict[str, Any], ...] = (
    {},
    {"workload": {"acks": 1, "producer_retries": 2}},
    {"topic": {"unclean_leader_election": True}},
    {"workload": {"consumer_mode": "at-most-once"}},
)
"""Changes to check_scale's test.json, one per seed in turn: as generated; acks=1 with
producer retries (expected losses and duplicates); unclean election allowed; consumers at
most once."""


def generate(into: Path, lines: int, seeds: list[int], keys: int) -> list[Path]:
    """The histories to compare: per seed one of each shape, and Jepsen's own case."""
    sys.path.insert(0, str(HERE))
    from check_scale import TEST_JSON, SyntheticHistory  # beside this script

    runs = []
    for turn, seed in enumerate(seeds):
        for shape in ("squall", "jepsen"):
            run = into / f"{shape}-{seed}"
            run.mkdir(parents=True)
            test = json.loads(json.dumps(TEST_JSON))
            for section, values in ALLOWANCES[turn % len(ALLOWANCES)].items():
                test[section].update(values)
            (run / "test.json").write_text(json.dumps(test))
            SyntheticHistory(
                run / "history.jsonl",
                lines,
                seed,
                keys=16 if shape == "squall" else keys,
                shape=shape,
            ).run(3)
            runs.append(run)
    jepsen = into / "jepsen-case"
    jepsen.mkdir()
    shutil.copy(JEPSEN_CASE, jepsen / "history.edn")
    runs.append(jepsen / "history.edn")
    return runs


def sections(runs: list[Path], master: str) -> dict[str, str]:
    """Per history, its results.json `checkers` section as JSON with sorted keys, as the
    `checkers` package on the path checks it."""
    from checkers import CheckConfig, check_history

    out = {}
    for run in runs:
        results = check_history(run, spark_master=master, config=CheckConfig(sample=100_000))
        out[str(run)] = json.dumps(results["checkers"], sort_keys=True)
    return out


def exported(repo: Path, commit: str, into: Path) -> Path:
    """The `checkers` and `histories` packages of `commit` of `repo`, exported under
    `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", commit, "checkers", "histories"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="the commit to compare with (e.g. 4e0898a)")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the git repository of it")
    parser.add_argument("--lines", type=int, default=100_000, help="lines per history")
    parser.add_argument("--keys", type=int, default=200, help="keys of the jepsen shape")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)  # the second process
    parser.add_argument("runs", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write is not None:
        args.write.write_text(json.dumps(sections(args.runs, args.master)))
        return
    if args.against is None:
        parser.error("--against: the commit to compare with")
    with tempfile.TemporaryDirectory(prefix="squall-same-results-") as scratch:
        work = Path(scratch)
        started = time.perf_counter()
        runs = generate(work / "runs", args.lines, args.seeds, args.keys)
        generated = time.perf_counter()
        mine = sections(runs, args.master)
        checked = time.perf_counter()
        theirs_file = work / "theirs.json"
        old = exported(args.repo, args.against, work / "old")
        # The other commit's checkers, on a path of their own: a Python of their own.
        env = {**os.environ, "PYTHONPATH": str(old)}
        subprocess.run(
            [sys.executable, __file__, "--master", args.master, "--write", str(theirs_file)]
            + [str(run) for run in runs],
            check=True,
            env=env,
            cwd=old,
        )
        theirs = json.loads(theirs_file.read_text())
        differing = sorted(
            Path(run).relative_to(work / "runs").as_posix()
            for run in mine
            if mine[run] != theirs.get(run)
        )
        figures = {
            "against": args.against,
            "histories": [Path(run).relative_to(work / "runs").as_posix() for run in runs],
            "lines": args.lines,
            "keys": args.keys,
            "generate_s": round(generated - started, 1),
            "check_s": round(checked - generated, 1),
            "checkers_bytes": {
                Path(run).relative_to(work / "runs").as_posix(): len(text)
                for run, text in mine.items()
            },
            "identical": not differing,
            "differing": differing,
        }
    print(json.dumps(figures, indent=2))
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
