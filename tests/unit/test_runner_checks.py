"""What a runtime cannot do is refused before anything is provisioned when asked for by
name, and recorded beside the verdict when the default mix leaves it out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from squall.report.verdict import explain
from squall.runner import TestRunner, check_runnable
from squall.spec import SpecError, TestSpec
from squall.store import RunStore


def spec(**fields: object) -> TestSpec:
    return TestSpec.from_mapping({"name": "t", **fields}, source="test").resolved(
        runtime=str(fields.get("runtime", "local"))
    )


def test_faults_by_name_that_the_runtime_lacks_are_refused(tmp_path: Path) -> None:
    partition = spec(runtime="local", nemesis={"faults": {"partition": 1, "kill": 1}})
    with pytest.raises(
        SpecError,
        match=r"local runtime cannot apply partition \(needs partitions\); use --runtime docker or ssh",
    ):
        check_runnable(partition)
    freeze = spec(runtime="ssh", inventory="hosts.toml", nemesis={"generator": {"fault": "freeze"}})
    with pytest.raises(SpecError, match="use --runtime docker"):
        check_runnable(freeze)
    with pytest.raises(SpecError, match="inventory"):
        check_runnable(spec(runtime="ssh"))
    # Nothing is created: the store stays empty and `latest` untouched.
    store = tmp_path / "store"
    with pytest.raises(SpecError):
        TestRunner(partition, store=RunStore(store)).run()
    assert not store.exists() or not any(store.iterdir())


def test_a_cluster_squall_did_not_deploy_needs_its_inventory_group_offsets_and_process_faults() -> (
    None
):
    kafka = {"client": "confluent-kafka"}
    with pytest.raises(SpecError, match="external runtime needs an inventory"):
        check_runnable(spec(runtime="external", workload=kafka))
    with pytest.raises(SpecError, match="make them members of the group"):
        check_runnable(
            spec(
                runtime="external",
                inventory="cluster.toml",
                workload={"group_membership": False},
            )
        )
    with pytest.raises(SpecError, match=r"external runtime cannot apply freeze"):
        check_runnable(
            spec(
                runtime="external",
                inventory="cluster.toml",
                workload=kafka,
                nemesis={"faults": {"freeze": 1}},
            )
        )
    check_runnable(
        spec(
            runtime="external",
            inventory="cluster.toml",
            workload=kafka,
            nemesis={"faults": {"kill": 1, "pause": 1, "bounce": 1, "partition": 1}},
        )
    )
    check_runnable(spec(runtime="external", inventory="cluster.toml", workload=kafka))


def test_the_default_mix_and_process_faults_run_anywhere() -> None:
    check_runnable(spec(runtime="local"))
    check_runnable(spec(runtime="local", nemesis={"faults": {"kill": 1, "pause": 1}}))
    check_runnable(spec(runtime="docker", nemesis={"generator": "leader-session-loss"}))
    check_runnable(spec(runtime="local", nemesis=None))
    for name in ("default", "default-with-disks", "default-without-disks"):  # they adapt
        check_runnable(spec(runtime="local", nemesis={"generator": name}))
        check_runnable(spec(runtime="docker", lazy_disk=False, nemesis={"generator": name}))


def test_what_was_left_out_is_said_beside_the_verdict() -> None:
    results = {
        "valid": True,
        "config": {"test": {"source": "t", "acks": -1}},
        "faults": {
            "not_applied": ["leader-session-loss"],
            "needs": {"leader-session-loss": "partitions"},
        },
    }
    assert explain(results).endswith(
        "Asked for but not applied: leader-session-loss (needs partitions)."
    )


def test_sut_event_times_are_corrected_by_each_nodes_clock_offset(tmp_path: Path) -> None:
    """An event is placed at its node's wall clock less the node's measured offset."""
    from histories import HistoryWriter, read_history
    from squall.cluster.clock import ClockOffset

    runner = TestRunner(spec(runtime="local"), store=RunStore(tmp_path / "store"))
    run_dir = runner.store.new_run("t")
    writer = HistoryWriter(run_dir.history)
    for i in range(3):
        writer.write(0, "invoke", "poll", [["poll"]], time=i * 1_000_000_000)
        writer.write(0, "ok", "poll", [["poll", {}]], time=i * 1_000_000_000 + 1)
    writer.close()
    runner.start_wall_ns = 10**18
    runner.clock_offsets = {
        "n1": ClockOffset("n1", 500_000_000, 1_000),  # n1's clock is 0.5 s ahead
        "n2": ClockOffset("n2", 0, 1_000),
    }
    for node in ("n1", "n2"):
        events = run_dir.node_dir(node) / "events.jsonl"
        events.parent.mkdir(parents=True, exist_ok=True)
        line = {"wall_time_ns": 10**18 + 1_500_000_000, "type": "isr-change", "key": node}
        events.write_text(json.dumps(line) + "\n")
    runner._merge_sut_events(run_dir)
    times = {
        op.value["key"]: op.time for op in read_history(run_dir.history) if op.process == "sut"
    }
    assert times == {"n1": 1_000_000_000, "n2": 1_500_000_000}
