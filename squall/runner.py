"""One test's life: provision, deploy, run the workload under the nemesis, heal, recover,
read everything back, collect the nodes' logs and events, check, report, tear down.

Everything lands in the test's run directory as it happens (docs/run-store.md):
``test.json`` before the first fault, every operation appended to ``history.jsonl`` as it
happens, ``schedule.json`` as applied, node logs, ``results.json``. Ctrl-C (or SIGTERM)
stops the workload, heals, keeps the history, and still checks what was recorded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from histories import HistoryWriter, merge_events, read_history, write_history
from nemesis import (
    Fault,
    Nemesis,
    Schedule,
    ScheduleRunner,
    ScheduleSpec,
    generate_schedule,
    heal_all,
    not_applicable,
)
from nemesis.generator import DEFAULT_GENERATORS
from nemesis.protocols import LAZY_DISK_MISSING
from nemesis.scenario_watch import ScenarioWatch
from squall.cluster.clock import ClockOffset, clock_section, measure_offsets
from squall.cluster.cluster import Cluster, broker_id_of, current_kept
from squall.cluster.event_tail import EventTail
from squall.cluster.node import Node
from squall.cluster.runtimes import Runtime, default_runtime, new_run_id, runtime_named
from squall.exit_codes import ExitCode
from squall.replica_reads import REPLICA_READ, record_replica_reads
from squall.report.live import RunView
from squall.report.scenarios import scenario_section_of
from squall.run_log import run_log
from squall.spec import SpecError, TestSpec
from squall.store import RunDirectory, RunStore
from system_under_test.config import BROKER_KEYS
from system_under_test.group_metadata_manager import partition_for
from system_under_test.kafka.group_metadata import OFFSETS_TOPIC
from workloads import QueueWorkload
from workloads.clients import client_factory, speaks_kafka

log = logging.getLogger(__name__)

NOTHING_HEALED = frozenset(
    {"already-running", "not-running", "healed", "unfrozen", "resumed", "no-snapshots"}
)
"""Outcomes of the final blind heal that found nothing to do: not worth a history line."""
SUT_EVENT_TYPES = {
    "leader-election",
    "isr-change",
    "truncation",
    "controller-elected",
    "log-recovery",
}


INVENTORY_RUNTIMES = frozenset({"ssh", "external"})
"""Runtimes whose nodes an inventory file names."""


class NoEvents:
    """The events of a cluster squall did not deploy: none it can read."""

    def read(self) -> list[dict[str, Any]]:
        return []


class InfrastructureError(RuntimeError):
    """The test could not be carried out (a cluster did not come up, a node vanished)."""


@dataclass
class RunOutcome:
    """How a run ended."""

    exit_code: int
    run_dir: RunDirectory
    results: dict[str, Any] | None
    interrupted: bool = False


class TestRunner:
    """Runs one TestSpec; ``run()`` returns the outcome (exit codes: docs/exit-codes.md)."""

    __test__ = False

    def __init__(
        self,
        spec: TestSpec,
        *,
        store: RunStore,
        console: Console | None = None,
        keep_cluster: bool = False,
        replay_schedule: Schedule | None = None,
        spark_master: str | None = None,
        spark_remote: str | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.console = console or Console(stderr=True)
        self.keep_cluster = keep_cluster
        self.replay_schedule = replay_schedule
        self.spark_master = spark_master
        self.spark_remote = spark_remote
        """Where the checkers run: a Spark master, or a Spark Connect server (at most one)."""
        self.stop = threading.Event()
        self.interrupted = False
        self.signal: signal.Signals | None = None
        """The first signal that stopped the run (SIGINT or SIGTERM), if any."""
        self.skip_check = False
        """A second Ctrl-C: heal and keep the history, but do not check it."""
        self.not_applied: dict[str, str] = {}
        """Scenarios and kinds of fault asked for that the runtime could not apply."""
        self.applied: list[Fault] = []
        self.clock_offsets: dict[str, ClockOffset] = {}
        """Each broker node's clock offset, measured before the first fault."""
        self.no_verdict: str | None = None
        """Why the run ended without a verdict, when it did (also in run.log)."""

    # --- the whole run --------------------------------------------------------------------

    def run(self) -> RunOutcome:
        spec = self.spec.resolved(runtime=self.spec.runtime or default_runtime())
        self.spec = spec
        check_runnable(spec)
        runtime: Runtime = runtime_named(spec.runtime or "local")
        run_dir = self.store.new_run(spec.name)
        with run_log(run_dir.path):
            log.info("run %s of test %s on %s", run_dir.path, spec.name, spec.runtime)
            outcome = self._run_in(run_dir, spec, runtime)
            log.info("run ended: exit code %s, %s", outcome.exit_code, _verdict_of(outcome))
        if outcome.results is not None:
            from squall.report.console import print_results

            print_results(outcome.results, console=self.console, run_dir=run_dir.path)
        else:
            from squall.report.console import report_pointer

            self.console.print(
                f"no verdict: {self.no_verdict or 'see run.log'}",
                style="bold yellow",
                markup=False,
            )
            self.console.print(report_pointer(run_dir.path), highlight=False, soft_wrap=True)
        return outcome

    def _run_in(self, run_dir: RunDirectory, spec: TestSpec, runtime: Runtime) -> RunOutcome:
        """The run in `run_dir`: its outcome, before the report is printed."""
        view = RunView(spec.name, str(run_dir.path), time_limit_s=spec.time_limit_s)
        view.interrupted = lambda: self.interrupted
        run_id = new_run_id()
        cluster: Cluster | None = None
        results: dict[str, Any] | None = None
        exit_code: int = ExitCode.INFRASTRUCTURE
        with (
            self._signals(),
            Live(view, console=self.console, refresh_per_second=4, transient=False),
        ):
            try:
                view.phase = "clean"
                self._clean_leftovers(runtime)
                view.phase, view.phase_detail = (
                    "provision",
                    f"{spec.nodes} brokers + zk1 on {spec.runtime}",
                )
                cluster = self._provision(runtime, run_id, view)
                self.clock_offsets = self._measure_clocks(cluster)
                run_dir.write_test(
                    {
                        **spec.to_json(),
                        "run_id": run_id,
                        "bootstrap": cluster.bootstrap,
                        **(
                            {"kafka_bootstrap": cluster.kafka_bootstrap}
                            if cluster.kafka_bootstrap
                            else {}
                        ),
                        "zookeeper": cluster.zookeeper_connect or None,
                        "brokers": {name: broker_id_of(name) for name in sorted(cluster.brokers)},
                        **(
                            {"clock": clock_section(self.clock_offsets)}
                            if self.clock_offsets
                            else {}
                        ),
                    }
                )
                view.phase, view.phase_detail = "deploy", f"topic {spec.workload.topic}"
                workload = QueueWorkload(
                    spec.workload, client_factory=client_factory(spec.workload.client)
                )
                workload.prepare(client_bootstrap(cluster, spec))
                self._run_and_heal(cluster, workload, run_dir, view)
                view.phase, view.phase_detail = "collect", "node logs and SUT events"
                self._collect(cluster, run_dir)
            except Exception as err:
                log.exception("run %s failed", run_dir.path)
                self.no_verdict = f"infrastructure failure: {err}"
                self.console.print(f"[bold red]infrastructure failure:[/] {err}")
                if cluster is not None:
                    with contextlib.suppress(Exception):
                        self._collect(cluster, run_dir)
            finally:
                if cluster is not None:
                    with contextlib.suppress(Exception):
                        heal_all(cluster)
                    if not self.keep_cluster:
                        with contextlib.suppress(Exception):
                            runtime.down(cluster.state)
                    cluster.close()
            if self.interrupted:
                self._mark_interrupted(run_dir)
            if run_dir.history.exists() and not self.skip_check:
                view.phase, view.phase_detail = "check", "Spark checkers"
                results, exit_code = self._check(run_dir)
            elif self.skip_check:
                self.no_verdict = "a second Ctrl-C skipped the check; the history is kept"
            elif not run_dir.history.exists():
                self.no_verdict = self.no_verdict or "the run recorded no history"
            if self.signal is not None:
                exit_code = 128 + int(self.signal)  # 130 for SIGINT, 143 for SIGTERM
            view.phase, view.phase_detail = "report", ""
        if not self.console.is_terminal:
            # Rich ends a live display with a newline only on a terminal: in a captured log
            # the results would start on the live panel's last line.
            self.console.line()
        if results is None:
            log.error("no verdict: %s", self.no_verdict or "the check did not finish")
        return RunOutcome(exit_code, run_dir, results, self.interrupted)

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        """Ctrl-C and SIGTERM stop the workload, heal, keep the history and check what was
        recorded (never VALID: the run did less than asked); a second Ctrl-C skips the check,
        never the heal."""

        def stop(signum: int, _frame: object) -> None:
            if self.interrupted:
                self.skip_check = True
                self.console.print(
                    "[yellow]again: healing still, keeping the history, skipping the check[/]"
                )
                return
            self.interrupted = True
            self.signal = signal.Signals(signum)
            self.stop.set()
            self.console.print(
                f"[yellow]{self.signal.name}: stopping, healing, keeping the history; the "
                "verdict will be at best unknown (Ctrl-C again to skip the check)[/]"
            )

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _clean_leftovers(self, runtime: Runtime) -> None:
        """docs/architecture.md: every test starts by removing what crashed runs left behind
        (runs whose owner is gone; never a run in progress)."""
        with contextlib.suppress(Exception):
            runtime.clean()

    def _provision(self, runtime: Runtime, run_id: str, view: RunView) -> Cluster:
        spec = self.spec

        def progress(message: str) -> None:
            view.phase_detail = message

        try:
            with current_kept():  # a cluster brought up by hand stays the current one
                return runtime.up(
                    run_id,
                    None if spec.runtime in INVENTORY_RUNTIMES else spec.nodes,
                    inventory=Path(spec.inventory)
                    if spec.runtime in INVENTORY_RUNTIMES and spec.inventory
                    else None,
                    settings=spec.broker_settings(),
                    progress=progress,
                    lazy_disk=spec.lazy_disk,
                    kafka_listener=spec.kafka_listener,
                )
        except Exception as err:
            raise InfrastructureError(f"the {spec.runtime} cluster did not come up: {err}") from err

    # --- run, heal, recover, final read --------------------------------------------------

    def _run_and_heal(
        self, cluster: Cluster, workload: QueueWorkload, run_dir: RunDirectory, view: RunView
    ) -> None:
        spec = self.spec
        seed = spec.seed or 0
        writer = HistoryWriter(run_dir.history)
        self.start_wall_ns = time.time_ns() - writer.now()
        keys = [f"{spec.workload.topic}-{p}" for p in range(spec.workload.partitions)]
        nemesis = Nemesis(
            cluster,
            rng=random.Random(seed),
            topic_hint=f"{spec.workload.topic}-0",
            partitions=keys,
            members=workload.members if has_members(spec) else None,
        )

        def record(fault: Fault) -> None:
            self.applied.append(fault)
            view.applied += 1
            writer.event(fault.f, fault.value)
            view.faults = _describe_active(nemesis)

        schedule = self.replay_schedule
        if schedule is None and spec.nemesis is not None:
            schedule = generate_schedule(self._supported(spec.nemesis, cluster))
        watch = ScenarioWatch(
            cluster.roles,
            EventTail(cluster) if cluster.deployed else NoEvents(),
            keys,
            schedule.spec.detectors
            if schedule is not None and schedule.spec is not None
            else spec.detectors(),
            rng=random.Random(seed + 2),
            group_keys=group_state_keys(spec),
        )

        def judged(outcome: dict[str, Any]) -> None:
            if outcome.get("reached") is not None:
                runs, reached = view.scenarios
                view.scenarios = (runs + 1, reached + bool(outcome["reached"]))

        # The schedule stops when the workload does (its own event: the run's stop must not
        # be set at the time limit, or the recovery wait below would be skipped).
        runner = ScheduleRunner(
            nemesis, on_applied=record, stop=threading.Event(), watch=watch, on_judged=judged
        )
        applied_schedule: list[Schedule] = []
        schedule_thread = None
        if schedule is not None:
            schedule_thread = threading.Thread(
                target=lambda: applied_schedule.append(runner.run(schedule)),
                name="nemesis",
                daemon=True,
            )
        view.phase, view.phase_detail = "run", f"workload {workload.name}, seed {seed}"
        view.counters = workload.counters.snapshot
        view.run_started = time.monotonic()
        if schedule_thread is not None:
            schedule_thread.start()
        try:
            workload.run(
                client_bootstrap(cluster, spec),
                cluster.zookeeper_connect,
                writer,
                stop_event=self.stop,
                time_limit_s=spec.time_limit_s,
                rng=random.Random(seed + 1),
            )
        finally:
            runner.stop()
            if schedule_thread is not None:
                schedule_thread.join(timeout=120)
            if applied_schedule:
                run_dir.write_schedule(applied_schedule[0])
            view.phase, view.phase_detail = "heal", "every fault undone, killed processes restarted"
            for fault in nemesis.heal(restart_killed=True):
                record(fault)
            for fault in heal_all(cluster, restart_killed=True):
                if fault.value.get("outcome") and any(
                    v not in NOTHING_HEALED for v in fault.value["outcome"].values()
                ):
                    record(fault)
            view.faults = []
        if not self.interrupted:
            view.phase, view.phase_detail = "recover", f"waiting {spec.recovery_wait_s:.0f} s"
            self.stop.wait(spec.recovery_wait_s)
        view.phase, view.phase_detail = "final read", "every key from its start to its end"
        try:
            workload.final_read(
                client_bootstrap(cluster, spec),
                writer,
                deadline_s=spec.workload.final_read_deadline_s,
            )
            view.phase_detail = "every replica's log, read off its disk"
            self._read_replicas(cluster, writer, run_dir)
        finally:
            writer.close()

    def _read_replicas(
        self, cluster: Cluster, writer: HistoryWriter, run_dir: RunDirectory
    ) -> None:
        """Every replica's log of every key, read off its node after the final read
        (`squall.replica_reads`); a failure is noted, never the end of the run."""
        workload = self.spec.workload
        if not cluster.deployed:  # its disks are its own, and their format too
            return
        try:
            record_replica_reads(
                cluster, workload.topic, workload.partitions, writer, scratch=run_dir.path
            )
        except Exception as err:
            log.exception("the replica reads of %s failed", run_dir.path)
            self.console.print(f"[yellow]replica reads not recorded:[/] {err}")

    def _supported(self, nemesis: ScheduleSpec, cluster: Cluster) -> ScheduleSpec:
        """The schedule spec for this cluster: its brokers and what its runtime can do; without
        the fault kinds the runtime cannot apply."""
        capabilities = cluster.capabilities
        nemesis = replace(
            nemesis,
            brokers=tuple(cluster.brokers),
            capabilities=frozenset(
                name
                for name, able in (
                    ("partitions", capabilities.partitions),
                    ("netem", capabilities.netem),
                    ("freeze", capabilities.freeze),
                    ("disks", capabilities.disks),
                    ("lazy-disk", capabilities.lazy_disk),
                    ("zookeeper", capabilities.zookeeper),
                    ("members", has_members(self.spec)),
                )
                if able
            ),
        )
        self.not_applied = not_applicable(nemesis)
        if not self.not_applied:
            return nemesis
        listing = ", ".join(f"{name} (needs {need})" for name, need in self.not_applied.items())
        self.console.print(
            f"[yellow]note:[/] the {cluster.runtime} runtime here cannot apply {listing} "
            "(partitions need docker or ssh; netem needs sch_netem in the kernel; freeze needs "
            f"docker; lazy-disk: {capabilities.lazy_disk_missing}; members: the workload's "
            "consumers as members of a group, group_membership); the rest runs, and the "
            "verdict says what was left out"
        )
        kept = {k: w for k, w in nemesis.faults.items() if k not in self.not_applied}
        if nemesis.generator is None and not any(kept.values()):
            kept = {"kill": 1.0}
        return replace(nemesis, faults=kept)

    # --- collect, merge SUT events -------------------------------------------------------

    def _collect(self, cluster: Cluster, run_dir: RunDirectory) -> None:
        if cluster.deployed:  # else its logs and events are not squall's to fetch
            for name in cluster.brokers:
                with contextlib.suppress(Exception):
                    cluster.broker(name).fetch_logs(run_dir.node_dir(name))
            with contextlib.suppress(Exception):
                cluster.zookeeper_service().fetch_logs(run_dir.node_dir(cluster.zookeeper.name))
        self._record_clock_drift(cluster, run_dir)
        if cluster.deployed and run_dir.history.exists() and hasattr(self, "start_wall_ns"):
            self._merge_sut_events(run_dir)

    @staticmethod
    def _broker_nodes(cluster: Cluster) -> list[Node]:
        return list(cluster.brokers.values())

    def _measure_clocks(self, cluster: Cluster) -> dict[str, ClockOffset]:
        """Each broker node's clock offset; none (events placed by their raw clocks, and
        the checkers' default tolerance) where a node cannot tell its time."""
        try:
            return measure_offsets(self._broker_nodes(cluster))
        except Exception as err:
            self.console.print(
                f"[yellow]note:[/] clock offsets not measured ({err}); SUT events are placed "
                "by the nodes' own clocks"
            )
            return {}

    def _record_clock_drift(self, cluster: Cluster, run_dir: RunDirectory) -> None:
        """test.json's `clock` with the offsets measured again after the run: the tolerance
        then covers how far each clock drifted (docs/history.md, SUT events)."""
        if not self.clock_offsets or not run_dir.test_json.exists():
            return
        try:
            end = measure_offsets(self._broker_nodes(cluster))
        except Exception as err:  # a node that did not come back: the start's offsets stay
            log.warning("clock offsets not measured after the run: %s", err)
            return
        test = run_dir.read_test()
        test["clock"] = clock_section(self.clock_offsets, end)
        run_dir.write_json(run_dir.test_json, test)

    def _merge_sut_events(self, run_dir: RunDirectory) -> None:
        events: list[dict[str, Any]] = []
        for path in sorted((run_dir.path / "nodes").glob("*/events.jsonl")):
            measured = self.clock_offsets.get(path.parent.name)
            offset = 0 if measured is None else measured.offset_ns
            for line in path.read_text().splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("type") not in SUT_EVENT_TYPES:
                    continue
                value = {k: v for k, v in event.items() if k not in ("type", "wall_time_ns")}
                events.append(
                    {
                        "time": max(0, int(event["wall_time_ns"]) - offset - self.start_wall_ns),
                        "f": event["type"],
                        "value": value,
                    }
                )
        if not events:
            return
        merged = merge_events(read_history(run_dir.history), events)
        write_history(run_dir.history, merged)

    # --- check ---------------------------------------------------------------------------

    def _mark_interrupted(self, run_dir: RunDirectory) -> None:
        """test.json says the run was stopped early, and by what."""
        if not run_dir.test_json.exists():
            return
        with contextlib.suppress(Exception):
            test = run_dir.read_test()
            test["interrupted"] = True
            test["interrupted_by"] = self.signal.name if self.signal else None
            run_dir.write_json(run_dir.test_json, test)

    def _check(self, run_dir: RunDirectory) -> tuple[dict[str, Any] | None, int]:
        from checkers import check_history

        try:
            results: dict[str, Any] = check_history(
                run_dir.path, spark_master=self.spark_master, spark_remote=self.spark_remote
            )
        except Exception as err:
            log.exception("checking %s failed", run_dir.history)
            self.no_verdict = f"the checkers failed: {err}"
            self.console.print(f"[bold red]the checkers failed:[/] {err}")
            return None, ExitCode.INFRASTRUCTURE
        if self.interrupted:
            results = interrupted_results(results, self.signal)
        scenarios = scenario_section_of(run_dir.path)
        if scenarios is not None:
            results = {**results, "scenarios": scenarios}
        if self.not_applied:
            results = {
                **results,
                "faults": {
                    "not_applied": sorted(self.not_applied),
                    "needs": dict(sorted(self.not_applied.items())),
                },
            }
        run_dir.write_json(run_dir.results, results)
        try:
            write_reports(run_dir, results)
        except Exception as err:  # a report must never hide the verdict
            log.exception("writing the reports of %s failed", run_dir.path)
            self.console.print(f"[yellow]reports not written:[/] {err}")
        valid = results.get("valid")
        return (
            results,
            ExitCode.VALID
            if valid is True
            else ExitCode.ANOMALIES
            if valid is False
            else ExitCode.INFRASTRUCTURE,
        )


RUNTIME_CAPABILITIES: dict[str, frozenset[str]] = {
    "local": frozenset({"disks", "zookeeper"}),
    "docker": frozenset({"partitions", "freeze", "netem", "disks", "zookeeper"}),
    "ssh": frozenset({"partitions", "netem", "disks", "zookeeper"}),
    "external": frozenset({"partitions"}),
}
"""What each runtime can offer beyond process faults at best (netem also needs sch_netem in
the nodes' kernel, which only bringing a cluster up tells; external's partitions need the
inventory's consent). ``lazy-disk`` comes with the spec's ``lazy_disk`` (docker's default)
on any runtime."""


def check_runnable(spec: TestSpec) -> None:
    """SpecError, before anything is provisioned, for a spec its runtime cannot carry out:
    the ssh runtime without an inventory, or faults asked for by name that the runtime can
    never apply, or that need lazy disks the spec does without (the default mix adapts to
    the runtime instead, and says what it left out)."""
    if spec.runtime in INVENTORY_RUNTIMES and not spec.inventory:
        raise SpecError(f"the {spec.runtime} runtime needs an inventory of hosts: --inventory FILE")
    workload = spec.workload
    if (
        spec.runtime == "external"
        and not speaks_kafka(workload.client)
        and workload.consumers > 0
        and not workload.group_membership
    ):
        raise SpecError(
            "squall's own consumers outside the group (group_membership = false) keep their "
            "group's offsets in ZooKeeper, which a cluster squall did not deploy does not "
            "offer: make them members of the group (drop group_membership = false, or "
            "--group-membership; the group's coordinator keeps the offsets), or use "
            "--client confluent-kafka or --client kafka-python"
        )
    nemesis = spec.nemesis
    if nemesis is None or nemesis.generator in DEFAULT_GENERATORS:
        return
    offered = RUNTIME_CAPABILITIES.get(spec.runtime or "local", frozenset())
    missing = not_applicable(replace(nemesis, capabilities=offered | {"lazy-disk"}))
    if missing:
        listing = ", ".join(f"{name} (needs {need})" for name, need in sorted(missing.items()))
        able = sorted(  # external is no substitute: its cluster is the one under test
            r
            for r, caps in RUNTIME_CAPABILITIES.items()
            if r != "external" and set(missing.values()) <= caps
        )
        raise SpecError(
            f"the {spec.runtime} runtime cannot apply {listing}; use --runtime "
            f"{' or '.join(able) or 'docker'}, or leave them out of --faults"
        )
    lazy = spec.lazy_disk if spec.lazy_disk is not None else spec.runtime == "docker"
    missing = {} if lazy else not_applicable(replace(nemesis, capabilities=offered))
    if missing:
        listing = ", ".join(f"{name} (needs {need})" for name, need in sorted(missing.items()))
        raise SpecError(
            f"this test's brokers write to plain disks, so it cannot apply {listing}: "
            f"{LAZY_DISK_MISSING}; or leave them out of --faults"
        )


def interrupted_results(results: dict[str, Any], by: signal.Signals | None) -> dict[str, Any]:
    """The results of a run stopped early: marked, and never valid (at best "unknown")."""
    name = by.name if by is not None else "a signal"
    note = (
        f"the run was interrupted ({name}): it ran less than it was asked to, so its verdict "
        "is at best unknown"
    )
    return {
        **results,
        "valid": "unknown" if results.get("valid") is True else results.get("valid"),
        "interrupted": True,
        "notes": [*results.get("notes", []), note],
    }


def _verdict_of(outcome: RunOutcome) -> str:
    if outcome.results is None:
        return "no verdict"
    return f"valid {outcome.results.get('valid')}"


def write_reports(run_dir: RunDirectory, results: dict[str, Any]) -> None:
    """junit.xml, then report.html with its plots (it links to junit.xml), beside
    results.json."""
    from squall.report.failures import failures_by_error
    from squall.report.html import render_html
    from squall.report.junit import render_junit
    from squall.report.plots import write_plots

    history = read_history(run_dir.history)
    events = [  # nemesis and SUT, without the replicas' records
        op.to_json_dict() for op in history if not op.is_client and op.f != REPLICA_READ
    ]
    faults = [op.to_json_dict() for op in history if op.process == "nemesis"]
    elections = sum(1 for op in history if op.process == "sut" and op.f == "leader-election")
    test = run_dir.read_test() if run_dir.test_json.exists() else None
    run_dir.junit.write_text(
        render_junit(results, suite=run_dir.test_name, test=test, run_dir=str(run_dir.path))
    )
    images: list[str] = []
    if run_dir.parquet.exists():
        plots = write_plots(run_dir.parquet, run_dir.path, results, events=events, test=test)
        images = [p.name for p in plots]
    page = render_html(
        results,
        test=test,
        faults=faults,
        images=images,
        elections=elections,
        events=events,
        failures=failures_by_error(history),
        run_dir=run_dir.path,
    )
    run_dir.report_html.write_text(page)


def _describe_active(nemesis: Nemesis) -> list[str]:
    active = nemesis.active
    out = [f"killed {','.join(sorted(active.killed))}"] if active.killed else []
    if active.paused:
        out.append(f"paused {','.join(sorted(active.paused))}")
    if active.frozen:
        out.append(f"frozen {','.join(sorted(active.frozen))}")
    if active.partition is not None:
        out.append("partition")
    if active.netem:
        out.append(f"netem {','.join(sorted(active.netem))}")
    if active.slowed:
        out.append(f"slowed {','.join(sorted(active.slowed))}")
    if active.snapshots:
        out.append(f"snapshots of {','.join(sorted(active.snapshots))}")
    if active.paused_members:
        out.append(f"paused members {','.join(sorted(active.paused_members))}")
    return out


def has_members(spec: TestSpec) -> bool:
    """Whether the workload's consumers are members of a group, which the nemesis can
    pause, kill and make leave."""
    return spec.workload.group_membership and spec.workload.consumers > 0


def group_state_keys(spec: TestSpec) -> list[str]:
    """The partition of the offsets topic that holds the workload's group, where its
    consumers are members (none otherwise): its leader is the group's coordinator. Kafka's
    rule, the group id's hash over the topic's partitions, as the brokers are configured."""
    if not has_members(spec):
        return []
    key = "offsets.topic.num.partitions"
    setting = spec.broker_settings().get(key, BROKER_KEYS[key].default)
    count = int(BROKER_KEYS[key].convert(str(setting), "broker"))
    return [f"{OFFSETS_TOPIC}-{partition_for(spec.workload.group, count)}"]


def client_bootstrap(cluster: Cluster, spec: TestSpec) -> str:
    """Where the workload's client connects: the brokers' second (Kafka) listeners for a
    Kafka client, else their listeners."""
    if not speaks_kafka(spec.workload.client):
        return cluster.bootstrap
    if cluster.kafka_bootstrap is None:
        raise InfrastructureError(
            f"the workload's client is {spec.workload.client}, but the cluster's brokers have "
            "no Kafka listener (kafka_listener)"
        )
    return cluster.kafka_bootstrap
