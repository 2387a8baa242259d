"""Which of the system under test's code one run reaches: line coverage of a real run.

A bug hides where no run goes. This bench runs one configuration of the bug zoo's campaign
(the default run's, `safe`, unless told) on its runtime, with every broker process started
under coverage.py and the control process (squall's own client, and the group members'
processes it spawns) measured too, and reports the statements of `system_under_test/` that
the run executed, by module, with the functions it never entered. Nothing of squall or the
SUT knows: the bench wraps the brokers' command in a small launcher it uploads beside the
SUT (with coverage.py's package), which saves what its process executed every
`SAVE_INTERVAL_S` seconds (a broker killed by the nemesis loses at most that much) and at
exit, into `logs/sut-coverage/` on the node; the run's log fetch brings those files home.

    PYTHONPATH=. .venv/bin/python bench/sut_coverage.py --config safe --seed 96001 \\
        --store /tmp/cov-store --out /tmp/cov

writes `<out>/report.txt` (coverage's own report, statements and misses by module),
`<out>/unreached.txt` (functions never entered, by module), `<out>/summary.json` and an
HTML report in `<out>/html/`. The brokers run slower under a tracer, so a covered run's
timing is not a default run's; what it reaches is what the bench is for.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import coverage

ROOT = Path(__file__).resolve().parent.parent
SUT = ROOT / "system_under_test"
ZOO = ROOT / "campaigns" / "bug-zoo.toml"
SAVE_INTERVAL_S = 2.0
LAUNCHER = "squall_sut_coverage"
"""The launcher's module name on the nodes (beside `system_under_test` in the SUT's dir)."""

_LAUNCHER_SOURCE = f'''"""Run the SUT's command line under coverage.py, saving what ran every few seconds."""

import atexit
import json
import os
import runpy
import sys
import threading
import time

import coverage


def launch() -> None:
    args = sys.argv[1:]
    config = os.path.abspath(args[args.index("--config") + 1])
    out_dir = os.path.join(os.path.dirname(os.path.dirname(config)), "logs", "sut-coverage")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{{os.getpid()}}-{{time.time_ns()}}.json")
    cov = coverage.Coverage(data_file=None, source=["system_under_test"], concurrency=["thread"])
    cov.start()
    lock = threading.Lock()

    def save() -> None:
        with lock:
            data = cov.get_data()
            lines = {{name: sorted(data.lines(name) or ()) for name in data.measured_files()}}
            with open(out + ".tmp", "w") as handle:
                json.dump(lines, handle)
            os.replace(out + ".tmp", out)

    def keep_saving() -> None:
        while True:
            time.sleep({SAVE_INTERVAL_S})
            try:
                save()
            except Exception as err:  # the broker must go on whatever coverage does
                print(f"sut-coverage: {{err}}", file=sys.stderr)

    threading.Thread(target=keep_saving, name="sut-coverage", daemon=True).start()
    atexit.register(save)
    sys.argv = ["system_under_test", *args]
    runpy.run_module("system_under_test", run_name="__main__", alter_sys=True)


launch()
'''


@contextmanager
def brokers_under_coverage(work: Path) -> Iterator[None]:
    """Brokers installed with coverage.py and the launcher, started through it, and their
    coverage files fetched with their logs (patched for the bench's process only)."""
    from squall.cluster import services, ssh_runtime

    launcher = work / f"{LAUNCHER}.py"
    launcher.write_text(_LAUNCHER_SOURCE, encoding="utf-8")
    package = Path(coverage.__file__).parent
    vendored = ssh_runtime.vendored_packages
    command = services.BrokerService.command
    fetch_logs = services.BrokerService.fetch_logs

    def with_coverage() -> list[Path]:
        return [*vendored(), package, launcher]

    def covered_command(self: services.BrokerService) -> list[str]:
        plain = command(self)
        return [plain[0], "-m", LAUNCHER, *plain[3:]]

    def fetch_with_coverage(self: services.BrokerService, local: Path) -> None:
        fetch_logs(self, local)
        self.node.download(str(self.root / "logs" / "sut-coverage"), local / "sut-coverage")

    ssh_runtime.vendored_packages = with_coverage
    services.BrokerService.command = covered_command  # type: ignore[method-assign]
    services.BrokerService.fetch_logs = fetch_with_coverage  # type: ignore[method-assign]
    try:
        yield
    finally:
        ssh_runtime.vendored_packages = vendored
        services.BrokerService.command = command  # type: ignore[method-assign]
        services.BrokerService.fetch_logs = fetch_logs  # type: ignore[method-assign]


def control_coverage(work: Path) -> coverage.Coverage:
    """Coverage of the control process and of the member processes it spawns."""
    rc = work / "coveragerc"
    rc.write_text(
        "[run]\n"
        f"data_file = {work / 'control' / '.coverage'}\n"
        "parallel = true\n"
        f"source = {SUT}\n"
        "concurrency = thread,multiprocessing\n",
        encoding="utf-8",
    )
    (work / "control").mkdir()
    return coverage.Coverage(config_file=str(rc))


def broker_lines(run_dir: Path) -> dict[str, set[int]]:
    """Lines the brokers executed, by this checkout's file names."""
    lines: dict[str, set[int]] = {}
    for path in sorted(run_dir.glob("nodes/*/sut-coverage/*.json")):
        for name, executed in json.loads(path.read_text(encoding="utf-8")).items():
            _, sep, rest = name.partition("/sut/system_under_test/")
            if not sep:
                continue
            lines.setdefault(str(SUT / rest), set()).update(executed)
    return lines


def unreached_functions(path: Path, executed: set[int]) -> list[str]:
    """Functions of `path` none of whose body's statements ran (qualified names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                body = child.body[1:] if ast.get_docstring(child) else child.body
                first = body[0].lineno if body else child.lineno
                last = child.end_lineno or first
                if not any(first <= line <= last for line in executed):
                    found.append(f"{prefix}{child.name} (line {child.lineno})")
                else:
                    visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def report(run_dir: Path, work: Path, out: Path) -> dict[str, Any]:
    """Combine the brokers' and the control process's coverage; write the reports."""
    combined = coverage.Coverage(data_file=str(out / ".coverage"), source=[str(SUT)])
    data = combined.get_data()
    data.add_lines({name: sorted(lines) for name, lines in broker_lines(run_dir).items()})
    for path in sorted((work / "control").glob(".coverage.*")):
        part = coverage.CoverageData(basename=str(path))
        part.read()
        data.update(part)
    data.write()
    combined.load()
    with (out / "report.txt").open("w", encoding="utf-8") as text:
        total = combined.report(file=text, show_missing=False, skip_empty=True)
    combined.html_report(directory=str(out / "html"), skip_empty=True)
    modules: dict[str, Any] = {}
    unreached_text: list[str] = []
    for path in sorted(SUT.rglob("*.py")):
        _, statements, _, missing, _ = combined.analysis2(str(path))
        executed = set(statements) - set(missing)
        relative = str(path.relative_to(ROOT))
        functions = unreached_functions(path, executed)
        modules[relative] = {
            "statements": len(statements),
            "missed": len(missing),
            "unreached_functions": functions,
        }
        if functions:
            unreached_text.append(relative)
            unreached_text.extend(f"    {f}" for f in functions)
    (out / "unreached.txt").write_text("\n".join(unreached_text) + "\n", encoding="utf-8")
    summary = {
        "run_dir": str(run_dir),
        "percent": round(total, 2),
        "statements": sum(m["statements"] for m in modules.values()),
        "missed": sum(m["missed"] for m in modules.values()),
        "broker_files": len(list(run_dir.glob("nodes/*/sut-coverage/*.json"))),
        "modules": modules,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="safe", help="a configuration of the campaign")
    parser.add_argument("--campaign", type=Path, default=ZOO)
    parser.add_argument("--seed", type=int, default=96001)
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds of workload")
    parser.add_argument("--store", type=Path, default=Path("store"))
    parser.add_argument("--out", type=Path, default=Path("store/bench/sut-coverage"))
    parser.add_argument("--spark-master", default=None)
    args = parser.parse_args(argv)
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="sut-coverage-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        control = control_coverage(work)
        control.start()  # before squall imports the SUT's client, so its imports count
        try:
            outcome = _run(args, work)
        finally:
            control.stop()
            control.save()
        if outcome is None:
            return 2
        summary = report(outcome.run_dir.path, work, args.out)
    print(
        json.dumps(
            {
                "run_dir": summary["run_dir"],
                "valid": (outcome.results or {}).get("valid"),
                "percent": summary["percent"],
                "statements": summary["statements"],
                "missed": summary["missed"],
                "broker_coverage_files": summary["broker_files"],
                "seconds": round(time.monotonic() - started, 1),
                "out": str(args.out),
            }
        )
    )
    return 0


def _run(args: argparse.Namespace, work: Path) -> Any:
    """The configuration's run with `args.seed`, its brokers under coverage (None: no such
    configuration)."""
    from squall.campaign import load_campaign
    from squall.runner import TestRunner
    from squall.store import RunStore

    _, cases = load_campaign(args.campaign)
    specs = {case.spec.name: case.spec for case in cases}
    if args.config not in specs:
        print(f"error: --config {args.config}: not in {args.campaign}; one of {sorted(specs)}")
        return None
    spec = specs[args.config].model_copy(
        update={"seed": args.seed, "time_limit_s": args.time_limit}
    )
    with brokers_under_coverage(work):
        return TestRunner(spec, store=RunStore(args.store), spark_master=args.spark_master).run()


if __name__ == "__main__":
    sys.exit(main())
