"""What the consumer group went through in runs of `bench/detection.py`: per run, its
verdict, the generations and rebalances of its members, the commits the coordinator refused,
and the nemesis's faults on members, with the zombies (members paused past their session
timeout, so that the group moved on without them).

    python bench/group_runs.py SUMMARY.json [SUMMARY.json ...] [--store DIR]

Reads each run's results.json (the `generations` checker's details) and test.json (the
members' session timeout: the workload's consumer_config, else the client's default).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_SESSION_S = {"confluent-kafka": 45.0}
"""The clients' default session.timeout.ms, in seconds (10 s unless listed)."""


def session_s(test: dict[str, Any]) -> float:
    workload = test.get("workload", {})
    configured = workload.get("consumer_config", {}).get("session.timeout.ms")
    if configured is not None:
        return int(configured) / 1000
    return DEFAULT_SESSION_S.get(workload.get("client", "squall"), 10.0)


def summary(run_dir: Path) -> dict[str, Any]:
    results = json.loads((run_dir / "results.json").read_text())
    test = json.loads((run_dir / "test.json").read_text())
    details = results["checkers"].get("generations", {}).get("details", {})
    faults = details.get("member_faults", {})
    session = session_s(test)
    return {
        "run_dir": str(run_dir),
        "valid": results["valid"],
        "anomaly_types": results.get("anomaly_types", []),
        "generations": details.get("generations"),
        "rebalances": details.get("revocations"),
        "refused_commits": details.get("refused_commits"),
        "member_faults": faults.get("counts", {}),
        "zombies": sum(1 for slept in faults.get("paused_s", []) if slept > session),
        "session_s": session,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summaries", nargs="+", type=Path, help="bench/detection.py --out files")
    parser.add_argument(
        "--store", type=Path, default=Path("."), help="where run_dir is relative to"
    )
    args = parser.parse_args()
    rows = []
    for path in args.summaries:
        for run in json.loads(path.read_text())["runs"]:
            run_dir = Path(run["run_dir"])
            rows.append(summary(run_dir if run_dir.is_absolute() else args.store / run_dir))
    for row in rows:
        print(json.dumps(row))
    valid = sum(row["valid"] is True for row in rows)
    print(
        f"{valid} of {len(rows)} VALID; rebalances per run "
        f"{sorted(row['rebalances'] or 0 for row in rows)}; zombies per run "
        f"{sorted(row['zombies'] for row in rows)}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
