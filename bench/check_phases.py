"""Where a check's time goes: the seconds of each phase of `checkers.check`, on a kept run.

`bench/check_scale.py` times a check as a whole; this bench checks a run directory the same
way (`check_history`, `local[2]`) with each function `checkers.check` calls wrapped in a
timer, so that the Spark jobs around the per-key pass (loading, the shared facts, the
events, the statistics, the checkers' own jobs, collecting the findings) and the pass
itself show apart; `bench/key_pass_cost.py` then splits the pass's Python per key.
Phases that run side by side (the shared facts beside the events; on a small history the
statistics beside the pass) overlap, so the phases may add up to more than `total_s`.
Prints one JSON document.

    .venv/bin/python bench/check_scale.py --lines 3000000 --shape jepsen --keys 1700 --keep
    .venv/bin/python bench/check_phases.py /tmp/squall-check-scale-3000000-jepsen-1700
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pyspark import cloudpickle

import checkers.check as check_module
from checkers import CheckConfig
from checkers.checker import CheckContext, Checker
from checkers.results import CheckerReport

PHASES = (
    "load_history",
    "collect_events",
    "shared_facts",
    "key_pass",
    "history_stats",
    "unclean_lost_frame",
    "collect_findings",
    "explain_samples",
    "assemble_results",
)
"""The functions of `checkers.check` timed, in the order a check calls them."""


class TimedChecker:
    """A checker whose `check` (its part after the pass, on the driver or in its own
    Spark jobs) is timed into `spent`."""

    def __init__(self, checker: Checker, spent: dict[str, float]) -> None:
        self._checker = checker
        self._spent = spent
        self.name = checker.name
        self.anomalies = checker.anomalies

    def check(self, context: CheckContext) -> CheckerReport:
        started = time.perf_counter()
        try:
            return self._checker.check(context)
        finally:
            self._spent[f"check:{self.name}"] += time.perf_counter() - started

    def __getattr__(self, name: str) -> Any:  # check_key and anything else: the checker's
        if name.startswith("_"):  # not yet set (unpickling): no recursion into _checker
            raise AttributeError(name)
        return getattr(self._checker, name)


def _timed(function: Callable[..., Any], name: str, spent: dict[str, float]) -> Callable[..., Any]:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - started

    return timed


def phases(run: Path, master: str) -> dict[str, Any]:
    """Seconds of each phase of a check of `run`, and of the whole check."""
    spent: dict[str, float] = defaultdict(float)
    originals = {name: getattr(check_module, name) for name in PHASES}
    for name, function in originals.items():
        setattr(check_module, name, _timed(function, name, spent))
    from checkers.registry import REGISTRY

    if __name__ != "__main__":  # imported: the workers get the wrapper by value too
        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    chosen: Iterable[Checker] = [TimedChecker(checker, spent) for checker in REGISTRY]
    started = time.perf_counter()
    try:
        results = check_module.check_history(
            run, spark_master=master, config=CheckConfig(sample=100_000), checkers=chosen
        )
    finally:
        for name, function in originals.items():
            setattr(check_module, name, function)
    return {
        "history": str(run),
        "total_s": round(time.perf_counter() - started, 2),
        "load_and_check_s": results["history"]["seconds"],
        "phases_s": {name: round(seconds, 2) for name, seconds in spent.items()},
        "valid": results["valid"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run directory (bench/check_scale.py --keep)")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    print(json.dumps(phases(args.run, args.master), indent=2))


if __name__ == "__main__":
    main()
