"""``squall nemesis ...``: break the current cluster by hand, the way Blockade users do.

Each command applies one fault to the cluster that ``squall cluster up`` started and prints
the fault as applied (targets resolved to node names, the grudge, the outcome) as one JSON
line: the same record a test's history would hold. ``squall nemesis heal`` undoes every
kind of fault on every node.
"""

from __future__ import annotations

import json
import random
from typing import Any

import typer

from nemesis.errors import UnsupportedFaultError
from squall.cluster.cluster import ClusterStateError
from squall.cluster.runtimes import RuntimeUnavailableError, attach
from squall.commands._common import fail
from squall.exit_codes import ExitCode

nemesis_app = typer.Typer(
    help="Apply faults to the current cluster: kill, pause, partition, netem, damaged files, "
    "rollbacks, heal.",
    no_args_is_help=True,
)

TARGET_HELP = (
    "n1.., zk, controller, random, minority, brokers, all, or ROLE:TOPIC-PARTITION with ROLE "
    "leader, follower (one in the ISR), followers or isr; repeatable."
)


def _apply(f: str, value: dict[str, Any], seed: int | None) -> None:
    from nemesis import Fault, Nemesis, NemesisError

    try:
        cluster = attach()
    except (ClusterStateError, RuntimeUnavailableError) as err:
        fail(str(err), ExitCode.USAGE)
    try:
        nemesis = Nemesis(cluster, rng=random.Random(seed))
        applied = nemesis.apply(Fault(f, value))
    except UnsupportedFaultError as err:
        fail(str(err), ExitCode.USAGE)
    except NemesisError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)
    finally:
        cluster.close()
    print(
        json.dumps({"process": "nemesis", "type": "info", "f": applied.f, "value": applied.value})
    )


def _targets(targets: list[str], default: list[str] | None = None) -> list[str]:
    chosen = targets or default
    if not chosen:
        fail("name at least one --target (" + TARGET_HELP + ")", ExitCode.USAGE)
    return chosen


TargetOption = typer.Option([], "--target", "-t", metavar="TARGET", help=TARGET_HELP)
SeedOption = typer.Option(
    None, "--seed", metavar="N", help="Seed for random choices (minority, random halves)."
)


@nemesis_app.command()
def kill(target: list[str] = TargetOption, seed: int | None = SeedOption) -> None:
    """SIGKILL the targets' broker (or ZooKeeper) process."""
    _apply("kill", {"targets": _targets(target)}, seed)


@nemesis_app.command()
def start(target: list[str] = TargetOption, seed: int | None = SeedOption) -> None:
    """Start the targets' processes again (default: every broker that is down)."""
    _apply("start", {"targets": _targets(target, ["brokers"])}, seed)


@nemesis_app.command()
def bounce(target: list[str] = TargetOption, seed: int | None = SeedOption) -> None:
    """Clean restart: SIGTERM, wait for the process to exit, start it again."""
    _apply("bounce", {"targets": _targets(target)}, seed)


@nemesis_app.command()
def pause(target: list[str] = TargetOption, seed: int | None = SeedOption) -> None:
    """SIGSTOP the targets' broker process."""
    _apply("pause", {"targets": _targets(target)}, seed)


@nemesis_app.command()
def resume(target: list[str] = TargetOption, seed: int | None = SeedOption) -> None:
    """SIGCONT the targets' broker process (default: every broker)."""
    _apply("resume", {"targets": _targets(target, ["brokers"])}, seed)


@nemesis_app.command()
def freeze(target: list[str] = TargetOption, seed: int | None = SeedOption) -> None:
    """Freeze whole nodes (docker pause: sshd stops too). Docker runtime only."""
    _apply("freeze", {"targets": _targets(target)}, seed)


@nemesis_app.command()
def unfreeze(target: list[str] = TargetOption, seed: int | None = SeedOption) -> None:
    """Unfreeze nodes (default: all)."""
    _apply("unfreeze", {"targets": _targets(target, ["all"])}, seed)


@nemesis_app.command()
def partition(
    shape: str = typer.Option(
        ...,
        "--shape",
        metavar="SHAPE",
        help="isolate, halves, random-halves, majorities-ring, bridge, one-way, isolate-zk "
        "(only isolate, one-way and isolate-zk take targets).",
    ),
    target: list[str] = TargetOption,
    destination: list[str] = typer.Option(
        [],
        "--destination",
        metavar="NODE",
        help="For one-way: the nodes that stop hearing the targets; repeatable.",
    ),
    among: str = typer.Option(
        "all",
        "--among",
        metavar="all|brokers",
        help="The nodes split: all (ZooKeeper's included) or brokers.",
    ),
    seed: int | None = SeedOption,
) -> None:
    """Cut the network along a Jepsen grudge (iptables DROP in squall's own chain)."""
    value: dict[str, Any] = {"shape": shape, "among": among}
    if target:
        value["targets"] = target
    if destination:
        value["destinations"] = destination
    _apply("start-partition", value, seed)


@nemesis_app.command()
def netem(
    target: list[str] = TargetOption,
    delay_ms: float = typer.Option(
        100.0, "--delay-ms", min=0, metavar="MS", help="Delay added to every packet."
    ),
    jitter_ms: float = typer.Option(
        0.0, "--jitter-ms", min=0, metavar="MS", help="Random variation of the delay."
    ),
    loss_pct: float = typer.Option(
        0.0, "--loss-pct", min=0, max=99.9, metavar="PCT", help="Percent of packets dropped."
    ),
    seed: int | None = SeedOption,
) -> None:
    """Delay, jitter and lose packets on the targets' interface (tc netem)."""
    _apply(
        "start-netem",
        {
            "targets": _targets(target),
            "delay_ms": delay_ms,
            "jitter_ms": jitter_ms,
            "loss_pct": loss_pct,
        },
        seed,
    )


FILE_HELP = (
    "log, index, timeindex (a segment's), leader-epoch-checkpoint (the partition's), "
    "recovery-point-checkpoint or high-watermark-checkpoint (the log dir's)."
)
KeyOption = typer.Option(
    None,
    "--key",
    metavar="TOPIC-PARTITION",
    help="The partition whose files to damage (default: the one a role target names).",
)
PickOption = typer.Option(
    "last",
    "--pick",
    metavar="last|first|random",
    help="Which of the partition's files of that kind: the active segment's, the oldest, any.",
)
SnapshotOption = typer.Option("snap-0", "--name", metavar="NAME", help="The snapshot's name.")


def _file_value(file: str, key: str | None, pick: str) -> dict[str, Any]:
    return {"file": file, "pick": pick, **({"key": key} if key else {})}


@nemesis_app.command("corrupt-file")
def corrupt_file(
    target: list[str] = TargetOption,
    file: str = typer.Option("log", "--file", metavar="KIND", help=FILE_HELP),
    key: str | None = KeyOption,
    pick: str = PickOption,
    bits: int = typer.Option(
        8, "--bits", min=1, max=4096, metavar="N", help="How many bits to flip."
    ),
    crash: bool = typer.Option(
        True,
        "--crash/--no-crash",
        help="SIGKILL the broker first (default), or damage the "
        "file under the running broker (a disk that lies).",
    ),
    seed: int | None = SeedOption,
) -> None:
    """Flip bits at random places of one file of the targets' data directory; the broker,
    crashed first, stays down until `nemesis start`."""
    value = {"targets": _targets(target), **_file_value(file, key, pick), "bits": bits}
    _apply("corrupt-file", {**value, "crash": crash}, seed)


@nemesis_app.command("truncate-file")
def truncate_file(
    target: list[str] = TargetOption,
    file: str = typer.Option("log", "--file", metavar="log|index|timeindex", help="The file."),
    key: str | None = KeyOption,
    pick: str = PickOption,
    max_bytes: int | None = typer.Option(
        None, "--max-bytes", min=1, metavar="N", help="Chop at most N bytes (default: any)."
    ),
    seed: int | None = SeedOption,
) -> None:
    """Crash the targets' broker and chop the tail of one file (the active segment by
    default); the broker stays down until `nemesis start`."""
    value = {"targets": _targets(target), **_file_value(file, key, pick)}
    _apply("truncate-file", {**value, **({"max_bytes": max_bytes} if max_bytes else {})}, seed)


@nemesis_app.command()
def snapshot(
    target: list[str] = TargetOption, name: str = SnapshotOption, seed: int | None = SeedOption
) -> None:
    """Copy the targets' data directory (the broker paused for the copy) for a rollback."""
    _apply("snapshot", {"targets": _targets(target), "name": name}, seed)


@nemesis_app.command()
def rollback(
    target: list[str] = TargetOption, name: str = SnapshotOption, seed: int | None = SeedOption
) -> None:
    """Crash the targets' broker, put the snapshot in place of its data directory, start it."""
    _apply("rollback", {"targets": _targets(target), "name": name}, seed)


@nemesis_app.command("power-loss")
def power_loss(target: list[str] = TargetOption, seed: int | None = SeedOption) -> None:
    """SIGKILL the targets' broker and drop what its disk had not synced (needs a lazy
    disk); the broker stays down until `nemesis start`."""
    _apply("power-loss", {"targets": _targets(target)}, seed)


@nemesis_app.command()
def heal(
    restart_killed: bool = typer.Option(
        False, "--restart-killed", help="Also start every broker and ZooKeeper that is down."
    ),
) -> None:
    """Undo every fault on every node: flush partitions, remove netem, resume, unfreeze,
    remove snapshots."""
    from nemesis import HealError, heal_all

    try:
        cluster = attach()
    except (ClusterStateError, RuntimeUnavailableError) as err:
        fail(str(err), ExitCode.USAGE)
    try:
        healed = heal_all(cluster, restart_killed=restart_killed)
    except HealError as err:
        fail(str(err), ExitCode.INFRASTRUCTURE)
    finally:
        cluster.close()
    for fault in healed:
        print(
            json.dumps({"process": "nemesis", "type": "info", "f": fault.f, "value": fault.value})
        )
