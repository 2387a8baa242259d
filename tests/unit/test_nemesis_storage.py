"""Storage faults: their data, what they do to a replica's files, replay, heal and refusal.

The cluster is a real local-runtime Cluster with no processes running; each broker's data
directory holds a partition written by the SUT's own log, so the damage is done by the real
node commands and seen by the SUT's own recovery.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from nemesis import Fault, Nemesis, Schedule, ScheduledFault, ScheduleSpec, generate_schedule
from nemesis.errors import FaultError, UnsupportedFaultError
from nemesis.partial_failures import FaultApplicationError
from nemesis.schedule import _with_healed_targets, not_applicable
from squall.cluster.cluster import Cluster, ClusterState, NodeState
from squall.cluster.local import LocalRuntime
from squall.runner import check_runnable
from squall.spec import SpecError, TestSpec
from system_under_test.log import Log, LogConfig
from system_under_test.log.record import encode_records
from tests.support import run_squall

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=120)
KEY = "t-0"


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    state = ClusterState(
        run_id="storage",
        runtime="local",
        brokers=[
            NodeState(f"n{i}", f"127.0.9.{i}", root=str(tmp_path / f"n{i}"), python=sys.executable)
            for i in (1, 2, 3)
        ],
        zookeeper=NodeState("zk1", "127.0.9.10", root=str(tmp_path / "zk1")),
    )
    return LocalRuntime().attach(state)


def log_dir(cluster: Cluster, node: str) -> Path:
    return Path(cluster.broker(node).log_dir)


def write_partition(cluster: Cluster, node: str, count: int, *, start: int = 0) -> Path:
    """``count`` 100-byte records appended to t-0 on node (segments of 10 records)."""
    directory = log_dir(cluster, node) / KEY
    log = Log.open(directory, CONFIG, recovery_point=0, clean_shutdown=True)
    for offset in range(start, start + count):
        log.append(bytearray(encode_records([(None, b"%04d" % offset + b"r" * 28, offset)])))
    log.close()
    events = log_dir(cluster, node) / "squall-events.jsonl"
    with events.open("a") as out:
        out.write(json.dumps({"type": "written", "count": count}) + "\n")
    return directory


def recovered(directory: Path) -> Log:
    """The partition as the broker loads it after a crash (recovery from offset 0)."""
    return Log.open(directory, CONFIG, recovery_point=0, clean_shutdown=False)


def test_storage_faults_check_their_data() -> None:
    with pytest.raises(FaultError, match="needs targets"):
        Fault("corrupt-file", {"file": "log"})
    with pytest.raises(FaultError, match="file must be one of log, index"):
        Fault("corrupt-file", {"targets": ["n1"], "file": "segment"})
    with pytest.raises(
        FaultError, match="truncate-file: file must be one of log, index, timeindex"
    ):
        Fault("truncate-file", {"targets": ["n1"], "file": "leader-epoch-checkpoint"})
    with pytest.raises(FaultError, match="bits must be 1 to 4096"):
        Fault("corrupt-file", {"targets": ["n1"], "bits": 0})
    with pytest.raises(FaultError, match="pick must be one of last, first, random"):
        Fault("corrupt-file", {"targets": ["n1"], "pick": "middle"})
    with pytest.raises(FaultError, match="always crashes the broker"):
        Fault("truncate-file", {"targets": ["n1"], "crash": False})
    with pytest.raises(FaultError, match=r"damage\.n1\.flips: \[offset >= 0, bit 0-7\]"):
        Fault(
            "corrupt-file",
            {"targets": ["n1"], "damage": {"n1": {"path": "t-0/a", "size": 9, "flips": [[3, 8]]}}},
        )
    with pytest.raises(FaultError, match="a path inside the data directory"):
        Fault(
            "truncate-file",
            {"targets": ["n1"], "damage": {"n1": {"path": "../x", "size": 9, "to_size": 1}}},
        )
    with pytest.raises(FaultError, match="snapshot: name must be"):
        Fault("snapshot", {"targets": ["n1"], "name": "../up"})
    with pytest.raises(FaultError, match="not a TOPIC-PARTITION"):
        Fault("corrupt-file", {"targets": ["n1"], "key": "t"})
    # healing faults may go without targets: they heal what this nemesis did
    assert Fault("rollback").targets is None
    assert Fault("drop-snapshots").targets is None


def test_corrupt_file_flips_the_recorded_bits_and_recovery_cuts_the_log_there(
    cluster: Cluster,
) -> None:
    directory = write_partition(cluster, "n2", 25)
    segment = directory / f"{20:020d}.log"
    before = segment.read_bytes()
    nemesis = Nemesis(cluster, rng=random.Random(7))

    applied = nemesis.apply(
        Fault("corrupt-file", {"targets": ["follower:t-0"], "key": KEY, "bits": 3}).with_value(
            targets=["n2"]
        )
    )

    damage = applied.value["damage"]["n2"]
    assert applied.value["outcome"] == {"n2": "corrupted"}
    assert applied.value["killed"] == []  # no broker was running
    assert (applied.value["file"], applied.value["pick"], applied.value["key"]) == (
        "log",
        "last",
        KEY,
    )
    assert damage["path"] == f"{KEY}/{20:020d}.log" and damage["size"] == len(before)
    after = segment.read_bytes()
    changed = {
        (i, bit)
        for i in range(len(before))
        for bit in range(8)
        if (before[i] ^ after[i]) >> bit & 1
    }
    assert changed == {tuple(flip) for flip in damage["flips"]}
    assert len(changed) == 3

    log = recovered(directory)
    first_bad = min(offset for offset, _ in damage["flips"])
    report = log.recovery_report
    assert report.truncated, "recovery must cut the segment at the first bad record"
    assert 20 <= log.log_end_offset < 25
    assert report.recovered[-1].valid_bytes <= first_bad
    log.close()


def test_a_resolved_corruption_replays_the_same_bytes(cluster: Cluster) -> None:
    first = write_partition(cluster, "n1", 12)
    second = write_partition(cluster, "n3", 12)
    assert (first / f"{10:020d}.log").read_bytes() == (second / f"{10:020d}.log").read_bytes()
    applied = Nemesis(cluster, rng=random.Random(1)).apply(
        Fault("corrupt-file", {"targets": ["n1"], "key": KEY, "pick": "first", "bits": 5})
    )
    again = Fault.loads(applied.dumps()).request()
    recorded = again.value["damage"].pop("n1")
    again = again.with_value(targets=["n3"], damage={"n3": recorded})
    replayed = Nemesis(cluster, rng=random.Random(99)).apply(again)
    assert replayed.value["damage"]["n3"] == recorded
    assert (first / f"{0:020d}.log").read_bytes() == (second / f"{0:020d}.log").read_bytes()


def test_truncate_file_chops_the_active_segment_to_the_recorded_size(cluster: Cluster) -> None:
    directory = write_partition(cluster, "n2", 25)
    active = directory / f"{20:020d}.log"
    size = active.stat().st_size
    applied = Nemesis(cluster, rng=random.Random(3)).apply(
        Fault("truncate-file", {"targets": ["n2"], "key": KEY, "max_bytes": 250})
    )
    damage = applied.value["damage"]["n2"]
    assert damage["size"] == size and size - 250 <= damage["to_size"] < size
    assert active.stat().st_size == damage["to_size"]
    assert applied.value["outcome"] == {"n2": "truncated"}
    log = recovered(directory)
    assert log.log_end_offset == 20 + damage["to_size"] // 100  # whole records survive
    log.close()


def test_checkpoints_and_indexes_can_be_chosen(cluster: Cluster) -> None:
    write_partition(cluster, "n1", 25)
    (log_dir(cluster, "n1") / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 20\n")
    nemesis = Nemesis(cluster, rng=random.Random(5))
    checkpoint = nemesis.apply(
        Fault("corrupt-file", {"targets": ["n1"], "file": "recovery-point-checkpoint"})
    )
    assert checkpoint.value["damage"]["n1"]["path"] == "recovery-point-offset-checkpoint"
    assert "key" not in checkpoint.value
    index = nemesis.apply(
        Fault("corrupt-file", {"targets": ["n1"], "file": "index", "key": KEY, "pick": "first"})
    )
    assert index.value["damage"]["n1"]["path"] == f"{KEY}/{0:020d}.index"
    with pytest.raises(
        FaultApplicationError, match="n2 has no non-empty log file of partition t-0"
    ):
        nemesis.apply(Fault("corrupt-file", {"targets": ["n2"], "key": KEY}))
    with pytest.raises(FaultError, match="zk1 runs no broker"):
        nemesis.apply(Fault("corrupt-file", {"targets": ["all"], "key": KEY}))
    assert not nemesis.active.killed


def test_a_rollback_restores_the_snapshot_and_keeps_the_event_log(cluster: Cluster) -> None:
    directory = write_partition(cluster, "n2", 15)
    nemesis = Nemesis(cluster, rng=random.Random(0))
    taken = nemesis.apply(Fault("snapshot", {"targets": ["n2"]}))
    assert taken.value["name"] == "snap-0" and taken.value["outcome"] == {"n2": "taken"}
    assert taken.value["copied"]["n2"] > 1500
    assert nemesis.active.snapshots == {"n2": ["snap-0"]}
    write_partition(cluster, "n2", 10, start=15)
    events = (log_dir(cluster, "n2") / "squall-events.jsonl").read_text()
    nemesis.active.killed.add("n2")  # another fault keeps the broker down: it stays down

    rolled = nemesis.apply(Fault("rollback"))

    assert rolled.value["targets"] == ["n2"]
    assert rolled.value["snapshots"] == {"n2": "snap-0"}
    assert rolled.value["outcome"] == {"n2": "rolled-back-down"}
    assert (log_dir(cluster, "n2") / "squall-events.jsonl").read_text() == events
    log = recovered(directory)
    assert log.log_end_offset == 15
    log.close()

    healed = nemesis.heal()
    assert [f.f for f in healed] == ["drop-snapshots"]
    assert healed[0].value["outcome"] == {"n2": "dropped"}
    assert not (Path(cluster.broker("n2").log_dir).parent / "snapshots").exists()
    assert not nemesis.active.snapshots
    with pytest.raises(FaultApplicationError, match="n2 has no snapshot to roll back to"):
        nemesis.apply(Fault("rollback", {"targets": ["n2"]}))


def test_power_loss_is_refused_without_a_lazy_disk(cluster: Cluster) -> None:
    nemesis = Nemesis(cluster, rng=random.Random(0))
    with pytest.raises(
        UnsupportedFaultError, match="power-loss is unavailable on this local cluster"
    ):
        nemesis.apply(Fault("power-loss", {"targets": ["n1"]}))
    assert nemesis.active.quiet
    power = {"name": "queue", "nemesis": {"faults": {"power-loss": 1}}}
    check_runnable(TestSpec.from_mapping({**power, "runtime": "docker"}, source="test"))
    check_runnable(
        TestSpec.from_mapping({**power, "runtime": "local", "lazy_disk": True}, source="test")
    )
    for plain in ({"runtime": "docker", "lazy_disk": False}, {"runtime": "local"}):
        spec = TestSpec.from_mapping({**power, **plain}, source="test")
        with pytest.raises(SpecError, match=r"write to plain disks.*power-loss.*--lazy-disk"):
            check_runnable(spec)
    corrupt = TestSpec.from_mapping(
        {"name": "queue", "runtime": "local", "nemesis": {"faults": {"corrupt": 1, "rollback": 1}}},
        source="test",
    )
    check_runnable(corrupt)


def test_kinds_lay_their_fault_and_its_end() -> None:
    spec = ScheduleSpec(
        generator={"sequence": [{"fault": "corrupt", "file": "index"}, {"fault": "rollback"}]},
        time_limit_s=300,
    )
    schedule = generate_schedule(spec)
    steps = [(s.fault.f, s.heals, s.fault.value.get("targets")) for s in schedule.faults]
    assert steps == [
        ("corrupt-file", None, ["follower"]),
        ("start", 0, None),
        ("snapshot", None, ["follower"]),
        ("rollback", 2, None),
    ]
    snapshot, rollback = schedule.faults[2], schedule.faults[3]
    hit = snapshot.fault.with_value(targets=["n3"], name="snap-0")
    assert _with_healed_targets(rollback, {snapshot.id: hit}).targets == ["n3"]
    assert Schedule.from_json(json.loads(schedule.dumps())) == schedule
    lacking = ScheduleSpec(faults={"power-loss": 1, "truncate": 1}, capabilities={"disks"})
    assert not_applicable(lacking) == {"power-loss": "lazy-disk"}


def test_a_schedule_records_the_damage_it_did(cluster: Cluster) -> None:
    write_partition(cluster, "n1", 12)
    applied = Nemesis(cluster, rng=random.Random(2)).apply(
        Fault("truncate-file", {"targets": ["n1"], "key": KEY})
    )
    entry = ScheduledFault(1.5, applied, 0)
    back = ScheduledFault.from_json(json.loads(json.dumps(entry.to_json())))
    assert back == entry
    assert back.fault.request().value["damage"] == applied.value["damage"]


def test_the_nemesis_commands_damage_files_and_refuse_power_loss(
    cluster: Cluster, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQUALL_HOME", str(home))
        cluster.state.save()
    directory = write_partition(cluster, "n2", 25)
    size = (directory / f"{20:020d}.log").stat().st_size
    cut = run_squall("nemesis", "truncate-file", "-t", "n2", "--key", KEY, "--seed", "4", home=home)
    assert cut.returncode == 0, cut.stderr
    line = json.loads(cut.stdout)
    assert (line["process"], line["f"]) == ("nemesis", "truncate-file")
    assert line["value"]["damage"]["n2"]["size"] == size
    assert (directory / f"{20:020d}.log").stat().st_size == line["value"]["damage"]["n2"]["to_size"]
    refused = run_squall("nemesis", "power-loss", "-t", "n1", home=home)
    assert refused.returncode == 2
    assert "power-loss is unavailable on this local cluster" in refused.stderr
